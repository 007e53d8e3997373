"""The report's own pages (Overview, Selection, Quarantine board), and the
site: these and the pages of each contribution, in the navigation's order.
Each page takes the gathered `SiteData` and returns its HTML; every string
from the tree or the quarantine file goes through `text` or `attr`
(`views.page`), every link through `html_link`."""

from __future__ import annotations

from collections.abc import Sequence

from matrixgen.model.jobs import Job, Target
from matrixgen.report.site import EXPIRING_DAYS, SiteData
from matrixgen.views.cost import cost_report, hours, pipeline_name
from matrixgen.views.page import Frame, attr, bar_chart, figures, table, text
from matrixgen.views.page import tracker_link as _tracker

# The report's own pages, first in the navigation: (file name, title).
OWN_PAGES = (
    ("index.html", "Overview"),
    ("selection.html", "Selection"),
    ("quarantine.html", "Quarantine"),
)


def _frame(data: SiteData) -> Frame:
    words = [str(data.generation.tree.root), *(p.subtitle for p in data.parts.values())]
    subtitle = " · ".join([*words, f"as of {data.today.isoformat()}"])
    return Frame(nav=(*OWN_PAGES, *data.part_pages), subtitle=subtitle)


def _notes(data: SiteData, page: str) -> list[str]:
    """What the contributions add at the end of one of the report's pages."""
    return [n for n in (p.note(page) for p in data.parts.values()) if n]


def _pipelines(targets: Sequence[Target]) -> dict[str, list[Target]]:
    found: dict[str, list[Target]] = {}
    for target in targets:
        found.setdefault(pipeline_name(target), []).append(target)
    return dict(sorted(found.items()))


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
    series = []
    for name, cost in data.cost.pipelines:
        bars = [
            ("GPU-h max", cost.gpu_hours_max, "#90a4c8"),
            ("weighted", cost.weighted_max, "#1f5fbf"),
        ]
        if cost.expected is not None:
            bars.append(("expected", cost.expected, "#2e7d32"))
        series.append((name, bars))
    targets = {name: len(group) for name, group in groups.items()}
    pipelines = cost_report("pipeline (one run)", data.cost.pipelines, targets, quarantined)
    body.append(pipelines.html(cls="pipelines"))
    body.append("<h2>GPU-hours per pipeline run</h2>\n")
    body.append(bar_chart("GPU-hours per pipeline run", series))
    body.append(
        '<p class="note">GPU-hours = nodes x gpus x time_limit x n_repeat / 3600 (an upper '
        "bound: time limits), weighted by each platform's gpu_hour_weight; "
        "as <code>matrixgen stats --cost</code> computes them.</p>\n"
    )
    body += _notes(data, "index.html")
    return _frame(data).page("index.html", "Overview", "".join(body))


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
    return _frame(data).page("selection.html", "Selection", "".join(body))


def board(data: SiteData) -> str:
    entries = data.entries
    problems: dict[str, list[str]] = {}
    for item in data.audit:
        problems.setdefault(item.entry_id, []).append(item.problem)
    headers = ["entry", "tracker", "owner", "kind", "action", "jobs", "age", "expires"]
    headers += [h for part in data.parts.values() for h in part.board_headers()]
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
        rows.append(row + [c for part in data.parts.values() for c in part.board_cells(entry)])
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
    body += _notes(data, "quarantine.html")
    return _frame(data).page("quarantine.html", "Quarantine board", "".join(body))


def render_site(data: SiteData) -> dict[str, str]:
    """{file name: page}, in the navigation's order."""
    site = {
        "index.html": overview(data),
        "selection.html": selection(data),
        "quarantine.html": board(data),
    }
    frame = _frame(data)
    for part in data.parts.values():
        site.update(part.pages(frame))
    return site
