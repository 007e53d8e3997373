"""The streamed ingest: records go to the store in batches as the reports are
read, and what is stored is what the whole reports, folded in memory, say."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matrixgen.cli.main import main
from matrixgen.engine.errors import ExitCode
from matrixgen.evidence import ingest as ingest_module
from matrixgen.evidence.junit import parse_report
from matrixgen.evidence.queries import counts
from matrixgen.evidence.store import open_store
from tests.evidence_fixtures import RECIPES, TARGET, TODAY
from tests.evidence_fixtures import db as store_db  # noqa: F401  (SQLite and PostgreSQL)

BUCKET = "tests/unit_tests/data"
OUTCOMES = {"passed": 0, "failed": 1, "error": 2, "skipped": 3}
_BODY = {
    "passed": "",
    "failed": '<failure message="f"/>',
    "error": '<error message="e"/>',
    "skipped": "<skipped/>",
}


@pytest.fixture(autouse=True)
def _today(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATRIXGEN_TODAY", TODAY)


def _xml(records: list[tuple[int, str, int]]) -> str:
    """A report: (test number, outcome, rerun children) per record, in order."""
    cases = "".join(
        f'<testcase classname="tests.unit_tests.data.test_s" name="test_{n}" time="0.5">'
        f"{_BODY[outcome]}{'<rerunFailure/>' * reruns}</testcase>\n"
        for n, outcome, reruns in records
    )
    return (
        '<testsuites><testsuite name="pytest" timestamp="2026-11-20T10:00:00" time="1">\n'
        f"{cases}</testsuite></testsuites>\n"
    )


def _expected(files: list[str]) -> dict[str, tuple[int, int]]:
    """node id -> (outcome code, reruns), folded as the whole reports say: each
    report read whole (parse_report folds a test's records in it), then a test
    in a later file of the job is run again (its reruns added, plus one)."""
    found: dict[str, tuple[int, int]] = {}
    for text in files:
        for t in parse_report(text.encode(), "r.xml").testcases:
            before = found.get(t.node_id)
            reruns = t.reruns + (before[1] + 1 if before is not None else 0)
            found[t.node_id] = (OUTCOMES[t.outcome.value], reruns)
    return found


def _stored(db: str) -> dict[str, tuple[int, int]]:
    import sqlalchemy as sa

    from matrixgen.evidence.tables import cases, results

    store = open_store(db, write=False)
    try:
        with store.transaction() as conn:
            rows = conn.execute(
                sa.select(cases.c.node_id, results.c.outcome, results.c.reruns).select_from(
                    results.join(cases, cases.c.id == results.c.case_id)
                )
            ).all()
    finally:
        store.close()
    return {node: (outcome, reruns) for node, outcome, reruns in rows}


def _ingest(paths: list[Path], db: str, run_id: str = "1") -> int:
    return main(
        ["results", "ingest", *map(str, paths), "--run-id", run_id, "--target", TARGET,
         "--tag", "latest", "--recipes", str(RECIPES), "--db", db, "--format", "json"]
    )  # fmt: skip


_RECORD = st.tuples(st.integers(0, 5), st.sampled_from(sorted(OUTCOMES)), st.integers(0, 2))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    files=st.lists(st.lists(_RECORD, min_size=1, max_size=8), min_size=1, max_size=3),
    batch=st.sampled_from([1, 2, 3, 5000]),
)
def test_a_streamed_ingest_stores_what_the_whole_reports_say(
    files: list[list[tuple[int, str, int]]],
    batch: int,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever the batch size and however a test's records repeat (reruns in
    one file, the same test in several files of the job): one result per test,
    its last record's outcome, its failed attempts counted as reruns."""
    monkeypatch.setattr(ingest_module, "_STAGE_BATCH", batch)
    tmp = tmp_path_factory.mktemp("streamed")
    texts = [_xml(records) for records in files]
    paths = []
    for n, text in enumerate(texts):
        paths.append(tmp / f"r{n}.xml")
        paths[-1].write_text(text, encoding="utf-8")
    db = str(tmp / "results.db")
    assert _ingest(paths, db) == 0
    assert _stored(db) == _expected(texts)


def test_a_bad_file_after_flushed_batches_leaves_no_partial_run(
    store_db: str,  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The good file's records went to the store batch by batch before the bad
    file was read: the one transaction takes them all back."""
    db = store_db
    monkeypatch.setattr(ingest_module, "_STAGE_BATCH", 2)
    first = tmp_path / "a.xml"
    first.write_text(_xml([(n, "passed", 0) for n in range(6)]), encoding="utf-8")
    assert _ingest([first], db, run_id="1") == 0
    store = open_store(db, write=False)
    try:
        before = dict(counts(store))
    finally:
        store.close()
    flushed = []
    real = ingest_module._bulk_insert

    def counted(conn, table, keys, rows):
        flushed.append(len(rows))
        return real(conn, table, keys, rows)

    monkeypatch.setattr(ingest_module, "_bulk_insert", counted)
    bad = tmp_path / "b.xml"
    bad.write_text(_xml([(n, "failed", 0) for n in range(6)])[:-30], encoding="utf-8")
    capsys.readouterr()
    assert _ingest([first, bad], db, run_id="2") == ExitCode.RESULTS_FILE
    assert "b.xml:" in capsys.readouterr().err
    assert len(flushed) >= 3  # a.xml's six records, two a batch, and some of b.xml's
    store = open_store(db, write=False)
    try:
        assert dict(counts(store)) == before
    finally:
        store.close()


def test_a_test_no_job_holds_stores_nothing_of_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mapping error raised from inside the parser's handler is the usage
    error it is (exit 2, located), not a report the parser could not read; and
    the SQLite store the ingest would have created is not left behind."""
    monkeypatch.setattr(ingest_module, "_STAGE_BATCH", 1)
    report = tmp_path / "r.xml"
    text = _xml([(0, "passed", 0), (1, "passed", 0)])
    elsewhere = 'classname="nowhere.test_x" name="test_1"'
    text = text.replace('classname="tests.unit_tests.data.test_s" name="test_1"', elsewhere)
    report.write_text(text, encoding="utf-8")
    db = tmp_path / "results.db"
    assert _ingest([report], str(db)) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert f"{report}:3: test nowhere/test_x.py::test_1 is in no unit-test bucket" in err
    assert not db.exists()


def test_the_ingest_names_its_jobs_as_before(tmp_path: Path, capsys) -> None:
    """The table and JSON of `results ingest`: per job its tests (each once),
    failures, skips and reruns; a second ingest of the run stores nothing."""
    import orjson

    report = tmp_path / "r.xml"
    records = [(0, "failed", 0), (0, "passed", 1), (1, "skipped", 0), (2, "error", 0)]
    report.write_text(_xml(records), encoding="utf-8")
    db = str(tmp_path / "results.db")
    assert _ingest([report], db) == 0
    out, err = capsys.readouterr()
    (job,) = orjson.loads(out)["jobs"]
    assert (job["tests"], job["failed"], job["skipped"], job["reruns"]) == (3, 1, 1, 2)
    assert job["status"] == "stored" and job["scope"] == "gitlab/mr"
    assert "run 1: 1 file(s), 3 test(s); stored 3 result(s) of 1 job(s)" in err
    assert _ingest([report], db) == 0
    out, err = capsys.readouterr()
    assert orjson.loads(out)["jobs"][0]["status"] == "already stored"
    assert "stored 0 result(s) of 0 job(s)" in err
