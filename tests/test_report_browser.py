"""The report's pages in a real browser: Debian's Chromium, headless, driven
by Playwright (never its own browser download).

For each page of four sites (the shipped tree without a store, with the
evidence fixture's store, the same with a merge request's run triaged
(`--run`), and a tree and store with hostile names, its hostile run triaged): it loads
with no console error and no request outside the site; the elements it
promises are in the DOM; a hostile name shows as text; with JavaScript off it
reads the same; a screenshot of it is not blank. With
MATRIXGEN_WRITE_SCREENSHOTS=1 the screenshots of the second site (the shipped
tree with the evidence fixture's store), its Triage page from the third, are
written to docs/images/ (docs/report.md shows them, the README the overview)."""

from __future__ import annotations

import base64
import datetime as dt
import functools
import http.server
import os
import shutil
import struct
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from matrixgen.cli.main import main
from tests.realvalidators import CHROMIUM, CHROMIUM_ARGS, REPO_ROOT, require_chromium
from tests.results_fixtures import MR_FAILURES, MR_RUN, RECIPES, TODAY

# The slow tier (tests/tiers.py): Chromium drives every test here.
pytestmark = pytest.mark.slow

PAGES = ("index.html", "selection.html", "quarantine.html", "flakes.html", "triage.html")
IMAGES = REPO_ROOT / "docs" / "images"
HOSTILE_OWNER = "<script>alert('owner')</script>"
HOSTILE_REASON = '"><img src=x onerror=alert(1)> & <b>bold</b>'
HOSTILE_NODE = "tests/unit_tests/data/test_blend.py::test_blend[<i>x</i>\"'javascript:]"
HOSTILE_RUN = "<b>9999</b>"
HOSTILE_ENTRY = f"""
  - id: hostile-entry
    tracker: 'https://github.com/example/mcore/issues/9"><script>alert(1)</script>'
    kind: flaky
    action: allow-failure
    match:
      model: gpt
      test_case: gpt3_tp1_pp1
    owner: "{HOSTILE_OWNER}"
    added: "2026-11-20"
    expires: "2026-12-05"
    reason: '{HOSTILE_REASON}'
"""


@pytest.fixture(scope="module", autouse=True)
def _chromium() -> None:
    require_chromium()


@pytest.fixture(autouse=True)
def _today(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATRIXGEN_TODAY", TODAY)
    monkeypatch.delenv("MATRIXGEN_RESULTS_DB", raising=False)


def _report(recipes: Path, out: Path, *extra: str) -> Path:
    assert main(["report", "--recipes", str(recipes), "--out", str(out), *extra]) == 0
    return out


@pytest.fixture(scope="module")
def sites(
    tmp_path_factory: pytest.TempPathFactory, evidence_store: Path, triage_evidence_store: Path
) -> dict[str, Path]:
    # A module fixture cannot take monkeypatch: the day is set, and put back.
    before = os.environ.get("MATRIXGEN_TODAY")
    os.environ["MATRIXGEN_TODAY"] = TODAY
    try:
        return _sites(tmp_path_factory, evidence_store, triage_evidence_store)
    finally:
        if before is None:
            os.environ.pop("MATRIXGEN_TODAY", None)
        else:
            os.environ["MATRIXGEN_TODAY"] = before


def _sites(
    tmp_path_factory: pytest.TempPathFactory, evidence_store: Path, triage_evidence_store: Path
) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("sites")
    shipped = _report(RECIPES, out / "shipped")
    # The site of the README's screenshots: paths as a checkout shows them.
    shutil.copytree(RECIPES, out / "recipes")
    shutil.copyfile(evidence_store, out / "results.db")
    shutil.copyfile(triage_evidence_store, out / "triage.db")
    here = Path.cwd()
    os.chdir(out)
    try:
        evidence = _report(Path("recipes"), Path("evidence"), "--db", "results.db")
        run = _report(Path("recipes"), Path("run"), "--db", "triage.db", "--run", MR_RUN)
    finally:
        os.chdir(here)
    evidence = out / evidence
    run = out / run
    hostile_tree = out / "hostile-recipes"
    shutil.copytree(RECIPES, hostile_tree)
    quarantine = hostile_tree / "quarantine.yaml"
    quarantine.write_text(
        quarantine.read_text(encoding="utf-8") + HOSTILE_ENTRY,
        encoding="utf-8",
    )
    store = out / "hostile.db"
    shutil.copyfile(evidence_store, store)
    _ingest_hostile(store)
    hostile = _report(hostile_tree, out / "hostile", "--db", str(store), "--run", HOSTILE_RUN)
    return {"shipped": shipped, "evidence": evidence, "run": run, "hostile": hostile}


def _ingest_hostile(store_path: Path) -> None:
    """One more run, with a test whose node id is markup."""
    from matrixgen.results.ingest import ingest
    from matrixgen.results.junit import Outcome, Testcase
    from matrixgen.results.store import JobKey, JobResults, RunInfo, open_store

    job = JobKey(
        system="gitlab", scope="mr", platform="dgx_h100", environment="dev",
        model="unit-tests", test_case="tests/unit_tests/data/", tag="latest", unit=True,
    )  # fmt: skip
    test = Testcase(
        node_id=HOSTILE_NODE, classname="x", name="y", suite="", outcome=Outcome.FAILED,
        duration=1.0,
    )  # fmt: skip
    store = open_store(str(store_path), write=True)
    try:
        ingest(
            store,
            RunInfo(run_id=HOSTILE_RUN, commit="f" * 40,
                    finished_at=dt.datetime(2026, 11, 22, tzinfo=dt.UTC)),
            [JobResults(job=job, job_name="unit", target="", testcases=(test,))],
        )  # fmt: skip
    finally:
        store.close()


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server(sites: dict[str, Path]) -> Iterator[str]:
    """The sites over HTTP on 127.0.0.1: /shipped/, /evidence/, /run/, /hostile/."""
    root = next(iter(sites.values())).parent
    handler = functools.partial(Quiet, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[bool, object]]:
    """Two Chromium contexts, each with a fresh profile: JavaScript on and off."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        contexts = {
            js: playwright.chromium.launch_persistent_context(
                str(tmp_path_factory.mktemp(f"profile-js-{js}")),
                executable_path=str(CHROMIUM),
                headless=True,
                args=list(CHROMIUM_ARGS),
                java_script_enabled=js,
                viewport={"width": 1280, "height": 800},
            )
            for js in (True, False)
        }
        try:
            yield contexts
        finally:
            for context in contexts.values():
                context.close()


class Visit:
    """A page loaded, with every console error and every request outside the site."""

    def __init__(self, context, base: str, url: str) -> None:
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.page = context.new_page()
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))

        def route(route_) -> None:
            if route_.request.url.startswith(base + "/"):
                route_.continue_()
            else:
                self.outside.append(route_.request.url)
                route_.abort()

        self.page.route("**/*", route)
        self.page.goto(url, wait_until="load")
        self.page.wait_for_load_state("networkidle")

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def visit(browser, server: str):
    opened: list[Visit] = []

    def load(site: str, name: str, *, js: bool = True) -> Visit:
        found = Visit(browser[js], server, f"{server}/{site}/{name}")
        opened.append(found)
        return found

    yield load
    for one in opened:
        one.close()


COUNT_COLOURS = """async (source) => {
  const image = new Image();
  image.src = source;
  await image.decode();
  const canvas = document.createElement("canvas");
  canvas.width = image.width;
  canvas.height = image.height;
  const context = canvas.getContext("2d");
  context.drawImage(image, 0, 0);
  const pixels = new Uint32Array(
    context.getImageData(0, 0, image.width, image.height).data.buffer);
  return new Set(pixels).size;
}"""


@pytest.fixture(scope="module")
def colours(browser) -> Iterator:
    """Distinct colours of a PNG, decoded by the browser itself (in a blank
    page of the JavaScript context: it loads nothing)."""
    page = browser[True].new_page()

    def count(png: bytes) -> int:
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        source = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
        return int(page.evaluate(COUNT_COLOURS, source))

    yield count
    page.close()


def test_colour_count_tells_a_blank_image(colours) -> None:
    """The decoder on two PNGs made here: one colour, and a gradient."""

    def png(width: int, height: int, pixel) -> bytes:
        rows = b"".join(
            b"\x00" + b"".join(bytes(pixel(x, y)) for x in range(width)) for y in range(height)
        )

        def chunk(tag: bytes, data: bytes) -> bytes:
            return (
                struct.pack(">I", len(data))
                + tag
                + data
                + struct.pack(">I", zlib.crc32(tag + data))
            )

        head = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", head)
            + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b"")
        )

    assert colours(png(40, 10, lambda x, y: (255, 255, 255))) == 1
    assert colours(png(40, 10, lambda x, y: (x * 4, y * 20, 0))) == 400


@pytest.mark.parametrize("site", ["shipped", "evidence", "run", "hostile"])
@pytest.mark.parametrize("name", PAGES)
def test_page_loads_clean_and_is_not_blank(visit, colours, site: str, name: str) -> None:
    seen = visit(site, name)
    assert seen.errors == []
    assert seen.outside == []
    # The triaged run's page whole: its sections of every verdict, below the fold.
    whole = site == "run" and name == "triage.html"
    shot = seen.page.screenshot(full_page=whole)
    found = colours(shot)
    assert found >= 8, f"{site}/{name}: {found} colour(s): a blank page"
    # The README's screenshots: the evidence site's pages, and the run's triage.
    shown = (site == "evidence" and name != "triage.html") or whole
    if os.environ.get("MATRIXGEN_WRITE_SCREENSHOTS") == "1" and shown:
        IMAGES.mkdir(parents=True, exist_ok=True)
        (IMAGES / f"report-evidence-{name.removesuffix('.html')}.png").write_bytes(shot)


@pytest.mark.parametrize("site", ["shipped", "evidence", "run"])
@pytest.mark.parametrize("name", PAGES)
def test_page_reads_the_same_without_javascript(visit, site: str, name: str) -> None:
    with_js = visit(site, name).page.inner_text("main")
    without = visit(site, name, js=False).page.inner_text("main")
    assert without == with_js and len(without) > 200


def test_board_has_a_row_per_entry_and_tracker_links(visit) -> None:
    from matrixgen.pipeline import generate

    entries = generate(RECIPES).quarantine.entries
    page = visit("shipped", "quarantine.html").page
    assert page.locator("table.board tbody tr").count() == len(entries)
    hrefs = page.eval_on_selector_all("table.board a", "links => links.map(a => a.href)")
    assert hrefs == [e.tracker_url for e in entries]


def test_flake_grid_has_runs_by_keys_cells(visit) -> None:
    page = visit("evidence", "flakes.html").page
    rows = page.locator("table.flakes tbody tr")
    heads = page.locator("table.flakes thead th.c")
    assert heads.count() == 24
    assert rows.count() == 7  # flaky's 6 keys, and a test skipped in every run
    for i in range(rows.count()):
        assert rows.nth(i).locator("td").count() == 3 + 24
    first = rows.nth(0)
    assert "test_blend_weights" in first.inner_text()
    # Colour is not the only cue: each outcome has its glyph and its title.
    failed = first.locator("td.f").first
    assert failed.inner_text() == "X" and failed.get_attribute("title").endswith(": fail")


def test_hostile_names_show_as_text(visit) -> None:
    board = visit("hostile", "quarantine.html").page
    assert board.locator("script, img, table b, table i").count() == 0
    text = board.inner_text("table.board")
    assert HOSTILE_OWNER in text and "<b>bold</b>" in text
    # The tracker with markup in it is a link, percent-encoded; its text is text.
    link = board.locator("a[href*='issues/9']")
    assert link.count() == 1 and '"><script>' in link.inner_text()
    assert (
        board.eval_on_selector_all(
            "*",
            "all => all.flatMap(e => [...e.attributes].map(a => a.name))"
            ".filter(n => n.startsWith('on'))",
        )
        == []
    )
    grid = visit("hostile", "flakes.html").page
    assert grid.locator("table.flakes script, table.flakes i, table.flakes b").count() == 0
    assert "test_blend[<i>x</i>\"'javascript:]" in grid.inner_text("table.flakes")
    assert "<b>9999</b>" in grid.locator("table.flakes thead th.c").last.get_attribute("title")
    selection = visit("hostile", "selection.html").page
    assert "hostile-entry" in selection.inner_text("main")


def test_triage_page_has_a_row_per_failure(visit) -> None:
    """The run's five failures, one row each, in verdict order (new first), each
    row's verdict the one the fixture's run was made to have (the functional
    job's: its loss check's); the quarantining entry's tracker a link."""
    page = visit("run", "triage.html").page
    rows = page.locator("table.triage tbody tr")
    assert rows.count() == len(MR_FAILURES) == 5
    seen = {}
    for i in range(rows.count()):
        cells = rows.nth(i).locator("td")
        assert cells.count() == 10
        node = cells.nth(2).inner_text()
        whole_job = node == "the whole job" or node.startswith("check ")  # a job, or a check of it
        key = cells.nth(1).inner_text().split("/", 1)[1] if whole_job else node
        seen[key] = cells.nth(0).inner_text()
    assert seen == MR_FAILURES
    assert list(seen.values()) == ["new", "baseline", "flaky", "flaky", "quarantined"]
    hrefs = page.eval_on_selector_all("table.triage a", "links => links.map(a => a.href)")
    assert hrefs == ["https://github.com/example/mcore/issues/7958"]
    assert page.locator("h2#new").inner_text() == "New failures (1)"


def test_hostile_run_triage_shows_as_text(visit) -> None:
    """The hostile run (its id and a failed test's node id are markup): its
    triage page shows both as written, and no tag of theirs."""
    page = visit("hostile", "triage.html").page
    assert page.locator("main script, main img, main i, table.triage b").count() == 0
    assert HOSTILE_NODE in page.inner_text("table.triage")
    assert f"run {HOSTILE_RUN} (commit " in page.inner_text("main")
    without = visit("hostile", "triage.html", js=False).page
    assert without.inner_text("main") == page.inner_text("main")
