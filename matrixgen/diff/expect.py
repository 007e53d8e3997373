"""`matrixgen diff --expect RULE`: assertions about a selection diff, for CI gates.

Grammar (one rule per --expect; every rule must hold):

    RULE     = PATTERN ":" CHECK { [","] CHECK }
    PATTERN  = SYSTEM "/" SCOPE [ "/" PLATFORM [ "/" ENVIRONMENT [ "/" CADENCE ] ] ]
             | TARGET-NAME
    CHECK    = KIND [ OP ] COUNT
             | "findings" [ OP | "=" ] COUNT
             | "cost" [ OP ] AMOUNT
    KIND     = "+"  jobs added
             | "-"  jobs removed
             | "~"  jobs changed
             | "q"  quarantine changes (quarantined, lifted, action changed, entry
                    changed, arrives quarantined, leaves quarantined, and the
                    habits: parked in a habit scope, commented out, lifted)
             | "m"  jobs moved to or from another target (a renamed scope,
                    platform or environment)
             | "="  all of the above, plus each matched target whose own definition changed
    OP       = "<=" | ">=" | "<" | ">" | "!=" | "=="  (none: exactly)
    COUNT    = a whole number
    AMOUNT   = [ "+" | "-" ] NUMBER UNIT | "0"
               NUMBER a decimal number (2, 1.5, .25); UNIT "h" GPU-hours or
               "m" GPU-minutes: the change in the GPU-hours of one run of the
               matched targets (head minus base, `stats --cost`'s upper bound,
               unweighted)

`findings` counts what `matrixgen validate` reports (errors and warnings) at
HEAD and not at BASE, over the whole tree (findings belong to files, not to
targets: the pattern only has to match a target): `*:findings=0` fails a pull
request that adds one.

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
    gitlab/mr:cost<=+2h   one run of the GitLab mr targets costs at most 2 GPU-hours more
    */nightly:cost<=0     nightly costs no more than before
    github/*:cost>=-30m   GitHub saves at most 30 GPU-minutes per run

A cost is compared in the rule's unit at a millionth of it, so `cost<=+7m`
holds for a change of exactly 7 GPU-minutes.

A malformed rule (a cost without its unit, an unknown check) is a usage error
(exit 2), and so is a pattern part (system,
scope, platform, environment, cadence) without globs that no target of the diff
has (with "did you mean"); a rule that does not hold, or whose pattern matches
no target, fails the command with exit 6.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from fnmatch import fnmatchcase

from msgspec import Struct

from matrixgen.diff.model import SelectionDiff, target_counts, target_order
from matrixgen.engine.errors import ExpectationError, UsageError, did_you_mean
from matrixgen.engine.model import Target
from matrixgen.engine.targets import is_holding_pen
from matrixgen.engine.vocab import resolve_scope
from matrixgen.views.cost import signed_hours

KINDS = {
    "+": "added",
    "-": "removed",
    "~": "changed",
    "q": "quarantine changes",
    "m": "jobs moved (in and out)",
    "=": "changes in total",
}
COST = "cost"
FINDINGS = "findings"  # findings (errors and warnings) the branch adds, tree-wide
UNITS = {"h": 1, "m": 60}  # per GPU-hour
OPS: dict[str, Callable[[float, float], bool]] = {
    "": operator.eq,
    "==": operator.eq,
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
    "!=": operator.ne,
}
PATTERN_PARTS = ("system", "scope", "platform", "environment", "cadence")
_CHECK = re.compile(r"\s*([-+~qm=])(<=|>=|!=|==|<|>)?([0-9]+)\s*,?")
_COST = re.compile(
    r"\s*cost(<=|>=|!=|==|<|>)?([-+]?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+))([A-Za-z]*)\s*,?"
)
_FINDINGS = re.compile(r"\s*findings(<=|>=|!=|==|<|>|=)?([0-9]+)\s*,?")
_WORD = re.compile(r"\s*([A-Za-z][A-Za-z_-]*)")
_GLOB = re.compile(r"[*?\[]")
_EXAMPLE = "like github/L1:+6, gitlab/*:=0, */nightly:-0 or gitlab/mr:cost<=+2h"
_COST_FORM = "a signed amount of GPU-hours or GPU-minutes, like cost<=+2h, cost<=+30m or cost<=0"


class Check(Struct, frozen=True):
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
        what = "new finding(s)" if self.kind == FINDINGS else KINDS[self.kind]
        return f"{words[self.op]} {self.count} {what}"

    def shown(self, value: float) -> str:
        if self.kind == FINDINGS:
            return f"{int(value)} new finding(s)"
        return f"{int(value)} {KINDS[self.kind]}"


class CostCheck(Struct, frozen=True):
    """A bound on the change in GPU-hours: `amount` in `unit` ("h", "m"; "" for
    a bare 0)."""

    op: str  # one of OPS
    amount: float
    unit: str = "h"
    kind: str = COST

    @property
    def hours(self) -> float:
        return self.amount / UNITS.get(self.unit, 1)

    def __str__(self) -> str:
        return f"{COST}{self.op}{_amount_text(self.amount)}{self.unit}"

    def holds(self, value: float) -> bool:
        """Compared in the rule's unit, at a millionth of it."""
        factor = UNITS.get(self.unit, 1)
        return OPS[self.op](round(value * factor, 6), round(self.amount, 6))

    def describe(self) -> str:
        words = {"": "a change of exactly", "==": "a change of exactly", "<=": "at most"}
        words |= {">=": "at least", "<": "less than", ">": "more than", "!=": "a change other than"}
        unit = {"h": " GPU-h", "m": " GPU-min"}.get(self.unit, " GPU-h")
        return f"{words[self.op]} {_amount_text(self.amount) or '0'}{unit} per run"

    def shown(self, value: float) -> str:
        return f"{signed_hours(value)} GPU-h per run"


def _amount_text(amount: float) -> str:
    """+2, -0.5, 0: what parses back to the same amount."""
    if amount == 0:
        return "0"
    digits = (
        str(int(abs(amount)))
        if abs(amount).is_integer()
        else format(Decimal(repr(abs(amount))), "f")
    )
    return ("+" if amount > 0 else "-") + digits


class Rule(Struct, frozen=True):
    text: str  # as given
    parts: tuple[str, ...]  # system, scope, ... (glob patterns); empty when by name
    name: str | None  # a target name glob, for patterns without "/"
    checks: tuple[Check | CostCheck, ...]

    def matches(self, target: Target) -> bool:
        if self.name is not None:
            return fnmatchcase(target.name, self.name)
        sel = target.selector
        # A holding pen (--holding-pen) belongs to no system: only `*` matches it there.
        system = "" if is_holding_pen(sel.scope) else target.system.value
        values = (system, *_values(target)[1:])
        # A scope matches by its name or by its tier.
        return all(
            fnmatchcase(value, pattern)
            or (i == 1 and fnmatchcase(resolve_scope(value), resolve_scope(pattern)))
            for i, (value, pattern) in enumerate(zip(values, self.parts, strict=False))
        )


class Outcome(Struct, frozen=True):
    rule: Rule
    counts: dict[str, float]  # per check kind; "cost": GPU-hours per run, head minus base
    failed: tuple[Check | CostCheck, ...]
    targets: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return bool(self.targets) and not self.failed

    def __str__(self) -> str:
        if not self.targets:
            return f"--expect {self.rule.text}: matches no target"
        shown = ", ".join(f"{c}: {c.shown(self.counts[c.kind])}" for c in self.rule.checks)
        if not self.failed:
            return f"--expect {self.rule.text}: holds ({shown})"
        wrong = "; ".join(
            f"expected {c.describe()}, got {c.shown(self.counts[c.kind])}" for c in self.failed
        )
        return f"--expect {self.rule.text}: FAILED: {wrong} (over {len(self.targets)} target(s))"


def parse_rule(text: str) -> Rule:
    """One rule; UsageError (exit 2) saying what is wrong when it is malformed."""
    pattern, sep, checks_text = text.rpartition(":")
    pattern = pattern.strip()
    if not sep or not pattern:
        raise UsageError(f'--expect "{text}": expected PATTERN:CHECKS, {_EXAMPLE}')
    checks: list[Check | CostCheck] = []
    pos = 0
    body = checks_text.rstrip()
    if not body.strip():
        raise UsageError(f'--expect "{text}": no check after ":", {_EXAMPLE}')
    while pos < len(body):
        cost = _cost_check(text, body, pos)
        if cost is not None:
            checks.append(cost[0])
            pos = cost[1]
            continue
        found = _FINDINGS.match(body, pos)
        if found is not None:
            op = found.group(1) or ""
            checks.append(Check(FINDINGS, "" if op == "=" else op, int(found.group(2))))
            pos = found.end()
            continue
        match = _CHECK.match(body, pos)
        if match is None:
            word = _WORD.match(body, pos)
            hint = did_you_mean(word.group(1), [COST, FINDINGS]) if word else ""
            raise UsageError(
                f'--expect "{text}": cannot read "{body[pos:].strip()}"{hint}: a check is '
                "one of + - ~ q m = findings, an optional <= >= < > != ==, and a count; "
                "or cost, "
                f"an optional operator and {_COST_FORM}; {_EXAMPLE}"
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


def _cost_check(text: str, body: str, pos: int) -> tuple[CostCheck, int] | None:
    """A cost check at `pos` and where it ends; None when none starts there;
    a UsageError for one that starts but is malformed."""
    if not body[pos:].lstrip().startswith(COST):
        return None
    match = _COST.match(body, pos)
    start = body[pos:].strip()
    if match is None:
        raise UsageError(f'--expect "{text}": cannot read "{start}": a cost check is {_COST_FORM}')
    op, number, unit = match.group(1) or "", match.group(2), match.group(3)
    if len(number) > 40:
        raise UsageError(f'--expect "{text}": the amount "{number}" has more than 40 characters')
    amount = float(number)
    if unit == "" and amount != 0:
        raise UsageError(
            f'--expect "{text}": the cost "{number}" needs a unit: "{number}h" (GPU-hours) '
            f'or "{number}m" (GPU-minutes); only 0 goes without'
        )
    if unit and unit not in UNITS:
        raise UsageError(
            f'--expect "{text}": unknown unit "{unit}" in "{start}"'
            f"{did_you_mean(unit.lower(), UNITS)}: h (GPU-hours) or m (GPU-minutes)"
        )
    return CostCheck(op, amount, unit), match.end()


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
    """System, scope, platform, environment and cadence: what a pattern's parts match."""
    return target_order(target)[:5]


def evaluate(rules: Sequence[Rule], diff: SelectionDiff) -> list[Outcome]:
    """Each rule's counts over the targets it matches (see `check_rules` for the
    usage errors, which callers check first)."""
    outcomes = []
    for rule in rules:
        matched = [t for t in diff.targets if rule.matches(t.target)]
        counts: dict[str, float] = {**target_counts(matched)}
        counts[COST] = sum(t.gpu_hours_delta for t in matched) + 0.0
        counts[FINDINGS] = len(diff.findings_added)
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
