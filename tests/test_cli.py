"""The command line as a user meets it: exit codes, formats, start-up cost."""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.tree_fixtures import HAND_TREE


def test_usage_errors_exit_2(tree: Callable[..., Path], cli: Callable) -> None:
    root = tree(HAND_TREE)
    assert cli("list", "--recipes", root, "--format", "xml").code == 2
    assert cli("list", "--recipes", root, "--bogus").code == 2
    assert cli("frobnicate").code == 2
    bad_cadence = cli("list", "--recipes", root, "--cadence", "nightyl")
    assert bad_cadence.code == 2
    assert 'did you mean "nightly"' in bad_cadence.err
    missing = cli("list", "--recipes", root / "nope")
    assert missing.code == 2
    assert "Traceback" not in missing.err


def test_formats(tree: Callable[..., Path], cli: Callable) -> None:
    root = tree(HAND_TREE)
    as_json = json.loads(cli("list", "--recipes", root, "--format", "json").out)
    as_yaml = yaml.safe_load(cli("list", "--recipes", root, "--format", "yaml").out)
    assert as_json == as_yaml
    assert len(as_json) == 8
    table = cli("list", "--recipes", root, "--scope", "mr")
    lines = table.out.splitlines()
    assert lines[0].split()[:3] == ["model", "test_case", "tag"]
    assert len(lines) == 2 + 1 and "a_mr_and_github" in lines[2]
    assert "1 job(s)" in table.err


def test_test_case_filter_takes_lists(tree: Callable[..., Path], cli: Callable) -> None:
    root = tree(HAND_TREE)
    run = cli(
        "list",
        "--recipes",
        root,
        "--format",
        "json",
        "--test-case",
        "d_slim,e_broken",
        "--test-case",
        "a_mr_and_github",
    )
    assert sorted({j["test_case"] for j in json.loads(run.out)}) == [
        "a_mr_and_github",
        "d_slim",
        "e_broken",
    ]


def test_errors_block_list_but_warnings_do_not(tree: Callable[..., Path], cli: Callable):
    files = dict(HAND_TREE)
    files["h100/bad.yaml"] = HAND_TREE["h100/gpt.yaml"].replace("[dev]", "dev", 1)
    run = cli("list", "--recipes", tree(files))
    assert run.code == 1
    assert "bad.yaml:" in run.err and "nothing was generated" in run.err
    assert run.out == ""


def test_recipes_default_to_the_checkout(tmp_path: Path, monkeypatch, cli: Callable) -> None:
    from tests.conftest import write_tree

    write_tree(tmp_path / "recipes", HAND_TREE)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    run = cli("list", "--format", "json")
    assert run.code == 0, run
    assert len(json.loads(run.out)) == 8


def test_a_megatron_checkout_finds_its_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Callable
) -> None:
    # Megatron-LM keeps its recipes in tests/test_utils/recipes and has no
    # recipes/ at its top: that is the default there, from anywhere inside.
    from tests.conftest import write_tree

    write_tree(tmp_path / "tests/test_utils/recipes", HAND_TREE)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.chdir(tmp_path)
    run = cli("list", "--format", "json")
    assert run.code == 0, run
    assert len(json.loads(run.out)) == 8
    (tmp_path / "tests/sub").mkdir()
    monkeypatch.chdir(tmp_path / "tests/sub")
    assert cli("validate").code == 0
    # With both, recipes/ is the tree (matrixgen's own layout).
    write_tree(tmp_path / "recipes", {"_build.yaml": HAND_TREE["_build-mcore-dev.yaml"]})
    assert json.loads(cli("list", "--format", "json").out) == []


def test_matrixgen_recipes_sets_the_tree_and_the_flag_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Callable
) -> None:
    from tests.conftest import write_tree

    write_tree(tmp_path / "mine", HAND_TREE)
    write_tree(tmp_path / "other", {"_build.yaml": HAND_TREE["_build-mcore-dev.yaml"]})
    monkeypatch.chdir(tmp_path)  # no checkout, no recipes/ here
    assert cli("list").code == 2  # recipe directory not found
    monkeypatch.setenv("MATRIXGEN_RECIPES", str(tmp_path / "mine"))
    assert len(json.loads(cli("list", "--format", "json").out)) == 8
    flagged = cli("list", "--recipes", tmp_path / "other", "--format", "json")
    assert flagged.code == 0 and json.loads(flagged.out) == []
    monkeypatch.setenv("MATRIXGEN_RECIPES", str(tmp_path / "gone"))
    gone = cli("list")
    assert gone.code == 2 and "gone" in gone.err


def test_default_tree_is_shown_from_the_top_of_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Callable
) -> None:
    # As a reader knows the file: `recipes/h100/bad.yaml:...` from the top, the
    # full path from anywhere else.
    from tests.conftest import write_tree

    files = dict(HAND_TREE)
    files["h100/bad.yaml"] = "a: [\n"
    write_tree(tmp_path / "recipes", files)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.chdir(tmp_path)
    assert cli("validate").err.startswith("recipes/h100/bad.yaml:2:1: error:")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    top = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert cli("validate").err.startswith(f"{top}/recipes/h100/bad.yaml:2:1: error:")


def run_module(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "matrixgen", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )


@pytest.mark.slow  # seconds by itself (tests/tiers.py)
def test_output_is_identical_across_hash_seeds(tree: Callable[..., Path]) -> None:
    root = tree(HAND_TREE)
    outputs = {
        run_module(
            "list", "--recipes", str(root), "--format", "json", env={"PYTHONHASHSEED": seed}
        ).stdout
        for seed in ("0", "1", "4242", "random")
    }
    assert len(outputs) == 1 and len(next(iter(outputs))) > 100


def test_real_tree_output_is_identical_across_hash_seeds(megatron_dir: Path) -> None:
    runs = [
        run_module(
            "list", "--recipes", str(megatron_dir), "--format", "json", env={"PYTHONHASHSEED": seed}
        )
        for seed in ("0", "123")
    ]
    assert [r.returncode for r in runs] == [0, 0], runs
    assert runs[0].stdout == runs[1].stdout
    # The output is the tree's jobs, not an empty or truncated answer.
    jobs = json.loads(runs[0].stdout)
    assert len(jobs) > 500 and len({json.dumps(j, sort_keys=True) for j in jobs}) == len(jobs)


def test_start_up_imports_no_heavy_modules() -> None:
    heavy = ("jsonschema", "networkx", "ruamel.yaml", "urllib.request", "http.client")
    code = f"import sys, matrixgen.cli.main; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"


@pytest.mark.parametrize(
    "command",
    [
        "validate",
        "list",
    ],
)
def test_help_documents_exit_codes_and_options(command: str) -> None:
    import typer.main

    from matrixgen.cli.main import build_app

    result = run_module(command, "--help")
    assert result.returncode == 0, result
    text = " ".join(result.stdout.split())  # rewrapped for the terminal width
    # Every option the command takes is shown, each with a description.
    params = typer.main.get_command(build_app()).commands[command].params  # type: ignore[attr-defined]
    options = [p for p in params if p.param_type_name == "option" and p.name != "help"]
    assert options and "--recipes" in text
    for option in options:
        assert option.opts[0] in text, option.opts
        assert option.help and " ".join(option.help.split()[:4]) in text, option.opts
    # The exit codes: 0 on success, 1 for problems found, 2 for a usage error.
    assert re.search(r"\bExit\b.*\b0\b.*\b1\b.*\b2\b", text, re.IGNORECASE), text


# --- bad input of every shape: a located message and a documented code, never a traceback

FUZZ_CONFIG = {
    "format_version": 2,
    "vocabulary": {
        "platforms": ["dgx_h100", "dgx_gb200"],
        "environments": ["dev", "lts"],
        "scopes": {"github": ["L0", "L1"], "gitlab": ["mr", "nightly"]},
        "tags": ["latest"],
        "models": ["gpt", "unit-tests"],
        "axes": ["extra"],
    },
    "defaults": {"time_limit": 2700, "n_repeat": 5, "max_jobs": 1000},
    "platforms": {
        "dgx_h100": {"arch": "amd64"},
        "dgx_gb200": {"arch": "arm64", "alias_of": "dgx_h100"},
    },
    "images": {
        "version": "26.09",
        "github": {"repository": "nvcr.io/nvidia/pytorch", "tag": "26.09-py3"},
        "gitlab": {"amd64": {"repository": "reg.example/ci", "tag": "26.09-amd64"}},
    },
    "pins": {"fa": {"env": {"NVTE_FLASH_ATTN_V4": "0"}, "exclude": {"models": ["unit-tests"]}}},
    "systems": {"gitlab": {"parent_job": "generate"}},
    "targets": {
        "gl-mr": {"system": "gitlab", "scope": "mr", "platform": "dgx_h100", "environment": "dev"},
        "gh-l1": {"system": "github", "scope": "L1", "platform": "dgx_h100", "environment": "dev"},
    },
    "quarantine": {"tracker_base": "https://example.invalid/issues/"},
    "graph": {"external": {"gitlab": ["prepare"]}},
}
FUZZ_RECIPE = {
    "type": "basic",
    "format_version": 2,
    "maintainers": ["me"],
    "spec": {
        "name": "{test_case}_{environment}_{platforms}",
        "model": "gpt",
        "build": "img-{environment}",
        "platforms": "dgx_h100",
        "script": "run {name} {n_repeat}",
        "env": {"NVTE_FLASH_ATTN_V4": "0"},
        "args": ["--x", "1"],
        "needs": ["warm_{environment}_{platforms}"],
        "launcher": "env NVTE_FLASH_ATTN_V4=0 run.sh",
    },
    "products": [
        {
            "test_case": ["tc"],
            "cadence": ["pr"],
            "products": [
                {
                    "environment": ["dev"],
                    "scope": ["mr", "L1"],
                    "platforms": ["dgx_h100"],
                    "tag": ["latest"],
                    "extra": [1],
                    "env": {"B": "2"},
                    "args": ["--y"],
                    "n_repeat": [3],
                    "allow_failure": [False],
                }
            ],
        },
        {"test_case": ["warm"], "products": [{"environment": ["dev"], "scope": ["mr"]}]},
    ],
}
FUZZ_BUILD = {"type": "build", "format_version": 2, "spec": {"name": "img-dev"}}
FUZZ_QUARANTINE = {
    "entries": [
        {
            "id": "e1",
            "tracker": "#1",
            "kind": "flaky",
            "action": "skip",
            "match": {"model": "gpt", "test_case": "tc", "platforms": ["dgx_h100"]},
            "where": ["gitlab/mr"],
            "owner": "me",
            "added": "2026-11-01",
            "expires": "2099-01-01",
            "reason": "r",
        }
    ]
}
FUZZ_WORDS = ["", "dgx_h100", "mr", "L1", "dev", "tc", "{name}", "{nope}", "x-y", "ü{", "2"]

fuzz_keys = st.one_of(
    st.sampled_from(["scope", "env", "args", "cadence", "products", "test_case", "x-k", "needs"]),
    st.text(max_size=6),
    st.integers(-3, 3),
    st.none(),
    st.booleans(),
    st.dates(),
)
fuzz_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.floats(),
    st.dates(),
    st.sampled_from(FUZZ_WORDS),
    st.text(max_size=8),
)
fuzz_values = st.recursive(
    fuzz_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(fuzz_keys, children, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: object, path: tuple = ()) -> list[tuple]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _paths(item, (*path, i))
    return found


@st.composite
def mutated(draw: st.DrawFn, base: dict, most: int) -> object:
    """The base document with a few values replaced, keys removed or added."""
    doc: object = copy.deepcopy(base)
    for _ in range(draw(st.integers(0, most))):
        path = draw(st.sampled_from(_paths(doc)))
        value = draw(fuzz_values)
        if not path:
            doc = value
            continue
        parent = doc
        for step in path[:-1]:
            parent = parent[step]  # type: ignore[index]
        op = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if op == "replace":
            parent[path[-1]] = value  # type: ignore[index]
        elif op == "delete":
            del parent[path[-1]]  # type: ignore[union-attr]
        elif isinstance(parent, dict):
            parent[draw(fuzz_keys)] = value
        else:
            parent.append(value)  # type: ignore[union-attr]
    return doc


def _text(doc: object, how: str) -> bytes:
    text = yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)
    if how == "crlf-bom":
        return b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode()
    if how == "complex-key":
        text += "? [a, b]\n: c\n" if isinstance(doc, dict) else ""
    if how == "huge-number":
        text += f"n_repeat: {'9' * 5000}\n" if isinstance(doc, dict) else ""
    if how == "cut":
        text = text[: len(text) // 2]
    return text.encode()


fuzz_text = st.sampled_from(
    ["plain", "plain", "plain", "crlf-bom", "complex-key", "huge-number", "cut"]
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# A key YAML reads as a date, in a spec the schema matches against patterns:
# what once crashed `validate` inside jsonschema.
@example(
    recipe={**FUZZ_RECIPE, "spec": {**FUZZ_RECIPE["spec"], dt.date(2024, 1, 31): None}},
    recipe_text="plain",
    config=FUZZ_CONFIG,
    quarantine=None,
    v1=False,
)
# A number Python refuses to read: what once ended in a ValueError traceback.
@example(
    recipe=FUZZ_RECIPE, recipe_text="huge-number", config=FUZZ_CONFIG, quarantine=None, v1=False
)
@given(
    recipe=mutated(FUZZ_RECIPE, 3),
    recipe_text=fuzz_text,
    config=st.one_of(st.none(), mutated(FUZZ_CONFIG, 2)),
    quarantine=st.one_of(st.none(), mutated(FUZZ_QUARANTINE, 2)),
    v1=st.booleans(),
)
def test_bad_input_never_tracebacks(
    cli: Callable,
    tmp_path_factory: pytest.TempPathFactory,
    recipe: object,
    recipe_text: str,
    config: object,
    quarantine: object,
    v1: bool,
) -> None:
    """Random values in every position of a recipe, the project config and the
    quarantine file: each command ends with a documented exit code and says
    what is wrong; `list` never refuses a tree that `validate` passes."""
    root = tmp_path_factory.mktemp("fuzz")
    if v1 and isinstance(recipe, dict) and recipe.get("format_version") == 2:
        recipe["format_version"] = 1
    files = {"_build.yaml": _text(FUZZ_BUILD, "plain"), "a/x.yaml": _text(recipe, recipe_text)}
    if config is not None and not v1:
        files["matrixgen.yaml"] = _text(config, "plain")
    if quarantine is not None:
        files["quarantine.yaml"] = _text(quarantine, "plain")
    for rel, raw in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(raw)
    codes = {}
    for command in ("validate", "list", "stats", "pins", "graph"):
        run = cli(command, "--recipes", root)
        codes[command] = run.code
        assert run.code in (0, 1, 2, 3), (command, run)
        assert "Traceback" not in run.err, (command, run)
        if run.code:
            assert run.err.strip(), (command, run)
    assert codes["validate"] != 0 or codes["list"] == 0, codes
    assert codes["stats"] == codes["list"], codes  # both refuse what validate's checks refuse
    assert (codes["validate"] == 3) == (codes["list"] == 3), codes


# --- conventions: --version, shell completion, help that speaks the user's words


def test_version(cli) -> None:
    from importlib.metadata import version

    import matrixgen

    run = cli("--version")
    assert run.code == 0
    assert run.out == f"matrixgen {matrixgen.__version__}\n"
    assert matrixgen.__version__ == version("matrixgen-ci")  # one truth: pyproject reads it


def test_shell_completion(tmp_path: Path) -> None:
    # Without the switch, typer reads the shell from the parent processes and
    # ignores "bash": a run whose parent is no shell (a detached job, a runner
    # that spawns pytest directly) would fail here with "Shell  not supported".
    shown = run_module(
        "--show-completion", "bash", env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    )
    assert shown.returncode == 0, shown.stderr
    assert "_MATRIXGEN_COMPLETE=complete_bash" in shown.stdout
    env = {
        **os.environ,
        "_MATRIXGEN_COMPLETE": "complete_bash",
        "COMP_WORDS": "matrixgen validate --format ",
        "COMP_CWORD": "3",
    }
    done = subprocess.run(
        [sys.executable, "-m", "matrixgen"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["text", "json", "sarif"], done.stderr
    env["COMP_WORDS"], env["COMP_CWORD"] = "matrixgen quarantine l", "2"
    done = subprocess.run(
        [sys.executable, "-m", "matrixgen"], env=env, capture_output=True, text=True, timeout=60
    )
    assert sorted(done.stdout.split()) == ["lift", "list"]


def _help_sections(text: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = line[:-1]
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    return sections


def _options(lines: list[str]) -> list[tuple[str, str]]:
    """(flags and metavar, help) of each option in an Options: section."""
    found: list[list[str]] = []
    for line in lines:
        if line.startswith("  -"):
            flags, _, text = line.strip().partition("  ")
            found.append([flags, text.strip()])
        elif found and line.strip():
            found[-1][1] += " " + line.strip()
    return [(flags, text) for flags, text in found]


def _walk_help(cli, path: tuple[str, ...] = ()):
    run = cli(*path, "--help")
    assert run.code == 0, (path, run)
    sections = _help_sections(run.out)
    yield path, sections
    for line in sections.get("Commands", []):
        # A command's line starts two spaces in; its help's wrapped lines, deeper.
        name = line.split()[0] if line.startswith("  ") and line[2:3] != " " else ""
        if name:
            yield from _walk_help(cli, (*path, name))


def test_every_help_describes_every_option_in_plain_words(cli, monkeypatch) -> None:
    import re

    monkeypatch.setenv("COLUMNS", "200")
    seen = 0
    for path, sections in _walk_help(cli):
        for flags, text in _options(sections.get("Options", [])):
            seen += 1
            where = f"matrixgen {' '.join(path)} {flags}"
            assert text, f"{where}: no description"
            # An internal type name: <str>, <list[str]>, <int>, <path>...; a choice
            # list such as <table|json> is what the user may type.
            for metavar in re.findall(r"<([^>]*)>", flags):
                assert "|" in metavar, f"{where}: shows the type <{metavar}>"
            assert "list[" not in flags and "[str]" not in flags, where
    assert seen > 60  # every command was walked, sub-commands included


def _list_table_job_by_job(jobs: list, owners: list[str] | None = None) -> str:
    """What `list` prints, built row by row from each job's fields."""
    from matrixgen.views.table import table

    rows = [
        [
            j.model,
            j.test_case,
            j.tag or "",
            j.environment,
            j.platform,
            j.shown_scope or "",
            ",".join(j.cadence),
            str(j.n_repeat),
            str(j.time_limit),
        ]
        for j in jobs
    ]
    headers = ["model", "test_case", "tag", "environment", "platform", "scope", "cadence"]
    headers += ["n_repeat", "time_limit"]
    if any(j.quarantine for j in jobs):
        headers.append("quarantine")
        for row, j in zip(rows, jobs, strict=True):
            q = j.quarantine
            row.append(f"{q.action} {q.id} ({q.tracker})" if q else "")
    if owners is not None:
        headers.insert(0, "target")
        for row, name in zip(rows, owners, strict=True):
            row.insert(0, name)
    return table(rows, headers)


def test_list_table_is_each_jobs_fields(cli: Callable) -> None:
    """The shipped tree has declared scopes, quarantined jobs and untagged ones."""
    from matrixgen.model.jobs import Selector
    from matrixgen.pipeline import generate

    root = Path(__file__).resolve().parents[1] / "recipes"
    generation = generate(root)
    chosen = generation.selection(Selector())
    assert any(j.quarantine for j in chosen.with_quarantined)
    assert any(j.declared_scope for j in chosen.jobs)
    run = cli("list", "--recipes", str(root), "--with-quarantined")
    assert run.out == _list_table_job_by_job(list(chosen.with_quarantined))
    assert cli("list", "--recipes", str(root)).out == _list_table_job_by_job(list(chosen.jobs))
    targets = generation.targets()[:3]
    jobs = [j for t in targets for j in generation.selection(t).jobs]
    owners = [t.name for t in targets for _ in generation.selection(t).jobs]
    names = [arg for t in targets for arg in ("--target", t.name)]
    run = cli("list", "--recipes", str(root), *names)
    assert run.out == _list_table_job_by_job(jobs, owners)


# Commands that read no recipe tree, and why: each other one takes --recipes.
NO_TREE = {"results prune": "deletes old runs from the results store only"}


def _commands() -> list[tuple[str, object, object]]:
    """Every command of the CLI: (its name as typed, the click command, its group)."""
    import typer.main

    from matrixgen.cli.main import build_app

    found = []

    def walk(group: object, prefix: str) -> None:
        for name, command in group.commands.items():  # type: ignore[attr-defined]
            if command.hidden:  # an old spelling (tests/test_cli_registry.py)
                continue
            typed = f"{prefix}{name}"
            if getattr(command, "commands", None):
                walk(command, typed + " ")
            else:
                found.append((typed, command, group))

    walk(typer.main.get_command(build_app()), "")
    return found


def test_every_command_that_reads_the_tree_takes_recipes() -> None:
    commands = _commands()
    assert len(commands) > 20  # the walk reached the groups' commands too
    lacking = {
        name
        for name, command, _ in commands
        if "--recipes" not in {o for p in command.params for o in getattr(p, "opts", ())}
    }
    assert lacking == set(NO_TREE), lacking


def test_help_lists_every_command_in_full_and_usage_has_no_braces(cli: Callable) -> None:
    groups = {"": cli("--help").out}
    for name in ("quarantine", "results"):
        groups[name + " "] = cli(name, "--help").out
    for name, command, _ in _commands():
        prefix = name.rpartition(" ")[0] + " " if " " in name else ""
        # Compared without white space: help wraps lines (at hyphens too).
        listing = "".join(groups[prefix].split())
        # The first sentence of the command's help, as typed in its docstring.
        first = " ".join(command.help.split("\n\n")[0].split())  # type: ignore[attr-defined]
        first = first[: first.find(". ") + 1] if ". " in first else first
        assert "".join(f"{name.rpartition(' ')[2]} {first}".split()) in listing, (name, first)
        usage = cli(*name.split(), "--help").out.splitlines()[0]
        assert usage.startswith(f"Usage: matrixgen {name} [OPTIONS]"), usage
        assert "{" not in usage and "}" not in usage, usage
    assert cli("diff", "--help").out.startswith("Usage: matrixgen diff [OPTIONS] BASE [HEAD]\n")


@pytest.mark.parametrize(
    "command", [["quarantine", "list"], ["quarantine", "remove", "x"], ["quarantine", "migrate"]]
)
def test_a_quarantine_command_refuses_a_missing_recipe_directory(
    tmp_path: Path, cli: Callable, command: list[str]
) -> None:
    run = cli(*command, "--recipes", tmp_path / "nope")
    assert run.code == 2, run
    assert run.err == f"matrixgen: recipe directory not found: {tmp_path / 'nope'}\n"
