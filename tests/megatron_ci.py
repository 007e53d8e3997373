"""Megatron-LM's own CI, run as a reference (differential tests of `jet-trigger`).

The real client lives outside the project, at `$MATRIXGEN_MEGATRON_CI` (default
`../shared/megatron-ci` beside the checkout). Nothing of it is copied into the
project: at test time its parser and generator are copied into a temporary
checkout laid out as Megatron-LM's (`tests/test_utils/python_scripts`, with a
recipe tree at `tests/test_utils/recipes`), and run there in a subprocess.

Two things of the reference's surroundings are fixed, both without changing what
it computes:
- the file system's listing order: the generator reads files in the order
  `Path.glob` yields them, which differs between machines; the driver lists
  them in path order (the order matrixgen documents);
- PyYAML's C loader stands in for the pure-Python one, which reads the same data
  (a test checks it on every file of the real tree) several times faster.

The calls themselves come from the CI files: `ci_calls` runs each configure
job's script in bash, with the generator replaced by a recorder, for given
values of the CI variables, so the argument lists are what the real shell
builds (arrays, word splitting, `$(...)`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import tiers

CI_ENV = "MATRIXGEN_MEGATRON_CI"
REQUIRE_ENV = "MATRIXGEN_REQUIRE_MEGATRON"
GENERATOR = "python tests/test_utils/python_scripts/generate_jet_trigger_job.py"
SCRIPTS = ("recipe_parser.py", "generate_jet_trigger_job.py")

# The jobs that call the generator, per CI file.
GITLAB_CONFIGURE_JOBS = {
    ".gitlab/stages/02.test.yml": "test:unit_tests_configure",
    ".gitlab/stages/03.integration-tests.yml": "integration:configure",
    ".gitlab/stages/04.functional-tests.yml": "functional:configure",
}
GITHUB_WORKFLOW = ".github/workflows/cicd-main.yml"
GITHUB_PARSE_JOBS = ("cicd-parse-integration-tests-h100", "cicd-parse-integration-tests-gb200")

DRIVER = r"""
import json, pathlib, sys

import yaml

_glob = pathlib.Path.glob
pathlib.Path.glob = lambda self, pattern: iter(sorted(_glob(self, pattern), key=str))
_pure = yaml.safe_load
_loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
yaml.safe_load = lambda stream: yaml.load(stream, Loader=_loader)

from tests.test_utils.python_scripts import generate_jet_trigger_job as generator

for line in sys.stdin:
    args = json.loads(line)
    try:
        generator.main.main(args, standalone_mode=False)
        answer = {"ok": True}
    except SystemExit as exc:
        answer = {"ok": exc.code in (0, None), "error": f"exit {exc.code}"}
    except BaseException as exc:
        answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(answer), flush=True)
"""


# Megatron-LM's parser, asked what it selects for many targets at once: one line
# of [[scope, platform, environment, tag, cadence], ...] in, one line out with,
# per target, the sorted identities (model, test case, environment, platform,
# tag or "") of the test workloads it selects (or {"error": ...}). The same
# file-order fix as DRIVER, and one parse per distinct file text (a deep copy
# each time: the parser changes what it loads).
PARSER_DRIVER = r"""
import copy, json, pathlib, sys

import yaml

_glob = pathlib.Path.glob
pathlib.Path.glob = lambda self, pattern: iter(sorted(_glob(self, pattern), key=str))
_loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_parsed = {}


def _load(stream):
    text = stream.read() if hasattr(stream, "read") else stream
    if text not in _parsed:
        _parsed[text] = yaml.load(text, Loader=_loader)
    return copy.deepcopy(_parsed[text])


yaml.safe_load = _load

from tests.test_utils.python_scripts import recipe_parser as parser

for line in sys.stdin:
    answer = []
    for scope, platform, environment, tag, cadence in json.loads(line):
        try:
            found = parser.load_workloads(
                container_tag="t", scope=scope, platform=platform,
                environment=environment, tag=tag, cadence=cadence,
            )
            answer.append(sorted({
                (w.spec["model"], w.spec["test_case"], w.spec["environment"],
                 w.spec["platforms"], w.spec.get("tag") or "")
                for w in found if "test_case" in w.spec
            }))
        except Exception as exc:
            answer.append({"error": f"{type(exc).__name__}: {exc}"})
    print(json.dumps(answer), flush=True)
"""


def megatron_ci_path() -> Path | None:
    value = os.environ.get(CI_ENV)
    path = Path(value) if value else Path(__file__).resolve().parents[2] / "shared" / "megatron-ci"
    if (path / "tests" / "test_utils" / "python_scripts" / "generate_jet_trigger_job.py").is_file():
        return path
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(
            f"{REQUIRE_ENV}=1 but Megatron-LM's CI files are absent (looked for {path}; "
            f"set {CI_ENV})",
            pytrace=False,
        )
    return None


def require_megatron_ci() -> Path:
    path = megatron_ci_path()
    if path is None:
        pytest.skip(f"Megatron-LM's CI files are absent (set {CI_ENV})")
    try:
        import click  # noqa: F401  (the generator's command line)
    except ImportError:
        pytest.fail("the test extra lacks click, which Megatron-LM's generator imports")
    tiers.uses("generator")
    return path


class Upstream:
    """Megatron-LM's generator in a temporary checkout, one process for many calls."""

    def __init__(self, ci: Path, top: Path, recipes: Path | None, *, driver: str = DRIVER) -> None:
        tiers.uses("generator")
        self.ci = ci
        self.top = top
        scripts = top / "tests" / "test_utils" / "python_scripts"
        scripts.mkdir(parents=True)
        for name in SCRIPTS:
            shutil.copyfile(ci / "tests" / "test_utils" / "python_scripts" / name, scripts / name)
        self.recipes = top / "tests" / "test_utils" / "recipes"
        if recipes is not None:
            shutil.copytree(recipes, self.recipes)
        else:
            self.recipes.mkdir()
        env = {**os.environ, "PYTHONPATH": str(top)}
        self.process = subprocess.Popen(
            [sys.executable, "-c", driver],
            cwd=top,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def write_tree(self, files: Mapping[str, str]) -> None:
        """Replace the recipe tree with these files."""
        shutil.rmtree(self.recipes)
        for rel, text in files.items():
            path = self.recipes / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")

    def run(self, args: Sequence[str]) -> dict:
        """One call of the generator; its answer ({"ok": ..., "error": ...})."""
        return self._ask(list(args))

    def select(self, targets: Sequence[Sequence[str | None]]) -> list[set[tuple[str, ...]]]:
        """What the parser (PARSER_DRIVER) selects for each (scope, platform,
        environment, tag, cadence): the identities of its test workloads."""
        answers = self._ask([list(t) for t in targets])
        for target, answer in zip(targets, answers, strict=True):
            if isinstance(answer, dict):
                raise RuntimeError(f"the reference parser failed for {target}: {answer}")
        return [{tuple(identity) for identity in answer} for answer in answers]

    def _ask(self, question: Any) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(question) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the reference process ended")
        return json.loads(line)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def with_output(args: Sequence[str], output: Path) -> list[str]:
    """The call with its --output-path replaced."""
    out = list(args)
    i = out.index("--output-path")
    out[i + 1] = str(output)
    return out


def read_pipeline(path: Path) -> dict:
    with path.open(encoding="utf-8") as stream:
        return yaml.safe_load(stream)


# --------------------------------------------------------------------------- CI calls

RECORDER = r"""#!/usr/bin/env python3
import json, os, sys
with open(os.environ["RECORD_CALLS"], "a", encoding="utf-8") as out:
    out.write(json.dumps(sys.argv[1:]) + "\n")
"""


def _script_of(document: dict, job: str) -> str:
    lines = document[job]["script"]
    return "\n".join(lines)


def gitlab_scripts(ci: Path) -> dict[str, str]:
    """Each configure job's script (one shell, as GitLab runs it), by CI file."""
    out = {}
    for rel, job in GITLAB_CONFIGURE_JOBS.items():
        document = yaml.safe_load((ci / rel).read_text(encoding="utf-8"))
        out[rel] = _script_of(document, job)
    return out


def github_scripts(ci: Path) -> dict[str, tuple[str, dict[str, str]]]:
    """Each parse job's generator step: (script, the names of its env variables)."""
    document = yaml.safe_load((ci / GITHUB_WORKFLOW).read_text(encoding="utf-8"))
    out = {}
    for job in GITHUB_PARSE_JOBS:
        for step in document["jobs"][job]["steps"]:
            if GENERATOR in step.get("run", ""):
                out[job] = (step["run"], dict(step.get("env") or {}))
    return out


def ci_calls(script: str, variables: Mapping[str, str], work: Path) -> list[list[str]]:
    """The generator calls a CI script makes for these variable values, each as
    its argument list (the script runs in bash, the generator replaced by a
    recorder; every other command runs or fails harmlessly)."""
    work.mkdir(parents=True, exist_ok=True)
    recorder = work / "record-call"
    recorder.write_text(RECORDER, encoding="utf-8")
    recorder.chmod(0o755)
    record = work / "calls.jsonl"
    record.unlink(missing_ok=True)
    body = script.replace(GENERATOR, f"{sys.executable} {recorder}")
    _bash(body, {**variables, "RECORD_CALLS": str(record)}, work, ())
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]


def _bash(script: str, variables: Mapping[str, str], cwd: Path, path: Sequence[Path]) -> None:
    """Run a CI script in bash, in `cwd`, with only these variables (and PATH,
    `path` first, and HOME); what it prints is not kept, and its exit code does
    not matter (every other command of a CI script runs or fails harmlessly)."""
    env = {
        "PATH": os.pathsep.join([*map(str, path), os.environ.get("PATH", "/usr/bin:/bin")]),
        "HOME": str(cwd),
        **variables,
    }
    subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
        timeout=600,
    )


SWITCH = (GENERATOR, "matrixgen jet-trigger")  # the edit of docs/megatron.md


def run_ci_script(
    script: str, variables: Mapping[str, str], top: Path, path: Sequence[Path]
) -> dict[str, dict]:
    """Run a CI script as its job runs it, from the top of a checkout, and take
    the pipeline files it writes there: {file name: parsed YAML}. `path` comes
    first on PATH (where `python` and `matrixgen` are)."""
    before = set(top.iterdir())
    _bash(script, variables, top, path)
    written = {}
    for new in sorted(set(top.iterdir()) - before):
        if new.suffix == ".yaml":
            written[new.name] = read_pipeline(new)
        new.unlink() if new.is_file() else shutil.rmtree(new)
    return written
