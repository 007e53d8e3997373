"""The results store's part of `matrixgen report`: what it adds to the
report's pages (every page's subtitle, the expected GPU-hours of the overview,
each quarantine entry's evidence and last runs on the board) and its own two
pages, Flake history (a test-by-run grid) and Triage (one run's triage). The
report reaches it through `contributes.REPORT`, never by importing it."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import closing
from functools import cache
from typing import TYPE_CHECKING

from msgspec import Struct

from matrixgen.model.jobs import Target
from matrixgen.model.vocab import QuarantineAction
from matrixgen.pipeline import Generation
from matrixgen.quarantine.apply import Hit
from matrixgen.quarantine.model import Entry
from matrixgen.views.contributions import SiteRequest
from matrixgen.views.page import OUTCOME_STYLE, Frame, attr, figures, sparkline, table, text
from matrixgen.views.page import tracker_link as _tracker

if TYPE_CHECKING:
    from matrixgen.results.flaky import FlakyRow
    from matrixgen.results.queries import Cells
    from matrixgen.results.store import JobKey, RunRow
    from matrixgen.results.triage import Failure, TriageReport
    from matrixgen.views.cost import Measured

# The flake grid shows at most this many runs (the last of the window), the
# board's sparklines this many.
GRID_RUNS = 100
SPARK_RUNS = 20

Key = tuple["JobKey", str | None]


def _no_store(what: str) -> str:
    note = (
        "No results store (--db, $MATRIXGEN_RESULTS_DB, or .matrixgen/results.db): "
        f"with one, {what}."
    )
    return f'<p class="note no-store">{text(note)}</p>\n'


class StoreView(Struct, frozen=True, kw_only=True):
    """What the results store adds: the runs of the window (oldest first, at
    most GRID_RUNS), flaky's ranked verdicts, every stored outcome, and each
    entry's evidence line and keys."""

    shown: str
    runs: tuple[RunRow, ...]
    rows: tuple[FlakyRow, ...]
    skipped_only: tuple[Key, ...]  # keys whose every result in the window was a skip
    cells: Cells
    muted: frozenset[Key]  # keys an allow-failure or deselect entry keeps from blocking
    evidence: Mapping[str, str]
    entry_keys: Mapping[str, tuple[Key, ...]]


class TriageQuery(Struct, frozen=True, kw_only=True):
    """`--run` and the baseline options: the run the Triage page triages."""

    run_id: str
    baseline_ref: str = "main"
    baseline_source: str | None = None
    baseline_runs: int = 1


class EvidencePart(Struct, frozen=True, kw_only=True):
    """What the store adds to one site (`views.contributions.SitePart`): with no
    store, `store` is None and each page says what one would add."""

    store: StoreView | None
    triage: TriageReport | None = None  # with --run: that run's triage
    measured: Measured | None = None
    since_days: int

    @property
    def subtitle(self) -> str:
        return f"store {self.store.shown}" if self.store is not None else "no results store"

    def board_headers(self) -> Sequence[str]:
        return ["evidence", "last runs"] if self.store is not None else []

    def board_cells(self, entry: Entry) -> Sequence[str]:
        store = self.store
        if store is None:
            return []
        keys = store.entry_keys.get(entry.id, ())
        return [
            text(store.evidence.get(entry.id, "")),
            sparkline(_entry_outcomes(store, keys), f"last runs of {entry.id}"),
        ]

    def note(self, page: str) -> str:
        if self.store is not None:
            return ""
        if page == "index.html":
            return _no_store("the expected GPU-hours of every measured job are shown too")
        if page == "quarantine.html":
            return _no_store(
                "each entry shows its evidence (its jobs' results of the last "
                f"{self.since_days} days) and a sparkline of its last runs"
            )
        return ""

    def pages(self, frame: Frame) -> dict[str, str]:
        return {"flakes.html": flakes(self, frame), "triage.html": triage(self, frame)}


def gather(request: SiteRequest) -> EvidencePart:
    """The store's part: without a store (none given, none in the environment,
    no default file) sqlalchemy is not imported, and a triage query is an error
    (exit 11): there is no run to read. Options: `db`, `triage` (a TriageQuery)."""
    from matrixgen.results.summary import store_configured

    db = request.options.get("db")
    assert db is None or isinstance(db, str)
    query = request.options.get("triage")
    assert query is None or isinstance(query, TriageQuery)
    if not store_configured(db):
        if query is not None:
            from matrixgen.model.errors import ResultsStoreError

            raise ResultsStoreError(
                f"--run {query.run_id}: no results store to read the run from: pass --db or set "
                "$MATRIXGEN_RESULTS_DB (or ingest into .matrixgen/results.db)"
            )
        return EvidencePart(store=None, since_days=request.since_days)
    from matrixgen.results.durations import measured_from_store

    measured = measured_from_store(db)
    store_view = _store_view(
        request.generation, request.targets, request.hits, db=db, since_days=request.since_days
    )
    report = None
    if query is not None:
        # As `matrixgen results triage --since DAYS` gives it (its other policy
        # options at their defaults): the same library call.
        from matrixgen.results.flaky import FlakyPolicy
        from matrixgen.results.queries import RunFilter
        from matrixgen.results.triage import read_triage

        report = read_triage(
            db,
            request.generation,
            query.run_id,
            baseline=RunFilter(ref=query.baseline_ref, source=query.baseline_source),
            count=query.baseline_runs,
            policy=FlakyPolicy(since_days=request.since_days),
        )
    return EvidencePart(
        store=store_view, triage=report, measured=measured, since_days=request.since_days
    )


def _store_view(
    generation: Generation,
    targets: Sequence[Target],
    hits: Mapping[str, list[Hit]],
    *,
    db: str | None,
    since_days: int,
) -> StoreView:
    from matrixgen.results.flaky import FlakyPolicy, window_start
    from matrixgen.results.mapping import job_key
    from matrixgen.results.queries import outcome_cells
    from matrixgen.results.store import open_store
    from matrixgen.results.summary import entry_evidence, entry_verdicts

    # One reading of the verdicts for the grid and the entries' evidence: the
    # grid leaves out the whole-job rows of unit-test buckets (their tests
    # have rows of their own, as in `matrixgen results flaky`).
    verdicts = entry_verdicts(db, since_days)
    rows = tuple(r for r in verdicts.rows if not (r.job.unit and r.node_id is None))
    with closing(open_store(db, write=False)) as store:
        shown = store.shown
        since = window_start(FlakyPolicy(since_days=since_days))
        run_rows, cells = outcome_cells(store, since=since)
    refs = {ref for outcomes in cells.values() for ref in outcomes}
    runs = sorted((run_rows[r] for r in refs), key=lambda r: (r.finished_at, r.ref))
    ranked = {(r.job, r.node_id) for r in rows}
    entries = generation.quarantine.entries
    entry_keys: dict[str, tuple[Key, ...]] = {}
    muted: set[Key] = set()
    for entry in entries:
        jobs = sorted({job_key(h.job, h.target.system) for h in hits.get(entry.id, [])})
        if entry.action is QuarantineAction.DESELECT:
            keys: tuple[Key, ...] = tuple((k, n) for k in jobs for n in entry.node_ids)
        else:
            keys = tuple((k, None) for k in jobs)
        entry_keys[entry.id] = keys
        if entry.action is not QuarantineAction.SKIP:
            muted.update(keys)
    return StoreView(
        shown=shown,
        runs=tuple(runs[-GRID_RUNS:]),
        rows=rows,
        skipped_only=tuple(
            sorted((k for k in cells if k not in ranked), key=lambda k: (k[0], k[1] or ""))
        ),
        cells=cells,
        muted=frozenset(muted),
        evidence=entry_evidence(
            generation,
            entries,
            db=db,
            since_days=since_days,
            targets=targets,
            verdicts=verdicts,
            hits=hits,
        )
        or {},
        entry_keys=entry_keys,
    )


# ---------------------------------------------------------------------- board


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
    return next((name for name in ("fail", "rerun", "pass") if name in names), "skip")


# ---------------------------------------------------------------------- flakes


@cache  # once per kind of cell of the grid
def _outcome(code: int, reruns: int, *, muted: bool) -> str:
    from matrixgen.results.tables import FAILED_CODES, SKIPPED

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
    label = f"{job.model}/{job.case} on {job.where} ({job.place})"
    return f"{label} {node}" if node else label


def _short_label(key: Key) -> str:
    """What a row shows: the test's file (without its directories) and name,
    or the job's model/test case, and where it ran."""
    job, node = key
    if node:
        path, sep, rest = node.partition("::")
        name = path.rsplit("/", 1)[-1] + sep + rest
    else:
        name = f"{job.model}/{job.case}"
    return f"{name} · {job.where}"


def flakes(data: EvidencePart, frame: Frame) -> str:
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
        return frame.page("flakes.html", "Flake history", "".join(body))
    runs = store.runs
    if not runs:
        body.append(f'<p class="note">No results in the last {data.since_days} days.</p>\n')
        return frame.page("flakes.html", "Flake history", "".join(body))
    made = _run_cells(runs)
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
            cells.append("<td>" if found is None else made[i][_outcome(*found, muted=muted)])
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
    return frame.page("flakes.html", "Flake history", "".join(body))


def _run_cells(runs: Sequence[RunRow]) -> list[dict[str, str]]:
    """Each run's cells, made once per outcome: the cell title names the run,
    its commit and the outcome ("run 9106 8d42207ea2: fail")."""
    wheres = (attr(f"run {run.run_id} {(run.commit or '')[:10]}".rstrip()) for run in runs)
    return [
        {
            name: f'<td class={cls} title="{where}: {shown}">{glyph}'
            for name, (cls, glyph, shown, _) in OUTCOME_STYLE.items()
        }
        for where in wheres
    ]


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
    from matrixgen.results.flaky import iso

    where = ", ".join(
        f"{name} {value}"
        for name, value in (("ref", run.git_ref), ("source", run.source), ("commit", run.commit))
        if value
    )
    return f"run {run.run_id} ({where + ', ' if where else ''}finished {iso(run.finished_at)})"


def _failure_row(f: Failure) -> list[str]:
    from matrixgen.results.flaky import iso

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
    from matrixgen.results.triage import NOT_NEW, TriageVerdict

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


def triage(data: EvidencePart, frame: Frame) -> str:
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
    return frame.page("triage.html", "Triage", body, style=TRIAGE_STYLE)
