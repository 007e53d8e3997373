"""`matrixgen report`: what each page holds, checked against the commands that
compute the same figures, the escaping of every string, and the command's
errors. The pages in a real browser: tests/test_report_browser.py."""

from __future__ import annotations

import datetime as dt
import html
import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from matrixgen.cli.features import report_contributions
from matrixgen.documents.quarantine import Match
from matrixgen.model.errors import ExitCode
from matrixgen.model.vocab import QuarantineAction, QuarantineKind
from matrixgen.pipeline import Generation, generate
from matrixgen.quarantine.model import Entry
from matrixgen.report.pages import render_site
from matrixgen.report.site import SiteData
from matrixgen.report.site import gather as gather_site
from matrixgen.results.site import EvidencePart, StoreView, TriageQuery
from matrixgen.util.escape import html_attribute, html_link, html_text
from tests.results_fixtures import MR_FAILURES, MR_RUN, RECIPES, TODAY
from tests.triage_fixtures import triage_runs  # noqa: F401

if TYPE_CHECKING:
    from matrixgen.results.triage import TriageReport


def gather(
    generation: Generation,
    *,
    db: str | None = None,
    since_days: int,
    today: dt.date,
    triage: TriageQuery | None = None,
) -> SiteData:
    """The site as `matrixgen report` gathers it: with every feature's part."""
    return gather_site(
        generation,
        since_days=since_days,
        today=today,
        contributions=report_contributions(),
        options={"db": db, "triage": triage},
    )


def _part(data: SiteData) -> EvidencePart:
    part = data.parts["evidence"]
    assert isinstance(part, EvidencePart)
    return part


def _with_part(data: SiteData, **changes: object) -> SiteData:
    """`data` with the results store's part changed."""
    part = msgspec.structs.replace(_part(data), **changes)
    return msgspec.structs.replace(data, parts={**data.parts, "evidence": part})


PAGES = ("index.html", "selection.html", "quarantine.html", "flakes.html", "triage.html")
DAY = dt.date.fromisoformat(TODAY)


class Rows(HTMLParser):
    """The text of each cell of each body row of the tables whose class holds
    `table_class`, in page order (a cell's text with its line breaks as " | ")."""

    def __init__(self, source: str, table_class: str) -> None:
        super().__init__(convert_charrefs=True)
        self.wanted = table_class
        self.inside = self.in_body = self.in_cell = False
        self.rows: list[list[str]] = []
        self.feed(source)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.inside = self.wanted in (dict(attrs).get("class") or "").split()
        elif self.inside and tag == "tbody":
            self.in_body = True
        elif self.in_body and tag == "tr":
            self.rows.append([])
        elif self.in_body and tag == "td":
            self.rows[-1].append("")
            self.in_cell = True
        elif self.in_cell and tag == "br":
            self.rows[-1][-1] += " | "

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.inside = self.in_body = False
        if tag in ("td", "tr", "table"):
            self.in_cell = False

    def handle_data(self, data: str) -> None:
        if self.in_cell:
            self.rows[-1][-1] += data


class Parsed(HTMLParser):
    """Every start tag with its attributes, and the text, of one page."""

    def __init__(self, source: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.texts: list[str] = []
        self.feed(source)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.texts.append(data)

    @property
    def text(self) -> str:
        return "".join(self.texts)

    def rows(self, table_class: str) -> int:
        """<tr> in <tbody> of the table with that class (rows after the head)."""
        count = 0
        inside = False
        for tag, attrs in self.tags:
            if tag == "table":
                inside = table_class in (attrs.get("class") or "").split()
            elif inside and tag == "tr":
                count += 1
        return count - 1 if count else 0  # the head's row


@pytest.fixture(autouse=True)
def _today(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATRIXGEN_TODAY", TODAY)
    monkeypatch.delenv("MATRIXGEN_RESULTS_DB", raising=False)


@pytest.fixture(scope="module")
def shipped() -> SiteData:
    return gather(generate(RECIPES), db=None, since_days=30, today=DAY)


# ---------------------------------------------------------------- escaping

HOSTILE = st.one_of(
    st.text(),
    st.sampled_from(
        [
            "<script>alert(1)</script>",
            '"><img src=x onerror=alert(1)>',
            "' onmouseover='alert(1)",
            "javascript:alert(1)",
            "&lt;b&gt; &amp;",
            "a\x00b\x07c\x1b[31m\u202eevil\u200b",
            "</td></tr></table><h1>x</h1>",
            "<!-- -->",
        ]
    ),
)


@given(HOSTILE)
def test_html_text_is_never_markup(value: str) -> None:
    parsed = Parsed(f"<p>{html_text(value)}</p>")
    assert [t for t, _ in parsed.tags] == ["p"]
    if value.isprintable():
        assert parsed.text == value  # the value itself, as text


@given(HOSTILE)
def test_html_attribute_stays_one_attribute(value: str) -> None:
    parsed = Parsed(f'<p title="{html_attribute(value)}">x</p>')
    assert parsed.tags == [("p", {"title": parsed.tags[0][1]["title"]})]
    if value.isprintable():
        assert parsed.tags[0][1]["title"] == value
    assert "\n" not in html_attribute(value) and "\x00" not in html_attribute(value)


@given(HOSTILE)
def test_html_link_is_http_or_nothing(url: str) -> None:
    link = html_link(url)
    if link is not None:
        href = Parsed(f'<a href="{link}">x</a>').tags[0][1]["href"] or ""
        assert href.startswith(("http://", "https://"))


def test_html_link_refuses_what_is_no_web_link() -> None:
    for url in ("javascript:alert(1)", "data:text/html,x", "//evil.org/x", "#7201", "file:///x"):
        assert html_link(url) is None, url
    assert html_link("https://example.org/a?b=1&c='2'") == (
        "https://example.org/a?b=1&amp;c=&#39;2&#39;"
    )


def _hostile_entry(name: str, url: str) -> Entry:
    return Entry(
        id="hostile",
        tracker=url,
        tracker_url=url,
        kind=QuarantineKind.FLAKY,
        action=QuarantineAction.SKIP,
        match=Match(test_case=name),
        owner=name,
        reason=name,
        added=DAY,
        expires=DAY + dt.timedelta(days=3),
    )


def _safe_markup(page: str) -> Parsed:
    """The page's tags are the site's own: no script, no event handler, no link
    but the site's pages and http(s) trackers."""
    parsed = Parsed(page)
    for tag, attrs in parsed.tags:
        assert tag not in {"script", "iframe", "object", "embed", "img", "form", "base"}, tag
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            if name == "href":
                assert value in PAGES or (value or "").startswith(("http://", "https://")), value
    return parsed


@given(HOSTILE, HOSTILE)
def test_hostile_entry_shows_as_text_on_the_board(shipped: SiteData, name: str, url: str) -> None:
    data = msgspec.structs.replace(shipped, entries=(_hostile_entry(name, url),), hits={}, audit=())
    parsed = _safe_markup(render_site(data)["quarantine.html"])
    if name.isprintable() and name.strip():
        assert name in parsed.text  # the owner, the reason: as they are
    links = [a["href"] for tag, a in parsed.tags if tag == "a" and a["href"] not in PAGES]
    assert len(links) == (1 if html_link(url) is not None else 0)


# ------------------------------------------------------- the shipped tree


def test_overview_shows_stats_cost_figures(cli, shipped: SiteData) -> None:
    """Each pipeline's row holds the figures `stats --cost` prints for it (the
    Overview counts every platform: `--all-platforms`, GB300 included)."""
    done = cli("stats", "--recipes", RECIPES, "--cost", "--all-platforms", "--format", "json")
    assert done.code == 0, done.err
    pipelines = json.loads(done.out)["pipelines"]
    parsed = Parsed(render_site(shipped)["index.html"])
    assert parsed.rows("pipelines") == len(pipelines) > 0
    from matrixgen.views.cost import hours

    for row in pipelines:
        shown = f"{row['pipeline']}"
        assert shown in parsed.text
        assert hours(row["weighted_gpu_hours_max"]) in parsed.text
    # One bar per pipeline and series (max and weighted: no store).
    rects = [a for tag, a in parsed.tags if tag == "rect" and a.get("height") != "10"]
    assert len(rects) == 2 * len(pipelines)


@pytest.mark.parametrize("site", ["shipped", pytest.param("with_store", marks=pytest.mark.slow)])
def test_the_overview_pipelines_are_the_rows_stats_cost_prints(
    site: str, request: pytest.FixtureRequest
) -> None:
    """One table in two places: the Overview shows `stats --cost`'s pipelines
    table, cell for cell (jobs in thousands), with each pipeline's targets and
    quarantined jobs beside it."""
    import re

    from matrixgen.views.cost import render_cost_table

    data: SiteData = request.getfixturevalue(site)
    page = render_site(data)["index.html"]
    table = page.split('<table class="pipelines">', 1)[1].split("</table>", 1)[0]
    html_rows = [
        [html.unescape(c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)]
        for row in table.split("<tr>")[1:]
    ]
    text = render_cost_table(data.cost).split("\n\n")[1].splitlines()
    text_rows = [re.split(r"  +", line) for line in text[:1] + text[2:]]
    (head, *shown_rows), (text_head, *printed_rows) = html_rows, text_rows
    assert head == [text_head[0], "targets", *text_head[1:], "quarantined jobs"]
    assert len(shown_rows) == len(printed_rows) > 0
    for shown, (name, jobs, *figures) in zip(shown_rows, printed_rows, strict=True):
        assert [shown[0], *shown[2:6]] == [name, f"{int(jobs):,}", *figures]


def test_selection_grid_has_a_cell_per_case_and_target(cli, shipped: SiteData) -> None:
    """Per pipeline: one row per case any of its targets holds, one cell per
    target; the cells that say skip are the jobs `list --with-quarantined`
    marks as skipped."""
    parsed = Parsed(render_site(shipped)["selection.html"])
    tables = [a for tag, a in parsed.tags if tag == "table"]
    from matrixgen.views.cost import pipeline_name

    assert len(tables) == len({pipeline_name(t) for t in shipped.targets})
    cells = [a for tag, a in parsed.tags if tag == "td" and a.get("class") != "case"]
    skips = sum(1 for a in cells if a.get("class") == "skip")
    expected = sum(len(shipped.selections[t.name].skipped) for t in shipped.targets)
    assert skips == expected > 0
    runs = sum(1 for a in cells if a.get("class") in {"run", "allow", "desel"})
    assert runs == sum(len(shipped.selections[t.name].jobs) for t in shipped.targets)
    done = cli(
        "list",
        "--recipes",
        RECIPES,
        "--with-quarantined",
        "--format",
        "json",
        *[x for t in shipped.targets for x in ("--target", t.name)],
    )
    listed = json.loads(done.out)
    assert sum(1 for j in listed if (j.get("quarantine") or {}).get("action") == "skip") == skips


def test_board_has_a_row_per_entry_with_its_tracker(shipped: SiteData) -> None:
    parsed = Parsed(render_site(shipped)["quarantine.html"])
    entries = shipped.entries
    assert parsed.rows("board") == len(entries) > 0
    hrefs = [a["href"] for tag, a in parsed.tags if tag == "a" and a["href"] not in PAGES]
    assert hrefs == [e.tracker_url for e in entries]
    for entry in entries:
        assert entry.owner in parsed.text and entry.id in parsed.text


def test_board_marks_expired_and_expiring_entries() -> None:
    """Judged a day after an entry expired, its row stands out as expired; 10
    days before, as expiring; 30 days before, as neither."""
    generation = generate(RECIPES)
    entry = generation.quarantine.entries[0]
    assert entry.expires is not None
    for day, state in (
        (entry.expires + dt.timedelta(days=1), "expired"),
        (entry.expires - dt.timedelta(days=10), "expiring"),
        (entry.expires - dt.timedelta(days=30), None),
    ):
        data = gather(generation, db=None, since_days=30, today=day)
        parsed = Parsed(render_site(data)["quarantine.html"])
        rows = [a.get("class") for tag, a in parsed.tags if tag == "tr"][1:]
        assert rows[0] == state, (day, rows)


def test_every_page_says_what_a_store_would_add(shipped: SiteData) -> None:
    site = render_site(shipped)
    for name in ("index.html", "quarantine.html", "flakes.html", "triage.html"):
        assert "No results store" in Parsed(site[name]).text, name
    assert "adds nothing" in Parsed(site["selection.html"]).text
    assert 'class="grid flakes"' not in site["flakes.html"]
    triage = Parsed(site["triage.html"]).text
    assert "With a run given (--run RUN), it shows each job and test that failed" in triage
    assert "and --run RUN, this page shows that run's triage" in triage
    assert 'class="triage' not in site["triage.html"]


def test_every_page_is_subtitled_with_its_tree_the_parts_words_and_the_day(
    shipped: SiteData,
) -> None:
    subtitle = f'<span class="note">{RECIPES} · no results store · as of {DAY.isoformat()}</span>'
    for name, page in render_site(shipped).items():
        assert subtitle in page, name


def test_pages_load_nothing_from_elsewhere(shipped: SiteData) -> None:
    for name, page in render_site(shipped).items():
        parsed = _safe_markup(page)
        for tag, attrs in parsed.tags:
            assert "src" not in attrs, (name, tag)
            assert tag != "link", name
        assert "Content-Security-Policy" in page and "default-src 'none'" in page


# -------------------------------------------------------------- a store


@pytest.fixture(scope="module")
def with_store(evidence_store: Path) -> SiteData:
    # Module-scoped, so monkeypatch cannot set the day: set for the gathering
    # only, then put back (held until the module ends, it would outlive a
    # test's own setting when a test asks for this fixture, and leak from there).
    before = os.environ.get("MATRIXGEN_TODAY")
    os.environ["MATRIXGEN_TODAY"] = TODAY
    try:
        return gather(generate(RECIPES), db=str(evidence_store), since_days=30, today=DAY)
    finally:
        if before is None:
            del os.environ["MATRIXGEN_TODAY"]
        else:
            os.environ["MATRIXGEN_TODAY"] = before


def test_flake_grid_rows_are_flakys_ranking(cli, with_store: SiteData, evidence_store) -> None:
    """Rows in the order `matrixgen flaky` prints, one cell per run, and each
    row's cells count what flaky counted: fail and muted cells are its failed
    runs, rerun-pass cells its reruns that passed, every non-skip cell a run."""
    done = cli("results", "flaky", "--db", evidence_store, "--min-runs", "1", "--format", "json")
    flaky = json.loads(done.out)
    page = render_site(with_store)["flakes.html"]
    rows = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0].split("<tr>")[1:]
    ranked = rows[: len(flaky)]
    assert len(rows) >= len(flaky) > 0
    runs = len(_part(with_store).store.runs)
    assert runs == 24
    for row, expected in zip(ranked, flaky, strict=True):
        cells = Parsed(row)
        tds = [a.get("class") for tag, a in cells.tags if tag == "td"][3:]
        assert len(tds) == runs
        assert expected["verdict"] in row
        node = expected["node_id"] or expected["test_case"]
        assert node in [a.get("title") for tag, a in cells.tags if tag == "td"][2]
        assert tds.count("f") + tds.count("m") == expected["failures"]
        assert tds.count("r") == expected["rerun_passes"]
        assert sum(1 for c in tds if c in {"p", "f", "m", "r"}) == expected["runs"]
    # A test that was skipped in every run: not in flaky's rows, still shown.
    assert any("test_blend_full_corpus" in r and r.count("class=s") == runs for r in rows)


def test_flake_cells_name_run_commit_and_outcome(with_store: SiteData) -> None:
    parsed = Parsed(render_site(with_store)["flakes.html"])
    titles = [a["title"] for tag, a in parsed.tags if tag == "td" and a.get("class") == "f"]
    run = _part(with_store).store.runs[-1]
    assert f"run {run.run_id} {run.commit[:10]}: fail" in titles


def test_board_with_a_store_has_evidence_and_sparklines(
    with_store: SiteData, evidence_store: Path, cli
) -> None:
    """The evidence column is `quarantine audit`'s line for each entry; the
    deselect entry's sparkline has a bar for each of its runs."""
    done = cli(
        "quarantine", "audit", "--recipes", RECIPES, "--db", evidence_store, "--format", "json"
    )
    parsed = Parsed(render_site(with_store)["quarantine.html"])
    for line in _part(with_store).store.evidence.values():
        assert line in parsed.text
    audit = json.loads(done.out) if done.out.strip().startswith(("{", "[")) else None
    assert audit is not None, done
    svgs = [a for tag, a in parsed.tags if tag == "svg"]
    assert len(svgs) == 1  # the one entry with runs: ut-async-save-flaky-dev
    assert svgs[0]["width"] == str(5 * 20)  # its last 20 of 24 runs


# -------------------------------------------------------------- the command


def test_report_command_writes_the_site(cli, tmp_path: Path) -> None:
    out = tmp_path / "site"
    done = cli("report", "--recipes", RECIPES, "--out", out)
    assert done.code == 0, done.err
    assert sorted(p.name for p in out.iterdir()) == sorted(PAGES)
    assert "5 page(s)" in done.err


@pytest.mark.slow  # seconds by itself (tests/tiers.py)
def test_report_is_the_same_bytes_whatever_the_hash_seed(tmp_path: Path) -> None:
    outs = []
    for seed in ("0", "4242"):
        out = tmp_path / f"site{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed, "MATRIXGEN_TODAY": TODAY}
        subprocess.run(
            [
                sys.executable,
                "-m",
                "matrixgen",
                "report",
                "--recipes",
                str(RECIPES),
                "--out",
                str(out),
            ],
            check=True,
            env=env,
            capture_output=True,
        )
        outs.append({p.name: p.read_bytes() for p in out.iterdir()})
    assert outs[0] == outs[1]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--since", "0"], ExitCode.USAGE, "--since must be 1 day or more"),
        (["--db", "postgresql+nosuchdriver://x/y"], ExitCode.USAGE, "expected a file path"),
        (["--db", "{garbage}"], ExitCode.RESULTS_STORE, "garbage"),
    ],
)
def test_report_errors(cli, tmp_path: Path, args: list[str], code: int, message: str) -> None:
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"not a database, " * 100)
    args = [a.format(garbage=garbage) for a in args]
    done = cli("report", "--recipes", RECIPES, "--out", tmp_path / "site", *args)
    assert done.code == code, done
    assert message in done.err and "Traceback" not in done.err
    assert len(done.err.strip().splitlines()) == 1


def test_report_into_a_file_is_a_usage_error(cli, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    done = cli("report", "--recipes", RECIPES, "--out", blocker / "site")
    assert done.code == ExitCode.USAGE, done
    assert "is a file, not a directory" in done.err


def test_report_never_writes_through_a_linked_folder(cli, tmp_path: Path) -> None:
    """--out that is a symbolic link is refused (exit 12), as generate's
    --output-dir is: the folder it points to is left as it was."""
    real = tmp_path / "elsewhere"
    real.mkdir()
    (tmp_path / "site").symlink_to(real)
    done = cli("report", "--recipes", RECIPES, "--out", tmp_path / "site")
    assert done.code == ExitCode.OUTPUT, done
    assert "symbolic link" in done.err and "Traceback" not in done.err
    assert list(real.iterdir()) == []


def test_since_narrows_the_grid_as_it_narrows_flaky(cli, evidence_store: Path) -> None:
    """With --since 14 (from 2026-12-01: the runs of 2026-11-18 on) the grid
    holds only the runs of that window, and each row as many runs as flaky
    counts for it."""
    done = cli("results", "flaky", "--db", evidence_store, "--min-runs", "1", "--since", "14",
               "--format", "json")  # fmt: skip
    flaky = json.loads(done.out)
    data = gather(generate(RECIPES), db=str(evidence_store), since_days=14, today=DAY)
    assert _part(data).store is not None
    runs = {r.ref for r in _part(data).store.runs}
    assert 0 < len(runs) < 24
    assert all(ref in runs for cells in _part(data).store.cells.values() for ref in cells)
    ranked = [(r.job, r.node_id) for r in _part(data).store.rows]
    assert [(r["test_case"], r["node_id"]) for r in flaky] == [(k.test_case, n) for k, n in ranked]
    from matrixgen.results.tables import SKIPPED

    for (key, node), expected in zip(ranked, flaky, strict=True):
        played = [c for c in _part(data).store.cells[(key, node)].values() if c[0] != SKIPPED]
        assert len(played) == expected["runs"]


def test_a_failure_a_deselect_entry_covers_is_muted(store_copy: Path) -> None:
    """ut-async-save-flaky-dev deselects one node id on dev: its failure in a
    new run is muted (M), another test's failure in that run is a fail (X)."""
    from matrixgen.results.ingest import ingest
    from matrixgen.results.junit import Outcome, Testcase
    from matrixgen.results.store import JobKey, JobResults, RunInfo, open_store

    bucket = "tests/unit_tests/dist_checkpointing/test_async_save.py"
    job = JobKey(system="gitlab", scope="mr", platform="dgx_h100", environment="dev",
                 model="unit-tests", test_case=bucket, tag="latest", unit=True)  # fmt: skip
    deselected = f"{bucket}::TestAsyncSave::test_async_is_equivalent_to_sync"
    other = f"{bucket}::TestAsyncSave::test_roundtrip"
    tests = tuple(
        Testcase(node_id=n, classname="c", name="n", suite="", outcome=Outcome.FAILED, duration=1.0)
        for n in (deselected, other)
    )
    store = open_store(str(store_copy), write=True)
    try:
        at = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
        ingest(store, RunInfo(run_id="9200", commit="e" * 40, finished_at=at),
               [JobResults(job=job, job_name="unit", target="", testcases=tests)])  # fmt: skip
    finally:
        store.close()
    data = gather(generate(RECIPES), db=str(store_copy), since_days=30, today=DAY)
    page = render_site(data)["flakes.html"]
    rows = page.split("<tbody>", 1)[1].split("<tr>")[1:]
    last = {n: Parsed(r).tags[-1][1].get("class") for r in rows for n in (deselected, other)
            if n.rsplit("/", 1)[-1] in r}  # fmt: skip
    assert last == {deselected: "m", other: "f"}


# ---------------------------------------------------------------- triage

TRIAGE_COLUMNS = ["verdict", "job / test", "node id", "platform", "environment", "scope"]
TRIAGE_COLUMNS += ["reason", "evidence", "entry", "baseline run"]


def _triage_json(cli, db: Path, run: str, *extra: str | Path, recipes: Path = RECIPES) -> dict:
    done = cli(
        "results",
        "triage",
        "--recipes",
        recipes,
        "--db",
        db,
        "--run",
        run,
        "--format",
        "json",
        *extra,
    )
    assert done.code in (0, ExitCode.EXPECTATION), done
    return json.loads(done.out)


def _triage_page(cli, tmp_path: Path, db: Path, *args: str | Path, recipes: Path = RECIPES) -> str:
    out = tmp_path / "site"
    done = cli("report", "--recipes", recipes, "--out", out, "--db", db, *args)
    assert done.code == 0, done  # new failures or not: the report is written
    return (out / "triage.html").read_text(encoding="utf-8")


def _expected_row(f: dict) -> list[str]:
    """A failure of `triage --format json` as the page's row shows it."""
    case = f["test_case"] + (f"[{f['tag']}]" if f["tag"] else "")
    entry, known = f["entry"], f["known"]
    base = f["baseline_run"]
    return [
        f["verdict"],
        f"{f['model']}/{case}",
        f["node_id"] or (f"check {f['metric']}" if f["metric"] else "the whole job"),
        f["platform"],
        f["environment"],
        f"{f['system']}/{f['scope']}",
        f["reason"] or "-",
        f["evidence"],
        f"{entry['id']} | {entry['action']}, {entry['kind']}; tracker {entry['tracker']}"
        if entry
        else f"known {known['kind']} failure | pattern {known['pattern']}; tracker "
        f"{known['tracker']}"
        if known
        else "-",
        f"run {base['run_id']} | {base['at']}" if base else "-",
    ]


def test_triage_page_rows_are_the_triage_json(
    cli, tmp_path: Path, triage_evidence_store: Path
) -> None:
    """One truth: the page's rows are `triage --format json`'s failures, cell
    for cell, in its order; and the verdicts are the ones the fixture's run was
    made to have (new first, then baseline, flaky, quarantined)."""
    payload = _triage_json(cli, triage_evidence_store, MR_RUN)
    page = _triage_page(cli, tmp_path, triage_evidence_store, "--run", MR_RUN)
    rows = Rows(page, "triage").rows
    assert rows == [_expected_row(f) for f in payload["failures"]]
    verdicts = {(f["node_id"] or f["test_case"]): f["verdict"] for f in payload["failures"]}
    assert verdicts == MR_FAILURES
    assert [r[0] for r in rows] == ["new", "baseline", "flaky", "flaky", "quarantined"]
    headers = [t for t in Parsed(page).texts if t in TRIAGE_COLUMNS]
    assert headers[: len(TRIAGE_COLUMNS)] == TRIAGE_COLUMNS
    text = Parsed(page).text
    for run in payload["baseline"]["runs"]:
        assert f"run {run['run_id']} (ref main, source schedule, commit {run['commit']}, " in text
        assert f"finished {run['at']})" in text
    assert Rows(page, "lift").rows == [] and "None: no entry that lets jobs fail" in text
    assert "No baseline" not in text and "has no failures" not in text
    # The tracker of the quarantining entry is a link; no other link but the pages.
    links = [
        a["href"] for tag, a in _safe_markup(page).tags if tag == "a" and a["href"] not in PAGES
    ]
    assert links == ["https://github.com/example/mcore/issues/7958"]


def test_triage_page_baseline_options_are_triages(
    cli, tmp_path: Path, triage_evidence_store: Path
) -> None:
    """With --baseline-runs 2 (9123 and 9122) and a source no run has (no
    baseline at all), the page still shows what `triage` gives with the same
    options."""
    for extra in (("--baseline-runs", "2"), ("--baseline-source", "push")):
        payload = _triage_json(cli, triage_evidence_store, MR_RUN, *extra)
        page = _triage_page(cli, tmp_path, triage_evidence_store, "--run", MR_RUN, *extra)
        assert Rows(page, "triage").rows == [_expected_row(f) for f in payload["failures"]]
    assert payload["note"] is not None
    assert f"No baseline. {payload['note']}." in Parsed(page).text
    # Without a baseline every failure is new, but the one an entry covers.
    assert [r[0] for r in Rows(page, "triage").rows] == ["new"] * 4 + ["quarantined"]


def test_triage_page_lift_candidates_are_triages(
    cli,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    shipped_recipes: Path,
    triage_runs: list,  # noqa: F811
) -> None:
    """On the triage project's real runs (an allow-failure entry whose bucket
    passed): the lift candidate in the page is the one in the JSON."""
    from tests.triage_fixtures import ENTRIES, _ingest

    quarantine = shipped_recipes / "quarantine.yaml"
    quarantine.write_text(quarantine.read_text() + ENTRIES)
    db = tmp_path / "results.db"
    _ingest(str(db), shipped_recipes, triage_runs)
    capsys.readouterr()
    base = ("--baseline-source", "schedule")
    payload = _triage_json(cli, db, "6000", *base, recipes=shipped_recipes)
    page = _triage_page(cli, tmp_path, db, "--run", "6000", *base, recipes=shipped_recipes)
    assert Rows(page, "triage").rows == [_expected_row(f) for f in payload["failures"]]
    assert Rows(page, "lift").rows == [
        [c["id"], c["action"], c["kind"], c["tracker"], str(c["jobs"]), c["reason"]]
        for c in payload["lift_candidates"]
    ]
    assert [r[0] for r in Rows(page, "lift").rows] == ["ckpt-bucket-allow-failure"]


def test_triage_page_of_a_run_without_failures_or_baseline(
    cli, tmp_path: Path, triage_evidence_store: Path
) -> None:
    """9101, the first scheduled run: nothing failed, no run before it. 9102:
    nothing failed, 9101 its baseline."""
    first = Parsed(_triage_page(cli, tmp_path, triage_evidence_store, "--run", "9101")).text
    assert "Run 9101 has no failures:" in first
    assert "No baseline. no baseline: no run of ref main finished before run 9101" in first
    second = Parsed(_triage_page(cli, tmp_path, triage_evidence_store, "--run", "9102")).text
    assert "Run 9102 has no failures:" in second and "No baseline" not in second
    assert "Baseline runs" in second and "run 9101 (ref main, source schedule" in second


def test_triage_page_without_run_names_the_latest_runs(
    cli, tmp_path: Path, triage_evidence_store: Path
) -> None:
    text = Parsed(_triage_page(cli, tmp_path, triage_evidence_store)).text
    assert "No run given. matrixgen report --run RUN shows here each job and test" in text
    assert "The latest runs in the store: 9124, 9125, 9123, 9122, 9121." in text
    assert "No results store" not in text


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--run", "9126"], ExitCode.USAGE, "--run 9126: no such run in sqlite:///"),
        (["--run", "9126"], ExitCode.USAGE, '(did you mean "9125"?) (the latest: 9124, 9125, 9123'),
        (["--run", "  "], ExitCode.USAGE, "--run must not be empty"),
        (["--run", MR_RUN, "--baseline-runs", "0"], ExitCode.USAGE, "--baseline-runs must be 1"),
        (["--run", MR_RUN, "--baseline-ref", ""], ExitCode.USAGE, "--baseline-ref must not be"),
    ],
)
def test_report_run_errors(
    cli, tmp_path: Path, triage_evidence_store: Path, args: list[str], code: int, message: str
) -> None:
    done = cli("report", "--recipes", RECIPES, "--out", tmp_path / "site",
               "--db", triage_evidence_store, *args)  # fmt: skip
    assert done.code == code, done
    assert message in done.err and "Traceback" not in done.err
    assert len(done.err.strip().splitlines()) == 1
    assert not (tmp_path / "site").exists()  # nothing written


def test_report_run_without_a_store(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no .matrixgen/results.db here
    done = cli("report", "--recipes", RECIPES, "--out", tmp_path / "site", "--run", MR_RUN)
    assert done.code == ExitCode.RESULTS_STORE, done
    assert f"--run {MR_RUN}: no results store to read the run from" in done.err
    assert len(done.err.strip().splitlines()) == 1 and not (tmp_path / "site").exists()


def _hostile_triage(name: str, url: str) -> TriageReport:
    from matrixgen.results.flaky import RunRef
    from matrixgen.results.known import KnownRef
    from matrixgen.results.lifts import EntryRef, LiftCandidate
    from matrixgen.results.queries import RunFilter
    from matrixgen.results.store import JobKey, RunRow
    from matrixgen.results.triage import Failure, TriageReport, TriageVerdict

    job = JobKey(system=name, scope=name, platform=name, environment=name, model=name,
                 test_case=name, tag=name, unit=True)  # fmt: skip
    entry = EntryRef(id=name, action=name, kind=name, tracker=url)
    run = RunRow(1, name, name, 0, git_ref=name, source=name)
    known = KnownRef(pattern=name, tracker=url, kind=name)
    failures = tuple(
        Failure(job=job, node_id=name, verdict=verdict, evidence=name, reason="failure: " + name,
                entry=entry if verdict is TriageVerdict.QUARANTINED else None,
                known=known if verdict is TriageVerdict.KNOWN else None,
                baseline_run=RunRef(name, name, 0) if verdict is TriageVerdict.BASELINE else None)
        for verdict in TriageVerdict
    )  # fmt: skip
    return TriageReport(
        run=run,
        baseline=RunFilter(ref=name, source=name),
        baseline_runs=(run,),
        failures=failures,
        lift_candidates=(LiftCandidate(entry=entry, jobs=1, reason=name),),
    )


@given(HOSTILE, HOSTILE)
def test_hostile_names_show_as_text_on_the_triage_page(
    shipped: SiteData, name: str, url: str
) -> None:
    """Every string of a triage (from the store: a pull request's reports) in
    every place the page puts one: text, never markup; the tracker a link only
    when it is http(s)."""
    data = _with_part(shipped, triage=_hostile_triage(name, url))
    page = render_site(data)["triage.html"]
    parsed = _safe_markup(page)
    rows = Rows(page, "triage").rows
    assert len(rows) == 5  # one per failure, whatever the names hold
    assert all(len(r) == len(TRIAGE_COLUMNS) for r in rows)
    # The five failures share their reason: one group, its reason and test as text.
    assert "5 failures of one test share one reason:" in parsed.text
    if name.isprintable() and name.strip() and "|" not in name:
        assert rows[0][2] == name  # the node id, as it is
        assert rows[0][6] == "failure: " + name  # the reason
        assert rows[0][7] == name  # the evidence
        assert name in parsed.text
    links = [a["href"] for tag, a in parsed.tags if tag == "a" and a["href"] not in PAGES]
    # The quarantined failure's entry, the known failure's tracker and the lift
    # candidate: three links or none.
    assert len(links) == (3 if html_link(url) is not None else 0)


def _store_view(keys: list, cells: dict, entry_keys: dict | None = None) -> object:
    """A results store's view of `keys` (each with its ranked flaky row) over
    runs 1 and 2, and their outcomes `cells`: {key: {run ref: (code, reruns)}}."""
    from matrixgen.results.flaky import FlakyRow, Verdict
    from matrixgen.results.store import RunRow

    rows = tuple(
        FlakyRow(job=job, node_id=node, runs=2, failures=1, flips=1, verdict=Verdict.FLAKY)
        for job, node in keys
    )
    runs = (RunRow(1, "101", "a" * 40, 1_795_000_000), RunRow(2, "102", "b" * 40, 1_795_003_600))
    return StoreView(shown="test", runs=runs, rows=rows, skipped_only=(), cells=cells,
                     muted=frozenset(), evidence={}, entry_keys=entry_keys or {})  # fmt: skip


def _bucket(name: str) -> object:
    from matrixgen.results.store import JobKey

    return JobKey(system="gitlab", scope="mr", platform="dgx_h100", environment="dev",
                  model="unit-tests", test_case=name, tag="", unit=True)  # fmt: skip


@given(HOSTILE)
def test_hostile_node_ids_show_as_text_on_the_flakes_page(shipped: SiteData, name: str) -> None:
    """A node id comes from a pull request's JUnit report: in the grid, text."""
    key = (_bucket("tests/unit/"), f"tests/unit/test_a.py::test_a[{name}]")
    store = _store_view([key], {key: {1: (1, 0), 2: (0, 0)}})
    page = render_site(_with_part(shipped, store=store))["flakes.html"]
    parsed = _safe_markup(page)
    if name.isprintable() and name.strip():
        assert f"test_a.py::test_a[{name}]" in parsed.text


_SPARK_KEYS = ((_bucket("tests/unit/"), "tests/unit/test_a.py::t1"), (_bucket("tests/unit/"), None))


def _first_sparkline(shipped: SiteData, cells: dict) -> list[str]:
    """The outcomes the first entry's sparkline titles, every entry owning both keys."""
    entries = {e.id: _SPARK_KEYS for e in shipped.entries}
    data = _with_part(shipped, store=_store_view(list(_SPARK_KEYS), cells, entries))
    page = render_site(data)["quarantine.html"]
    first = shipped.entries[0].id
    svg = page.split(f'aria-label="last runs of {first}"', 1)[1].split("</svg>", 1)[0]
    return [t.split("</title>")[0] for t in svg.split("<title>")[1:]]


def test_an_entrys_sparkline_shows_each_runs_worst_outcome(shipped: SiteData) -> None:
    """Per run, over the entry's keys: fail before rerun-pass before pass."""
    one, two = _SPARK_KEYS
    cells = {one: {1: (0, 1), 2: (1, 0)}, two: {1: (0, 0), 2: (0, 1)}}
    assert _first_sparkline(shipped, cells) == ["rerun-pass", "fail"]


def test_an_entrys_sparkline_shows_skip_only_when_nothing_ran(shipped: SiteData) -> None:
    """A run where every key was skipped is a skip; one pass among skips is a pass."""
    from matrixgen.results.tables import SKIPPED

    one, two = _SPARK_KEYS
    cells = {one: {1: (SKIPPED, 0), 2: (0, 0)}, two: {1: (SKIPPED, 0), 2: (SKIPPED, 0)}}
    assert _first_sparkline(shipped, cells) == ["skip", "pass"]
