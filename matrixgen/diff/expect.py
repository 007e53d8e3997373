"""`matrixgen diff --expect RULE`: assertions about a selection diff, for CI gates.

The grammar is the command's help (docs/cli.md); what each check counts, test
cases in braces and cost units are docs/reviewing.md's. Counts are per target,
summed over every target the pattern matches (a job added to two targets counts
twice); `findings` counts over the whole tree, since findings belong to files.
Rules over golden-values files (the pattern `golden`) are diff.golden_rules',
with this module's operators, test-case braces and `require`. A malformed rule,
or a pattern part without globs that no target has, is a usage error (exit 2);
a rule that does not hold, or matches no target, fails with exit 6.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from fnmatch import fnmatchcase
from typing import Protocol

from msgspec import Struct

from matrixgen.diff.model import SelectionDiff, TargetDiff, target_order
from matrixgen.engine.targets import is_holding_pen
from matrixgen.model.errors import ExpectationError, UsageError, did_you_mean
from matrixgen.model.jobs import Job, Target
from matrixgen.model.vocab import resolve_scope
from matrixgen.systems import example_places, names
from matrixgen.util.patterns import name_pattern, whole
from matrixgen.views.cost import signed_hours

KINDS = {
    "+": "added",
    "-": "removed",
    "~": "changed",
    "q": "quarantine changes",
    "m": "jobs moved (in and out)",
    "=": "changes in total",
    "starts": "start running",
    "stops": "stop running",
}
RUNNING = ("starts", "stops")  # words, written with "=" for exactly
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
# How a check's comparison reads in a failure ("expected at most 2 ...").
OP_WORDS = {"": "exactly", "==": "exactly", "<=": "at most", ">=": "at least"}
OP_WORDS |= {"<": "less than", ">": "more than", "!=": "not"}
PATTERN_PARTS = ("system", "scope", "platform", "environment", "cadence")
_CHECK = re.compile(r"\s*([-+~qm=])(<=|>=|!=|==|<|>)?([0-9]+)\s*,?")
_COST = re.compile(
    r"\s*cost(<=|>=|!=|==|<|>)?([-+]?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+))([A-Za-z]*)\s*,?"
)
# The checks spelled as words, written with "=" for exactly.
_WORDED = re.compile(r"\s*(starts|stops|findings)(<=|>=|!=|==|<|>|=)?([0-9]+)\s*,?")
_CASES = name_pattern(r"(?P<pattern>[^{}]*)\{(?P<cases>[^{}]*)\}")
# `+=6`: one "=" where "==" (or none) is meant.
_SINGLE_EQUALS = re.compile(r"\s*([-+~qm])=(?!=)([0-9]+)")
_WORD = re.compile(r"\s*([A-Za-z][A-Za-z_-]*)")
_GLOB = re.compile(r"[*?\[]")
_FIRST, _LAST = example_places()[0], example_places()[-1]
_EXAMPLE = f"like {_FIRST}:+6, {_LAST.split('/')[0]}/*:=0, */nightly:-0 or {_LAST}:cost<=+2h"
_COST_FORM = "a signed amount of GPU-hours or GPU-minutes, like cost<=+2h, cost==+30m or cost<=0"


class Check(Struct, frozen=True):
    kind: str  # one of KINDS
    op: str  # one of OPS
    count: int

    def __str__(self) -> str:
        op = "=" if not self.op and self.kind in RUNNING else self.op
        return f"{self.kind}{op}{self.count}"

    def holds(self, value: int) -> bool:
        return OPS[self.op](value, self.count)

    def shown(self, value: float) -> str:
        if self.kind == FINDINGS:
            return f"{int(value)} new finding(s)"
        return f"{int(value)} {KINDS[self.kind]}"

    def describe(self) -> str:
        words = OP_WORDS | {"<": "fewer than"}
        what = "new finding(s)" if self.kind == FINDINGS else KINDS[self.kind]
        if self.kind in RUNNING:
            what = f"jobs that {what}"
        return f"{words[self.op]} {self.count} {what}"


class CostCheck(Struct, frozen=True):
    """A bound on the change in GPU-hours: `amount` in `unit` ("h", "m"; "" for
    a bare 0)."""

    op: str  # one of OPS
    amount: float
    unit: str = "h"
    kind: str = COST

    def __str__(self) -> str:
        return f"{COST}{self.op}{_amount_text(self.amount)}{self.unit}"

    def holds(self, value: float) -> bool:
        """Compared in the rule's unit, at a millionth of it."""
        factor = UNITS.get(self.unit, 1)
        return OPS[self.op](round(value * factor, 6), round(self.amount, 6))

    def describe(self) -> str:
        exactly = "a change of exactly"
        words = OP_WORDS | {"": exactly, "==": exactly, "!=": "a change other than"}
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
    cases: tuple[str, ...] = ()  # test case names or globs; (): every job counts

    def matches(self, target: Target) -> bool:
        if self.name is not None:
            return fnmatchcase(target.name, self.name)
        sel = target.selector
        # A holding pen (--holding-pen) belongs to no system: only `*` matches it there.
        system = "" if is_holding_pen(sel.scope) else target.system.value
        values = (system, *target_order(target)[1:5])
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
            f"expected {c.describe()}, got {c.shown(self.counts[c.kind])}{self._hint(c)}"
            for c in self.failed
        )
        return f"--expect {self.rule.text}: FAILED: {wrong} (over {len(self.targets)} target(s))"

    def _hint(self, check: Check | CostCheck) -> str:
        """For a failed + or - check, the jobs that start (stop) running when
        they differ: a lift adds no row, a skip removes none."""
        word = {"+": "starts", "-": "stops"}.get(check.kind)
        if word is None or self.counts[word] == self.counts[check.kind]:
            return ""
        why = "lifts" if word == "starts" else "skips"
        return (
            f" (but {int(self.counts[word])} {KINDS[word]}, {why} and habits included: "
            f"`{word}` counts those)"
        )


def parse_rule(text: str) -> Rule:
    """One rule; UsageError (exit 2) saying what is wrong when it is malformed."""
    pattern, sep, checks_text = text.rpartition(":")
    pattern = pattern.strip()
    if not sep or not pattern:
        raise UsageError(f'--expect "{text}": expected PATTERN:CHECKS, {_EXAMPLE}')
    pattern, cases = rule_cases(text, pattern)
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
        found = _WORDED.match(body, pos) or _CHECK.match(body, pos)
        if found is None:
            word = _WORD.match(body, pos)
            hint = did_you_mean(word.group(1), [COST, FINDINGS, *RUNNING]) if word else ""
            single = _SINGLE_EQUALS.match(body, pos)
            if single is not None:
                kind, count = single.groups()
                hint = f' (did you mean "{kind}{count}" or "{kind}=={count}"?)'
            raise UsageError(
                f'--expect "{text}": cannot read "{body[pos:].strip()}"{hint}: a check is '
                "one of + - ~ q m =, starts, stops or findings, an optional <= >= < > != "
                "==, and a count; or cost, "
                f"an optional operator and {_COST_FORM}; {_EXAMPLE}"
            )
        kind, op, count = found.groups()
        checks.append(Check(kind, "" if op in (None, "=") else op, int(count)))
        pos = found.end()
    kinds = [c.kind + c.op for c in checks]
    if len(set(kinds)) != len(kinds):
        raise UsageError(f'--expect "{text}": a check is given twice')
    whole = [str(c) for c in checks if cases and c.kind in (COST, FINDINGS)]
    if whole:
        raise UsageError(
            f'--expect "{text}": {whole[0]} counts whole targets and takes no test cases '
            "(give it in a rule of its own)"
        )
    if "/" not in pattern:
        return Rule(text=text, parts=(), name=pattern, checks=tuple(checks), cases=cases)
    parts = tuple(p.strip() for p in pattern.split("/"))
    if len(parts) > len(PATTERN_PARTS):
        raise UsageError(
            f'--expect "{text}": a pattern has at most {len(PATTERN_PARTS)} parts: '
            + "/".join(PATTERN_PARTS)
        )
    if any(not p for p in parts):
        raise UsageError(f'--expect "{text}": an empty part in the pattern (use * for any)')
    return Rule(text=text, parts=parts, name=None, checks=tuple(checks), cases=cases)


def rule_cases(text: str, pattern: str) -> tuple[str, tuple[str, ...]]:
    """The pattern without its `{CASES}`, and the test cases named there."""
    if "{" not in pattern and "}" not in pattern:
        return pattern, ()
    found = whole(_CASES, pattern)
    if found is None:
        raise UsageError(
            f'--expect "{text}": test cases go in one pair of braces at the end of the '
            f"pattern, like {_LAST}{{gpt3_a,moe_*}}:starts=2"
        )
    cases = tuple(c.strip() for c in found.group("cases").split(","))
    if not all(cases):
        raise UsageError(f'--expect "{text}": an empty test case in the braces')
    if len(set(cases)) != len(cases):
        raise UsageError(f'--expect "{text}": a test case is given twice in the braces')
    return found.group("pattern").strip(), cases


def _cost_check(text: str, body: str, pos: int) -> tuple[CostCheck, int] | None:
    """A cost check at `pos` and where it ends; None when none starts there;
    a UsageError for one that starts but is malformed."""
    if not body[pos:].lstrip().startswith(COST):
        return None
    match = _COST.match(body, pos)
    start = body[pos:].strip()
    if match is None:
        # `cost=+2h`: one "=" where "==" (exactly) is meant.
        single = re.match(r"cost=(?!=)([^,]*)", start)  # prefix: the hint reads its start
        hint = f' (did you mean "cost=={single.group(1)}"?)' if single else ""
        raise UsageError(
            f'--expect "{text}": cannot read "{start}"{hint}: a cost check is {_COST_FORM}'
        )
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


def check_rules(rules: Sequence[Rule], diff: SelectionDiff) -> None:
    """A UsageError (exit 2) for a rule that names a system, scope, platform,
    environment or cadence (without globs) that no target of the diff has; a
    scope is looked for among the scopes of the system(s) the rule names."""
    places = [target_order(t.target)[:5] for t in diff.targets]
    values = [{p[i] for p in places if p[i]} for i in range(len(PATTERN_PARTS))]
    values[0] |= set(names())
    for rule in rules:
        for i, pattern in enumerate(rule.parts):
            known, what, tiers = values[i], PATTERN_PARTS[i], set()
            if i == 1:  # a scope matches by its name or its tier
                known = {p[1] for p in places if p[1] and fnmatchcase(p[0], rule.parts[0])}
                what, tiers = f"{rule.parts[0]} scope", {resolve_scope(k) for k in known}
            if _GLOB.search(pattern) or pattern in known or resolve_scope(pattern) in tiers:
                continue
            shown = ", ".join(sorted(known)) or "none"
            raise UsageError(
                f'--expect "{rule.text}": unknown {what} "{pattern}"'
                f"{did_you_mean(pattern, known)}; the targets of this diff have: {shown}"
            )
        check_cases(rule.text, rule.cases, diff.test_cases)


def check_cases(text: str, cases: Sequence[str], known: Sequence[str]) -> None:
    """A test case of a rule (as given: `text`) that no job of either side has
    (a glob that matches none) is a usage error: the rule would count nothing,
    and hold or fail for the wrong reason. Not checked when the diff does not
    know them."""
    if not known:
        return
    for case in cases:
        if case in known or (_GLOB.search(case) and any(fnmatchcase(k, case) for k in known)):
            continue
        what = "matches no test case" if _GLOB.search(case) else "is no test case"
        raise UsageError(
            f'--expect "{text}": "{case}" {what} of either side{did_you_mean(case, known)}'
        )


def evaluate(rules: Sequence[Rule], diff: SelectionDiff) -> list[Outcome]:
    """Each rule's counts over the targets it matches (callers run `check_rules` first)."""
    outcomes = []
    for rule in rules:
        matched = [t for t in diff.targets if rule.matches(t.target)]
        wanted = case_matcher(rule.cases, diff.test_cases) if rule.cases else None
        counts: dict[str, float] = {**case_counts(matched, wanted)}
        counts[COST] = sum(t.gpu_hours_delta for t in matched) + 0.0
        counts[FINDINGS] = len(diff.findings_added)
        failed = tuple(c for c in rule.checks if not c.holds(counts[c.kind]))
        names = tuple(t.target.name for t in matched)
        outcomes.append(Outcome(rule=rule, counts=counts, failed=failed, targets=names))
    return outcomes


def case_matcher(cases: Sequence[str], known: Iterable[str]) -> Callable[[str], bool]:
    """Whether a test case is one of `cases`: a name matches itself only, even
    when it looks like a glob (Megatron-LM's unit-test buckets are named
    `tests/unit_tests/models/**/*.py`); another glob matches by fnmatch."""
    names = set(known)
    exact = {c for c in cases if c in names or not _GLOB.search(c)}
    globs = [c for c in cases if c not in exact]
    return lambda test_case: test_case in exact or any(fnmatchcase(test_case, g) for g in globs)


def case_counts(
    targets: Sequence[TargetDiff], wanted: Callable[[str], bool] | None
) -> dict[str, int]:
    """The jobs of each KIND, and those that start and stop running, summed
    over the targets (a job added to two targets counts twice, as the table
    shows it in both rows), of the test cases `wanted` accepts (None: every
    job; `=` then also counts a changed target definition, which is no test
    case's)."""
    total = dict.fromkeys(("+", "-", "~", "q", "m", "=", *RUNNING), 0)
    for t in targets:
        starts, stops = t.running_changes()
        jobs: dict[str, Iterable[Job]] = {
            "+": t.added,
            "-": t.removed,
            "~": (c.head for c in t.changed),
            "q": (q.job for q in t.quarantine),
            "m": (m.job for m in (*t.moved_out, *t.moved_in)),
            "starts": starts,
            "stops": stops,
        }
        for kind, group in jobs.items():
            n = sum(1 for job in group if wanted is None or wanted(job.test_case))
            total[kind] += n
            if kind not in RUNNING:
                total["="] += n
        if wanted is None and t.settings:
            total["="] += 1
    return total


class Verdict(Protocol):
    """What `require` reads of an outcome (this module's, or a golden rule's):
    whether it holds, and `str()` to say so."""

    @property
    def ok(self) -> bool: ...


def require(outcomes: Sequence[Verdict], diff: SelectionDiff) -> None:
    """Raise ExpectationError (exit 6) listing every rule that does not hold."""
    bad = [o for o in outcomes if not o.ok]
    if not bad:
        return
    lines = []
    targets = [t.target for t in diff.targets]
    places = sorted({f"{t.system.value}/{t.selector.scope or '*'}" for t in targets})
    unmatched = [o for o in bad if isinstance(o, Outcome) and not o.targets]
    for o in bad:
        line = str(o)
        if isinstance(o, Outcome) and not o.targets and o.rule.name is None:
            line += did_you_mean("/".join(o.rule.parts[:2]), places)
        lines.append(line)
    if unmatched:
        lines.append(f"system/scope of the targets of this diff: {', '.join(places) or 'none'}")
    raise ExpectationError(f"{len(bad)} of {len(outcomes)} expectation(s) failed:", details=lines)
