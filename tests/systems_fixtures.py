"""One home per CI system: the scan for system names and CI variables outside
`matrixgen/systems/`, and the toy third system added to a copy of the checkout.

Shared by tests/test_systems.py and bench/code_shape.py (which loads this file
without importing the package: the scan is plain `ast`).
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

# A system's name as a word of a value (`github`, `--github-output`,
# `gitlab-job-name`, `.gitlab-ci.yml`): lower case, the way code and files spell it.
NAME_WORD = re.compile(r"(?<![A-Za-z])(?:github|gitlab)(?![A-Za-z])")
# A system's name as the whole of a literal, in any spelling ("GitHub").
NAME_SPELLINGS = frozenset({"github", "gitlab", "GitHub", "GitLab", "GITHUB", "GITLAB"})
# A CI variable: the prefixes the CI systems name theirs with.
CI_VARIABLE = re.compile(r"(?<![A-Za-z0-9_])(?:GITHUB|GITLAB|CI|RUNNER)_[A-Z0-9_]*[A-Z0-9]")
# `System.GITHUB` and the like: a member named in code.
MEMBERS = frozenset({"GITHUB", "GITLAB"})
# A home's own modules, named from outside (`matrixgen.systems.github...`).
HOME_IMPORT = re.compile(r"matrixgen\.systems\.(?!ci$|home$)[a-z_]+")

# What may be spelled outside systems/ though it looks like a system's name or
# variable, each with why: taken out of a literal before it is scanned.
ALLOWED: tuple[tuple[str, str], ...] = (
    # The issue tracker lives on GitHub whichever CI runs: its host, its API and
    # the token and API root the tracker commands read are the tracker's, not a
    # CI system's (quarantine/tracker.py, quarantine/trackers.py).
    (r"(?:api\.|www\.)?github\.com", "the issue tracker's host"),
    (r"application/vnd\.github\+json", "the tracker API's media type"),
    (r"GITHUB_API_URL|GITHUB_TOKEN", "the tracker API's root and token"),
    # Scope names of Megatron-LM's recipes (legacy aliases of tiers): words of a
    # recipe tree, not the system.
    (r"mr-github(?:-slim)?", "a legacy scope name of the recipes"),
)
_ALLOWED = re.compile("|".join(f"(?:{pattern})" for pattern, _ in ALLOWED))


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes (prose for readers, never a value)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def literal_problem(text: str) -> str | None:
    """What a string literal names: a system or a CI variable, None for neither
    (its allowed words taken out first)."""
    rest = _ALLOWED.sub(" ", text)
    if rest.strip() in NAME_SPELLINGS or NAME_WORD.search(rest):
        return "a system's name"
    found = CI_VARIABLE.search(rest)
    if found:
        return f"the CI variable {found.group(0)}"
    return None


def system_names_in(source: str) -> list[tuple[int, str]]:
    """(line, what) of each system name or CI variable in a module's code: string
    literals (docstrings left out; f-strings part by part), `System.<MEMBER>`
    and imports of a home's modules."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            problem = literal_problem(node.value)
            if problem:
                found.append((node.lineno, f"{problem}: {node.value[:60]!r}"))
        elif isinstance(node, ast.Attribute) and node.attr in MEMBERS:
            found.append((node.lineno, f"a system's member: .{node.attr}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if HOME_IMPORT.match(alias.name):
                    found.append((node.lineno, f"a home's module: {alias.name}"))
        elif isinstance(node, ast.ImportFrom) and HOME_IMPORT.match(node.module or ""):
            found.append((node.lineno, f"a home's module: {node.module}"))
        elif isinstance(node, ast.ImportFrom) and node.module == "matrixgen.systems":
            homes = [a.name for a in node.names if a.name.islower() and a.name in _HOME_NAMES]
            found += [(node.lineno, f"a home's module: matrixgen.systems.{h}") for h in homes]
    return sorted(found)


_HOME_NAMES = frozenset({"github", "gitlab"})


def names_outside_systems(package: Path) -> list[str]:
    """`path:line: what` for every system name or CI variable in `package`
    outside its `systems/` (paths relative to the package's parent)."""
    out = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).as_posix()
        if rel.startswith(f"{package.name}/systems/"):
            continue
        out += [
            f"{rel}:{line}: {what}"
            for line, what in system_names_in(path.read_text(encoding="utf-8"))
        ]
    return out


# --------------------------------------------------------------------------- the toy system

# The toy system's package: its facts, settings Struct, emitter and command.
TOY_FILES: dict[str, str] = {
    "__init__.py": '''
        """Toy CI: a third system, to prove what adding one touches."""

        from __future__ import annotations

        from matrixgen.systems.home import Home

        HOME = Home(
            name="toy",
            label="Toy CI",
            package=__name__,
            events=("push",),
            job_variable="TOY_CI",
            tiers=r"T[0-9]",
            variables={"commit": "TOY_COMMIT"},
            example_scope="T0",
            parts=frozenset({"commands", "emitter", "settings"}),
        )
        ''',
    "settings.py": '''
        """Toy CI's settings."""

        from collections.abc import Mapping
        from typing import ClassVar

        from matrixgen.model.sections import SystemSettings


        class ToySettings(SystemSettings, frozen=True, kw_only=True):
            SYSTEM: ClassVar[str] = "toy"
            colour: str | None = None

            DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
                **SystemSettings.DESCRIPTIONS,
                "colour": "The colour of every job.",
            }


        SETTINGS = ToySettings
        ''',
    "emitter.py": '''
        """Toy CI's file: a JSON list of its jobs' names and colours."""

        from __future__ import annotations

        import json
        from typing import Any

        from matrixgen.emit.common import Waits, emitted_job, emitted_jobs
        from matrixgen.systems.toy.settings import ToySettings


        def _row(job, settings) -> dict[str, Any]:
            own = settings.target.settings
            colour = own.colour if isinstance(own, ToySettings) else None
            return {"name": job.name, "colour": colour or "grey"}


        class ToyEmitter:
            suffix = ".json"
            child_pipelines = False
            names_jobs = False

            def jobs(self, jobs, settings):
                return [emitted_job(j, _row, settings) for j in emitted_jobs(jobs)], []

            def file(self, emitted, settings):
                rows = [dict(e.content) for e in emitted]
                return json.dumps(rows) + "\\n", 1 if rows else 0

            def standalone(self, job, settings):
                return _row(job, settings)

            def launcher(self, job, settings):
                return None

            def job_names(self, jobs):
                return [j.name for j in jobs]

            def name_problems(self, jobs):
                return []

            def waits(self, settings):
                return Waits()

            def own_settings(self, settings, *, launcher):
                return None


        EMITTER = ToyEmitter()
        ''',
    "commands.py": '''
        """`matrixgen toy`: one target's toy file."""

        from __future__ import annotations

        import typer

        from matrixgen.cli.common import RecipesOption, TargetOption, load_valid
        from matrixgen.cli.emit import one_target
        from matrixgen.model.vocab import System
        from matrixgen.systems.toy import HOME


        def emit(target: TargetOption = None, recipes: RecipesOption = None) -> None:
            """Toy CI JSON of one target."""
            from matrixgen.emit.registry import emitter_for, resolve_settings

            generation = load_valid(recipes, emitting=True)
            chosen = one_target(generation, System(HOME.name), target)
            jobs = generation.jobs_for(chosen)
            settings = resolve_settings(chosen, generation.tree.config, jobs)
            emitter = emitter_for(chosen.system)
            emitted, _ = emitter.jobs(jobs, settings)
            typer.echo(emitter.file(emitted, settings)[0], nl=False)
        ''',
}
# The registry's line, the one edit of an existing file.
TOY_IMPORT = ("from matrixgen.systems import github, gitlab\n",
              "from matrixgen.systems import github, gitlab, toy\n")  # fmt: skip
TOY_LINE = ("    gitlab.HOME,\n", "    gitlab.HOME,\n    toy.HOME,\n")


def add_toy_system(checkout: Path) -> tuple[list[str], list[str]]:
    """Add the toy system to a copy of the checkout: its package and its line in
    the registry by hand, then the generated files written again (the schemas,
    the CLI reference). (the files edited by hand, the files written again),
    each relative to the checkout; the new package counts as one."""
    from tests.schema_fixtures import changed_files, write_again

    with changed_files(checkout) as changed:
        home = checkout / "matrixgen" / "systems" / "toy"
        home.mkdir()
        for name, text in TOY_FILES.items():
            (home / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        registry = checkout / "matrixgen" / "systems" / "__init__.py"
        text = registry.read_text(encoding="utf-8")
        for old, new in (TOY_IMPORT, TOY_LINE):
            assert old in text, f"the registry has no {old.strip()!r}"
            text = text.replace(old, new, 1)
        registry.write_text(text, encoding="utf-8")
        write_again(checkout, "matrixgen.documents", "matrixgen.cli.reference")
    package = "matrixgen/systems/toy/"
    by_hand = sorted(
        {package if c.startswith(package) else c for c in changed} - _GENERATED(changed)
    )
    return by_hand, sorted(_GENERATED(changed))


def _GENERATED(changed: list[str]) -> set[str]:
    """The files `python -m matrixgen.documents` and `matrixgen.cli.reference` write."""
    return {c for c in changed if c.startswith(("schema/", "docs/"))}


# Run in the copy: what the toy system reaches, each a bool.
TOY_CHECK = r"""
import json, subprocess, sys
from pathlib import Path

from matrixgen.documents.config_sections import SYSTEM_SETTINGS
from matrixgen.emit.registry import EMITTERS
from matrixgen.model.vocab import System

tree = Path(sys.argv[1])
toy = System("toy")
run = lambda *args: subprocess.run(
    [sys.executable, "-m", "matrixgen", *args], capture_output=True, text=True
)
helped = run("--help")
place = "scope=T0,platform=dgx_h100,environment=dev"
emitted = run("toy", "--recipes", str(tree), "--target", place)
rows = json.loads(emitted.stdout) if emitted.returncode == 0 else []
print(json.dumps({
    "vocabulary": toy in list(System) and toy.events == ("push",),
    "settings": SYSTEM_SETTINGS[toy].__name__ == "ToySettings",
    "emitter": type(EMITTERS[toy]).__name__ == "ToyEmitter",
    "command": helped.returncode == 0 and " toy " in helped.stdout,
    "emitted": bool(rows) and all(r["colour"] == "teal" for r in rows),
    "stderr": emitted.stderr[-400:],
}))
"""


def toy_tree(tree: Path) -> None:
    """A recipe tree whose config declares toy scope T0 and a toy setting, and
    one recipe with rows there."""
    tree.mkdir(parents=True)
    (tree / "matrixgen.yaml").write_text(
        textwrap.dedent(
            """
            format_version: 2
            project: toy
            vocabulary:
              platforms: [dgx_h100]
              environments: [dev]
              scopes:
                gitlab: [mr]
                toy: [T0]
            systems:
              toy: {colour: teal}
            """
        ).lstrip(),
        encoding="utf-8",
    )
    (tree / "gpt.yaml").write_text(
        textwrap.dedent(
            """
            type: basic
            format_version: 2
            spec:
              name: "{test_case}_{environment}_{platforms}"
              model: gpt
              build: toy-image
              platforms: dgx_h100
            products:
              - test_case: [tiny]
                products:
                  - {environment: [dev], scope: [T0, mr]}
              - test_case: [small]
                products:
                  - {environment: [dev], scope: [T0]}
            """
        ).lstrip(),
        encoding="utf-8",
    )
    (tree / "_build-toy.yaml").write_text(
        textwrap.dedent(
            """
            type: build
            format_version: 2
            spec:
              name: toy-image
              platforms: [linux/amd64]
              source: {image: registry.example.com/toy, dockerfile: Dockerfile}
            """
        ).lstrip(),
        encoding="utf-8",
    )


def toy_system_reaches(checkout: Path, tree: Path) -> dict[str, object]:
    """What the toy system reaches in the copy, with the package of `checkout`."""
    from tests.schema_fixtures import run_in_checkout

    toy_tree(tree)
    return run_in_checkout(checkout, TOY_CHECK, str(tree))
