"""The checks of the loaded tree itself: the JSON Schema, the declared
vocabularies of a format_version 2 tree (or, in a tree that declares none, values
that look like typos of values used elsewhere) and script placeholders.
`matrixgen.validate` runs them beside every other stage's checks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import compress, repeat
from operator import attrgetter, contains
from typing import Any

from msgspec import Struct

from matrixgen.documents.config_sections import Vocabulary
from matrixgen.documents.recipe import RecipeFile, rows
from matrixgen.documents.recipe_fields import RECIPE
from matrixgen.documents.schema import check_document
from matrixgen.engine.changes import recipe_lists
from matrixgen.engine.context import ValidationContext
from matrixgen.engine.expand import Expansion
from matrixgen.engine.load import RecipeTree
from matrixgen.model.errors import (
    SUGGEST_MAX_LENGTH,
    Finding,
    Findings,
    Location,
    Severity,
    did_you_mean,
    finding,
)
from matrixgen.model.templates import TemplateError, placeholders
from matrixgen.model.vocab import RUNTIME_PLACEHOLDERS, RecipeType, resolve_scope, scope_names

# Resolved job fields a launcher passes to the script even when no recipe sets them.
JOB_FIELDS = frozenset({"n_repeat", "time_limit", "name", "cadence"})

# Row keys whose values come from a vocabulary, and what the vocabulary calls them.
VOCABULARY_AXES = {
    "platforms": "platform",
    "environment": "environment",
    "scope": "scope",
    "tag": "tag",
}


def check_tree(context: ValidationContext, *, schema: bool = True) -> Iterator[Finding]:
    """Every finding of the loaded tree (the schema pass only when asked)."""
    tree, expansion = context.tree, context.expansion
    if schema:
        yield from _schema_findings(tree, expansion)
    if (vocab := tree.config.vocabulary) is not None:
        yield from _vocabulary_findings(tree, vocab)
    else:
        yield from _typo_findings(tree)
    yield from _script_findings(tree, expansion)
    yield from _unused_findings(tree)


# Spec keys of a format_version 2 test recipe that no emitter writes anywhere:
# the GitLab job runs the launcher with the job's fields, the GitHub row carries
# fields, neither a script nor per-recipe artifacts. (A format_version 1 tree
# keeps them: Megatron-LM's own launcher, the default, reads `script` and
# `script_setup` from the recipe file when the job runs.)
UNUSED_SPEC_KEYS_V2 = ("script_setup", "script", "artifacts")


def _unused_findings(tree: RecipeTree) -> Iterator[Finding]:
    """A recipe field that reaches no emitted job must not be there silently."""
    for recipe in tree.files:
        if recipe.format_version != 2 or recipe.kind is not RecipeType.BASIC:
            continue
        spec = recipe.data.get("spec")
        if not isinstance(spec, dict):
            continue
        for key in (k for k in UNUSED_SPEC_KEYS_V2 if k in spec):
            yield finding(
                recipe.document.locate(["spec", key], key=True),
                "unused-field",
                f'spec "{key}" reaches no emitted job: GitLab jobs run the launcher '
                f"(spec.launcher, else systems.{_launcher_system()}.launcher) with the job's "
                "fields, "
                f'and GitHub rows carry no {key}; remove it, or name it "x-{key}" '
                "if a tool of your own reads it",
                Severity.WARNING,
            )


def _launcher_system() -> str:
    """The system whose settings name a launcher (the one whose jobs run it)."""
    from matrixgen.documents.config_sections import SYSTEM_SETTINGS

    return next(
        s.value for s, cls in SYSTEM_SETTINGS.items() if "launcher" in cls.__struct_fields__
    )


def _schema_findings(tree: RecipeTree, expansion: Expansion) -> Iterator[Finding]:
    taken = {f.location for f in expansion.findings}
    for recipe in tree.files:
        lenient = Severity.ERROR if recipe.format_version == 2 else Severity.WARNING
        schema_findings = Findings()
        check_document(
            RECIPE, recipe.document, schema_findings, severity=lenient, leave_out=_unknown_key
        )
        # Expansion already said it (with a "did you mean" where it helps).
        yield from (f for f in schema_findings.items if f.location not in taken)


def _unknown_key(error: Any) -> bool:
    """A key no schema property names (`additionalProperties: false` where no
    `patternProperties` frees a pattern): expansion reports each unknown key itself,
    at the key, with a "did you mean"."""
    return (
        error.validator == "additionalProperties"
        and error.validator_value is False
        and "patternProperties" not in error.schema
    )


class _Place(Struct, frozen=True):
    """Where a value sits; resolved to line and column only when a finding needs it."""

    recipe: RecipeFile
    keys: tuple[str | int, ...]

    def locate(self) -> Location:
        return self.recipe.document.locate(list(self.keys))


def _recipe_axis_values(recipe: RecipeFile) -> Iterator[tuple[str, str, _Place]]:
    """(axis, value, place) for each vocabulary value one test recipe uses."""
    spec = recipe.data.get("spec")
    if isinstance(spec, dict):
        for key, what in VOCABULARY_AXES.items():
            value = spec.get(key)
            if isinstance(value, str):
                yield what, value, _Place(recipe, ("spec", key))
    for where, row in rows(recipe.data):
        for key, what in VOCABULARY_AXES.items():
            values = row.get(key)
            if isinstance(values, list):
                for i, value in enumerate(values):
                    if isinstance(value, str):
                        yield what, value, _Place(recipe, (*where, key, i))


class _AxisUsage:
    """How often each value is used per axis, and which recipes use it, without a
    place for each value: rows repeat a few lists thousands of times, so each
    distinct list is counted once per recipe, and only the recipes using a
    reported value are walked again (`occurrences`). A recipe an earlier usage
    counted (the very same parsed file, as across a diff) is not counted again."""

    def __init__(self, tests: Sequence[RecipeFile], known: Sequence[_AxisUsage] = ()) -> None:
        counts: dict[str, Counter[str]] = {what: Counter() for what in VOCABULARY_AXES.values()}
        # (axis, value) -> the indexes of the recipes that use it, ascending.
        users: dict[tuple[str, str], list[int]] = {}
        # recipe rel -> (recipe, its uses): a hit counts only for that very recipe.
        self._uses: dict[str, tuple[RecipeFile, dict[tuple[str, Any], int]]] = {}
        for index, recipe in enumerate(tests):
            single = next(
                (
                    hit[1]
                    for usage in known
                    if (hit := usage._uses.get(recipe.rel)) and hit[0] is recipe
                ),
                None,
            )
            if single is None:
                single = _recipe_uses(recipe)
            self._uses[recipe.rel] = (recipe, single)
            for (what, value), n in single.items():
                counts[what][value] += n
                users.setdefault((what, value), []).append(index)
        self.counts = {what: counter for what, counter in counts.items() if counter}
        self._tests = tests
        self._users = users

    def occurrences(self, wanted: Iterable[tuple[str, str]]) -> Iterator[tuple[str, str, _Place]]:
        """What `_recipe_axis_values` yields for the wanted (axis, value) pairs,
        in recipe order, walking only the recipes that use one."""
        wanted = set(wanted)
        for index in sorted({i for used in wanted for i in self._users.get(used, ())}):
            for what, value, place in _recipe_axis_values(self._tests[index]):
                if (what, value) in wanted:
                    yield what, value, place


def _recipe_uses(recipe: RecipeFile) -> dict[tuple[str, Any], int]:
    """(axis, value) -> uses in one test recipe: a spec's value, and the values
    of the row lists counted by the list (a list holding something unhashable is
    counted value by value)."""
    axes = tuple(VOCABULARY_AXES.items())
    single: dict[tuple[str, Any], int] = {}
    lists: dict[tuple[str, tuple], int] = {}
    spec = recipe.data.get("spec")
    if isinstance(spec, dict):
        for key, what in axes:
            value = spec.get(key)
            if isinstance(value, str):
                single[(what, value)] = single.get((what, value), 0) + 1
    for _, row in rows(recipe.data):
        for key, what in axes:
            values = row.get(key)
            if not isinstance(values, list):
                continue
            listed = (what, tuple(values))
            try:
                lists[listed] = lists.get(listed, 0) + 1
            except TypeError:
                for value in values:
                    if isinstance(value, str):
                        single[(what, value)] = single.get((what, value), 0) + 1
    for (what, values), n in lists.items():
        for value in values:
            if isinstance(value, str):
                single[(what, value)] = single.get((what, value), 0) + n
    return single


def _vocabulary_findings(tree: RecipeTree, vocab: Vocabulary) -> Iterator[Finding]:
    # Each distinct value checked once; only the unknown ones are looked for.
    usage = _usage(tree)
    unknown: dict[tuple[str, str], frozenset[str]] = {}
    for what, counter in usage.counts.items():
        allowed = vocab.declared(what)
        if allowed is None:
            continue
        for value in counter:
            if (resolve_scope(value) if what == "scope" else value) not in allowed:
                unknown[(what, value)] = allowed
    for what, value, place in usage.occurrences(unknown):
        allowed = unknown[(what, value)]
        yield finding(
            place.locate(),
            "vocabulary",
            f'unknown {what} "{value}"{did_you_mean(value, allowed)}; '
            f"declared in {tree.config.path}: "
            f"{', '.join(scope_names(allowed) if what == 'scope' else sorted(allowed))}",
        )
    yield from _cadence_findings(tree, vocab.cadences)
    if vocab.models is not None:
        for recipe in tree.tests:
            spec = recipe.data.get("spec")
            model = spec.get("model") if isinstance(spec, dict) else None
            if isinstance(model, str) and model not in vocab.models:
                yield finding(
                    recipe.document.locate(["spec", "model"]),
                    "vocabulary",
                    f'unknown model "{model}"{did_you_mean(model, vocab.models)}',
                )


def _cadence_findings(tree: RecipeTree, declared: frozenset[str]) -> Iterator[Finding]:
    """Cadences of blocks and rows must be among those the config declares."""
    for recipe in tree.tests:
        for where, cadence in recipe_lists(recipe.data, "cadence", spec=False):
            for i, value in enumerate(cadence):
                if isinstance(value, str) and value not in declared:
                    yield finding(
                        recipe.document.locate([*where, i]),
                        "vocabulary",
                        f'cadence "{value}" is not declared in {tree.config.path} '
                        f"(vocabulary.cadences: {', '.join(sorted(declared))})",
                    )


def _typo_findings(tree: RecipeTree) -> Iterator[Finding]:
    """In a tree without a vocabulary: rare values that look like a common one mistyped."""
    usage = _usage(tree)
    counts = usage.counts
    found = {what: typos(counter) for what, counter in counts.items()}
    if not any(found.values()):
        return
    # Rare: only now look for where each suspect value is used.
    places: dict[tuple[str, str], list[_Place]] = {}
    suspects = [(what, value) for what, typo in found.items() for value in typo]
    for what, value, place in usage.occurrences(suspects):
        places.setdefault((what, value), []).append(place)
    for what, counter in sorted(counts.items()):
        for value, other in sorted(found[what].items()):
            n, m = counter[value], counter[other]
            for place in places[(what, value)]:
                yield finding(
                    place.locate(),
                    "vocabulary-typo",
                    f'{what} "{value}" is used {n} time(s) and looks like a typo '
                    f'of "{other}" (used {m} times) (did you mean "{other}"?)',
                    Severity.WARNING,
                )


# The usage of the last trees asked about, by identity (the tree is held, so
# its id cannot be reused while listed): validate's checks, target discovery
# and both sides of a diff ask about the same trees again.
_USAGES: list[tuple[RecipeTree, _AxisUsage]] = []


def _usage(tree: RecipeTree) -> _AxisUsage:
    usage = next((u for known, u in _USAGES if known is tree), None)
    if usage is None:
        usage = _AxisUsage(tree.tests, known=[u for _, u in _USAGES])
        _USAGES.insert(0, (tree, usage))
        del _USAGES[4:]
    return usage


def typo_platforms(tree: RecipeTree) -> frozenset[str]:
    """The platforms `validate` reports as typos of another (a tree without a
    vocabulary; a declared vocabulary rejects unknown platforms instead)."""
    if tree.config.vocabulary is not None:
        return frozenset()
    return frozenset(typos(_usage(tree).counts.get("platform", Counter())))


def typos(counter: Mapping[str, int]) -> dict[str, str]:
    """value -> the value it looks like a typo of: the most used one (ties by
    name) that is at least three times as common and one typo away.

    Only values of at most SUGGEST_MAX_LENGTH characters are compared (a name
    mistyped is short; a long value is no name): with that, the cost is linear
    in the size of the values, whatever they hold."""
    near = _Neighbours(v for v in counter if len(v) <= SUGGEST_MAX_LENGTH)
    found: dict[str, str] = {}
    for value in near.values:
        n = counter[value]
        candidates = [
            (-counter[other], other)
            for other in near.of(value, counter)
            if other != value and counter[other] >= 3 * n and _looks_like_typo(value, other)
        ]
        if candidates:
            found[value] = min(candidates)[1]
    return found


class _Neighbours:
    """The values that may be one typo away from a value (_looks_like_typo
    decides), found through indexes rather than by comparing every pair: a tree
    with tens of thousands of distinct values must not take minutes. Values that
    squash alike (case, spaces, punctuation) all look like typos of each other:
    of those only the most used two are candidates, so that many such spellings
    of one name cost no more than one."""

    def __init__(self, values: Iterable[str]) -> None:
        self.values = set(values)
        self.squashed: dict[str, list[str]] = {}
        self.deleted: dict[str, list[str]] = {}
        for value in self.values:
            self.squashed.setdefault(_squash(value), []).append(value)
            for shorter in _deletions(value):
                self.deleted.setdefault(shorter, []).append(value)
        self.top: dict[str, list[str]] = {}

    def _most_used(self, squashed: str, counter: Mapping[str, int]) -> list[str]:
        top = self.top.get(squashed)
        if top is None:
            ranked = sorted(self.squashed.get(squashed, ()), key=lambda v: (-counter[v], v))
            top = self.top[squashed] = ranked[:2]
        return top

    def of(self, value: str, counter: Mapping[str, int]) -> set[str]:
        # The best of the alike-squashed values other than `value` is among the top two.
        found = set(self._most_used(_squash(value), counter))
        found.update(self.deleted.get(value, ()))  # one letter more
        found.update(v for v in _deletions(value) if v in self.values)  # one letter less
        found.update(v for v in _swaps(value) if v in self.values)
        return found


def _deletions(value: str) -> set[str]:
    return {value[:i] + value[i + 1 :] for i in range(len(value))}


def _swaps(value: str) -> set[str]:
    """The value with two neighbouring letters swapped, each way there is."""
    return {value[:i] + value[i + 1] + value[i] + value[i + 2 :] for i in range(len(value) - 1)}


def _squash(value: str) -> str:
    return "".join(ch for ch in value.lower() if ch.isalnum())


def _looks_like_typo(value: str, other: str) -> bool:
    """Equal but for case, spaces and punctuation; or one letter added, dropped or swapped."""
    if _squash(value) == _squash(other):
        return True
    if min(len(value), len(other)) < 4:
        return False
    if len(value) == len(other):
        return other in _swaps(value)
    short, long_ = sorted((value, other), key=len)
    return len(long_) - len(short) == 1 and short in _deletions(long_)


def _script_findings(tree: RecipeTree, expansion: Expansion) -> Iterator[Finding]:
    """Script placeholders must be job fields or ones the launcher fills in."""
    reported: set[tuple[Location, str]] = set()
    lenient = Severity.ERROR if tree.format_version == 2 else Severity.WARNING
    # Per distinct script (thousands of jobs share each): the placeholders that
    # must be fields of the job's spec, or what makes the script no template.
    needed: dict[str, frozenset[str] | str] = {}
    jobs = expansion.jobs
    specs = list(map(attrgetter("spec"), jobs))
    for key in ("script", "script_setup"):
        # The jobs whose spec has the key, found in C.
        having = map(contains, specs, repeat(key))
        for job, spec in compress(zip(jobs, specs, strict=True), having):
            script = spec[key]
            if not isinstance(script, str):
                continue
            names = needed.get(script)
            if names is None:
                names = needed[script] = _spec_placeholders(script)
            if isinstance(names, str):
                problem = names
            else:
                if not names or spec.keys() >= names:
                    continue
                missing = [n for n in placeholders(script) if n in names and n not in spec]
                names = ", ".join(f"{{{m}}}" for m in missing)
                problem = (
                    f"placeholder {names} does not resolve to a field of the job "
                    "(write {{ and }} for literal braces)"
                )
            if (job.source, key + problem) not in reported:
                reported.add((job.source, key + problem))
                yield finding(job.source, "template", f"spec {key}: {problem}", lenient)


def _spec_placeholders(script: str) -> frozenset[str] | str:
    """The placeholders of a script that only the job's spec can fill (neither
    the launcher nor a job field), or the reason it is no template."""
    try:
        names = placeholders(script)
    except TemplateError as exc:
        return str(exc)
    return frozenset(n for n in names if n not in RUNTIME_PLACEHOLDERS and n not in JOB_FIELDS)
