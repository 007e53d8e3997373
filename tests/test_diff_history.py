"""`matrixgen diff` over a history of Megatron-LM's tree, with one fixed list of
targets for every commit, against Megatron-LM's own parser (differential).

Megatron-LM's CI calls its generator for one fixed set of 42 targets (its CI
files: every scope a scheduled pipeline passes, every platform, environment and
unit-test tag). A CI that runs `diff` with that list runs it on commits older
than some of the targets: scopes not used yet, platforms not there yet, files
added, removed and renamed, rows parked in habit scopes and commented out. The
history here is such a sequence, built from the real tree; for every pair of
commits compared and every target, the diff must succeed and say what the
parser says: the jobs it selects at each side (the jobs columns) and the jobs it
gains and loses (the JSON's parser view: added, moved in, and habits and
arrivals the parser counts as added; the same for removed), job by job.

Skips when Megatron-LM's CI files or recipe tree are absent (fails under
MATRIXGEN_REQUIRE_MEGATRON=1, as `.ci/run` sets it).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import require_megatron, run_cli
from tests.gitrepo import GitRepo
from tests.megatron_ci import (
    PARSER_DRIVER,
    Upstream,
    ci_calls,
    github_scripts,
    gitlab_scripts,
    require_megatron_ci,
)

REPO = Path(__file__).resolve().parent.parent
RECIPES = "tests/test_utils/recipes"
Files = dict[str, str]
Target = tuple[str, str, str, str, str | None]  # system, scope, platform, environment, tag

# What each scheduled pipeline of Megatron-LM's CI passes to its configure jobs:
# the values that make their calls cover every target they can ask for.
GITLAB_VALUES = {
    "DEFAULT_A100_CLUSTER": "dgxa100_dracooci",
    "DEFAULT_H100_CLUSTER": "dgxh100_eos",
    "DEFAULT_GB200_CLUSTER": "dgxgb200_oci-hsg",
    "UTILITY_IMAGE": "mcore_utility",
    "CI_PIPELINE_ID": "1",
    "CI_SLURM_ACCOUNT": "acct",
    "UNIT_TEST_REPEAT": "1",
    "UNIT_TEST_TIMEOUT": "30",
    "FUNCTIONAL_TEST_REPEAT": "5",
    "FUNCTIONAL_TEST_TIME_LIMIT": "2700",
    "FUNCTIONAL_TEST_CASES": "all",
    "FUNCTIONAL_TEST_NAME": "release/run",
    "INTEGRATION_TEST_TIME_LIMIT": "900",
    "INTEGRATION_TEST_CASES": "all",
}
SCOPE_VARIABLES = {
    ".gitlab/stages/02.test.yml": ("", ()),
    ".gitlab/stages/03.integration-tests.yml": ("INTEGRATION_TEST_SCOPE", ("mr", "mr-slim")),
    ".gitlab/stages/04.functional-tests.yml": (
        "FUNCTIONAL_TEST_SCOPE",
        ("mr", "mr-slim", "nightly", "weekly", "release"),
    ),
}
GITHUB_SCOPES = ("L0", "L1")  # CADENCE empty: the label bypass, no cadence filter


def _option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def ci_targets(ci: Path, work: Path) -> list[Target]:
    """Every target Megatron-LM's CI files call its generator for."""
    found: dict[Target, None] = {}

    def add(system: str, args: list[str]) -> None:
        found[
            (
                system,
                *(str(_option(args, f"--{key}")) for key in ("scope", "platform", "environment")),
                _option(args, "--tag"),
            )  # type: ignore[index]
        ] = None

    for rel, script in gitlab_scripts(ci).items():
        name, values = SCOPE_VARIABLES[rel]
        for value in values or ("",):
            for args in ci_calls(script, {**GITLAB_VALUES, name: value}, work):
                add("gitlab", args)
    for script, _ in github_scripts(ci).values():
        for scope in GITHUB_SCOPES:
            variables = {"SCOPE": scope, "LIGHTWEIGHT": "false", "CADENCE": ""}
            for args in ci_calls(script, variables, work):
                add("github", args)
    return sorted(found, key=lambda t: tuple(v or "" for v in t))


def name(target: Target) -> str:
    """The target's name, as the diff names a target given as key=value pairs."""
    return "-".join(v for v in target if v)


def spec(target: Target) -> str:
    system, scope, platform, environment, tag = target
    text = f"system={system},scope={scope},platform={platform},environment={environment}"
    return text + (f",tag={tag}" if tag else "")


# --------------------------------------------------------------------------- the history


def _recipes(files: Files) -> Iterator[tuple[str, dict]]:
    for rel, text in sorted(files.items()):
        data = yaml.safe_load(text)
        if isinstance(data, dict) and data.get("type") == "basic":
            yield rel, data


def without_scope(files: Files, scope: str) -> Files:
    """The tree before `scope` existed: it leaves every row; a row, block or
    file left empty goes too."""
    out = dict(files)
    for rel, data in _recipes(files):
        if scope not in files[rel]:
            continue
        blocks = []
        for block in data.get("products") or []:
            rows = []
            for row in block.get("products") or []:
                if scope in row.get("scope", []):
                    row["scope"] = [s for s in row["scope"] if s != scope]
                    if not row["scope"]:
                        continue
                rows.append(row)
            if rows:
                blocks.append({**block, "products": rows})
        if blocks:
            out[rel] = yaml.safe_dump({**data, "products": blocks}, sort_keys=False)
        else:
            del out[rel]
    return out


def only_tag(files: Files, rel: str, tag: str) -> Files:
    """A unit-test recipe before its other tags (`legacy`) existed."""
    data = yaml.safe_load(files[rel])
    for block in data["products"]:
        for row in block.get("products") or []:
            row["tag"] = [t for t in row["tag"] if t == tag]
    return {**files, rel: yaml.safe_dump(data, sort_keys=False)}


def replaced(files: Files, rel: str, old: str, new: str, count: int = 1) -> Files:
    text = files[rel]
    assert text.count(old) >= count, (rel, old)
    return {**files, rel: text.replace(old, new, count)}


def parked(files: Files) -> Files:
    """Two rows parked in a habit scope (one with its tracker), one commented out."""
    out = replaced(files, "h100/moe.yaml", "scope: [mr, mr-github, L0-smoke]", "scope: [mr-broken]")
    rel = "h100/moe-dynamic-inference-with-coordinator.yaml"
    out = replaced(out, rel, "scope: [mr] #[mr, mr-github]", "scope: [mr-broken] # hang: #7201 [mr")
    text = out["h100/t5.yaml"]
    block = re.search(r"\n(  - test_case: \[t5_mcore_te_tp4_pp1\]\n(?:    [^\n]*\n)+)", text)
    assert block is not None
    commented = "  # hang: #513\n" + "".join(
        "  # " + line[2:] + "\n" for line in block.group(1).splitlines()
    )
    return {**out, "h100/t5.yaml": text.replace(block.group(1), commented, 1)}


def reshaped(files: Files) -> Files:
    """A file removed, one renamed, one added; a scope renamed in one file."""
    out = dict(files)
    del out["h100/bert.yaml"]
    out["h100/t5-renamed.yaml"] = out.pop("h100/t5.yaml")
    out["h100/gpt-grads-copy.yaml"] = re.sub(
        r"test_case: \[(\w+)\]", r"test_case: [\1_copy]", out["h100/gpt-grads.yaml"]
    )
    return replaced(out, "h100/moe.yaml", "mr-slim", "mr-lean", count=1)


@dataclass
class History:
    repo: GitRepo
    commits: list[str] = field(default_factory=list)
    trees: list[Files] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def commit(self, name: str, files: Files) -> None:
        folder = self.repo.top / RECIPES
        if folder.exists():
            self.repo.git("rm", "-r", "-q", "--cached", RECIPES)
            for path in sorted(folder.rglob("*"), reverse=True):
                path.unlink() if path.is_file() else path.rmdir()
        self.repo.write(files, under=RECIPES)
        self.commits.append(self.repo.commit(message=name))
        self.trees.append(files)
        self.names.append(name)


def build_history(top: Path, real: Files) -> History:
    """The real tree's past and future as commits, oldest first."""
    history = History(GitRepo(top))
    gb200 = {r: t for r, t in real.items() if r.startswith("gb200/")}
    unit = "h100/unit-tests.yaml"
    h100 = {r: t for r, t in without_scope(real, "L0-smoke").items() if r not in gb200}
    h100 = only_tag(h100, unit, "latest")
    history.commit("before mr-slim, L0-smoke, GB200 and legacy", without_scope(h100, "mr-slim"))
    history.commit("mr-slim", h100)
    history.commit("GB200 (with its L0-smoke rows)", h100 | gb200)
    history.commit("unit tests on legacy too", history.trees[-1] | {unit: real[unit]})
    history.commit("the tree as it is", dict(real))
    history.commit("cases parked and commented out", parked(real))
    history.commit("files removed, renamed, added; a scope renamed", reshaped(real))
    history.commit("back to the tree as it is", dict(real))
    return history


# Pairs compared (indexes into the history): each commit against the one before,
# and two across several commits.
def pairs(n: int) -> list[tuple[int, int]]:
    return [(i - 1, i) for i in range(1, n)] + [(0, n - 1), (2, 6)]


# --------------------------------------------------------------------------- the tests


@pytest.fixture(scope="module")
def ci() -> Path:
    return require_megatron_ci()


@pytest.fixture(scope="module")
def fixed(ci: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Target]:
    return ci_targets(ci, tmp_path_factory.mktemp("ci-calls"))


@pytest.fixture(scope="module")
def real() -> Files:
    tree = require_megatron()
    return {
        p.relative_to(tree).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(tree.rglob("*.yaml"))
    }


@pytest.fixture(scope="module")
def history(real: Files, tmp_path_factory: pytest.TempPathFactory) -> History:
    return build_history(tmp_path_factory.mktemp("history") / "megatron-lm", real)


@pytest.fixture(scope="module")
def parser(ci: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstream]:
    reference = Upstream(ci, tmp_path_factory.mktemp("parser"), None, driver=PARSER_DRIVER)
    yield reference
    reference.close()


def test_the_fixed_list_is_the_42_targets_of_the_ci_files(fixed: list[Target]) -> None:
    assert len(fixed) == 42
    scopes = {(t[0], t[1]) for t in fixed}
    assert ("gitlab", "release") in scopes and ("github", "L1") in scopes
    assert sum(1 for t in fixed if t[1] == "unit-tests") == 4  # dev, lts x latest, legacy
    # 03.integration-tests.yml's typo is one of them: a platform no recipe uses.
    assert any(t[2] == "dgx_gb2100" for t in fixed)


def _identity(job: dict[str, Any]) -> tuple[str, ...]:
    return (job["model"], job["test_case"], job["environment"], job["platform"], job["tag"] or "")


def parser_view(target: dict[str, Any]) -> tuple[set, set]:
    """The jobs the diff says the parser gains and loses in a target."""
    gained = {_identity(j) for j in target["added"]}
    lost = {_identity(j) for j in target["removed"]}
    gained |= {_identity(m["job"]) for m in target["moved_in"]}
    lost |= {_identity(m["job"]) for m in target["moved_out"]}
    for q in target["quarantine"]:
        if q["parser"] == "added":
            gained.add(_identity(q["job"]))
        elif q["parser"] == "removed":
            lost.add(_identity(q["job"]))
    return gained, lost


def run_diff(
    top: Path, base: str, head: str, targets: list[Target], monkeypatch: pytest.MonkeyPatch
) -> Any:
    monkeypatch.chdir(top)
    args = ["diff", base, head, "--recipes", RECIPES, "--format", "json"]
    for target in targets:
        args += ["--target", spec(target)]
    return run_cli(args)


def test_the_diff_agrees_with_the_parser_over_the_history(
    history: History,
    parser: Upstream,
    fixed: list[Target],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    selected: list[list[set]] = []
    for files in history.trees:
        parser.write_tree(files)
        selected.append(parser.select([(t[1], t[2], t[3], t[4], None) for t in fixed]))
    compared = nonempty = changed = 0
    for old, new in pairs(len(history.commits)):
        run = run_diff(
            history.repo.top, history.commits[old], history.commits[new], fixed, monkeypatch
        )
        assert run.code == 0, (history.names[old], history.names[new], run.err)
        targets = json.loads(run.out)["targets"]
        assert len(targets) == len(fixed)
        by_name = {t["name"]: t for t in targets}
        for i, target in enumerate(fixed):
            got = by_name[name(target)]
            before, after = selected[old][i], selected[new][i]
            where = (history.names[old], history.names[new], spec(target))
            assert (got["jobs"]["base"], got["jobs"]["head"]) == (len(before), len(after)), where
            assert parser_view(got) == (after - before, before - after), where
            compared += 1
            nonempty += bool(before or after)
            changed += before != after
    assert compared == 42 * len(pairs(len(history.commits)))
    print(f"compared {compared} target pairs: {nonempty} non-empty, {changed} changed")
    assert nonempty > compared // 3 and changed > 20  # the history is no empty exercise


def test_targets_neither_side_uses_are_one_note_and_no_refusal(
    history: History, fixed: list[Target], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two oldest commits have no L0-smoke rows and no unit tests on the
    legacy tag, and no commit uses `release` or `dgx_gb2100`: one note names
    those values and targets, once."""
    run = run_diff(history.repo.top, history.commits[0], history.commits[1], fixed, monkeypatch)
    assert run.code == 0, run.err
    notes = [line for line in run.err.splitlines() if "compared as empty" in line]
    assert len(notes) == 1, run.err
    note = notes[0]
    assert note.startswith("matrixgen: note: no job of either side has ")
    for part in ('scope "release"', 'scope "L0-smoke"', 'tag "legacy"'):
        assert part in note
    assert 'platform "dgx_gb2100" (did you mean "dgx_gb200"?)' in note
    assert "gitlab-unit-tests-dgx_h100-dev-legacy" in note
    assert "gitlab-L0-smoke-dgx_h100-dev" in note and "gitlab-release-dgx_h100-lts" in note
    # The targets are compared, empty on both sides, and rules can name them.
    data = json.loads(run.out)
    smoke = next(t for t in data["targets"] if t["name"] == "gitlab-L0-smoke-dgx_h100-dev")
    assert smoke["jobs"] == {"base": 0, "head": 0}
    monkeypatch.chdir(history.repo.top)
    args = ["diff", history.commits[0], history.commits[1], "--recipes", RECIPES]
    for target in fixed:
        args += ["--target", spec(target)]
    ruled = run_cli([*args, "--expect", "gitlab/L0-smoke:=0", "--expect", "gitlab/release:=0"])
    assert ruled.code == 0, ruled.err


def test_a_value_a_declared_vocabulary_lacks_is_still_refused(
    tree: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only trees without vocabulary have no list of values but their jobs':
    with a declared one, a value outside it is a typo, whatever the jobs."""
    from tests.quarantine_fixtures import v2_files

    root = tree(v2_files(quarantine=None))
    repo = GitRepo(root)
    repo.commit(message="tree")
    monkeypatch.chdir(root)
    run = run_cli(
        ["diff", "HEAD", "--recipes", ".", "--target", "scope=mr,platform=dgx_h10,environment=dev"]
    )
    assert run.code == 2 and 'unknown platform "dgx_h10" (did you mean "dgx_h100"' in run.err


# --------------------------------------------------------------------------- the bench


def test_the_bench_over_a_checkout_counts_agreement_and_refusals(
    ci: Path, history: History, fixed: list[Target], tmp_path: Path
) -> None:
    """bench/diff_history.py, run on a checkout laid out as Megatron-LM's (the
    history above, with the parser beside the tree), agrees on every target of
    every pair; with a parser that selects otherwise, it counts disagreements."""
    top = history.repo.top
    scripts = top / "tests" / "test_utils" / "python_scripts"
    scripts.mkdir(parents=True, exist_ok=True)
    parser_file = scripts / "recipe_parser.py"
    parser_file.write_text(
        (ci / "tests" / "test_utils" / "python_scripts" / "recipe_parser.py").read_text()
    )
    n = len(history.commits)

    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"

    def bench(*extra: str, commits: int = n) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, str(REPO / "bench" / "diff_history.py"), str(top),
             "--commits", str(commits), "--json", *extra],
            capture_output=True, text=True, check=False, timeout=1800,
            env={**os.environ, "PATH": path},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    listed = subprocess.run(
        [sys.executable, str(REPO / "bench" / "diff_history.py"), "--print-targets"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert sorted(listed) == sorted(spec(t) for t in fixed)  # the CI files' list
    report = bench()
    assert (report["commits"], report["pairs"], report["targets"]) == (n, n - 1, 42)
    assert report["refused"] == {} and report["disagree"] == []
    assert report["agree"] == 42 * (n - 1)
    # A reference that drops GB200: the bench sees every pair where GB200 changes.
    wrong = parser_file.read_text().replace(
        "    if workloads and platform:\n",
        "    workloads = [w for w in workloads if w.spec.get('platforms') != 'dgx_gb200']\n"
        "    if workloads and platform:\n",
    )
    (tmp_path / "recipe_parser.py").write_text(wrong)
    # Over the last three commits, the jobs columns of every GB200 target that
    # has jobs disagree with such a reference.
    report = bench("--parser", str(tmp_path / "recipe_parser.py"), commits=3)
    assert report["pairs"] == 2 and report["disagree"]
    assert all("platform=dgx_gb200" in d["target"] for d in report["disagree"])
