"""`quarantine list`: what each entry matches and where, and its filters, on the
shipped quarantine file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from matrixgen.entries.listing import EntryFilter, entry_row, filter_entries
from matrixgen.model.vocab import QuarantineAction, QuarantineKind
from matrixgen.quarantine.model import parse_quarantine

SHIPPED = Path(__file__).resolve().parents[1] / "recipes"
BASE = "https://github.com/example/mcore/issues/"


def ids(cli, *args: str) -> list[str]:
    run = cli("quarantine", "list", "--recipes", SHIPPED, "--format", "json", *args)
    assert run.code == 0, run
    return [e["id"] for e in json.loads(run.out)]


def test_the_table_shows_what_each_entry_matches(cli) -> None:
    run = cli("quarantine", "list", "--recipes", SHIPPED)
    assert run.code == 0, run
    header, _, *rows = run.out.splitlines()
    assert header.split() == [
        "id",
        "action",
        "kind",
        "tracker",
        "matches",
        "platforms",
        "environments",
        "where",
        "owner",
        "expires",
    ]
    by_id = {row.split()[0]: re.split(r"\s{2,}", row) for row in rows}
    ep8 = by_id["moe-ep8-alltoall-dropless-h100"]
    assert ep8[4:8] == [
        "moe/moe_mixtral_tp1_pp1_ep8_alltoall_dropless",
        "dgx_h100",
        "any",
        "github/L1,gitlab/mr,gitlab/mr-slim",
    ]
    lts = by_id["hybrid-moe-ep4-convergence-lts-baseline"]
    assert lts[5:8] == ["dgx_h100", "lts", "gitlab/nightly"]
    flaky = by_id["ut-async-save-flaky-dev"]
    assert flaky[4:8] == [
        "unit-tests/tests/unit_tests/dist_checkpointing/test_async_save.py (1 node id(s))",
        "any",
        "dev",
        "everywhere",
    ]
    assert run.err.strip() == "5 entries"


def test_filters(cli, monkeypatch) -> None:
    every = ids(cli)
    assert len(every) == 5
    assert ids(cli, "--tracker", "7201") == ["moe-ep8-alltoall-dropless-h100"]
    assert ids(cli, "--tracker", "#7201") == ids(cli, "--tracker", BASE + "7201")
    assert ids(cli, "--owner", "mcore-moe") == [
        "moe-ep8-alltoall-dropless-h100",
        "moe-ep8-etp1-fp8-h100",
        "moe-gb200-ep8-convergence-baseline",
    ]
    assert ids(cli, "--owner", "MCORE-MOE") == ids(cli, "--owner", "mcore-moe")
    assert ids(cli, "--kind", "baseline-failure") == [
        "hybrid-moe-ep4-convergence-lts-baseline",
        "moe-gb200-ep8-convergence-baseline",
    ]
    assert ids(cli, "--action", "deselect") == ["ut-async-save-flaky-dev"]
    # A platform: the entries that name it, and those that name no platform.
    assert ids(cli, "--platform", "dgx_gb200") == [
        "ut-async-save-flaky-dev",
        "moe-gb200-ep8-convergence-baseline",
    ]
    # Filters combine.
    assert ids(cli, "--owner", "mcore-moe", "--action", "allow-failure") == [
        "moe-gb200-ep8-convergence-baseline"
    ]
    assert ids(cli, "--owner", "nobody") == []
    # Expired: against MATRIXGEN_TODAY.
    monkeypatch.setenv("MATRIXGEN_TODAY", "2026-12-01")
    assert ids(cli, "--expired") == []
    monkeypatch.setenv("MATRIXGEN_TODAY", "2027-02-01")
    assert ids(cli, "--expired") == ["moe-ep8-alltoall-dropless-h100", "moe-ep8-etp1-fp8-h100"]
    monkeypatch.setenv("MATRIXGEN_TODAY", "2030-01-01")
    assert ids(cli, "--expired") == every
    shown = cli("quarantine", "list", "--recipes", SHIPPED, "--kind", "flaky")
    assert shown.err.strip() == "1 of 5 entries"


def test_bad_filter_values_are_usage_errors(cli) -> None:
    run = cli("quarantine", "list", "--recipes", SHIPPED, "--kind", "flakey")
    assert run.code == 2 and "Traceback" not in run.err
    run = cli("quarantine", "list", "--recipes", SHIPPED, "--action", "skipp")
    assert run.code == 2


TWO_REPOS = b"""
entries:
  - id: a
    tracker: https://github.com/one/repo/issues/5
    kind: flaky
    action: skip
    match: {test_case: x}
    owner: me
    added: 2026-11-01
    expires: 2027-01-01
    reason: r
  - id: b
    tracker: https://github.com/two/repo/issues/5
    kind: flaky
    action: skip
    match: {test_case: y, platforms: [p1, p2], environments: [dev], tags: [latest]}
    where: [gitlab/mr]
    owner: me
    added: 2026-11-01
    expires: 2027-01-01
    reason: r
"""


def test_library_filter_and_rows() -> None:
    qfile = parse_quarantine(TWO_REPOS, "q.yaml")
    assert not qfile.errors, qfile.errors
    with pytest.raises(ValueError, match="ambiguous"):
        filter_entries(qfile.entries, EntryFilter(tracker="5"))
    assert [e.id for e in filter_entries(qfile.entries, EntryFilter(platform="p2"))] == ["a", "b"]
    assert [e.id for e in filter_entries(qfile.entries, EntryFilter(platform="p3"))] == ["a"]
    assert (
        filter_entries(
            qfile.entries, EntryFilter(kind=QuarantineKind.BROKEN, action=QuarantineAction.SKIP)
        )
        == []
    )
    row = entry_row(qfile.entries[1])
    assert row["matches"] == "y[latest]"
    assert (row["platforms"], row["environments"], row["where"]) == ("p1,p2", "dev", "gitlab/mr")
    assert entry_row(qfile.entries[0])["platforms"] == "any"


def test_empty_results_say_so_in_words(cli, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("MATRIXGEN_TODAY", "2026-12-01")
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("MATRIXGEN_RESULTS_DB", raising=False)
    monkeypatch.chdir(tmp_path)  # no default results store of a checkout around
    # The shipped entries are all in force on this day and none expires within
    # 14 days: no table header, a sentence.
    audit = cli("quarantine", "audit", "--recipes", SHIPPED)
    assert audit.code == 0, audit
    assert audit.out == (
        "no problems: no entry is expired, ownerless, matching nothing or with a closed "
        "tracker, and none expires within 14 days\n"
    )
    # Within 90 days two entries expire (2027-01-31): the table, no sentence.
    soon = cli("quarantine", "audit", "--recipes", SHIPPED, "--days", "90")
    assert soon.out.startswith("id ") and "no problems" not in soon.out
    listed = cli("quarantine", "list", "--recipes", SHIPPED, "--owner", "nobody")
    assert (listed.code, listed.out) == (0, "no entries match\n")
    jobs = cli("list", "--recipes", SHIPPED, "--model", "gpt", "--tag", "legacy", "--scope", "L0")
    assert (jobs.code, jobs.out) == (0, "no job matches\n")
    assert jobs.err.strip() == "0 job(s)"
