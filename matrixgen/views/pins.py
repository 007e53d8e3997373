"""Value pins (`pins` in the project config, docs/generating.md): env and
argument values every job a pin's selector covers must carry. A job whose
recipe names its own `launcher` bypasses the shared one and the arguments it
passes, so an argument pin must be on that launcher command itself."""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from msgspec import Struct, field
from msgspec.structs import asdict

from matrixgen.documents.config import ProjectConfig
from matrixgen.documents.recipe import RecipeFile, rows
from matrixgen.model.errors import Finding, Location, Severity, did_you_mean, finding
from matrixgen.model.jobs import Job
from matrixgen.util.patterns import name_pattern, whole
from matrixgen.util.values import JsonLayout, json_value
from matrixgen.views.images import image_status

if TYPE_CHECKING:
    from matrixgen.engine.context import ValidationContext
    from matrixgen.engine.load import RecipeTree

SELECTOR_KEYS = ("models", "platforms", "environments")


class ValuePin(Struct, frozen=True, kw_only=True):
    """An env and/or argument pin and the jobs it claims to cover."""

    name: str
    env: tuple[tuple[str, str], ...] = ()
    args: tuple[str, ...] = ()
    models: frozenset[str] | None = None
    platforms: frozenset[str] | None = None
    environments: frozenset[str] | None = None
    exclude: Mapping[str, frozenset[str]] = field(default_factory=dict)  # by key, sorted
    reason: str = ""

    # Its JSON: env as a mapping, each set of names sorted.
    JSON: ClassVar[JsonLayout] = JsonLayout(as_mapping=frozenset({"env"}))

    def covers(self, job: Job) -> bool:
        for key, value in zip(
            SELECTOR_KEYS, (job.model, job.platform, job.environment), strict=True
        ):
            wanted = getattr(self, key)
            if wanted is not None and value not in wanted:
                return False
            if value in self.exclude.get(key, ()):
                return False
        globs = self.exclude.get("test_cases", ())
        return not any(fnmatch.fnmatchcase(job.test_case, g) for g in globs)


class PinProblem(Struct, frozen=True):
    """What one job lacks; `key` says which part of the recipe is at fault."""

    key: str  # "env", "args" or "launcher"
    message: str


def value_pins(config: ProjectConfig) -> list[ValuePin]:
    return [
        ValuePin(
            name=name,
            # As expansion stores env values: booleans as true/false, the rest as text.
            env=tuple(
                sorted(
                    (k, str(v).lower() if isinstance(v, bool) else str(v))
                    for k, v in (pin.env or {}).items()
                )
            ),
            args=pin.args or (),
            models=pin.models,
            platforms=pin.platforms,
            environments=pin.environments,
            exclude={
                key: value
                for key in sorted((*SELECTOR_KEYS, "test_cases"))
                if pin.exclude is not None and (value := getattr(pin.exclude, key)) is not None
            },
            reason=pin.reason or "",
        )
        for name, pin in sorted(config.doc.pins.items())
    ]


def custom_launcher(job: Job) -> str | None:
    launcher = job.spec.get("launcher")
    return launcher if isinstance(launcher, str) and launcher.strip() else None


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:  # unbalanced quotes: compare on plain words
        return command.split()


def _normalized(words: Sequence[str]) -> list[str]:
    """`--flag=value` as `--flag value`, so both spellings satisfy a pin."""
    out: list[str] = []
    for word in words:
        if word.startswith("--") and "=" in word:
            flag, _, value = word.partition("=")
            out += [flag, value]
        else:
            out.append(word)
    return out


def _args_problem(words: Sequence[str], wanted: Sequence[str], where: str) -> str | None:
    words = _normalized(words)
    wanted = _normalized(wanted)
    n = len(wanted)
    if any(words[i : i + n] == wanted for i in range(len(words) - n + 1)):
        return None
    flag = wanted[0]
    if flag.startswith("-") and flag in words:
        i = words.index(flag)
        actual = shlex.join(words[i : i + len(wanted)])
        return f"{where} has {actual}, want {shlex.join(wanted)}"
    return f"{where} {'lack' if where == 'args' else 'lacks'} {shlex.join(wanted)}"


def pin_problems(pin: ValuePin, job: Job) -> list[PinProblem]:
    """What a covered job lacks to satisfy a pin (empty: it carries it)."""
    problems: list[PinProblem] = []
    env = dict(job.env)
    launcher = custom_launcher(job)
    assigned = _assignments(launcher) if launcher else {}
    for key, want in pin.env:
        have = env.get(key)
        if have is None:
            problems.append(PinProblem("env", f"env {key} is not set, want {key}={want}"))
        elif have != want:
            problems.append(PinProblem("env", f"env {key}={have}, want {key}={want}"))
        if key in assigned and assigned[key] != want:
            problems.append(
                PinProblem(
                    "launcher",
                    f"the custom launcher sets {key}={assigned[key]}, want {key}={want}",
                )
            )
    if pin.args:
        # The custom launcher bypasses the shared one: it must carry the arguments.
        key, words, where = (
            ("launcher", _words(launcher), "the custom launcher (bypasses the shared one)")
            if launcher is not None
            else ("args", job.args, "args")
        )
        problem = _args_problem(words, pin.args, where)
        if problem:
            problems.append(PinProblem(key, problem))
    return problems


_ASSIGNMENT = name_pattern(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)


def _assignments(command: str) -> dict[str, str]:
    """NAME=value words of a command line (`env NAME=value cmd`, `NAME=value cmd`)."""
    matches = (whole(_ASSIGNMENT, word) for word in _words(command))
    return {m.group(1): m.group(2) for m in matches if m}


class PinCoverage(
    ValuePin,
    frozen=True,
    kw_only=True,
    rename={
        "covered": "covered_jobs",
        "failing": "failing_jobs",
        "custom_launchers": "custom_launcher_jobs",
    },
):
    """For `matrixgen pins`: a pin, how many jobs it covers and how many lack it."""

    covered: int
    failing: int
    custom_launchers: int


def coverage(config: ProjectConfig, jobs: Iterable[Job]) -> list[PinCoverage]:
    jobs = list(jobs)
    out = []
    for pin in value_pins(config):
        covered = [j for j in jobs if pin.covers(j)]
        out.append(
            PinCoverage(
                **asdict(pin),
                covered=len(covered),
                failing=sum(1 for j in covered if pin_problems(pin, j)),
                custom_launchers=sum(1 for j in covered if custom_launcher(j) is not None),
            )
        )
    return out


def check_value_pins(context: ValidationContext) -> Iterator[Finding]:
    """validate: every job a pin covers carries it; each problem once per recipe
    row, at the key that has to change."""
    tree = context.tree
    config = tree.config
    pins = value_pins(config)
    if not pins:
        return
    yield from _selector_findings(config, pins)
    locator = _RecipeLocator(tree)
    grouped: dict[tuple[Location, str, str], list[Job]] = {}
    for pin in pins:
        covered = 0
        for job in context.expansion.jobs:
            if not pin.covers(job):
                continue
            covered += 1
            for problem in pin_problems(pin, job):
                where = locator.locate(job, problem.key, pin)
                grouped.setdefault((where, pin.name, problem.message), []).append(job)
        if covered == 0:
            yield finding(
                config.locate(["pins", pin.name]),
                "pin-unused",
                f'pin "{pin.name}" covers no job: check its selector',
                Severity.WARNING,
            )
    for (where, name, message), jobs in sorted(grouped.items(), key=lambda kv: kv[0]):
        names = sorted({j.name for j in jobs})
        example = names[0] + (f" and {len(names) - 1} more" if len(names) > 1 else "")
        yield finding(
            where,
            "pin",
            f'pin "{name}": {message} ({len(names)} job(s): {example}); pinned in {config.path}',
        )


def _selector_findings(config: ProjectConfig, pins: Sequence[ValuePin]) -> Iterator[Finding]:
    """Selector values must be words of the vocabulary (a typo would cover nothing)."""
    vocab = config.vocabulary
    if vocab is None:
        return
    for pin in pins:
        for key in SELECTOR_KEYS:  # named as the vocabulary's fields
            allowed: frozenset[str] | None = getattr(vocab, key)
            if allowed is None:
                continue
            for where, values in (
                ([key], getattr(pin, key)),
                (["exclude", key], pin.exclude.get(key)),
            ):
                for value in sorted(values or ()):
                    if value not in allowed:
                        yield finding(
                            config.locate(["pins", pin.name, *where]),
                            "pin",
                            f'pin "{pin.name}": unknown {key[:-1]} "{value}"'
                            f"{did_you_mean(value, allowed)}",
                        )


class _RecipeLocator:
    """Where in a recipe a pin problem has to be fixed: the row when the row
    sets the key itself, else the spec's key (or the spec, when it has none)."""

    def __init__(self, tree: RecipeTree) -> None:
        self.files = {f.rel: f for f in tree.files}
        self.rows: dict[str, dict[Location, Mapping[str, Any]]] = {}

    def _row(self, recipe: RecipeFile, job: Job) -> Mapping[str, Any]:
        if recipe.rel not in self.rows:
            self.rows[recipe.rel] = {
                recipe.document.locate(list(where)): row for where, row in rows(recipe.data)
            }
        return self.rows[recipe.rel].get(job.source, {})

    def locate(self, job: Job, key: str, pin: ValuePin) -> Location:
        recipe = self.files.get(job.recipe)
        if recipe is None or key in self._row(recipe, job):
            return job.source
        spec = recipe.data.get("spec")
        if not isinstance(spec, Mapping):
            return job.source
        if key == "env" and isinstance(spec.get("env"), Mapping):
            for name, _ in pin.env:
                if name in spec["env"]:
                    return recipe.document.locate(["spec", "env", name])
            return recipe.document.locate(["spec", "env"])
        if key in spec:
            return recipe.document.locate(["spec", key])
        return recipe.document.locate(["spec"], key=True)


def pins_report(config: ProjectConfig, jobs: Iterable[Job]) -> dict[str, Any]:
    """Images side by side with their versions, then env/argument pins with coverage."""
    return {
        "version": config.doc.images.version,
        "images": json_value(image_status(config)),
        "pins": json_value(coverage(config, jobs)),
    }
