"""Quarantine entries: the file and its schema, matching, applying per target,
the pipeline's selection, `list --with-quarantined`, and `validate`'s checks."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from matrixgen.documents.quarantine import Match, matches_test_case
from matrixgen.model.jobs import Job, Selector, Target
from matrixgen.model.vocab import QuarantineAction, QuarantineKind, System
from matrixgen.pipeline import generate
from matrixgen.quarantine.apply import apply_quarantine, overlaps
from matrixgen.quarantine.audit import audit_entries
from matrixgen.quarantine.model import Entry, Place, entries_tracked_by, parse_quarantine
from matrixgen.quarantine.trackers import resolve_tracker, tracker_key
from matrixgen.util.values import json_value
from tests.quarantine_fixtures import (
    CONFIG,
    QUARANTINE,
    v1_files,
    v2_files,
)


def entry(**fields: object) -> Entry:
    base: dict = {
        "id": "e",
        "tracker": "#1",
        "tracker_url": None,
        "kind": QuarantineKind.FLAKY,
        "action": QuarantineAction.SKIP,
        "match": Match(test_case="tc"),
    }
    base.update(fields)
    return Entry(**base)  # type: ignore[arg-type]


def job(**fields: object) -> Job:
    base: dict = {
        "model": "gpt",
        "test_case": "tc",
        "environment": "dev",
        "platform": "dgx_h100",
        "tag": None,
        "scope": "mr",
        "cadence": ("pr",),
        "name": "n",
        "build": None,
        "n_repeat": 1,
        "time_limit": 1,
    }
    base.update(fields)
    return Job(**base)  # type: ignore[arg-type]


def target(system: str, scope: str, platform: str = "dgx_h100", env: str = "dev") -> Target:
    selector = Selector(scope=scope, platform=platform, environment=env)
    return Target(name=f"{system}-{scope}", system=System(system), selector=selector)


# --------------------------------------------------------------------------- parsing


def test_parse_valid_file_resolves_trackers_and_places() -> None:
    qfile = parse_quarantine(
        QUARANTINE.encode(), "q.yaml", tracker_base="https://github.com/acme/ml/issues/"
    )
    assert not qfile.findings, qfile.findings
    assert [e.id for e in qfile.entries] == ["ep8-dist-opt", "ep8-muon", "unit-bucket"]
    first = qfile.entries[0]
    assert first.tracker == "#7201"
    assert first.tracker_url == "https://github.com/acme/ml/issues/7201"
    assert first.places == (
        Place(System.GITHUB, "L1"),
        Place(System.GITLAB, "mr"),
        Place(System.GITLAB, "mr-slim"),
    )
    assert first.added == dt.date(2025, 1, 10)
    assert qfile.entries[2].node_ids == ("tests/unit_tests/models/test_moe.py::test_router[dev]",)


def test_missing_tracker_and_owner_are_located_errors() -> None:
    text = """entries:
  - id: a
    kind: flaky
    action: skip
    match: {test_case: x}
    reason: r
  - id: b
    tracker: #123
    kind: flaky
    action: skip
    match: {test_case: x}
    owner: me
    reason: r
"""
    qfile = parse_quarantine(text.encode(), "q.yaml")
    messages = [str(f) for f in qfile.findings]
    assert any(m.startswith("q.yaml:2:5: error: ") and "has no tracker" in m for m in messages)
    assert any(m.startswith("q.yaml:2:5: error: ") and "has no owner" in m for m in messages)
    # `tracker: #123` is an empty value: the hint says why.
    bare = next(m for m in messages if '"b" has an empty tracker' in m)
    assert bare.startswith("q.yaml:8:13: error: ") and "a bare # starts a YAML comment" in bare
    # Entries without tracker or owner are still known (the audit lists them).
    assert {e.id for e in qfile.entries} == {"a", "b"}


@pytest.mark.parametrize(
    ("fragment", "located", "text"),
    [
        ("    action: skipp\n", "4:13", "'skipp' is not one of"),
        ("    action: deselect\n", "4:13", "action deselect needs node_ids"),
        (
            "    action: skip\n    node_ids: [a::b]\n",
            "5:15",
            "node_ids only go with action deselect or mute",
        ),
        (
            "    action: mute\n",
            "4:13",
            "action mute needs node_ids (the pytest node ids to run muted)",
        ),
        ("    action: skip\n    where: [gitlab/]\n", "5:13", "does not match"),
        ("    action: skip\n    expires: 2025-02-30\n", "5:14", "not a valid date"),
        ("    action: skip\n    expires: '2025-1-1'\n", "5:14", "does not match"),
        ("    action: skip\n    colour: red\n", "1:", "Additional properties"),
    ],
)
def test_schema_errors_are_located(fragment: str, located: str, text: str) -> None:
    head = 'entries:\n  - id: a\n    tracker: "#1"\n'
    tail = "    kind: flaky\n    match: {test_case: x}\n    owner: me\n    reason: r\n"
    raw = head + fragment + tail
    qfile = parse_quarantine(raw.encode(), "q.yaml")
    errors = [str(f) for f in qfile.errors]
    assert errors, raw
    assert any(text in e for e in errors), errors
    # Every message carries file:line:column; the expected line where it is exact.
    assert all(re.match(r"^q\.yaml:\d+:\d+: error: ", e) for e in errors), errors
    if not located.endswith(":"):
        assert any(e.startswith(f"q.yaml:{located}:") for e in errors), errors


def test_node_ids_on_a_long_skip_entry_give_one_clear_error() -> None:
    # jsonschema's message for the if/then/else quotes the whole entry, cut at 200
    # characters: only the message that says what to do may show.
    text = (
        'entries:\n  - id: a\n    tracker: "#1"\n    kind: flaky\n    action: skip\n'
        "    match: {test_case: x}\n    node_ids: [a::b]\n    owner: me\n"
        f"    reason: {'long reason ' * 30}\n"
    )
    errors = parse_quarantine(text.encode(), "q.yaml").errors
    assert [(f.code, f.location.line) for f in errors] == [("quarantine-node-ids", 7)], errors


@pytest.mark.parametrize("blank", ['""', '"   "'])
def test_blank_tracker_and_owner_are_errors_with_their_own_message(blank: str) -> None:
    text = (
        f"entries:\n  - id: a\n    tracker: {blank}\n    kind: flaky\n    action: skip\n"
        f"    match: {{test_case: x}}\n    owner: {blank}\n    reason: r\n"
    )
    qfile = parse_quarantine(text.encode(), "q.yaml")
    found = sorted((f.code, f.location.line, f.message) for f in qfile.errors)
    assert found == [
        ("quarantine-no-owner", 7, 'entry "a" has an empty owner'),
        ("quarantine-no-tracker", 3, 'entry "a" has an empty tracker'),
    ]


@pytest.mark.parametrize(
    "raw", ["entries: true\n", "entries: 3\n", "entries: {a: 1}\n", "entries: [1, [a]]\n"]
)
def test_entries_of_the_wrong_shape_are_schema_errors(raw: str) -> None:
    qfile = parse_quarantine(raw.encode(), "q.yaml")
    # Not a list at all: said once, with what to write instead.
    expected = "schema" if raw.startswith("entries: [") else "quarantine-type"
    assert qfile.errors and {f.code for f in qfile.errors} == {expected}
    assert qfile.entries == ()


def test_duplicate_ids_and_dates_in_wrong_order() -> None:
    one = """  - id: a
    tracker: "#1"
    kind: flaky
    action: skip
    match: {test_case: x}
    owner: me
    added: 2025-02-01
    expires: 2025-01-01
    reason: r
"""
    qfile = parse_quarantine(("entries:\n" + one + one).encode(), "q.yaml")
    codes = {f.code for f in qfile.errors}
    assert {"quarantine-duplicate-id", "quarantine-dates"} <= codes
    assert [e.id for e in qfile.entries] == ["a"]


def test_empty_and_absent_files_are_empty_quarantines() -> None:
    assert parse_quarantine(None, "q.yaml").entries == ()
    empty = parse_quarantine(b"# nothing yet\n", "q.yaml")
    assert empty.present and not empty.findings and not empty.entries
    assert not parse_quarantine(b"entries: []\n", "q.yaml").findings
    assert parse_quarantine(b"- id: a\n", "q.yaml").errors  # a list is not the format


def one_tracker(a: str, b: str, tracker_base: str | None) -> bool:
    """Whether two references name one tracker, as lift and `list --tracker` compare them."""
    return tracker_key(a, tracker_base) == tracker_key(b, tracker_base)


def test_tracker_resolution_and_equivalence() -> None:
    base = "https://github.com/acme/ml/issues/"
    assert resolve_tracker("#7", base) == "https://github.com/acme/ml/issues/7"
    assert resolve_tracker("#7", None) is None
    assert resolve_tracker("https://x.org/i/7/", None) == "https://x.org/i/7"
    assert one_tracker("#7201", "https://github.com/acme/ml/issues/7201", base)
    assert one_tracker("7201", "#7201", None)
    assert not one_tracker("#7201", "#720", base)
    # Spellings of one issue URL: scheme and host case, www, query, fragment, pull.
    url = "https://github.com/acme/ml/issues/7201"
    for spelling in (
        "HTTP://WWW.GitHub.com/acme/ml/issues/7201/",
        "https://github.com/acme/ml/pull/7201",
        "https://github.com/acme/ml/issues/7201#issuecomment-1",
    ):
        assert one_tracker(spelling, url, None), spelling
        assert one_tracker(spelling, "#7201", base), spelling
    assert not one_tracker("https://github.com/acme/ml/issues/72011", url, None)
    assert not one_tracker("https://github.com/acme/ml2/issues/7201", url, None)
    assert not one_tracker("https://jira.example.com/browse/ML-7201", url, None)
    assert not one_tracker("https://github.com/acme/ML/issues/7201", url, None)  # path case


def test_a_bare_issue_number_finds_its_entries_unless_two_repositories_have_it() -> None:
    def tracked(tracker: str, id: str) -> Entry:
        return entry(id=id, tracker=tracker, tracker_url=tracker)

    one = tracked("https://github.com/one/repo/issues/5", "a")
    also_one = tracked("https://github.com/one/repo/issues/5", "b")
    other = tracked("https://github.com/two/repo/issues/5", "c")
    assert entries_tracked_by([one, also_one], "5", None) == [one, also_one]
    assert entries_tracked_by([one, other], "6", None) == []  # no entry has #6
    with pytest.raises(ValueError) as info:
        entries_tracked_by([one, other], "#5", None)
    assert str(info.value) == (
        "#5 is ambiguous without a tracker base: it could be "
        "https://github.com/one/repo/issues/5, https://github.com/two/repo/issues/5"
    )
    # With a tracker base, #5 is that base's issue only.
    assert entries_tracked_by([one, other], "5", "https://github.com/two/repo/issues/") == [other]


def test_audit_counts_an_entry_expiring_within_the_days_given() -> None:
    today = dt.date(2026, 12, 1)
    entries = tuple(
        entry(id=f"in-{n}", owner="me", expires=today + dt.timedelta(days=n)) for n in (0, 7, 8)
    )
    items = audit_entries(entries, {}, today=today, days=7)
    assert {i.problem for i in items} == {"expiring", "matches-nothing"}
    assert [(i.entry_id, i.problem, i.detail) for i in items if i.problem == "expiring"] == [
        ("in-0", "expiring", "expires on 2026-12-01 (in 0 day(s))"),
        ("in-7", "expiring", "expires on 2026-12-08 (in 7 day(s))"),
    ]


# --------------------------------------------------------------------------- matching


def test_glob_named_test_case_matches_only_itself() -> None:
    known = {"tests/unit_tests/models/**/*.py", "tests/unit_tests/models/test_gpt.py"}
    bucket = "tests/unit_tests/models/**/*.py"
    assert matches_test_case(bucket, bucket, known)
    assert not matches_test_case(bucket, "tests/unit_tests/models/test_gpt.py", known)
    # The same text, when no test case has that name, is a glob.
    assert matches_test_case(
        "tests/unit_tests/models/*", "tests/unit_tests/models/test_gpt.py", known
    )
    assert matches_test_case("ep8_*", "ep8_muon", {"ep8_muon"})
    assert not matches_test_case("ep8_*", "cp2", {"cp2"})


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet="abc_/.", min_size=1, max_size=8),
    st.text(alphabet="abc_/.", min_size=1, max_size=8),
)
def test_names_without_glob_characters_match_exactly(pattern: str, name: str) -> None:
    assert matches_test_case(pattern, name, {name}) == (pattern == name)


def test_places_resolve_legacy_scope_names() -> None:
    assert Place.parse("github/mr-github") == Place(System.GITHUB, "L1")
    assert Place.parse("gitlab/nightly") == Place(System.GITLAB, "L2")
    assert Place.parse("gitlab").covers(System.GITLAB, "mr-slim")
    assert not Place.parse("gitlab/mr").covers(System.GITLAB, "mr-slim")
    assert not Place.parse("gitlab/mr").covers(System.GITHUB, "mr")
    assert Place.parse("gitlab/L2").covers(System.GITLAB, "nightly")


# --------------------------------------------------------------------------- applying


def test_skip_allow_failure_and_deselect_per_target() -> None:
    jobs = [job(test_case="a"), job(test_case="b"), job(test_case="c")]
    entries = [
        entry(id="s", match=Match(test_case="a"), places=(Place.parse("gitlab/mr"),)),
        entry(
            id="f",
            action=QuarantineAction.ALLOW_FAILURE,
            kind=QuarantineKind.BROKEN,
            match=Match(test_case="b"),
        ),
        entry(
            id="d",
            action=QuarantineAction.DESELECT,
            match=Match(test_case="c"),
            node_ids=("t.py::x",),
        ),
    ]
    kept, skipped = apply_quarantine(jobs, entries, target("gitlab", "mr"))
    assert [j.test_case for j in skipped] == ["a"]
    assert skipped[0].quarantine and skipped[0].quarantine.action == "skip"
    assert [j.test_case for j in kept] == ["b", "c"]
    assert kept[0].quarantine and json_value(kept[0].quarantine) == {
        "id": "f",
        "tracker": "#1",
        "action": "allow-failure",
        "kind": "broken",
    }
    assert kept[1].quarantine and kept[1].quarantine.node_ids == ("t.py::x",)
    # The skip is for gitlab/mr only: in a GitHub target the job stays, unmarked.
    kept, skipped = apply_quarantine(jobs, entries, target("github", "mr"))
    assert not skipped and kept[0].quarantine is None
    # The original jobs are values: applying never changed them.
    assert all(j.quarantine is None for j in jobs)


def test_several_entries_on_one_job_strongest_wins_and_all_are_named() -> None:
    jobs = [job()]
    entries = [
        entry(id="d1", action=QuarantineAction.DESELECT, node_ids=("a",), tracker="#1"),
        entry(id="d2", action=QuarantineAction.DESELECT, node_ids=("b",), tracker="#2"),
        entry(id="f", action=QuarantineAction.ALLOW_FAILURE, tracker="#3"),
    ]
    kept, _ = apply_quarantine(jobs, entries[:2], None)
    mark = kept[0].quarantine
    assert mark and mark.action == "deselect" and mark.node_ids == ("a", "b")
    assert mark.id == "d1, d2" and mark.tracker == "#1, #2"
    kept, _ = apply_quarantine(jobs, entries, None)
    mark = kept[0].quarantine
    assert mark and mark.action == "allow-failure" and mark.id == "f, d1, d2"
    assert mark.node_ids == ("a", "b")  # deselects still apply to a job that runs
    _, skipped = apply_quarantine(jobs, [*entries, entry(id="s", tracker="#4")], None)
    assert skipped[0].quarantine and skipped[0].quarantine.node_ids == ()


def test_a_mute_entry_keeps_the_job_and_its_mark_carries_the_node_ids() -> None:
    jobs = [job(test_case="a"), job(test_case="b")]
    mute = entry(
        id="m", action=QuarantineAction.MUTE, match=Match(test_case="a"), node_ids=("t::x",)
    )
    kept, skipped = apply_quarantine(jobs, [mute], target("gitlab", "mr"))
    assert not skipped and [j.test_case for j in kept] == ["a", "b"]
    mark = kept[0].quarantine
    assert mark is not None and mark.action == "mute"
    assert mark.node_ids == ("t::x",) and mark.muted == ("t::x",) and mark.deselected == ()
    assert json_value(mark)["muted"] == ["t::x"]
    assert kept[1].quarantine is None


def test_deselect_and_mute_on_one_job_merge_and_deselect_wins_a_shared_node() -> None:
    entries = [
        entry(id="m", action=QuarantineAction.MUTE, node_ids=("x", "shared"), tracker="#1"),
        entry(id="d", action=QuarantineAction.DESELECT, node_ids=("shared", "y"), tracker="#2"),
    ]
    kept, _ = apply_quarantine([job()], entries, None)
    mark = kept[0].quarantine
    assert mark is not None and mark.action == "deselect" and mark.id == "d, m"
    assert mark.node_ids == ("shared", "y", "x")
    assert mark.muted == ("x",) and mark.deselected == ("shared", "y")
    # Node-level entries together are no overlap: all their node ids apply.
    assert overlaps([job()], entries, [target("gitlab", "mr")]) == []
    # A skip takes the job out: no node ids are left on it.
    _, skipped = apply_quarantine([job()], [*entries, entry(id="s", tracker="#3")], None)
    assert skipped[0].quarantine and skipped[0].quarantine.node_ids == ()
    assert skipped[0].quarantine.muted == ()


def test_without_target_each_job_is_placed_by_its_scope() -> None:
    jobs = [job(scope="L1"), job(scope="mr"), job(scope="L2")]
    only_l1 = [entry(places=(Place.parse("github/mr-github"),))]
    kept, skipped = apply_quarantine(jobs, only_l1, None)
    assert [j.scope for j in skipped] == ["L1"]
    assert [j.scope for j in kept] == ["mr", "L2"]
    gitlab = [entry(places=(Place.parse("gitlab"),))]
    _, skipped = apply_quarantine(jobs, gitlab, None)
    assert [j.scope for j in skipped] == ["mr", "L2"]


job_strategy = st.builds(
    job,
    test_case=st.sampled_from(["a", "b", "c*", "d"]),
    platform=st.sampled_from(["dgx_h100", "dgx_gb200"]),
    environment=st.sampled_from(["dev", "lts"]),
    scope=st.sampled_from(["mr", "L1", "mr-slim", "L2"]),
    tag=st.sampled_from([None, "latest"]),
)
entry_strategy = st.builds(
    lambda i, tc, action, plats, where: entry(
        id=f"e{i}",
        action=action,
        match=Match(test_case=tc, platforms=plats),
        where=tuple(Place.parse(w) for w in where),
        node_ids=("n",) if action is QuarantineAction.DESELECT else (),
    ),
    st.integers(0, 99),
    st.sampled_from(["a", "b", "c*", "*", "?"]),
    st.sampled_from(list(QuarantineAction)),
    st.sampled_from([(), ("dgx_h100",), ("dgx_gb200",)]),
    st.lists(st.sampled_from(["github/L1", "gitlab/mr", "gitlab", "gitlab/nightly"]), max_size=2),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(job_strategy, max_size=12), st.lists(entry_strategy, max_size=4))
def test_no_job_is_lost_and_order_is_kept(jobs: list[Job], entries: list[Entry]) -> None:
    kept, skipped = apply_quarantine(jobs, entries, None)
    strip = [j.__class__(**{**_fields(j), "quarantine": None}) for j in kept + skipped]
    assert sorted(strip, key=_key) == sorted(jobs, key=_key)
    # Kept jobs come in the order given; every skipped job is marked "skip".
    order = [jobs.index(j) for j in strip[: len(kept)] if j in jobs]
    assert order == sorted(order) or len(set(map(_key, jobs))) < len(jobs)
    assert all(j.quarantine and j.quarantine.action == "skip" for j in skipped)
    assert all(j.quarantine is None or j.quarantine.action != "skip" for j in kept)
    if not entries:
        assert kept == jobs and not skipped


def _fields(j: Job) -> dict:
    return {f: getattr(j, f) for f in j.__struct_fields__}


def _key(j: Job) -> tuple:
    return (j.test_case, j.platform, j.environment, j.scope or "", j.tag or "")


# --------------------------------------------------------------------------- pipeline


def test_generation_jobs_for_applies_quarantine_per_target(tree: Callable[..., Path]) -> None:
    generation = generate(tree(v2_files()))
    assert not generation.findings, generation.findings
    l1 = target("github", "L1")
    mr = target("gitlab", "mr")
    l1_cases = [j.test_case for j in generation.jobs_for(l1)]
    assert "ep8_dist_opt" not in l1_cases and "ep8_muon" in l1_cases
    muon = next(j for j in generation.jobs_for(l1) if j.test_case == "ep8_muon")
    assert muon.quarantine is None  # allow-failure is for gitlab/mr only
    chosen = generation.selection(mr)
    assert [j.test_case for j in chosen.skipped] == ["ep8_dist_opt"]
    assert chosen.skipped[0].quarantine and chosen.skipped[0].quarantine.tracker == (
        "https://github.com/acme/ml/issues/7201"
    )
    muon_mr = next(j for j in chosen.jobs if j.test_case == "ep8_muon")
    assert muon_mr.quarantine and muon_mr.quarantine.action == "allow-failure"
    # The GB200 job of ep8_dist_opt is not matched (the entry names H100 only).
    gb200 = generation.selection(target("gitlab", "mr", platform="dgx_gb200"))
    assert [j.test_case for j in gb200.jobs] == ["ep8_dist_opt"] and not gb200.skipped
    # The bucket named like a glob is deselected for its latest tag only, and
    # the real file inside it is not touched.
    unit = generation.selection(Selector(model="unit-tests"))
    marks = {(j.test_case, j.tag): j.quarantine for j in unit.jobs}
    bucket = "tests/unit_tests/models/**/*.py"
    assert marks[(bucket, "latest")] and marks[(bucket, "latest")].node_ids
    assert marks[(bucket, "legacy")] is None
    assert marks[("tests/unit_tests/models/test_gpt.py", "latest")] is None


def test_broken_quarantine_file_stops_generation(tree: Callable[..., Path], cli) -> None:
    root = tree(v2_files(quarantine="entries:\n  - id: a\n    kind: [\n"))
    run = cli("list", "--recipes", root)
    assert run.code == 1, run
    assert "quarantine.yaml:" in run.err and "yaml-syntax" in run.err


# --------------------------------------------------------------------------- list


def test_list_json_carries_quarantine_and_with_quarantined_adds_skipped(
    tree: Callable[..., Path], cli
) -> None:
    root = tree(v2_files())
    run = cli("list", "--recipes", root, "--scope", "mr", "--format", "json")
    assert run.code == 0, run
    jobs = json.loads(run.out)
    by_case = {(j["test_case"], j["platform"], j["tag"]): j for j in jobs}
    assert ("ep8_dist_opt", "dgx_h100", None) not in by_case  # skipped on gitlab/mr
    assert by_case[("ep8_muon", "dgx_h100", None)]["quarantine"] == {
        "id": "ep8-muon",
        "tracker": "https://github.com/acme/ml/issues/7734",
        "action": "allow-failure",
        "kind": "broken",
    }
    assert "quarantine" not in by_case[("ep8_dist_opt", "dgx_gb200", None)]
    full = cli("list", "--recipes", root, "--scope", "mr", "--format", "json", "--with-quarantined")
    all_jobs = json.loads(full.out)
    assert len(all_jobs) == len(jobs) + 1
    skipped = [j for j in all_jobs if j.get("quarantine", {}).get("action") == "skip"]
    assert [(j["test_case"], j["platform"]) for j in skipped] == [("ep8_dist_opt", "dgx_h100")]
    assert skipped[0]["quarantine"] == {
        "id": "ep8-dist-opt",
        "tracker": "https://github.com/acme/ml/issues/7201",
        "action": "skip",
        "kind": "flaky",
    }
    # The deselect mark carries the node ids.
    bucket = next(
        j for j in all_jobs if j["test_case"].endswith("**/*.py") and j["tag"] == "latest"
    )
    assert bucket["quarantine"]["node_ids"] == [
        "tests/unit_tests/models/test_moe.py::test_router[dev]"
    ]


def test_list_table_shows_the_entry_and_counts_skipped(tree: Callable[..., Path], cli) -> None:
    root = tree(v2_files())
    run = cli("list", "--recipes", root, "--scope", "L1", "--with-quarantined")
    assert run.code == 0, run
    line = next(x for x in run.out.splitlines() if "ep8_dist_opt" in x and "dgx_h100" in x)
    assert "skip ep8-dist-opt (https://github.com/acme/ml/issues/7201)" in line
    plain = cli("list", "--recipes", root, "--scope", "L1")
    cases = [x for x in plain.out.splitlines() if "ep8_dist_opt" in x]
    assert len(cases) == 1 and "dgx_gb200" in cases[0]  # the H100 one is skipped
    assert "1 skipped by quarantine" in plain.err


def test_list_without_scope_places_jobs_by_their_scope(tree: Callable[..., Path], cli) -> None:
    root = tree(v2_files())
    run = cli("list", "--recipes", root, "--test-case", "ep8_dist_opt", "--format", "json")
    scopes = sorted((j["scope"], j["platform"]) for j in json.loads(run.out))
    # H100 is skipped in L1, mr and mr-slim; GB200 is not matched at all.
    assert scopes == [("L1", "dgx_gb200"), ("mr", "dgx_gb200"), ("mr-slim", "dgx_gb200")]


def test_v1_tree_quarantine_with_legacy_scope_names(tree: Callable[..., Path], cli) -> None:
    quarantine = """entries:
  - id: tc-a-github
    tracker: https://github.com/acme/ml/issues/1
    kind: broken
    action: skip
    match: {test_case: tc_a}
    where: [github/mr-github]
    owner: mcore
    reason: r
"""
    root = tree(v1_files(quarantine))
    github = cli("list", "--recipes", root, "--scope", "mr-github", "--format", "json")
    assert json.loads(github.out) == []
    gitlab = json.loads(cli("list", "--recipes", root, "--scope", "mr", "--format", "json").out)
    assert {j["test_case"] for j in gitlab} == {"tc_a", "tc_b"}
    assert cli("validate", "--recipes", root).code == 0


# --------------------------------------------------------------------------- validate


def _entry_text(**over: str) -> str:
    fields = {
        "id": "x",
        "tracker": '"#1"',
        "kind": "flaky",
        "action": "skip",
        "match": "{test_case: ep8_muon}",
        "owner": "alice",
        "expires": "2099-01-01",
        "reason": "r",
    }
    fields.update(over)
    lines = [f"  - id: {fields.pop('id')}"] + [f"    {k}: {v}" for k, v in fields.items() if v]
    return "\n".join(lines) + "\n"


def test_validate_reports_entries_that_match_nothing(tree: Callable[..., Path], cli) -> None:
    text = "entries:\n" + _entry_text(match="{test_case: ep8_muon, platforms: [dgx_gb200]}")
    run = cli("validate", "--recipes", tree(v2_files(text)))
    assert run.code == 1, run
    assert re.search(
        r"quarantine\.yaml:6:12: error: entry \"x\" applies to no job in any target", run.err
    ), run.err


def test_validate_unknown_values_get_did_you_mean(tree: Callable[..., Path], cli) -> None:
    text = "entries:\n" + _entry_text(
        match="{test_case: ep8_muonn, platforms: [dgx_h10]}", where="[gitlab/mr-slimm]"
    )
    run = cli("validate", "--recipes", tree(v2_files(text)))
    assert run.code == 1, run
    assert 'is not a test case (did you mean "ep8_muon"?)' in run.err
    assert 'no job has platform "dgx_h10" (did you mean "dgx_h100"?)' in run.err
    assert 'scope "mr-slimm" (did you mean "mr-slim"?)' in run.err
    located = re.search(r"quarantine\.yaml:(\d+):(\d+): error: [^\n]*dgx_h10\"", run.err)
    assert located and located.groups() == ("6", "47")


def test_validate_unknown_scope_did_you_mean_knows_legacy_names(
    tree: Callable[..., Path], cli
) -> None:
    text = "entries:\n" + _entry_text(where="[gitlab/nightlyy]")
    run = cli("validate", "--recipes", tree(v2_files(text)))
    assert run.code == 1, run
    assert 'no gitlab target has scope "nightlyy" (did you mean "nightly"?)' in run.err
    # The scopes in the tree's words: it declares nightly; L2 only as "also known as".
    assert "gitlab scopes: mr, mr-slim, nightly (also known as L2) [" in run.err


def test_validate_requires_tracker_and_owner(tree: Callable[..., Path], cli) -> None:
    text = "entries:\n" + _entry_text(owner="", tracker="")
    run = cli("validate", "--recipes", tree(v2_files(text)))
    assert run.code == 1
    assert 'quarantine.yaml:2:5: error: entry "x" has no tracker' in run.err
    assert 'quarantine.yaml:2:5: error: entry "x" has no owner' in run.err


def test_expired_is_a_warning_then_an_error_after_grace(tree: Callable[..., Path], cli) -> None:
    today = dt.date.today()
    recent = (today - dt.timedelta(days=3)).isoformat()  # grace_days is 7 in CONFIG
    old = (today - dt.timedelta(days=8)).isoformat()
    warn = cli("validate", "--recipes", tree(v2_files("entries:\n" + _entry_text(expires=recent))))
    assert warn.code == 0, warn
    assert re.search(r"quarantine\.yaml:8:14: warning: entry \"x\" expired on", warn.err)
    # The command it suggests works as typed: an unquoted #1 is a shell comment.
    assert "(matrixgen quarantine lift --tracker 1)" in warn.err
    assert (
        cli(
            "validate",
            "--strict",
            "--recipes",
            tree(v2_files("entries:\n" + _entry_text(expires=recent))),
        ).code
        == 1
    )
    late = cli("validate", "--recipes", tree(v2_files("entries:\n" + _entry_text(expires=old))))
    assert late.code == 1
    assert re.search(
        r"quarantine\.yaml:8:14: error: entry \"x\" expired on .*grace period", late.err
    )


def test_default_grace_period_without_config(tree: Callable[..., Path], cli) -> None:
    # A tree without config: 14 days of grace.
    base = """entries:
  - id: x
    tracker: https://github.com/acme/ml/issues/1
    kind: flaky
    action: skip
    match: {test_case: tc_a}
    owner: me
    expires: EXPIRES
    reason: r
"""
    ten = (dt.date.today() - dt.timedelta(days=10)).isoformat()
    fifteen = (dt.date.today() - dt.timedelta(days=15)).isoformat()
    assert cli("validate", "--recipes", tree(v1_files(base.replace("EXPIRES", ten)))).code == 0
    assert cli("validate", "--recipes", tree(v1_files(base.replace("EXPIRES", fifteen)))).code == 1


def test_overlapping_entries_are_a_warning(tree: Callable[..., Path], cli) -> None:
    text = (
        "entries:\n"
        + _entry_text(id="a", match="{test_case: ep8_muon}")
        + _entry_text(id="b", match="{test_case: ep8_*}", action="allow-failure")
    )
    run = cli("validate", "--recipes", tree(v2_files(text)))
    assert run.code == 0, run
    assert 'entries "a" (skip), "b" (allow-failure) all apply to' in run.err
    assert '"a" decides what happens' in run.err


def test_shipped_quarantine_config_section_is_schema_checked(
    tree: Callable[..., Path], cli
) -> None:
    bad = CONFIG.replace("grace_days: 7", "grace_days: soon")
    run = cli("validate", "--recipes", tree(v2_files(config=bad)))
    assert run.code == 3, run
    assert "matrixgen.yaml:" in run.err and "grace_days" in run.err


def test_the_day_expiry_is_judged_against(monkeypatch) -> None:
    import datetime as dt

    from matrixgen.model.errors import UsageError
    from matrixgen.quarantine.policy import TODAY_VARIABLE, current_day

    monkeypatch.delenv(TODAY_VARIABLE, raising=False)
    assert current_day() == dt.date.today()
    monkeypatch.setenv(TODAY_VARIABLE, "2031-02-03")
    assert current_day() == dt.date(2031, 2, 3)
    monkeypatch.setenv(TODAY_VARIABLE, "next tuesday")
    with pytest.raises(UsageError, match="MATRIXGEN_TODAY='next tuesday'"):
        current_day()


def test_one_day_format_everywhere(monkeypatch) -> None:
    """YYYY-MM-DD only, as the file and its schema hold dates: date.fromisoformat
    alone also takes 20270101 and 2027-W01-1, in $MATRIXGEN_TODAY and in a
    quoted date of the file alike."""
    import datetime as dt

    from matrixgen.model.errors import UsageError
    from matrixgen.quarantine.policy import TODAY_VARIABLE, current_day, parse_day

    assert parse_day("2027-01-31") == dt.date(2027, 1, 31)
    for text in ("20270131", "2027-W05-1", " 2027-01-31", "2027-1-31"):
        with pytest.raises(ValueError):
            parse_day(text)
    monkeypatch.setenv(TODAY_VARIABLE, "20261201")
    with pytest.raises(UsageError, match="expected a date like 2026-12-01"):
        current_day()
    text = ENTRY.replace("    reason: r\n", "    reason: r\n    expires: '20270131'\n")
    qfile = parse_quarantine(text.encode(), "q.yaml")
    assert [f.code for f in qfile.errors] == ["schema"] and not qfile.entries


ENTRY = """entries:
  - id: a
    tracker: '#1'
    owner: me
    kind: flaky
    action: skip
    match: {test_case: x}
    reason: r
"""


def test_schema_findings_the_file_says_itself_are_told_by_keyword_and_path() -> None:
    """A missing tracker or owner, and missing node ids, are said once, by this
    module's own rule; the schema's other findings about the same entry stay."""
    text = (
        "entries:\n  - kind: flaky\n    action: deselect\n    match: {test_case: x}\n"
        "    reason: r\n"
    )
    qfile = parse_quarantine(text.encode(), "q.yaml")
    said = sorted((f.code, f.message) for f in qfile.findings)
    assert said == [
        ("quarantine-no-owner", "entry entries[0] has no owner: every entry needs one"),
        ("quarantine-no-tracker", "entry entries[0] has no tracker: every entry needs one"),
        (
            "quarantine-node-ids",
            "entry entries[0]: action deselect needs node_ids (the pytest node ids to deselect)",
        ),
        ("schema", "entries/0: 'id' is a required property"),
    ]


def test_required_errors_name_their_property_in_the_schema_path() -> None:
    from matrixgen.documents.quarantine import QuarantineDocument
    from matrixgen.documents.schema import _validator

    errors = list(_validator(QuarantineDocument).iter_errors({"entries": [{"kind": "flaky"}]}))
    missing = {
        e.validator_value[e.relative_schema_path[-1]] for e in errors if e.validator == "required"
    }
    assert missing == {"id", "tracker", "action", "match", "owner", "reason"}
    assert all(
        e.message == f"{m!r} is a required property"
        for e, m in zip(
            sorted((e for e in errors if e.validator == "required"), key=lambda e: e.message),
            sorted(missing),
            strict=True,
        )
    )


@pytest.mark.parametrize(
    ("days_ago", "finding"),
    [(0, None), (1, "warning"), (7, "warning"), (8, "error")],  # grace_days is 7 in CONFIG
)
def test_expiry_and_grace_on_both_sides_of_each_day(
    tree: Callable[..., Path], cli, monkeypatch: pytest.MonkeyPatch, days_ago: int, finding: str
) -> None:
    """An entry is in force on its expiry day; the day after it is expired, a
    warning through the grace period's last day and an error the day after."""
    monkeypatch.setenv("MATRIXGEN_TODAY", "2026-12-01")
    expires = (dt.date(2026, 12, 1) - dt.timedelta(days=days_ago)).isoformat()
    run = cli("validate", "--recipes", tree(v2_files("entries:\n" + _entry_text(expires=expires))))
    if finding is None:
        assert run.code == 0 and "expired" not in run.err, run
        return
    assert run.code == (1 if finding == "error" else 0), run
    assert f'{finding}: entry "x" expired on {expires} ({days_ago} day(s) ago' in run.err


@pytest.mark.parametrize(("expires", "listed"), [("2026-12-01", False), ("2026-11-30", True)])
def test_list_expired_shows_an_entry_from_the_day_after_its_expiry(
    tree: Callable[..., Path], cli, monkeypatch: pytest.MonkeyPatch, expires: str, listed: bool
) -> None:
    monkeypatch.setenv("MATRIXGEN_TODAY", "2026-12-01")
    root = tree(v2_files("entries:\n" + _entry_text(expires=expires)))
    run = cli("quarantine", "list", "--recipes", root, "--expired", "--format", "json")
    assert run.code == 0, run
    assert [e["id"] for e in json.loads(run.out)] == (["x"] if listed else [])


@pytest.mark.parametrize(("expires", "finding"), [("2026-11-01", False), ("2026-10-31", True)])
def test_an_entry_may_expire_on_the_day_it_was_added(
    tree: Callable[..., Path], cli, monkeypatch: pytest.MonkeyPatch, expires: str, finding: bool
) -> None:
    monkeypatch.setenv("MATRIXGEN_TODAY", "2026-10-01")
    text = "entries:\n" + _entry_text(expires=expires, added="2026-11-01")
    run = cli("validate", "--recipes", tree(v2_files(text)))
    assert ("quarantine-dates" in run.err or "before it was added" in run.err) is finding, run


@pytest.mark.parametrize("action", ["[]", "{a: 1}", "[skip]", "[mute]"])
@pytest.mark.parametrize("node_ids", [None, "[tests/a.py::test_a]"])
def test_an_action_that_is_no_string_is_a_located_error(
    tree: Callable[..., Path], cli, action: str, node_ids: str | None
) -> None:
    """A list or a mapping where the action goes (a random Hypothesis seed's
    fuzzed file): what the schema says, at its line, never a traceback."""
    text = "entries:\n" + _entry_text(action=action, node_ids=node_ids or "")
    root = tree(v2_files(text))
    for command in (["validate"], ["list"], ["quarantine", "list"]):
        run = cli(*command, "--recipes", root)
        assert run.code in (1, 7), (command, run)
        assert re.search(
            r"quarantine\.yaml:5:13: error: entries/0/action: .* is not one of", run.err
        )


# Test case names and patterns that reach every way an entry can match: an exact
# name, a glob, a name that is also a glob (a unit-test bucket), a glob no name fits.
_CASE_NAMES = ["a", "ab", "b", "u/**/*.py", "u/x.py", "a*"]
_PATTERNS = [*_CASE_NAMES, "*", "a?", "u/*", "[ab]", "zz*", "zz"]


@settings(max_examples=200, deadline=None)
@given(
    cases=st.lists(st.sampled_from(_CASE_NAMES), min_size=1, max_size=6, unique=True),
    patterns=st.lists(
        st.lists(st.sampled_from(_PATTERNS), min_size=1, max_size=2, unique=True),
        max_size=6,
    ),
)
@example(cases=["u/**/*.py", "u/x.py"], patterns=[["u/**/*.py"], ["u/*"]])
@example(cases=["a*", "ab"], patterns=[["a*"], ["a*", "zz*"]])
@example(cases=["a", "b"], patterns=[["a", "b"], ["[ab]"], ["zz"]])
@example(cases=["a"], patterns=[["*"], ["a"]])  # a glob entry before a naming one
def test_applying_looks_only_at_entries_that_can_match_yet_finds_each_one(
    cases: list[str], patterns: list[list[str]]
) -> None:
    """apply_quarantine and entry_hits look at the entries that name a job's test
    case or glob, not at every entry for every job: they find exactly what
    checking every entry against every job finds."""
    from matrixgen.quarantine.apply import applying_entries, combined_mark, entry_hits

    jobs = [job(test_case=c) for c in cases]
    # Two entries share an index and an action, so that only their order decides.
    actions = [list(QuarantineAction)[n // 2 % len(QuarantineAction)] for n in range(len(patterns))]
    entries = [
        entry(
            id=f"e{n}",
            index=n // 2,
            action=actions[n],
            node_ids=("t.py::x",) if actions[n].node_level else (),
            match=Match(test_case=p[0] if len(p) == 1 else tuple(p)),
        )
        for n, p in enumerate(patterns)
    ]
    where = target("gitlab", "mr")
    known = set(cases)
    every = [(j, applying_entries(j, entries, where, known)) for j in jobs]
    kept, skipped = apply_quarantine(jobs, entries, where)
    expected = [(j.test_case, combined_mark(found) if found else None) for j, found in every]
    got = [(j.test_case, j.quarantine) for j in (*kept, *skipped)]
    assert sorted(got, key=repr) == sorted(expected, key=repr)
    hits = entry_hits(jobs, entries, [where])
    assert {e.id: sorted(h.job.test_case for h in hits[e.id]) for e in entries} == {
        e.id: sorted(j.test_case for j, found in every if e in found) for e in entries
    }


def test_a_test_case_named_like_a_glob_outside_the_target_still_matches_only_itself() -> None:
    from matrixgen.quarantine.apply import selection

    # The name is a test case of the tree, though not of this target: the entry
    # names that job, and does not reach "ab" as a glob would.
    jobs = [job(test_case="a*", platform="dgx_gb200"), job(test_case="ab")]
    chosen = selection(jobs, [entry(match=Match(test_case="a*"))], target("gitlab", "mr"))
    assert [(j.test_case, j.quarantine) for j in chosen.jobs] == [("ab", None)]
    assert chosen.skipped == ()
    everywhere = selection(jobs, [entry(match=Match(test_case="a*"))], Selector())
    assert [j.test_case for j in everywhere.skipped] == ["a*"]


def test_a_targets_selection_is_shared_and_cannot_be_changed(tree: Callable[..., Path]) -> None:
    generation = generate(tree(v2_files()))
    mr = target("gitlab", "mr")
    chosen = generation.selection(mr)
    # Every check, emitter and view reads this one object.
    assert generation.selection(mr) is chosen
    with pytest.raises(AttributeError):
        chosen.jobs = ()  # type: ignore[misc]


def test_entry_hits_lists_the_jobs_each_entry_applies_to_per_target() -> None:
    from matrixgen.quarantine.apply import entry_hits

    jobs = [job(test_case="tc"), job(test_case="other")]
    targets = [target("gitlab", "mr"), target("gitlab", "nightly")]
    entries = [entry(id="e"), entry(id="idle", match=Match(test_case="nothing"))]
    hits = entry_hits(jobs, entries, targets)
    shown = {k: [(h.target.selector.scope, h.job.test_case) for h in v] for k, v in hits.items()}
    assert shown == {"e": [("mr", "tc")], "idle": []}
    # A hit is a value: the audit may keep it, and no reader can change it.
    with pytest.raises(AttributeError):
        hits["e"][0].job = jobs[1]  # type: ignore[misc]
