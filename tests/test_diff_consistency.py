"""The diff says what CI receives: for each kind of edit, committed in a
temporary repository, the diff's per-target added / removed / changed /
quarantine equal what comparing `generate`'s files (and its quarantine summary)
at both revisions gives; migrating Megatron-LM's quarantine habits changes no
real target; the JSON output follows its published schema."""

from __future__ import annotations

import copy
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from matrixgen.diff.data import to_json_data
from matrixgen.diff.gitsource import Repository
from matrixgen.diff.model import ACTION_CHANGED, ENTRY_CHANGED, LIFTED, QUARANTINED, SelectionDiff
from matrixgen.diff.revisions import diff_revisions
from matrixgen.emit.generate import generate_all
from matrixgen.engine.targets import resolve_targets
from matrixgen.migrate.plan import real_targets
from matrixgen.model.jobs import JobId
from matrixgen.model.vocab import System
from matrixgen.pipeline import generate_from_files
from matrixgen.quarantine.jobenv import JOB_VARIABLES
from matrixgen.systems.gitlab.emitter import (
    ENTRY_LABEL_VARIABLE,
    PLACEHOLDER_JOB,
    QUARANTINE_VARIABLE,
)
from tests.diff_fixtures import GPT, block, dumped, v2_tree
from tests.gitrepo import GIT_ENV, GitRepo

ENTRY: dict[str, Any] = {
    "id": "gpt-a-hang",
    "tracker": "#7201",
    "kind": "broken",
    "action": "skip",
    "match": {"model": "gpt", "test_case": "gpt_a"},
    "where": ["github/L1", "gitlab/mr"],
    "owner": "mcore",
    "added": "2026-11-12",
    "expires": "2099-01-31",
    "reason": "hangs",
}


def with_entry(tree: dict[str, Any], **changes: Any) -> dict[str, Any]:
    tree = copy.deepcopy(tree)
    tree["quarantine.yaml"] = {"entries": [{**ENTRY, **changes}]}
    return tree


def edited(change: Callable[[dict[str, Any]], None], base: dict[str, Any] | None = None):  # type: ignore[no-untyped-def]
    base = base if base is not None else v2_tree()
    head = copy.deepcopy(base)
    change(head)
    return base, head


def _script(tree: dict[str, Any]) -> None:
    tree["h100/gpt.yaml"]["spec"]["script"] = "bash run.sh {test_case} --fast"


def _env(tree: dict[str, Any]) -> None:
    tree["h100/gpt.yaml"]["spec"]["env"]["NCCL_DEBUG"] = "INFO"


def _args(tree: dict[str, Any]) -> None:
    tree["h100/gpt.yaml"]["products"][0]["products"][0]["args"] = ["--seed", "7"]


def _image(tree: dict[str, Any]) -> None:
    images = tree["matrixgen.yaml"]["images"]
    images["github"]["tag"] = "26.10"
    images["gitlab"]["amd64"]["tag"] = "26.10-amd64"
    images["gitlab"]["arm64"]["tag"] = "26.10-arm64"


def _time_limit(tree: dict[str, Any]) -> None:
    tree["h100/gpt.yaml"]["products"][1]["products"][0]["time_limit"] = [5400]


def _n_repeat(tree: dict[str, Any]) -> None:
    tree["h100/gpt.yaml"]["products"][0]["products"][0]["n_repeat"] = [1]


def _platforms(tree: dict[str, Any]) -> None:
    tree["h100/gpt.yaml"]["products"][1]["products"][0]["platforms"] = ["dgx_gb200"]


def _platform_move(tree: dict[str, Any]) -> None:
    tree["h100/gpt.yaml"]["products"][0]["products"][0]["platforms"] = ["dgx_gb200"]


def _scopes(tree: dict[str, Any]) -> None:
    tree["h100/gpt.yaml"]["products"][0]["products"][0]["scope"] = ["mr", "nightly"]


def _removed_row(tree: dict[str, Any]) -> None:
    del tree["h100/gpt.yaml"]["products"][2]


def _new_file(tree: dict[str, Any]) -> None:
    moe = copy.deepcopy(GPT)
    moe["spec"]["model"] = "moe"
    moe["products"] = [block("moe_a", scope=["mr", "L1"]), block("moe_b", scope=["nightly"])]
    tree["h100/moe.yaml"] = moe


def _renamed_file(tree: dict[str, Any]) -> None:
    tree["h100/gpt-renamed.yaml"] = tree.pop("h100/gpt.yaml")


def _quarantine_add(tree: dict[str, Any]) -> None:
    tree.update(with_entry(tree))


def _lift(tree: dict[str, Any]) -> None:
    del tree["quarantine.yaml"]


def _action(tree: dict[str, Any]) -> None:
    tree["quarantine.yaml"]["entries"][0]["action"] = "allow-failure"


def _tracker(tree: dict[str, Any]) -> None:
    tree["quarantine.yaml"]["entries"][0]["tracker"] = "#7202"


def _duplicate(tree: dict[str, Any]) -> None:
    copy_ = copy.deepcopy(GPT)
    copy_["products"] = [block("gpt_c", scope=["mr"])]
    tree["h100/gpt-copy.yaml"] = copy_


def _duplicate_differs(tree: dict[str, Any]) -> None:
    copy_ = copy.deepcopy(GPT)
    copy_["products"] = [block("gpt_c", scope=["mr"], n_repeat=[2])]
    tree["h100/zz-copy.yaml"] = copy_


def _new_case(tree: dict[str, Any]) -> None:
    tree["h100/gpt.yaml"]["products"].append(block("gpt_new", scope=["mr", "L1"]))


SKIP_ALL = with_entry(v2_tree(), match={"model": "gpt", "test_case": "gpt_*"})
ARRIVES = edited(_new_case, SKIP_ALL)

EDITS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "script": edited(_script),
    "env": edited(_env),
    "args": edited(_args),
    "image pin": edited(_image),
    "time limit": edited(_time_limit),
    "n_repeat": edited(_n_repeat),
    "platform list": edited(_platforms),
    "a platform move": edited(_platform_move),
    "scope list": edited(_scopes),
    "a removed row": edited(_removed_row),
    "a new file": edited(_new_file),
    "a renamed file": edited(_renamed_file),
    "quarantine add": edited(_quarantine_add),
    "lift": edited(_lift, with_entry(v2_tree())),
    "action change": edited(_action, with_entry(v2_tree())),
    "tracker change": edited(_tracker, with_entry(v2_tree(), action="allow-failure")),
    "a new case under a skip entry": ARRIVES,
    "a skipped case removed": (ARRIVES[1], ARRIVES[0]),
    "a duplicate copy": edited(_duplicate),
    "a differing copy (last wins)": edited(_duplicate_differs),
}


# ---------------------------------------------------------------- the oracle


def _file_jobs(text: str, system: System) -> dict[str, dict[str, Any]]:
    """str(identity) -> what the file holds for the job, read back from the file."""
    out: dict[str, dict[str, Any]] = {}
    if system is System.GITHUB:
        document = json.loads(text)
        matrices = document.get("matrices", [document])
        for row in (r for m in matrices for r in m["include"]):
            identity = JobId(
                row["model"], row["test_case"], row["environment"], row["platform"], row["tag"]
            )
            out[str(identity)] = dict(row)
        return out
    document = yaml.safe_load(text)
    for name, job in document.items():
        if name in ("stages", PLACEHOLDER_JOB):
            continue
        words = shlex.split(job["script"][0])
        flags = {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}
        identity = JobId(
            flags["--model"],
            flags["--test-case"],
            flags["--environment"],
            flags["--platform"],
            flags.get("--tag", ""),
        )
        out[str(identity)] = {"name": name, **job}
    return out


def _unmarked(content: dict[str, Any], system: System) -> dict[str, Any]:
    """The content without what a quarantine mark adds to it."""
    content = copy.deepcopy(content)
    plugin = {QUARANTINE_VARIABLE, ENTRY_LABEL_VARIABLE, *JOB_VARIABLES.values()}
    if system is System.GITHUB:
        for key in ("quarantine", "continue-on-error"):
            content.pop(key, None)
        env = content.get("env", {})
        for key in plugin:
            env.pop(key, None)
        if not env:
            content.pop("env", None)
        return content
    content.pop("allow_failure", None)
    variables = content.get("variables", {})
    for key in plugin:
        variables.pop(key, None)
    if not variables:
        content.pop("variables", None)
    return content


def generated(repo: Repository, revision: str) -> dict[str, dict[str, Any]]:
    """Per target of a revision: its running jobs (from the file `generate`
    writes), its skipped jobs and every mark (from generate's summary)."""
    source = repo.read(revision, "recipes")
    generation = generate_from_files(source.files, root="recipes")
    targets = resolve_targets(generation.tree.config, generation.jobs)
    out = {}
    for output in generate_all(generation, targets):
        system = output.target.system
        running = _file_jobs(output.text, system)
        marks = {identity: mark for identity, mark in output.marks}
        skipped = {i for i, m in marks.items() if m.action == "skip"}
        if system is System.GITLAB:  # the launcher line is quoted: compare it as words
            for content in running.values():
                content["script"] = [shlex.join(shlex.split(content["script"][0]))]
        out[output.target.name] = {
            "system": system,
            "running": running,
            "skipped": skipped,
            "marks": marks,
        }
    return out


def expected(base: dict[str, Any], head: dict[str, Any]) -> dict[str, Any]:
    """What comparing the generated files of both sides gives for one target."""
    system = (head or base)["system"]
    run_b, run_h = base.get("running", {}), head.get("running", {})
    skip_b, skip_h = base.get("skipped", set()), head.get("skipped", set())
    marks_b, marks_h = base.get("marks", {}), head.get("marks", {})
    present_b, present_h = run_b.keys() | skip_b, run_h.keys() | skip_h
    quarantine = {(i, "arrives quarantined") for i in skip_h - present_b}
    quarantine |= {(i, "leaves quarantined") for i in skip_b - present_h}
    changed: dict[str, set[str]] = {}
    for i in present_b & present_h:
        old, new = marks_b.get(i), marks_h.get(i)
        if old != new:
            kind = (
                QUARANTINED
                if old is None
                else LIFTED
                if new is None
                else ACTION_CHANGED
                if old.action != new.action
                else ENTRY_CHANGED
            )
            quarantine.add((i, kind))
        if i in run_b and i in run_h:
            a, b = _unmarked(run_b[i], system), _unmarked(run_h[i], system)
            keys = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
            if keys:
                changed[i] = keys
    return {
        "added": set(run_h) - present_b,
        "removed": set(run_b) - present_h,
        "changed": changed,
        "quarantine": quarantine,
    }


def observed(result: SelectionDiff) -> dict[str, dict[str, Any]]:
    """The diff as the files see it: a job moved in or out, or parked by a
    habit, enters or leaves the target's file (the diff names why); the
    resolved-workload fields (workload.*) are no emitted field."""
    out = {}
    for t in result.targets:
        habits = [q for q in t.quarantine if q.habit is not None]
        changed = {
            str(c.head.identity): {f for f in c.fields if not f.startswith("workload.")}
            for c in t.changed
        }
        out[t.target.name] = {
            "added": {str(j.identity) for j in (*t.added, *(m.job for m in t.moved_in))}
            | {str(q.job.identity) for q in habits if q.parser == "added"},
            "removed": {str(j.identity) for j in (*t.removed, *(m.job for m in t.moved_out))}
            | {str(q.job.identity) for q in habits if q.parser == "removed"},
            "changed": {k: v for k, v in changed.items() if v},
            "quarantine": {(str(q.job.identity), q.change) for q in t.quarantine if not q.habit},
        }
    return out


@pytest.mark.parametrize("kind", sorted(EDITS))
def test_the_diff_is_the_difference_of_the_generated_files(kind: str, tmp_path: Path) -> None:
    base_tree, head_tree = EDITS[kind]
    repo = GitRepo(tmp_path / "repo")
    base = repo.commit(dumped(base_tree))
    repo.write({rel: None for rel in base_tree if rel not in head_tree})
    head = repo.commit(dumped(head_tree), message=kind)
    repository = Repository(repo.top)
    result, sides = diff_revisions(repository, "recipes", base, head)
    # A copy that differs is an error validate reports (generate refuses the tree;
    # the files compared here are what it would write going on: the last copy).
    errors = [f.code for side in sides for f in side.errors]
    assert errors == (["duplicate-conflict"] if "differing" in kind else []), kind
    before, after = generated(repository, base), generated(repository, head)
    seen = observed(result)
    assert set(seen) == before.keys() | after.keys()
    for name in sorted(seen):
        want = expected(before.get(name, {}), after.get(name, {}))
        assert seen[name] == want, (kind, name)
    # The jobs that start and stop running, whatever the cause (added, lifted,
    # parked, moved, skipped): the running jobs of each side's file, compared.
    for t in result.targets:
        run_b = set(before.get(t.target.name, {}).get("running", {}))
        run_h = set(after.get(t.target.name, {}).get("running", {}))
        starts, stops = t.running_changes()
        assert {str(j.identity) for j in starts} == run_h - run_b, (kind, t.target.name)
        assert {str(j.identity) for j in stops} == run_b - run_h, (kind, t.target.name)
        assert t.head_jobs - t.base_jobs == len(starts) - len(stops), (kind, t.target.name)
    # Every edit here does something, except the ones that reach no emitted file.
    quiet = {"script", "a renamed file", "a duplicate copy"}
    assert result.unchanged == (kind in quiet), kind
    if kind == "a duplicate copy":
        notes = [d for t in result.targets for d in t.duplicates]
        assert notes and all(d.change == "added" for d in notes)
        assert all("gpt-copy.yaml" in str(w) for d in notes for w in d.locations)


def test_every_edit_kind_of_the_issue_is_covered() -> None:
    assert {
        "script",
        "env",
        "args",
        "image pin",
        "time limit",
        "n_repeat",
        "platform list",
        "scope list",
        "a removed row",
        "a new file",
        "a renamed file",
        "quarantine add",
        "lift",
        "action change",
    } <= set(EDITS)


# ---------------------------------------------------------------- JSON Schema


@pytest.mark.slow  # seconds by itself (tests/tiers.py)
def test_json_output_follows_the_published_schema(tmp_path: Path) -> None:
    import jsonschema

    schema = json.loads((Path(__file__).parents[1] / "schema" / "diff.schema.json").read_text())
    jsonschema.validators.validator_for(schema).check_schema(schema)
    repo = GitRepo(tmp_path / "repo")
    repository = Repository(repo.top)
    checked = 0
    for kind, (base_tree, head_tree) in sorted(EDITS.items()):
        base = repo.commit(dumped(base_tree))
        repo.write({rel: None for rel in base_tree if rel not in head_tree})
        head = repo.commit(dumped(head_tree), message=kind)
        data = to_json_data(diff_revisions(repository, "recipes", base, head)[0])
        jsonschema.validate(data, schema)
        checked += 1
        repo.write({rel: None for rel in head_tree})
    assert checked == len(EDITS)
    # The schema is not a formality: a wrong category is refused.
    data["targets"][0]["quarantine"] = [
        {"change": "requarantined", "job": {}, "old": None, "new": None}
    ]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema)


# ---------------------------------------------------------------- Megatron-LM


def _writable_copy(source: Path, target: Path) -> None:
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


def test_migrating_megatron_habits_changes_no_real_target(
    megatron_dir: Path, tmp_path: Path
) -> None:
    """`migrate --write` keeps every real target's selection (it says so); the
    diff of that commit must say the same: +0 -0 ~0 on every real target, and
    each move a quarantine change."""
    repo = GitRepo(tmp_path / "repo")
    _writable_copy(megatron_dir, repo.top / "recipes")
    base = repo.commit(message="upstream tree")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "matrixgen",
            "migrate",
            "--recipes",
            "recipes",
            "--write",
            "--for-matrixgen-pipelines",
            "--default-tracker",
            "#1",
        ],
        cwd=repo.top,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
        check=False,
    )
    assert run.returncode == 0, run.stderr
    head = repo.commit(message="migrate")
    repository = Repository(repo.top)
    result, _ = diff_revisions(repository, "recipes", base, head)
    before = generate_from_files(repository.read(base, "recipes").files, root="recipes")
    after = generate_from_files(repository.read(head, "recipes").files, root="recipes")
    real = {t.name for t in (*real_targets(before), *real_targets(after))}
    compared = {t.target.name: t for t in result.targets}
    # Every target the diff compares is a real one (no habit scope); the ones it
    # leaves out are holding pens and platforms validate reports as typos.
    assert set(compared) <= real and len(compared) >= 20
    for name in sorted(compared):
        t = compared[name]
        assert (t.added, t.removed, t.changed) == ((), (), ()), name
        assert t.base_jobs == t.head_jobs, name
    moves = [q for t in result.targets for q in t.quarantine]
    assert moves and {q.change for q in moves} <= {"arrives quarantined", QUARANTINED}
    assert all(q.mark.action == "skip" for q in moves)
