"""Golden values compared: what a change to a golden-values file does to each
of its metrics, and the values a review of such changes is made of.

Pure: bytes in, values out (no git, no jobs, no command line);
`diff.golden_review` finds the files a diff changes, reads them and names the
jobs that read them.

A golden-values file is Megatron-LM's training layout, `{METRIC: {"start_step",
"end_step", "step_interval", "values": {STEP: VALUE}}}`. Per metric of either
side (the definitions of Megatron-LM's `compare_golden_values_kl.py`, extended):

- `steps_compared`: steps with a finite number on both sides; `steps_added` and
  `steps_removed`: steps on one side only; `non_finite_new`: samples of the new
  side that are no finite number (NaN, infinities, strings such as "nan", null);
- `mean_rel_change_pct`: 100 x mean((old - new) / old) over the compared steps,
  skipping steps where |old| < 1e-12 (positive: the new value is lower);
  `max_abs_rel_change_pct` and `max_step`: the largest 100 x |old - new| / |old|
  and the first step (in step order) where it is reached, as the new file writes
  it; None where no step is measured. `steps_skipped`: compared steps that are
  not measured (|old| < 1e-12, or a change too large for a float);
- `status`: added, removed, changed (a sample or a step differs), unchanged;
- `gated`: the case's test checks it: listed in its model_config.yaml's
  `METRICS`, else "lm loss" or "num-zeros" (as Megatron-LM's regular-pipeline
  test reads it).

Bad input is a finding, never an exception, and what can be read is still
compared: a file that is not JSON, larger than GOLDEN_MAX_BYTES or nested
deeper than GOLDEN_MAX_DEPTH, not an object of metrics, a metric without a
`values` object, a step that is no whole number, a key given twice (the last one
is read, as Python's json does), a sample that is a list, object or boolean
(counted as non-finite). A metric one side cannot read is not compared. Each
kind of problem is listed at most PROBLEMS_PER_KIND times per file (then one
line counts the rest), each placed at its line and column when the file spells
its keys plainly.

Cost: linear in the files' size (one parse; steps sorted per metric).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from msgspec import Struct, field
from msgspec.structs import replace

from matrixgen.documents.yamlio import parse_yaml
from matrixgen.engine.errors import Finding, Findings, Location, Severity, finding
from matrixgen.util.jsontext import JSON_MAX_DEPTH, JsonInputError, load_bounded

try:
    import orjson
except ImportError:  # pragma: no cover - a dependency; the standard library still reads
    orjson = None  # type: ignore[assignment]

# Bounds on a golden-values file (docs/security.md, input sizes): checked
# before it is read.
GOLDEN_MAX_BYTES = 16 * 1024 * 1024
GOLDEN_MAX_DEPTH = JSON_MAX_DEPTH
# What the test checks when model_config.yaml names no METRICS.
DEFAULT_GATED = ("lm loss", "num-zeros")
CONFIG_NAME = "model_config.yaml"
# |old| below this is not divided by (Megatron-LM's script skips such steps).
ZERO = 1e-12
PROBLEMS_PER_KIND = 10
# A step is a whole number as the file writes it (ASCII digits, at most 18 of them).
_STEP = re.compile(r"-?[0-9]{1,18}")
_STEP_DIGITS = 18  # as _STEP reads them
_LEADING_ZERO = re.compile(r"(?:^|\n)0[0-9]")  # "01": a step written otherwise than as itself
# More digits than this read as a float (past 308 digits: infinite), never as
# an int no float holds (Python refuses int() past 4,300 digits).
_WHOLE_DIGITS = 300

# Metric statuses, file statuses.
ADDED = "added"
REMOVED = "removed"
CHANGED = "changed"
UNCHANGED = "unchanged"
LAYOUT = '{METRIC: {"start_step", "end_step", "step_interval", "values": {STEP: VALUE}}}'

Series = Mapping[int, Any]  # step -> its sample


# ---------------------------------------------------------------- reading


class GoldenValues(Struct, frozen=True, kw_only=True):
    """One side of a golden-values file, as far as it could be read."""

    metrics: Mapping[str, Series]  # in file order
    # metric -> step -> the step as the file writes it, where that is not the
    # step's own spelling ("01" for 1)
    spelled: Mapping[str, Mapping[int, str]] = field(default_factory=dict)
    problems: tuple[Finding, ...] = ()
    readable: bool = True  # False: nothing in it can be compared
    unreadable: frozenset[str] = frozenset()  # metrics this side cannot read


class _Object(dict):
    """A JSON object that remembers the keys it was given more than once."""

    __slots__ = ("duplicates",)

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__(pairs)
        self.duplicates: tuple[str, ...] = ()
        if len(self) != len(pairs):
            seen: set[str] = set()
            twice = []
            for key, _ in pairs:
                if key in seen and key not in twice:
                    twice.append(key)
                seen.add(key)
            self.duplicates = tuple(twice)


# Samples that are said: a boolean, a list, an object (read as _Object).
_ODD = frozenset({bool, list, dict, _Object})


def _whole(text: str) -> int | float:
    return int(text) if len(text) <= _WHOLE_DIGITS else float(text)


class _Problems:
    """The problems of one side of one file, placed where the file says what
    they are about, each kind listed PROBLEMS_PER_KIND times at most."""

    def __init__(self, path: str, side: str, raw: bytes | None = None) -> None:
        self.path = path
        self.side = side
        self.raw = raw
        self._text: str | None = None
        self.found: list[Finding] = []
        self.counts: dict[str, int] = {}

    def add(
        self,
        code: str,
        message: str,
        keys: Sequence[str] = (),
        *,
        line: int = 0,
        column: int = 0,
        severity: Severity = Severity.ERROR,
    ) -> None:
        count = self.counts[code] = self.counts.get(code, 0) + 1
        if count > PROBLEMS_PER_KIND:
            return
        if keys and not line:
            line, column = self._locate(keys)
        location = Location(self.path, line, column)
        self.found.append(finding(location, code, f"{self.side}: {message}", severity))

    def done(self) -> tuple[Finding, ...]:
        for code, count in sorted(self.counts.items()):
            if count > PROBLEMS_PER_KIND:
                more = count - PROBLEMS_PER_KIND
                self.found.append(
                    finding(
                        Location(self.path),
                        code,
                        f"{self.side}: and {more} more problem(s) of this kind",
                    )
                )
        return tuple(self.found)

    def _locate(self, keys: Sequence[str]) -> tuple[int, int]:
        """Line and column of the last key, looked for key after key (0, 0
        when the file spells one otherwise, with escapes)."""
        if self.raw is None:
            return 0, 0
        if self._text is None:
            self._text = self.raw.decode("utf-8", "replace")
        text, pos = self._text, 0
        start = -1
        for key in keys:
            spelled = json.dumps(key, ensure_ascii=False)
            found = re.compile(re.escape(spelled) + r"\s*:").search(text, pos)
            if found is None:
                return 0, 0
            start, pos = found.start(), found.end()
        line = text.count("\n", 0, start) + 1
        return line, start - text.rfind("\n", 0, start)


_KEY_END = re.compile(rb'"[ \t\r\n]*:')
# orjson reads a whole number past 64 bits (20 digits and more) as a float.
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_NUMBER = b"0" * 20
_CONTAINERS = frozenset({dict, list})


def _quick(raw: bytes) -> Any:
    """The document as orjson reads it, when it reads it as the standard
    library would and its text writes no key twice; None otherwise (the
    standard library's reader, with its hooks, then reads it, says where it
    breaks and which key is given twice).

    orjson reads a whole number past 64 bits as a float: a text with 20
    digits in a row goes to the standard library. orjson keeps the
    last of two equal keys silently, so its result is taken only when it holds
    as many keys as the text has key endings (`":`): the text has at least one
    per key it writes (more where a string holds `":`), the result one per key
    it keeps, so equal counts mean no key was given twice."""
    if orjson is None or len(raw) > GOLDEN_MAX_BYTES:
        return None
    if raw.count(b"[") + raw.count(b"{") > GOLDEN_MAX_DEPTH:
        return None  # maybe too deep: the bounded reader says where
    if _LONG_NUMBER in raw.translate(_DIGITS_AS_ZERO):
        return None  # 20 digits in a row: maybe a whole number orjson reads as a float
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    keys, todo = 0, [document] if type(document) in _CONTAINERS else []
    while todo:
        item = todo.pop()
        values = item.values() if type(item) is dict else item
        keys += len(item) if type(item) is dict else 0
        if not _CONTAINERS.isdisjoint(set(map(type, values))):
            todo.extend(v for v in values if type(v) is dict or type(v) is list)
    return document if keys == len(_KEY_END.findall(raw)) else None


def too_large(path: str, side: str, size: int) -> GoldenValues:
    """A side not read: larger than GOLDEN_MAX_BYTES."""
    message = (
        f"{size:,} bytes, more than the {GOLDEN_MAX_BYTES:,} a golden-values file may have: "
        "not read, not compared"
    )
    return unreadable(path, side, "golden-size", message)


def unreadable(path: str, side: str, code: str, message: str) -> GoldenValues:
    """A side that cannot be read at all (a link, a special file, too large)."""
    problem = finding(Location(path), code, f"{side}: {message}")
    return GoldenValues(metrics={}, problems=(problem,), readable=False)


def parse_golden(raw: bytes, path: str, side: str) -> GoldenValues:
    """One side of a golden-values file; every problem a located finding."""
    problems = _Problems(path, side, raw)
    try:
        document = _quick(raw)
        if document is None:
            document = load_bounded(
                raw,
                max_bytes=GOLDEN_MAX_BYTES,
                max_depth=GOLDEN_MAX_DEPTH,
                constants=True,
                object_pairs_hook=_Object,
                parse_int=_whole,
            )
    except JsonInputError as exc:
        problems.add("golden-json", str(exc), line=exc.line, column=exc.column)
        return GoldenValues(metrics={}, problems=problems.done(), readable=False)
    if not isinstance(document, dict):
        problems.add(
            "golden-layout",
            f"the file holds {_kind(document)}, not an object of metrics {LAYOUT}: not compared",
            line=1,
            column=1,
        )
        return GoldenValues(metrics={}, problems=problems.done(), readable=False)
    for name in getattr(document, "duplicates", ()):
        problems.add(
            "golden-duplicate", f'metric "{name}" is given twice; the last one is read', [name]
        )
    metrics: dict[str, Series] = {}
    spelled: dict[str, Mapping[int, str]] = {}
    bad: list[tuple[str, str]] = []
    for name, entry in document.items():
        values = entry.get("values") if isinstance(entry, dict) else None
        if not isinstance(values, dict):
            what = (
                f'"values" is {_kind(values)}, not an object of STEP: VALUE'
                if isinstance(entry, dict) and "values" in entry
                else f'no "values" object (it is {_kind(entry)})'
            )
            bad.append((name, what))
            continue
        metrics[name], written = _series(name, values, problems)
        if written:
            spelled[name] = written
    if bad and not metrics:
        name, what = bad[0]
        problems.add(
            "golden-layout",
            f'not the training layout {LAYOUT}: no entry has a "values" object '
            f'("{_short(name)}": {what}): not compared',
            [name],
        )
        return GoldenValues(metrics={}, problems=problems.done(), readable=False)
    for name, what in bad:
        problems.add("golden-layout", f'metric "{name}": {what}: not compared', [name])
    return GoldenValues(
        metrics=metrics,
        spelled=spelled,
        problems=problems.done(),
        unreadable=frozenset(name for name, _ in bad),
    )


def _series(
    name: str, values: dict[str, Any], problems: _Problems
) -> tuple[dict[int, Any], dict[int, str]]:
    """A metric's samples by step, and the steps written otherwise than as
    themselves ("01")."""
    for key in getattr(values, "duplicates", ()):
        problems.add(
            "golden-duplicate",
            f'metric "{name}": step "{key}" is given twice; the last one is read',
            [name, "values", key],
        )
    # The usual file: every key a step written as itself, every sample a
    # number, a string or null: read in passes that run in C.
    joined = "\n".join(values)
    if (
        joined.isascii()
        and joined.replace("\n", "").isdigit()  # ASCII digits only: no sign, blank or "_"
        and joined.count("\n") == len(values) - 1
        and _LEADING_ZERO.search(joined) is None
        and max(map(len, values)) <= _STEP_DIGITS
        and _ODD.isdisjoint(set(map(type, values.values())))
    ):
        return dict(zip(map(int, values), values.values(), strict=True)), {}
    series: dict[int, Any] = {}
    written: dict[int, str] = {}
    for key, value in values.items():
        if _STEP.fullmatch(key) is None:
            problems.add(
                "golden-step",
                f'metric "{name}": step "{_short(key)}" is no whole number: left out',
                [name, "values", key],
            )
            continue
        step = int(key)
        if step in series:
            problems.add(
                "golden-duplicate",
                f'metric "{name}": steps "{written.get(step, str(step))}" and "{key}" are one '
                "step; the last one is read",
                [name, "values", key],
            )
        if isinstance(value, (bool, list, dict)):
            problems.add(
                "golden-value",
                f'metric "{name}": the value of step "{key}" is {_kind(value)}, not a number: '
                "counted as non-finite",
                [name, "values", key],
            )
        series[step] = value
        if key != str(step):
            written[step] = key
        else:
            written.pop(step, None)
    return series, written


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (int, float)):
        return "a number"
    return {list: "a list", dict: "an object"}.get(type(value), "an object")


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------- gating


class Gating(Struct, frozen=True, kw_only=True):
    """The metrics a case's test checks, and where that was read."""

    metrics: frozenset[str]
    source: str  # the model_config.yaml that lists them, or "default"
    problems: tuple[Finding, ...] = ()


DEFAULT_GATING = Gating(metrics=frozenset(DEFAULT_GATED), source="default")


def read_gating(raw: bytes | None, path: str) -> Gating:
    """The gated metrics of a case from its model_config.yaml (None: there is
    none): its METRICS list, else DEFAULT_GATED. A config that cannot be read,
    or whose METRICS is no list of names, is a finding, and the default holds."""
    if raw is None:
        return DEFAULT_GATING
    if b"METRICS" not in raw and b"\\" not in raw:
        # The key is not there (only a backslash escape could spell it
        # otherwise): the default, without reading the rest of the config.
        return DEFAULT_GATING
    findings = Findings()
    document = parse_yaml(raw, path, findings)
    # What the config's reader finds is said, but it is the test's file, not
    # the golden values': a warning, which no golden rule counts.
    problems = [replace(f, severity=Severity.WARNING) for f in findings.sorted()]
    if document is not None:
        data = document.data
        if not isinstance(data, dict):
            problems.append(
                finding(
                    document.locate([]),
                    "golden-config",
                    "model_config.yaml is no mapping",
                    Severity.WARNING,
                )
            )
        elif "METRICS" in data:
            listed = data["METRICS"]
            if isinstance(listed, list) and all(isinstance(m, str) for m in listed):
                return Gating(metrics=frozenset(listed), source=path, problems=tuple(problems))
            problems.append(
                finding(
                    document.locate(["METRICS"]),
                    "golden-config",
                    "METRICS is no list of metric names",
                    Severity.WARNING,
                )
            )
        else:
            return Gating(
                metrics=DEFAULT_GATING.metrics, source="default", problems=tuple(problems)
            )
    note = finding(
        Location(path),
        "golden-config",
        f"gated metrics taken as {', '.join(DEFAULT_GATED)} (the test's default)",
        Severity.WARNING,
    )
    return Gating(metrics=DEFAULT_GATING.metrics, source="default", problems=(*problems, note))


def unread_gating(path: str, why: str) -> Gating:
    """The gating of a case whose model_config.yaml is not read (too large, a
    link): the default, and a finding that says why."""
    note = finding(
        Location(path),
        "golden-config",
        f"{why}: not read; gated metrics taken as {', '.join(DEFAULT_GATED)} (the test's default)",
        Severity.WARNING,
    )
    return Gating(metrics=DEFAULT_GATING.metrics, source="default", problems=(note,))


# ---------------------------------------------------------------- comparing


class MetricChange(Struct, frozen=True, kw_only=True):
    """What a change of a golden-values file does to one metric (see the module)."""

    name: str
    gated: bool
    status: str
    steps_compared: int = 0
    steps_added: int = 0
    steps_removed: int = 0
    steps_skipped: int = 0
    non_finite_new: int = 0
    mean_rel_change_pct: float | None = None
    max_abs_rel_change_pct: float | None = None
    max_step: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "gated": self.gated,
            "status": self.status,
            "steps_compared": self.steps_compared,
            "steps_added": self.steps_added,
            "steps_removed": self.steps_removed,
            "steps_skipped": self.steps_skipped,
            "non_finite_new": self.non_finite_new,
            "mean_rel_change_pct": self.mean_rel_change_pct,
            "max_abs_rel_change_pct": self.max_abs_rel_change_pct,
            "max_step": self.max_step,
        }


def finite(value: Any) -> float | None:
    """The value as a float when it is a finite number (a boolean is none)."""
    if type(value) is int or type(value) is float:
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def _same(a: Any, b: Any) -> bool:
    """Two samples of which one at least is no finite number: the same text."""
    return _text(a) == _text(b)


def _text(value: Any) -> str:
    if type(value) is float:  # NaN, or an infinity
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return json.dumps(value, sort_keys=True, allow_nan=True)


def compare_series(
    name: str,
    old: Series | None,
    new: Series | None,
    *,
    gated: bool,
    spelled: Mapping[int, str] | None = None,
) -> MetricChange:
    """One metric's change (old None: the metric is new; new None: it is
    gone); `spelled`: the new side's steps written otherwise than as
    themselves. Each pass over the steps is a comprehension or a set
    operation: the cost is a few passes, linear in the steps."""
    before: Series = old if old is not None else {}
    after: Series = new if new is not None else {}
    olds, news = _numbers(before), _numbers(after)
    if olds is before and news is after and before == after and old is not None and new:
        return _unchanged(name, gated, before, spelled)
    common = olds.keys() & news.keys()
    both = before.keys() & after.keys()
    added, removed = len(after) - len(both), len(before) - len(both)
    differs = bool(added or removed) or any(before[s] != after[s] for s in common)
    if not differs:
        differs = any(_text(before[s]) != _text(after[s]) for s in both - common)
    changes = {s: (x - news[s]) / x for s in common if abs(x := olds[s]) >= ZERO}
    pcts = {s: 100.0 * abs(r) for s, r in changes.items()}
    # A difference past the floats' range is not measured.
    if not all(map(math.isfinite, pcts.values())):
        pcts = {s: p for s, p in pcts.items() if math.isfinite(p)}
        changes = {s: changes[s] for s in pcts}
    largest = max(pcts.values(), default=None)
    step = min((s for s, p in pcts.items() if p == largest), default=None)
    if old is None:
        status = ADDED
    elif new is None:
        status = REMOVED
    else:
        status = CHANGED if differs else UNCHANGED
    return MetricChange(
        name=name,
        gated=gated,
        status=status,
        steps_compared=len(common),
        steps_added=added,
        steps_removed=removed,
        steps_skipped=len(common) - len(changes),
        non_finite_new=len(after) - len(news),
        mean_rel_change_pct=100.0 * mean(list(changes.values())) + 0.0 if changes else None,
        max_abs_rel_change_pct=largest + 0.0 if largest is not None else None,
        max_step=None if step is None else (spelled or {}).get(step, str(step)),
    )


_FLOAT = frozenset({float})


def _unchanged(
    name: str, gated: bool, series: Series, spelled: Mapping[int, str] | None
) -> MetricChange:
    """A metric whose samples, all finite numbers, are the same on both sides."""
    skipped = sum(1 for x in series.values() if -ZERO < x < ZERO)
    measured = len(series) - skipped
    first = min((s for s, x in series.items() if abs(x) >= ZERO), default=None)
    return MetricChange(
        name=name,
        gated=gated,
        status=UNCHANGED,
        steps_compared=len(series),
        steps_skipped=skipped,
        mean_rel_change_pct=0.0 if measured else None,
        max_abs_rel_change_pct=0.0 if measured else None,
        max_step=(spelled or {}).get(first, str(first)) if first is not None else None,
    )


def _numbers(series: Series) -> Series:
    """The finite numbers of a series as floats (as Megatron-LM's script
    reads them): the series itself when all its samples are finite floats
    (checked in passes that run in C), else those of them converted (a boolean
    is none; x - x is 0.0 for a finite float only)."""
    kinds = set(map(type, series.values()))
    if kinds <= _FLOAT and all(map(math.isfinite, series.values())):
        return series
    return {
        s: float(v)
        for s, v in series.items()
        if (type(v) is float and v - v == 0.0) or type(v) is int
    }


def mean(values: Sequence[float]) -> float:
    """The mean of finite floats, exactly rounded where the sum fits a float."""
    try:
        return math.fsum(values) / len(values)
    except OverflowError:  # the sum passes the floats' range; the mean does not
        return math.fsum(v / len(values) for v in values)


def compare_goldens(
    old: GoldenValues | None, new: GoldenValues | None, gated: Iterable[str]
) -> tuple[MetricChange, ...]:
    """Every metric of either side (the new side's order, then the old side's
    own), compared; nothing when a side that exists cannot be read, and not the
    metrics a side cannot read."""
    if (old is not None and not old.readable) or (new is not None and not new.readable):
        return ()
    checked = frozenset(gated)
    before = old.metrics if old is not None else {}
    after = new.metrics if new is not None else {}
    skip = (old.unreadable if old else frozenset()) | (new.unreadable if new else frozenset())
    names = [*after, *(n for n in before if n not in after)]
    return tuple(
        compare_series(
            name,
            before.get(name) if old is not None and name in before else None,
            after.get(name) if new is not None and name in after else None,
            gated=name in checked,
            spelled=new.spelled.get(name) if new is not None else None,
        )
        for name in names
        if name not in skip
    )


def pct(value: float, *, signed: bool = True) -> str:
    """A percentage as the tables show it: three significant digits (at most
    eight decimals: `<0.000001%` below), no exponent below a million."""
    sign = ("+" if value > 0 else "-" if value < 0 else "") if signed else ""
    size = abs(value)
    if size == 0:
        return "0%"
    if size < 0.000001:
        return f"{sign}<0.000001%"
    if size >= 1_000_000:
        return f"{sign}{size:.2e}%"
    if size >= 1000:
        return f"{sign}{size:,.0f}%"
    digits = min(8, max(0, 2 - math.floor(math.log10(size))))
    return f"{sign}{size:.{digits}f}%"


# ---------------------------------------------------------------- the review


class GoldenJob(Struct, frozen=True, order=True):
    """A job that reads a golden-values file: in which target, which case."""

    target: str
    model: str
    test_case: str

    def to_dict(self) -> dict[str, str]:
        return {"target": self.target, "model": self.model, "test_case": self.test_case}


class GoldenFile(Struct, frozen=True, kw_only=True):
    """One golden-values file the diff changes."""

    path: str  # from the top of the repository
    status: str  # added, removed, changed
    # What its path says, by the template: model, test_case, environment, platform.
    fields: Mapping[str, str] = field(default_factory=dict)
    # The jobs that read it, in every target: the head's (the base's for a
    # removed file); `quarantined`: jobs a skip entry keeps from running.
    jobs: tuple[GoldenJob, ...] = ()
    quarantined: tuple[GoldenJob, ...] = ()
    metrics: tuple[MetricChange, ...] = ()
    problems: tuple[Finding, ...] = ()
    gated_by: str = "default"  # the model_config.yaml that lists METRICS, or "default"
    compared: bool = True  # False: a side could not be read, no metric is compared

    @property
    def orphan(self) -> bool:
        """No job of any target reads it (a quarantined one would)."""
        return not self.jobs and not self.quarantined

    @property
    def case(self) -> str:
        model, test_case = self.fields.get("model"), self.fields.get("test_case")
        if model and test_case:
            return f"{model}/{test_case}"
        return test_case or self.path

    @property
    def where(self) -> str:
        """The case and its hardware, as messages name the file."""
        return f"{self.case} ({self.hardware})" if self.hardware else self.case

    @property
    def hardware(self) -> str:
        parts = [self.fields.get("environment"), self.fields.get("platform")]
        return " ".join(p for p in parts if p)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "status": self.status,
            **{k: self.fields.get(k) for k in ("model", "test_case", "environment", "platform")},
            "jobs": [j.to_dict() for j in self.jobs],
            "quarantined_jobs": [j.to_dict() for j in self.quarantined],
            "orphan": self.orphan,
            "gated_by": self.gated_by,
            "compared": self.compared,
            "metrics": [m.to_dict() for m in self.metrics],
            "problems": [
                {
                    "code": p.code,
                    "severity": p.severity.value,
                    "location": str(p.location),
                    "message": p.message,
                }
                for p in self.problems
            ],
        }


class GoldenFigures(Struct, frozen=True, kw_only=True):
    """What `--expect golden...` rules check, over some files, and where each
    figure comes from (`places`: a few of its files or metrics, for a message)."""

    files: int = 0
    others: int = 0  # files of the other test cases
    orphans: int = 0
    missing: int = 0  # steps removed, over every metric
    nonfinite: int = 0  # non-finite samples of the new side, over every metric
    problems: int = 0  # files with a problem of the error kind
    # The largest gated |mean| and step change, in percent.
    mean: float = 0.0
    max: float = 0.0
    places: Mapping[str, str] = field(default_factory=dict)


# A figure's message names this many of the places it comes from.
PLACES_SHOWN = 3


def _places(items: Sequence[str]) -> str:
    shown = ", ".join(items[:PLACES_SHOWN])
    more = len(items) - PLACES_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


class GoldenReview(Struct, frozen=True, kw_only=True):
    """Every golden-values file a diff changes (added, removed, changed)."""

    template: str  # the path template the files fit, from the top of the repository
    files: tuple[GoldenFile, ...] = ()

    def to_list(self) -> list[dict[str, Any]]:
        return [f.to_dict() for f in self.files]

    @property
    def test_cases(self) -> tuple[str, ...]:
        return tuple(
            sorted({f.fields["test_case"] for f in self.files if f.fields.get("test_case")})
        )

    def figures(self, wanted: Callable[[str], bool] | None = None) -> GoldenFigures:
        """The figures of the files whose test case `wanted` accepts (None: all)."""
        chosen = [f for f in self.files if wanted is None or wanted(f.fields.get("test_case", ""))]
        others = [f for f in self.files if f not in chosen]
        mean_value: float | None = None
        max_value: float | None = None
        places: dict[str, list[str]] = {k: [] for k in ("missing", "nonfinite", "problems")}
        places |= {
            "files": [f.where for f in chosen],
            "others": [f.where for f in others],
            "orphans": [f.where for f in chosen if f.orphan],
            "mean": [],
            "max": [],
        }
        for f in chosen:
            where = f.where
            if any(p.severity is Severity.ERROR for p in f.problems):
                places["problems"].append(where)
            for m in f.metrics:
                if m.steps_removed:
                    places["missing"].append(f"{m.name} of {where}: {m.steps_removed}")
                if m.non_finite_new:
                    places["nonfinite"].append(f"{m.name} of {where}: {m.non_finite_new}")
                if not m.gated:
                    continue
                mean = m.mean_rel_change_pct
                if mean is not None and (mean_value is None or abs(mean) > mean_value):
                    mean_value = abs(mean)
                    places["mean"] = [f"{m.name} of {where}"]
                top = m.max_abs_rel_change_pct
                if top is not None and (max_value is None or top > max_value):
                    max_value = top
                    places["max"] = [f"{m.name} at step {m.max_step} of {where}"]
        return GoldenFigures(
            files=len(chosen),
            others=len(others),
            orphans=len(places["orphans"]),
            missing=sum(m.steps_removed for f in chosen for m in f.metrics),
            nonfinite=sum(m.non_finite_new for f in chosen for m in f.metrics),
            problems=len(places["problems"]),
            mean=mean_value or 0.0,
            max=max_value or 0.0,
            places={k: _places(v) for k, v in places.items() if v},
        )
