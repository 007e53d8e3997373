"""`matrixgen diff --expect RULE`: assertions about a selection diff, for CI gates.

Grammar (one rule per --expect; every rule must hold):

    RULE     = PATTERN ":" CHECK { [","] CHECK }
    PATTERN  = SYSTEM "/" SCOPE [ "/" PLATFORM [ "/" ENVIRONMENT [ "/" CADENCE ] ] ]
             | TARGET-NAME
    CHECK    = KIND [ OP ] COUNT
    KIND     = "+"  jobs added
             | "-"  jobs removed
             | "~"  jobs changed
             | "q"  quarantine changes (quarantined, lifted, action changed, entry
                    changed, arrives quarantined, leaves quarantined)
             | "="  all of the above, plus each matched target whose own definition changed
    OP       = "<=" | ">=" | "<" | ">" | "!=" | "=="  (none: exactly)
    COUNT    = a whole number

Each part of a PATTERN is a name or a glob (`*`, `?`, `[...]`); parts left out
match anything. A scope matches by its name or its tier, so `*/nightly` matches
L2 targets and `*/L2` matches targets configured as `nightly`. A PATTERN with
no `/` matches target names (`gitlab-mr-*`).

Counts are per target, as the table shows them, summed over every target the
pattern matches: a job added to the pr and the mergegroup targets of a tier
counts twice (`github/L1/*/*/pr:+6` asks about one cadence).

Examples:

    github/L1:+6          exactly six jobs added to GitHub L1 (all its platforms)
    gitlab/*:=0           no change at all on any GitLab target
    */nightly:-0          nothing removed from nightly, on either system
    github/L0/dgx_h100:+>=1,-0
                          at least one job added to L0 on H100, none removed
    gitlab-mr-*:~<=3      at most three changed jobs on targets named gitlab-mr-*

A malformed rule is a usage error (exit 2), and so is a pattern part (system,
scope, platform, environment, cadence) without globs that no target of the diff
has (with "did you mean"); a rule that does not hold, or whose pattern matches
no target, fails the command with exit 6.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from matrixgen.diff.compare import SelectionDiff, target_counts
from matrixgen.engine.errors import ExpectationError, UsageError, did_you_mean
from matrixgen.engine.model import Target
from matrixgen.engine.vocab import resolve_scope

KINDS = {
    "+": "added",
    "-": "removed",
    "~": "changed",
    "q": "quarantine changes",
    "=": "changes in total",
}
OPS: dict[str, Callable[[int, int], bool]] = {
    "": operator.eq,
    "==": operator.eq,
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
    "!=": operator.ne,
}
PATTERN_PARTS = ("system", "scope", "platform", "environment", "cadence")
_CHECK = re.compile(r"\s*([-+~q=])(<=|>=|!=|==|<|>)?([0-9]+)\s*,?")
_GLOB = re.compile(r"[*?\[]")
_EXAMPLE = "like github/L1:+6, gitlab/*:=0 or */nightly:-0"


@dataclass(frozen=True, slots=True)
class Check:
    kind: str  # one of KINDS
    op: str  # one of OPS
    count: int

    def __str__(self) -> str:
        return f"{self.kind}{self.op}{self.count}"

    def holds(self, value: int) -> bool:
        return OPS[self.op](value, self.count)

    def describe(self) -> str:
        words = {"": "exactly", "==": "exactly", "<=": "at most", ">=": "at least"}
        words |= {"<": "fewer than"}
        words |= {">": "more than", "!=": "not"}
        return f"{words[self.op]} {self.count} {KINDS[self.kind]}"


@dataclass(frozen=True, slots=True)
class Rule:
    text: str  # as given
    parts: tuple[str, ...]  # system, scope, ... (glob patterns); empty when by name
    name: str | None  # a target name glob, for patterns without "/"
    checks: tuple[Check, ...]

    def matches(self, target: Target) -> bool:
        if self.name is not None:
            return fnmatchcase(target.name, self.name)
        sel = target.selector
        values = (target.system.value, sel.scope or "", sel.platform or "", sel.environment or "")
        values += (sel.cadence or "",)
        for i, pattern in enumerate(self.parts):
            value = values[i]
            if i == 1:
                if not (
                    fnmatchcase(value, pattern)
                    or fnmatchcase(resolve_scope(value), resolve_scope(pattern))
                ):
                    return False
            elif not fnmatchcase(value, pattern):
                return False
        return True


@dataclass(frozen=True, slots=True)
class Outcome:
    rule: Rule
    counts: dict[str, int]
    failed: tuple[Check, ...]
    targets: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return bool(self.targets) and not self.failed

    def __str__(self) -> str:
        if not self.targets:
            return f"--expect {self.rule.text}: matches no target"
        shown = ", ".join(f"{c}: {self.counts[c.kind]} {KINDS[c.kind]}" for c in self.rule.checks)
        if not self.failed:
            return f"--expect {self.rule.text}: holds ({shown})"
        wrong = "; ".join(
            f"expected {c.describe()}, got {self.counts[c.kind]}" for c in self.failed
        )
        return f"--expect {self.rule.text}: FAILED: {wrong} (over {len(self.targets)} target(s))"


def parse_rule(text: str) -> Rule:
    """One rule; UsageError (exit 2) saying what is wrong when it is malformed."""
    pattern, sep, checks_text = text.rpartition(":")
    pattern = pattern.strip()
    if not sep or not pattern:
        raise UsageError(f'--expect "{text}": expected PATTERN:CHECKS, {_EXAMPLE}')
    checks: list[Check] = []
    pos = 0
    body = checks_text.rstrip()
    if not body.strip():
        raise UsageError(f'--expect "{text}": no check after ":", {_EXAMPLE}')
    while pos < len(body):
        match = _CHECK.match(body, pos)
        if match is None:
            raise UsageError(
                f'--expect "{text}": cannot read "{body[pos:].strip()}": a check is one of '
                "+ - ~ q = , an optional <= >= < > !=, and a count, "
                f"{_EXAMPLE}"
            )
        checks.append(Check(match.group(1), match.group(2) or "", int(match.group(3))))
        pos = match.end()
    kinds = [c.kind + c.op for c in checks]
    if len(set(kinds)) != len(kinds):
        raise UsageError(f'--expect "{text}": a check is given twice')
    if "/" not in pattern:
        return Rule(text=text, parts=(), name=pattern, checks=tuple(checks))
    parts = tuple(p.strip() for p in pattern.split("/"))
    if len(parts) > len(PATTERN_PARTS):
        raise UsageError(
            f'--expect "{text}": a pattern has at most {len(PATTERN_PARTS)} parts: '
            + "/".join(PATTERN_PARTS)
        )
    if any(not p for p in parts):
        raise UsageError(f'--expect "{text}": an empty part in the pattern (use * for any)')
    return Rule(text=text, parts=parts, name=None, checks=tuple(checks))


def parse_rules(texts: Iterable[str]) -> list[Rule]:
    return [parse_rule(t) for t in texts]


def check_rules(rules: Sequence[Rule], diff: SelectionDiff) -> None:
    """A UsageError (exit 2) for a rule that names a system, scope, platform,
    environment or cadence (without globs) that no target of the diff has; a
    scope is looked for among the scopes of the system(s) the rule names."""
    values: list[set[str]] = [set() for _ in PATTERN_PARTS]
    for t in diff.targets:
        for i, value in enumerate(_values(t.target)):
            if value:
                values[i].add(value)
    values[0] |= {"github", "gitlab"}
    for rule in rules:
        for i, pattern in enumerate(rule.parts):
            if _GLOB.search(pattern):
                continue
            known = values[i]
            if i == 1:
                known = {
                    _values(t.target)[1]
                    for t in diff.targets
                    if fnmatchcase(t.target.system.value, rule.parts[0])
                } - {""}
                found = pattern in known or resolve_scope(pattern) in {
                    resolve_scope(k) for k in known
                }
            else:
                found = pattern in known
            if not found:
                what = PATTERN_PARTS[i]
                if i == 1:
                    what = f"{rule.parts[0]} scope"
                shown = ", ".join(sorted(known)) or "none"
                raise UsageError(
                    f'--expect "{rule.text}": unknown {what} "{pattern}"'
                    f"{did_you_mean(pattern, known)}; the targets of this diff have: {shown}"
                )


def _values(target: Target) -> tuple[str, ...]:
    sel = target.selector
    return (
        target.system.value,
        sel.scope or "",
        sel.platform or "",
        sel.environment or "",
        sel.cadence or "",
    )


def evaluate(rules: Sequence[Rule], diff: SelectionDiff) -> list[Outcome]:
    """Each rule's counts over the targets it matches (see `check_rules` for the
    usage errors, which callers check first)."""
    outcomes = []
    for rule in rules:
        matched = [t for t in diff.targets if rule.matches(t.target)]
        counts = target_counts(matched)
        failed = tuple(c for c in rule.checks if not c.holds(counts[c.kind]))
        names = tuple(t.target.name for t in matched)
        outcomes.append(Outcome(rule=rule, counts=counts, failed=failed, targets=names))
    return outcomes


def require(outcomes: Sequence[Outcome], diff: SelectionDiff) -> None:
    """Raise ExpectationError (exit 6) listing every rule that does not hold."""
    bad = [o for o in outcomes if not o.ok]
    if not bad:
        return
    lines = []
    places = sorted({_place(t.target) for t in diff.targets})
    for o in bad:
        line = str(o)
        if not o.targets and o.rule.name is None:
            line += did_you_mean("/".join(o.rule.parts[:2]), places)
        lines.append(line)
    if any(not o.targets for o in bad):
        lines.append(f"system/scope of the targets of this diff: {', '.join(places) or 'none'}")
    raise ExpectationError(f"{len(bad)} of {len(outcomes)} expectation(s) failed:", details=lines)


def _place(target: Target) -> str:
    return f"{target.system.value}/{target.selector.scope or '*'}"
