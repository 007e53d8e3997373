"""The golden-values review on three real Megatron-LM refresh commits
(`$MATRIXGEN_MEGATRON_GOLDENS`: each commit's files before and after it): a
checkout laid out as Megatron-LM's (its recipe tree at tests/test_utils/recipes)
gets the before files as one commit and the after files as the next, and
`matrixgen diff HEAD~1 HEAD` must give, for every file and metric, the figures
worked out here from the two JSON files (tests/golden_fixtures.py), the gated
metrics each case's model_config.yaml names, and the jobs the data's README
counts. Skipped without the data (failed under MATRIXGEN_REQUIRE_MEGATRON=1)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.conftest import Run, require_megatron, require_megatron_goldens, run_cli
from tests.gitrepo import GitRepo
from tests.golden_fixtures import naive

REPO = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((REPO / "schema" / "diff.schema.json").read_text(encoding="utf-8"))
CASES = "tests/functional_tests/test_cases"
# commit: (files, files that jobs of the recipe tree read), as the data's README counts them
COMMITS = {"31fbdf0364": (7, 7), "93ebf8d72f": (38, 31), "2aeaf56cb7": (54, 30)}
INFERENCE = (
    f"{CASES}/hybrid/hybrid_dynamic_inference_tp1_pp1_dp8_583m/golden_values_dev_dgx_h100.json"
)


class Refresh:
    """One commit's history, its diff, and its files as plain JSON."""

    def __init__(self, data: Path, top: Path, recipes: Path) -> None:
        self.before, self.after = data / "before", data / "after"
        repo = GitRepo(top)
        shutil.copytree(recipes, top / "tests" / "test_utils" / "recipes")
        for path in [top, *top.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
        repo.commit(message="Megatron-LM's recipes")
        self._copy(self.before, top)
        repo.commit(message="before")
        for rel in self.files(self.before) - self.files(self.after):
            (top / rel).unlink()
        self._copy(self.after, top)
        repo.commit(message="after")
        self.repo = repo

    @staticmethod
    def _copy(side: Path, top: Path) -> None:
        if side.is_dir():
            # New times (shutil.copy, not copy2): a file of the same size and
            # time as the one it replaces is one git's index takes as unchanged.
            shutil.copytree(side, top, dirs_exist_ok=True, copy_function=shutil.copy)
            for path in top.rglob("*"):
                path.chmod(path.stat().st_mode | 0o200)

    @staticmethod
    def files(side: Path) -> set[str]:
        if not side.is_dir():
            return set()
        return {p.relative_to(side).as_posix() for p in side.rglob("*.json")}

    def run(self, *args: str) -> Run:
        cwd = os.getcwd()
        os.chdir(self.repo.top)
        try:
            return run_cli(["diff", "HEAD~1", "HEAD", *args])
        finally:
            os.chdir(cwd)

    def json(self) -> dict[str, Any]:
        run = self.run("--format", "json")
        assert run.code == 0, run
        data = json.loads(run.out)
        jsonschema.validate(data, SCHEMA)
        return data

    def load(self, side: Path, rel: str) -> dict[str, Any] | None:
        path = side / rel
        return json.loads(path.read_text()) if path.exists() else None

    def gated(self, rel: str, status: str) -> set[str]:
        side = self.before if status == "removed" else self.after
        config = (side / rel).parent / "model_config.yaml"
        if not config.exists():
            return {"lm loss", "num-zeros"}
        data = yaml.safe_load(config.read_text())
        return set(data.get("METRICS", ["lm loss", "num-zeros"]))


@pytest.fixture(scope="module", params=sorted(COMMITS))
def refresh(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Refresh:
    data = require_megatron_goldens() / request.param
    recipes = require_megatron()
    return Refresh(data, tmp_path_factory.mktemp(request.param) / "megatron", recipes)


def _training(values: dict[str, Any] | None) -> bool:
    return values is not None and all(
        isinstance(v, dict) and isinstance(v.get("values"), dict) for v in values.values()
    )


def test_every_file_and_metric_has_the_figures_of_its_two_sides(refresh: Refresh) -> None:
    data = refresh.json()
    items = {item["path"]: item for item in data["golden_changes"]}
    expected = refresh.files(refresh.before) | refresh.files(refresh.after)
    assert set(items) == expected
    for rel, item in items.items():
        old, new = refresh.load(refresh.before, rel), refresh.load(refresh.after, rel)
        status = "added" if old is None else "removed" if new is None else "changed"
        assert item["status"] == status, rel
        if not all(_training(v) for v in (old, new) if v is not None):
            assert not item["compared"] and item["metrics"] == [], rel
            continue
        gated = refresh.gated(rel, status)
        old_m, new_m = old or {}, new or {}
        names = [*new_m, *(n for n in old_m if n not in new_m)]
        assert [m["name"] for m in item["metrics"]] == names, rel
        for m in item["metrics"]:
            name = m["name"]
            a = old_m[name]["values"] if name in old_m else {}
            b = new_m[name]["values"] if name in new_m else {}
            want = naive(a, b)
            where = f"{rel} {name}"
            assert m["gated"] == (name in gated), where
            for key in ("steps_compared", "steps_added", "steps_removed", "steps_skipped"):
                assert m[key] == want[key], (where, key)
            assert m["non_finite_new"] == want["non_finite_new"], where
            if want["mean"] is None:
                assert m["mean_rel_change_pct"] is None, where
            else:
                assert m["mean_rel_change_pct"] == pytest.approx(want["mean"], rel=1e-9, abs=1e-12)
            assert m["max_abs_rel_change_pct"] == want["max"], where
            assert m["max_step"] == want["max_step"], where
            unchanged = name in old_m and name in new_m and a == b
            if name not in old_m:
                assert m["status"] == "added", where
            elif name not in new_m:
                assert m["status"] == "removed", where
            else:
                assert (m["status"] == "unchanged") == unchanged, where


def test_the_jobs_of_the_recipe_tree_read_as_many_files_as_the_data_says(refresh: Refresh) -> None:
    data = refresh.json()
    name = refresh.before.parent.name
    files, read = COMMITS[name]
    items = data["golden_changes"]
    assert len(items) == files
    assert sum(bool(i["jobs"]) for i in items) == read
    assert all(i["orphan"] == (not i["jobs"] and not i["quarantined_jobs"]) for i in items)
    for item in items:
        for job in item["jobs"]:
            assert (job["model"], job["test_case"]) == (item["model"], item["test_case"])
    # The refresh changes what the tests compare with, not what the pipelines run.
    assert data["summary"]["targets_changed"] == 0


def test_what_each_commit_shows(refresh: Refresh) -> None:
    items = {i["path"]: i for i in refresh.json()["golden_changes"]}
    name = refresh.before.parent.name
    if name == "93ebf8d72f":
        # The leading NaN of iteration-time goes (its step 1); nothing else moves.
        for item in items.values():
            for m in item["metrics"]:
                if m["name"] == "iteration-time":
                    assert (m["status"], m["steps_removed"], m["non_finite_new"]) == (
                        "changed",
                        1,
                        0,
                    )
                else:
                    assert m["status"] == "unchanged", (item["path"], m["name"])
        assert refresh.run("--expect", "golden:nonfinite=0,max<=0%").code == 0
        run = refresh.run("--expect", "golden:missing=0")
        assert run.code == 6 and "got 38 missing step(s)" in run.err
    elif name == "31fbdf0364":
        statuses = [m["status"] for i in items.values() for m in i["metrics"]]
        assert "unchanged" in statuses and "changed" in statuses
        listed = [i for i in items.values() if i["gated_by"] != "default"]
        assert [i["test_case"] for i in listed] == ["deepseek_proxy_fsdp_ep2_fsdp2"]
        assert refresh.run("--expect", "golden:files=7,problems=0,orphans=0").code == 0
    else:
        inference = items[INFERENCE]
        assert [p["code"] for p in inference["problems"] if p["severity"] == "error"] == [
            "golden-layout",
            "golden-layout",
        ]
        assert sum(i["status"] == "added" for i in items.values()) == 51
        run = refresh.run("--expect", "golden:problems=0")
        assert run.code == 6 and "1 file(s) with problems (hybrid/" in run.err


def test_the_text_and_the_comment_have_a_row_per_file(refresh: Refresh) -> None:
    items = refresh.json()["golden_changes"]
    text = refresh.run().out
    markdown = refresh.run("--format", "markdown").out
    assert "#### Golden values" in markdown
    for item in items:
        case = f"{item['model']}/{item['test_case']}"
        assert sum(line.startswith(f"{case} ") for line in text.splitlines()) >= 1, case
    rows = [line for line in markdown.splitlines() if line.startswith("| `")]
    assert len(rows) == min(len(items), 50)
