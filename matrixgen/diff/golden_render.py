"""The golden-values review shown: its table in the diff's text and its
section of the PR comment (every string from the branch escaped for where it
goes: `util.escape.terminal_line`, `util.markdown`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from matrixgen.diff.goldens import (
    ADDED,
    CHANGED,
    REMOVED,
    UNCHANGED,
    GoldenFile,
    GoldenReview,
    MetricChange,
    pct,
)
from matrixgen.model.errors import Severity
from matrixgen.util import markdown as md
from matrixgen.util.escape import terminal_line
from matrixgen.util.words import counted
from matrixgen.views.table import Column, Report

# The table shows this many metrics as columns; the others go in one cell.
METRIC_COLUMNS = 6
# The PR comment lists this many files (and problems); the JSON has all.
COMMENT_ROWS = 50
SHORT_COMMENT_ROWS = 10
Show = Callable[[str], str]  # writes a string for a format: str, md.code, md.text


def metric_cell(metric: MetricChange | None) -> str:
    """A metric's cell: its signed mean change, "Unchanged", or what happened."""
    if metric is None:
        return "-"
    if metric.status == UNCHANGED:
        return "Unchanged"
    if metric.status in (ADDED, REMOVED):
        return metric.status
    if metric.mean_rel_change_pct is None:
        return "changed"
    return pct(metric.mean_rel_change_pct)


def largest(f: GoldenFile, code: Show = str, text: Show = str, at: str = "@") -> str:
    """The metric with the largest change at any one step (the first of equals):
    its size, `code` writing its name and step, `text` the size."""
    measured = [(m, v) for m in f.metrics if (v := m.max_abs_rel_change_pct) is not None]
    if not measured:
        return "-"
    metric, size = max(measured, key=lambda item: item[1])
    return f"{text(pct(size, signed=False))} {code(metric.name)} {at} {code(metric.max_step or '')}"


def flags(f: GoldenFile, show: Show = str) -> list[str]:
    """What a reviewer must look at in a file: missing and non-finite samples,
    changes of metrics the test does not check, problems. `show` writes a
    metric name (code in Markdown)."""
    metrics = f.metrics
    listed = {
        "missing": [f"{show(m.name)} ({m.steps_removed})" for m in metrics if m.steps_removed],
        "non-finite": [f"{show(m.name)} ({m.non_finite_new})" for m in metrics if m.non_finite_new],
        "ungated change": [show(m.name) for m in metrics if not m.gated and m.status != UNCHANGED],
    }
    out = [f"{label}: {', '.join(names)}" for label, names in listed.items() if names]
    out += [] if f.compared else ["not compared"]
    errors = sum(p.severity is Severity.ERROR for p in f.problems)
    return out + ([counted(errors, "problem")] if errors else [])


def readers_cell(f: GoldenFile) -> str:
    if f.jobs:
        return counted(len({j.target for j in f.jobs}), "target")
    if f.quarantined:
        return "quarantined jobs only"
    return "orphan"


def metric_columns(review: GoldenReview) -> list[str]:
    """The metrics shown as columns: the first METRIC_COLUMNS names, in the order
    the files (by path) first have them."""
    return list(dict.fromkeys(m.name for f in review.files for m in f.metrics))[:METRIC_COLUMNS]


def _others(f: GoldenFile, columns: Sequence[str], show: Show = str) -> str:
    """The metrics past the table's columns, each with its cell."""
    cells = [f"{show(m.name)}: {metric_cell(m)}" for m in f.metrics if m.name not in columns]
    return "; ".join(cells)


def summary_words(review: GoldenReview) -> str:
    files = review.files
    status = {s: sum(f.status == s for f in files) for s in (CHANGED, ADDED, REMOVED)}
    orphans = sum(f.orphan for f in files)
    problems = sum(any(p.severity is Severity.ERROR for p in f.problems) for f in files)
    return (
        f"{counted(len(files), 'file')} ({status[CHANGED]} changed, {status[ADDED]} added, "
        f"{status[REMOVED]} removed), {counted(orphans, 'orphan')}, "
        f"{counted(problems, 'file')} with problems"
    )


def _table(review: GoldenReview) -> Report:
    """A row per file; a column per metric of `metric_columns`, the others in one.
    A cell each format writes its own way is a text-only and a Markdown-only column."""
    names = metric_columns(review)
    extra = any(m.name not in names for f in review.files for m in f.metrics)
    columns = [Column("case", escape=md.code), Column("hardware", escape=md.text)]
    columns += [Column("file", escape=str), Column("read by", escape=str)]
    columns += [Column(n, markdown=md.code(n), escape=md.text, right=True) for n in names]
    for header in [*(["other metrics"] if extra else []), "largest step change", "flags"]:
        columns += [Column(header, markdown=None), Column(header, text=False, escape=str)]
    return Report(columns, [_row(f, names, extra) for f in review.files])


def _row(f: GoldenFile, columns: Sequence[str], extra: bool) -> list[str]:
    by_name = {m.name: m for m in f.metrics}
    row = [f.case, f.hardware, f.status, readers_cell(f)]
    row += [metric_cell(by_name.get(c)) if f.compared else "?" for c in columns]
    row += [_others(f, columns), _others(f, columns, md.code)] if extra else []
    row += [largest(f), largest(f, md.code, md.text, "step")]
    return row + ["; ".join(flags(f, show)) or "-" for show in (str, md.code)]


def render_text(review: GoldenReview | None) -> str:
    """The golden values of a diff for a terminal ("" when there is no review)."""
    if review is None:
        return ""
    if not review.files:
        return f"\ngolden values: no file changes ({review.template})\n"
    out = [
        "",
        f"golden values: {summary_words(review)} ({review.template})",
        "  each metric: the signed mean of (old - new) / old over the steps both sides "
        "have (+: lower now)",
    ]
    text = "\n".join(terminal_line(line) for line in out) + "\n" + _table(review).text()
    problems = "".join(f"  {p}\n" for f in review.files for p in f.problems)
    return text + (f"problems:\n{problems}" if problems else "")


def render_markdown(review: GoldenReview | None, *, rows: int = COMMENT_ROWS) -> list[str]:
    """The golden values of a diff as lines of a PR comment, under their own heading."""
    if review is None:
        return []
    out = ["", "#### Golden values", ""]
    if not review.files:
        return [*out, f"No golden-values file changes ({md.code(review.template)})."]
    out += [
        f"**{md.text(summary_words(review))}**, under {md.code(review.template)}. "
        "Each metric: the signed mean of (old − new) / old over the steps both sides have "
        "(positive: lower now), or Unchanged.",
        "",
    ]
    out += _table(review).markdown(rows)
    if len(review.files) > rows:
        more = len(review.files) - rows
        out.append(f"\n… and {counted(more, 'more file')} (`--format json` lists all)")
    problems = [p for f in review.files for p in f.problems]
    items = [f"- {md.code(p.location)}: {md.text(p.message)} ({md.code(p.code)})" for p in problems]
    if items:
        out += ["", "**Golden-values problems**", "", *md.capped(items, rows)]
    return out
