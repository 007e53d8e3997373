"""The five pages. Each takes the gathered `SiteData` and returns its HTML;
every string from the tree, the quarantine file or the store goes through
`text` or `attr` (`page`), every link through `html_link`."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from matrixgen.model.jobs import Job, Target
from matrixgen.report.page import (
    OUTCOME_STYLE,
    attr,
    bar_chart,
    figures,
    page,
    sparkline,
    table,
    text,
)
from matrixgen.report.site import EXPIRING_DAYS, SPARK_RUNS, Key, SiteData, StoreView
from matrixgen.util.escape import html_link
from matrixgen.views.cost import hours, pipeline_name

if TYPE_CHECKING:
    from matrixgen.evidence.store import RunRow
    from matrixgen.evidence.triage import Failure, TriageReport


def _no_store(what: str) -> str:
    note = (
        "No results store (--db, $MATRIXGEN_RESULTS_DB, or .matrixgen/results.db): "
        f"with one, {what}."
    )
    return f'<p class="note no-store">{text(note)}</p>\n'


def _pipelines(targets: Sequence[Target]) -> dict[str, list[Target]]:
    found: dict[str, list[Target]] = {}
    for target in targets:
        found.setdefault(pipeline_name(target), []).append(target)
    return dict(sorted(found.items()))


# ------------------------------------------------------------------- overview


def overview(data: SiteData) -> str:
    groups = _pipelines(data.targets)
    quarantined = {
        name: sum(
            len(data.selections[t.name].skipped)
            + sum(1 for j in data.selections[t.name].jobs if j.quarantine is not None)
            for t in group
        )
        for name, group in groups.items()
    }
    total_weighted = sum(c.weighted_max for _, c in data.cost.pipelines)
    body = [
        figures(
            [
                (f"{len(data.generation.jobs):,}", "jobs in the tree"),
                (f"{len(data.targets)}", "targets"),
                (f"{len(groups)}", "pipelines"),
                (hours(total_weighted), "weighted GPU-h, one run of each"),
                (f"{len(data.entries)}", "quarantine entries"),
                (f"{sum(quarantined.values())}", "quarantined jobs in targets"),
            ]
        )
    ]
    headers = ["pipeline (one run)", "targets", "jobs", "GPU-h max", "weighted"]
    headers += ["GPU-h expected", "quarantined jobs"]
    rows, series = [], []
    for name, cost in data.cost.pipelines:
        rows.append(
            [
                text(name),
                str(len(groups.get(name, []))),
                f"{cost.jobs:,}",
                hours(cost.gpu_hours_max),
                hours(cost.weighted_max),
                text(cost.expected_text()),
                str(quarantined.get(name, 0)),
            ]
        )
        bars = [
            ("GPU-h max", cost.gpu_hours_max, "#90a4c8"),
            ("weighted", cost.weighted_max, "#1f5fbf"),
        ]
        if cost.expected is not None:
            bars.append(("expected", cost.expected, "#2e7d32"))
        series.append((name, bars))
    body.append(table(headers, rows, numeric=(1, 2, 3, 4, 6), cls="pipelines"))
    body.append("<h2>GPU-hours per pipeline run</h2>\n")
    body.append(bar_chart("GPU-hours per pipeline run", series))
    body.append(
        '<p class="note">GPU-hours = nodes x gpus x time_limit x n_repeat / 3600 (an upper '
        "bound: time limits), weighted by each platform's gpu_hour_weight; "
        "as <code>matrixgen stats --cost</code> computes them.</p>\n"
    )
    if data.store is None:
        body.append(_no_store("the expected GPU-hours of every measured job are shown too"))
    return page("index.html", "Overview", "".join(body), subtitle=_subtitle(data))


def _subtitle(data: SiteData) -> str:
    where = f"store {data.store.shown}" if data.store is not None else "no results store"
    return f"{data.generation.tree.root} · {where} · as of {data.today.isoformat()}"


# ------------------------------------------------------------------ selection


def _cell(jobs: list[Job], skipped: bool) -> str:
    mark = jobs[0].quarantine
    if mark is None:
        return '<td class="run" title="runs">run</td>'
    entry = mark.id
    if skipped:
        cls, title, shown = "skip", f"skipped by {entry}", "skip"
    elif mark.action == "allow-failure":
        cls, title, shown = "allow", f"runs, allowed to fail by {entry}", "may fail"
    else:
        n = len(mark.node_ids)
        cls, title, shown = "desel", f"runs, {n} node id(s) deselected by {entry}", f"-{n}"
    return f'<td class="{cls}" title="{attr(title)}">{shown} <small>{text(entry)}</small></td>'


def selection(data: SiteData) -> str:
    body = [
        '<p class="note">Per pipeline: each case (model / test case [tag]) against each '
        "target's platform and environment. <b>run</b>: selected; <b>skip</b>: a quarantine "
        "entry takes it out; <b>may fail</b>: it runs without blocking; <b>-N</b>: it runs "
        "with N pytest node ids deselected; <b>·</b>: not selected in that target.</p>\n"
    ]
    for name, group in _pipelines(data.targets).items():
        group = sorted(
            group, key=lambda t: (t.selector.platform or "", t.selector.environment or "", t.name)
        )
        states: dict[tuple[str, str, str], dict[str, tuple[list[Job], bool]]] = {}
        for target in group:
            chosen = data.selections[target.name]
            for skipped, jobs in ((False, chosen.jobs), (True, chosen.skipped)):
                for job in jobs:
                    case = (job.model, job.test_case, job.tag or "")
                    slot = states.setdefault(case, {}).setdefault(target.name, ([], skipped))
                    slot[0].append(job)
        headers = ["case"] + [
            f"{t.selector.platform or 'any'} / {t.selector.environment or 'any'}" for t in group
        ]
        rows = []
        for case in sorted(states):
            model, test_case, tag = case
            label = f"{model} / {test_case}" + (f" [{tag}]" if tag else "")
            cells = [f'<td class="case">{text(label)}</td>']
            for target in group:
                found = states[case].get(target.name)
                cells.append(
                    '<td class="off" title="not selected">·</td>'
                    if found is None
                    else _cell(*found)
                )
            rows.append("<tr>" + "".join(cells) + "</tr>")
        head = "".join(f'<th scope="col">{text(h)}</th>' for h in headers)
        body.append(
            f'<h2 id="{attr(name)}">{text(name)}</h2>\n<p class="note">{len(states)} case(s); '
            f"targets: {text(', '.join(t.name for t in group))}</p>\n"
            f'<table class="sel"><thead><tr>{head}</tr></thead><tbody>\n'
            + "\n".join(rows)
            + "\n</tbody></table>\n"
        )
    if not data.targets:
        body.append('<p class="note">The tree has no targets.</p>\n')
    body.append(
        '<p class="note">The selection is the tree\'s own: a results store adds nothing '
        "here (the Flake history page shows its results).</p>\n"
    )
    return page("selection.html", "Selection", "".join(body), subtitle=_subtitle(data))


# ----------------------------------------------------------------- quarantine


def _tracker(entry_url: str | None, written: str) -> str:
    href = html_link(entry_url)
    if href is None:
        return text(written)
    return f'<a href="{href}" rel="noreferrer noopener">{text(written)}</a>'


def _entry_outcomes(store: StoreView, keys: Sequence[Key]) -> list[str]:
    """Per run of the window where any of the keys has a result (the last
    SPARK_RUNS): fail if one failed, else rerun-pass, pass, skip."""
    found = (
        [store.cells[k][run.ref] for k in keys if run.ref in store.cells.get(k, {})]
        for run in store.runs
    )
    return [_worst(codes) for codes in found if codes][-SPARK_RUNS:]


def _worst(codes: Sequence[tuple[int, int]]) -> str:
    names = [_outcome(code, reruns, muted=False) for code, reruns in codes]
    for name in ("fail", "rerun", "pass"):
        if name in names:
            return name
    return "skip"


def board(data: SiteData) -> str:
    entries = data.entries
    problems: dict[str, list[str]] = {}
    for item in data.audit:
        problems.setdefault(item.entry_id, []).append(item.problem)
    headers = ["entry", "tracker", "owner", "kind", "action", "jobs", "age", "expires"]
    store = data.store
    if store is not None:
        headers += ["evidence", "last runs"]
    rows = []
    classes = []
    for entry in entries:
        hits = data.hits.get(entry.id, [])
        targets = sorted({h.target.name for h in hits})
        age = f"{(data.today - entry.added).days} d" if entry.added else "-"
        state = ""
        if entry.expires is None:
            expiry = "never"
        else:
            left = (entry.expires - data.today).days
            expiry = f"{entry.expires.isoformat()} (in {left} d)"
            found = problems.get(entry.id, [])
            state = next((s for s in ("expired", "expiring") if s in found), "")
            if state:
                shown = f"expired {-left} d ago" if state == "expired" else f"in {left} d"
                expiry = f'{entry.expires.isoformat()} <span class="tag {state}">{shown}</span>'
        jobs = (
            f'<span title="{attr(", ".join(targets))}">'
            f"{len(hits)} in {len(targets)} target(s)</span>"
            if hits
            else '<span class="tag expired">matches nothing</span>'
        )
        row = [
            f'<span id="{attr("entry-" + entry.id)}">{text(entry.id)}</span>'
            + (f"<br><small>{text(entry.reason)}</small>" if entry.reason else ""),
            _tracker(entry.tracker_url, entry.tracker or "-"),
            text(entry.owner or "-"),
            text(entry.kind.value),
            text(entry.action.value),
            jobs,
            age,
            expiry,
        ]
        if store is not None:
            keys = store.entry_keys.get(entry.id, ())
            row.append(text(store.evidence.get(entry.id, "")))
            row.append(sparkline(_entry_outcomes(store, keys), f"last runs of {entry.id}"))
        rows.append(row)
        classes.append(state)
    body = [
        figures(
            [
                (str(len(entries)), "entries"),
                (str(classes.count("expired")), "expired"),
                (str(classes.count("expiring")), f"expiring within {EXPIRING_DAYS} days"),
                (str(sum(len(data.hits.get(e.id, [])) for e in entries)), "jobs touched"),
            ]
        )
    ]
    if entries:
        body.append(table(headers, rows, cls="board", row_classes=classes))
    else:
        body.append('<p class="note">The tree has no quarantine entries.</p>\n')
    if store is None:
        body.append(
            _no_store(
                "each entry shows its evidence (its jobs' results of the last "
                f"{data.since_days} days) and a sparkline of its last runs"
            )
        )
    return page("quarantine.html", "Quarantine board", "".join(body), subtitle=_subtitle(data))


# ---------------------------------------------------------------------- flakes


def _outcome(code: int, reruns: int, *, muted: bool) -> str:
    from matrixgen.evidence.tables import FAILED_CODES, SKIPPED

    if code in FAILED_CODES:
        return "muted" if muted else "fail"
    if code == SKIPPED:
        return "skip"
    return "rerun" if reruns else "pass"


def _run_label(run: RunRow) -> str:
    return (run.commit or f"run {run.run_id}")[:10]


def _run_title(run: RunRow) -> str:
    at = dt.datetime.fromtimestamp(run.finished_at, dt.UTC)
    return f"run {run.run_id}, {at:%Y-%m-%d %H:%M}, commit {run.commit or '-'}"


def _key_label(key: Key) -> str:
    """The whole key: job, place, node id (a row's title)."""
    job, node = key
    label = f"{job.model}/{job.test_case}" + (f"[{job.tag}]" if job.tag else "")
    label += f" on {job.platform}/{job.environment} ({job.system}/{job.scope})"
    return f"{label} {node}" if node else label


def _short_label(key: Key) -> str:
    """What a row shows: the test's file (without its directories) and name,
    or the job's model/test case, and where it ran."""
    job, node = key
    if node:
        path, sep, rest = node.partition("::")
        name = path.rsplit("/", 1)[-1] + sep + rest
    else:
        name = f"{job.model}/{job.test_case}" + (f"[{job.tag}]" if job.tag else "")
    return f"{name} · {job.platform}/{job.environment}"


def flakes(data: SiteData) -> str:
    store = data.store
    legend = "".join(
        f'<span><i class="{c}">{g}</i>{n}</span>' for c, g, n, _ in OUTCOME_STYLE.values()
    )
    body = [
        '<p class="note">Per job (and per pytest node id of unit-test buckets), its outcome '
        f"in each of the last runs of the last {data.since_days} days, oldest on the left; "
        "rows ranked as <code>matrixgen results flaky</code> ranks them (broken, flaky, ok; most "
        "failed runs first). Muted: a failure an allow-failure or deselect entry keeps "
        "from blocking. A blank cell: no result in that run.</p>\n",
        f'<p class="legend grid">{legend}</p>\n',
    ]
    if store is None:
        body.append(_no_store("this page shows a test-by-run grid of outcomes"))
        return page("flakes.html", "Flake history", "".join(body), subtitle=_subtitle(data))
    runs = store.runs
    if not runs:
        body.append(f'<p class="note">No results in the last {data.since_days} days.</p>\n')
        return page("flakes.html", "Flake history", "".join(body), subtitle=_subtitle(data))
    made = _run_cells(runs)
    names: dict[tuple[int, bool, bool], str] = {}  # _outcome, once per kind of cell

    heads = "".join(
        f'<th class=c title="{attr(_run_title(r))}">{text(_run_label(r))}</th>' for r in runs
    )
    lines = [
        f'<table class="grid flakes"><thead><tr><th>verdict</th><th>failed</th>'
        f"<th>job / test</th>{heads}</tr></thead><tbody>"
    ]
    ordered: list[tuple[Key, str, str]] = [
        ((r.job, r.node_id), r.verdict.value, f"{r.failures}/{r.runs}") for r in store.rows
    ]
    ordered += [(k, "skipped", "0/0") for k in store.skipped_only]
    counts = Counter(verdict for _, verdict, _ in ordered)
    for key, verdict, failed in ordered:
        outcomes = store.cells.get(key, {})
        muted = key in store.muted
        cells = []
        for i, run in enumerate(runs):
            found = outcomes.get(run.ref)
            if found is None:
                cells.append("<td>")
            else:
                kind = (found[0], found[1] > 0, muted)
                name = names.get(kind)
                if name is None:
                    name = names[kind] = _outcome(found[0], found[1], muted=muted)
                cells.append(made[i][name])
        lines.append(
            f'<tr><td class="k verdict-{verdict}">{verdict}</td><td class=k>{failed}</td>'
            f'<td class="k name" title="{attr(_key_label(key))}">{text(_short_label(key))}</td>'
            + "".join(cells)
            + "</tr>"
        )
    lines.append("</tbody></table>")
    body.insert(
        0,
        figures(
            [
                (str(len(runs)), "runs shown"),
                (str(counts["broken"]), "broken"),
                # Only with --min-runs below --broken-runs: said where there are some.
                *([(str(counts["failing"]), "failing")] if counts["failing"] else []),
                (str(counts["flaky"]), "flaky"),
                (str(counts["ok"]), "ok"),
            ]
        ),
    )
    body.append("\n".join(lines) + "\n")
    return page("flakes.html", "Flake history", "".join(body), subtitle=_subtitle(data))


def _run_cells(runs: Sequence[RunRow]) -> list[dict[str, str]]:
    """Each run's cells, made once per outcome: the cell title names the run,
    its commit and the outcome ("run 9106 8d42207ea2: fail")."""
    made: list[dict[str, str]] = []
    for run in runs:
        where = attr(f"run {run.run_id} {(run.commit or '')[:10]}".rstrip())
        made.append(
            {
                name: f'<td class={cls} title="{where}: {shown}">{glyph}'
                for name, (cls, glyph, shown, _) in OUTCOME_STYLE.items()
            }
        )
    return made


# ---------------------------------------------------------------------- triage


TRIAGE_STYLE = """.triage{font-size:13px}.triage .ev{min-width:260px;max-width:400px}
.triage .node{min-width:200px;max-width:340px;overflow-wrap:anywhere}
.triage .job{min-width:150px;max-width:220px;overflow-wrap:anywhere}
.verdict-new{color:var(--fail);font-weight:600}.verdict-baseline{color:#4a5366;font-weight:600}
.verdict-quarantined{color:var(--muted);font-weight:600}.verdict-known{color:#4a5366;font-weight:600}
.triage .reason,.groups .reason{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;
overflow-wrap:anywhere;max-width:360px}
.groups li{margin:4px 0}
"""
TRIAGE_HEADERS = ["verdict", "job / test", "node id", "platform", "environment", "scope"]
TRIAGE_HEADERS += ["reason", "evidence", "entry", "baseline run"]


def _run_line(run: RunRow) -> str:
    from matrixgen.evidence.flaky import iso

    where = ", ".join(
        f"{name} {value}"
        for name, value in (("ref", run.git_ref), ("source", run.source), ("commit", run.commit))
        if value
    )
    return f"run {run.run_id} ({where + ', ' if where else ''}finished {iso(run.finished_at)})"


def _failure_row(f: Failure) -> list[str]:
    from matrixgen.evidence.flaky import iso

    entry = "-"
    if f.entry is not None:
        entry = (
            f"{text(f.entry.id)}<br><small>{text(f.entry.action)}, {text(f.entry.kind)}; "
            f"tracker {_tracker(f.entry.tracker, f.entry.tracker or '-')}</small>"
        )
    elif f.known is not None:
        entry = (
            f"known {text(f.known.kind)} failure<br><small>pattern <code>{text(f.known.pattern)}"
            f"</code>; tracker {_tracker(f.known.tracker, f.known.tracker or '-')}</small>"
        )
    base = "-"
    if f.baseline_run is not None:
        run = f.baseline_run
        base = (
            f'<span title="{attr("commit " + (run.commit or "-"))}">run {text(run.run_id)}'
            f"<br><small>{iso(run.at)}</small></span>"
        )
    return [
        f'<span class="verdict-{f.verdict.value}">{f.verdict.value}</span>',
        f'<div class="job">{text(f"{f.job.model}/{f.case}")}</div>',
        f'<div class="node">{text(f.node_id)}</div>'
        if f.node_id
        else f'<div class="node">check {text(f.metric)}</div>'
        if f.metric
        else '<span class="off">the whole job</span>',
        text(f.job.platform),
        text(f.job.environment),
        text(f.job.place),
        f'<div class="reason">{text(f.reason)}</div>' if f.reason else "-",
        f'<div class="ev">{text(f.evidence)}</div>',
        entry,
        base,
    ]


def _triage_of(report: TriageReport) -> list[str]:
    from matrixgen.evidence.triage import NOT_NEW, TriageVerdict

    counts = report.summary()
    body = [
        figures(
            [(str(len(report.failures)), "failures"), (str(counts["new"]), "new")]
            + [(str(counts[v]), v.value) for v in NOT_NEW]
            + [(str(len(report.lift_candidates)), "lift candidates")]
        ),
        f'<p class="note">{text(_run_line(report.run))}, against the baseline: '
        f"{text(str(report.baseline))}. The same verdicts as <code>matrixgen results triage --run "
        f"{text(report.run.run_id)}</code>.</p>\n",
    ]
    if report.baseline_runs:
        body.append('<h2>Baseline runs</h2>\n<ul class="baseline">')
        body += [f"<li>{text(_run_line(r))}</li>" for r in report.baseline_runs]
        body.append("</ul>\n")
    else:
        body.append(f'<p class="note no-baseline"><b>No baseline.</b> {text(report.note)}.</p>\n')
    if not report.failures:
        body.append(
            f'<p class="note no-failures"><b>Run {text(report.run.run_id)} has no failures:</b> '
            "no job or test of it failed in the results store.</p>\n"
        )
    for verdict in TriageVerdict:
        rows = [_failure_row(f) for f in report.failures if f.verdict is verdict]
        if rows:
            body.append(f'<h2 id="{verdict}">{verdict.heading} ({len(rows)})</h2>\n')
            body.append(table(TRIAGE_HEADERS, rows, cls=f"triage {verdict}"))
    if report.shared:
        body.append('<h2 id="groups">Failures that share a reason</h2>\n<ul class="groups">')
        for g in report.shared:
            tests = ", ".join(f"<code>{text(t)}</code>" for t in g.tests)
            body.append(
                f'<li><b>{text(g.sentence())}:</b> <span class="reason">{text(g.reason)}</span>'
                f"<br><small>{tests}</small></li>"
            )
        body.append("</ul>\n")
    body.append("<h2>Lift candidates</h2>\n")
    if report.lift_candidates:
        rows = [
            [
                text(c.entry.id),
                text(c.entry.action),
                text(c.entry.kind),
                _tracker(c.entry.tracker, c.entry.tracker or "-"),
                str(c.jobs),
                text(c.reason),
            ]
            for c in report.lift_candidates
        ]
        headers = ["entry", "action", "kind", "tracker", "jobs", "why"]
        body.append(table(headers, rows, numeric=(4,), cls="lift"))
    else:
        body.append(
            '<p class="note">None: no entry that lets jobs fail had all its jobs pass in the '
            "run and in the baseline.</p>\n"
        )
    return body


def triage(data: SiteData) -> str:
    what = (
        "each job and test that failed in the run, judged new, failing in the baseline with "
        "the same reason, flaky on the baseline ref, a known failure or quarantined, as "
        "<code>matrixgen results triage</code> judges it, and the failures that share a reason"
    )
    if data.triage is not None:
        body = "".join(_triage_of(data.triage))
    elif data.store is None:
        body = f'<p class="note">With a run given (<code>--run RUN</code>), it shows {what}.</p>\n'
        body += _no_store("and --run RUN, this page shows that run's triage")
    else:
        latest = ", ".join(r.run_id for r in reversed(data.store.runs[-5:]))
        body = (
            '<p class="note no-run"><b>No run given.</b> <code>matrixgen report --run RUN</code> '
            f"shows here {what}.</p>\n"
            + (
                f'<p class="note">The latest runs in the store: {text(latest)}.</p>\n'
                if latest
                else ""
            )
        )
    return page("triage.html", "Triage", body, subtitle=_subtitle(data), style=TRIAGE_STYLE)


def render_site(data: SiteData) -> dict[str, str]:
    """{file name: page}, in the navigation's order."""
    return {
        "index.html": overview(data),
        "selection.html": selection(data),
        "quarantine.html": board(data),
        "flakes.html": flakes(data),
        "triage.html": triage(data),
    }
