"""`matrixgen diff --expect 'golden...'`: rules over the golden-values files a
branch adds, removes or changes (diff.golden_review), for CI gates; the
grammar is the command's help and docs/golden-values.md says each check, with
diff.expect's operators, test-case braces and `require` (exit 2 for a tree
without golden values, 6 for a rule that does not hold). `missing` counts
every step of a removed metric or file; a percentage is compared at a
billionth of a percent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from msgspec import Struct

from matrixgen.diff.expect import OP_WORDS, OPS, case_matcher, check_cases, rule_cases
from matrixgen.diff.goldens import GoldenFigures, pct
from matrixgen.diff.model import SelectionDiff
from matrixgen.model.errors import UsageError, did_you_mean

GOLDEN = "golden"
COUNTS = {
    "files": "golden-values file(s) changed",
    "others": "file(s) of other test cases",
    "orphans": "orphan file(s)",
    "missing": "missing step(s)",
    "nonfinite": "non-finite sample(s)",
    "problems": "file(s) with problems",
}
PERCENTS = {
    "max": "a gated metric's change at any step",
    "mean": "a gated metric's mean change",
}
_COUNT = re.compile(r"\s*(" + "|".join(COUNTS) + r")(<=|>=|!=|==|<|>|=)?([0-9]+)\s*,?")
_PERCENT = re.compile(r"\s*(max|mean)(<=|>=|!=|==|<|>|=)?([0-9]+(?:\.[0-9]+)?|\.[0-9]+)(%?)\s*,?")
_WORD = re.compile(r"\s*([A-Za-z][A-Za-z_-]*)")
_EXAMPLE = "like golden:files=0, golden{CASE,...}:others=0, golden:max<=2% or golden:missing=0"


class GoldenCheck(Struct, frozen=True):
    """A count (COUNTS) or a percentage (PERCENTS) over golden-values changes."""

    kind: str
    op: str  # one of diff.expect's OPS ("" exactly)
    amount: float

    def __str__(self) -> str:
        amount = f"{self.amount:g}%" if self.kind in PERCENTS else str(int(self.amount))
        return f"{self.kind}{self.op or '='}{amount}"

    def value(self, figures: GoldenFigures) -> float:
        return float(getattr(figures, self.kind))

    def holds(self, figures: GoldenFigures) -> bool:
        return OPS[self.op](round(self.value(figures), 9), round(self.amount, 9))

    def shown(self, figures: GoldenFigures) -> str:
        value = self.value(figures)
        where = figures.places.get(self.kind)
        if self.kind in COUNTS:
            return f"{int(value)} {COUNTS[self.kind]}" + (f" ({where})" if where else "")
        if not where:
            return "no gated metric measured"
        return f"{pct(value, signed=False)} ({where})"

    def describe(self) -> str:
        if self.kind in COUNTS:
            return f"{OP_WORDS[self.op]} {int(self.amount)} {COUNTS[self.kind]}"
        return f"{PERCENTS[self.kind]} {OP_WORDS[self.op]} {self.amount:g}%"


class GoldenRule(Struct, frozen=True):
    """A rule over the golden-values files a diff changes (`golden[{CASES}]:...`)."""

    text: str
    checks: tuple[GoldenCheck, ...]
    cases: tuple[str, ...] = ()


class GoldenOutcome(Struct, frozen=True):
    rule: GoldenRule
    figures: GoldenFigures
    failed: tuple[GoldenCheck, ...]

    @property
    def ok(self) -> bool:
        return not self.failed

    def __str__(self) -> str:
        if not self.failed:
            shown = ", ".join(f"{c}: {c.shown(self.figures)}" for c in self.rule.checks)
            return f"--expect {self.rule.text}: holds ({shown})"
        wrong = "; ".join(
            f"expected {c.describe()}, got {c.shown(self.figures)}" for c in self.failed
        )
        return f"--expect {self.rule.text}: FAILED: {wrong}"


def is_golden(text: str) -> bool:
    """Whether a rule's pattern is `golden` (with or without test cases)."""
    pattern = text.rpartition(":")[0].strip()
    return pattern == GOLDEN or pattern.startswith(GOLDEN + "{")


def parse_golden_rule(text: str) -> GoldenRule:
    """One golden rule; UsageError (exit 2) saying what is wrong."""
    pattern, _, body = text.rpartition(":")
    pattern, cases = rule_cases(text, pattern.strip())
    if pattern != GOLDEN:
        raise UsageError(f'--expect "{text}": a golden rule reads golden[{{CASES}}]:CHECKS')
    if not body.strip():
        raise UsageError(f'--expect "{text}": no check after ":", {_EXAMPLE}')
    checks: list[GoldenCheck] = []
    pos, body = 0, body.rstrip()
    while pos < len(body):
        found = _PERCENT.match(body, pos) or _COUNT.match(body, pos)
        if found is None:
            word = _WORD.match(body, pos)
            hint = did_you_mean(word.group(1), [*COUNTS, *PERCENTS]) if word else ""
            raise UsageError(
                f'--expect "{text}": cannot read "{body[pos:].strip()}"{hint}: a golden check is '
                f"one of {', '.join(COUNTS)} with an optional operator and a count, or "
                f"max or mean with an optional operator and a percentage; {_EXAMPLE}"
            )
        checks.append(_check(text, found))
        pos = found.end()
    kinds = [c.kind + c.op for c in checks]
    if len(set(kinds)) != len(kinds):
        raise UsageError(f'--expect "{text}": a check is given twice')
    if not cases and any(c.kind == "others" for c in checks):
        raise UsageError(
            f'--expect "{text}": "others" counts the files of test cases the braces do not '
            "name: give them, like golden{gpt3_a,moe_*}:others=0"
        )
    return GoldenRule(text=text, checks=tuple(checks), cases=cases)


def _check(text: str, found: re.Match[str]) -> GoldenCheck:
    kind, op = found.group(1), found.group(2)
    if found.re is _PERCENT:
        number, sign = found.group(3), found.group(4)
        if not sign:
            raise UsageError(
                f'--expect "{text}": {kind} is a percentage: write "{kind}{op or "<="}'
                f'{number}%" (the change at any step of a gated metric, in percent)'
            )
        if len(number) > 40:
            raise UsageError(f'--expect "{text}": the percentage "{number}" is too long')
    return GoldenCheck(kind, "" if op in (None, "=") else op, float(found.group(3)))


def check_golden_rules(rules: Sequence[GoldenRule], diff: SelectionDiff) -> None:
    """A golden rule needs golden values (UsageError otherwise); its test cases
    are checked against every job's and every changed file's."""
    for rule in rules:
        if diff.goldens is None:
            raise UsageError(
                f'--expect "{rule.text}": this tree declares no golden values (a project config '
                "names them as references.templates.golden)"
            )
        check_cases(rule.text, rule.cases, sorted({*diff.test_cases, *diff.goldens.test_cases}))


def evaluate_golden(rule: GoldenRule, diff: SelectionDiff) -> GoldenOutcome:
    """A golden rule's figures over the files of its test cases (all without)."""
    review = diff.goldens
    assert review is not None  # check_golden_rules refuses a rule without golden values
    known = {*diff.test_cases, *review.test_cases}
    wanted = case_matcher(rule.cases, known) if rule.cases else None
    figures = review.figures(wanted)
    failed = tuple(c for c in rule.checks if not c.holds(figures))
    return GoldenOutcome(rule=rule, figures=figures, failed=failed)
