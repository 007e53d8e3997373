"""Reading golden values: one side of a golden-values file, and the metrics a
case's test gates (its model_config.yaml), as values and located findings.

Pure: bytes in, values out (no git, no jobs, no command line). Bad input
(docs/golden-values.md lists the kinds) is a finding, never an exception, and
what can be read is still read: a key given twice keeps the last one, as
Python's json does; a sample that is a list, object or boolean counts as
non-finite. Each kind of problem is listed at most PROBLEMS_PER_KIND times per
file, each at its line and column when the file spells its keys plainly.

Cost: linear in the file's size; msgspec decodes a file of the training
layout in C, straight into it (`_fast`), and the standard library's reader,
with a Python hook per object, reads only what that decode is not sure of.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType, field
from msgspec.structs import replace

from matrixgen.documents.yamlio import parse_yaml
from matrixgen.model.errors import Finding, Findings, Location, Severity, finding
from matrixgen.util.jsontext import JSON_MAX_DEPTH, JsonInputError, load_bounded

# Bounds on a golden-values file (docs/security.md, input sizes): checked
# before it is read.
GOLDEN_MAX_BYTES = 16 * 1024 * 1024
GOLDEN_MAX_DEPTH = JSON_MAX_DEPTH
# What the test checks when model_config.yaml names no METRICS (as Megatron-LM's
# regular-pipeline test reads it).
DEFAULT_GATED = ("lm loss", "num-zeros")
CONFIG_NAME = "model_config.yaml"
PROBLEMS_PER_KIND = 10
# A step is a whole number as the file writes it (ASCII digits, at most 18 of them).
_STEP = re.compile(r"-?[0-9]{1,18}")
_STEP_DIGITS = 18  # as _STEP reads them
_LEADING_ZERO = re.compile(r"(?:^|\n)0[0-9]")  # "01": a step written otherwise than as itself
# More digits than this read as a float (past 308 digits: infinite), never as
# an int no float holds (Python refuses int() past 4,300 digits).
_WHOLE_DIGITS = 300
LAYOUT = '{METRIC: {"start_step", "end_step", "step_interval", "values": {STEP: VALUE}}}'

Series = Mapping[int, Any]  # step -> its sample


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
                more = f"{self.side}: and {count - PROBLEMS_PER_KIND} more problem(s) of this kind"
                self.found.append(finding(Location(self.path), code, more))
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
# 19 digits in a row: maybe a step the careful reader says is no whole number
# (_STEP_DIGITS), or a whole number past 64 bits (kept an int up to
# _WHOLE_DIGITS digits by `_whole`); left to the careful reader.
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_NUMBER = b"0" * (_STEP_DIGITS + 1)
_MINUS_ZERO_KEY = b'"-0"'  # a step msgspec reads as 0, written otherwise than as itself


class _Metric(Struct, forbid_unknown_fields=True):
    """One metric as the training layout writes it: steps whole numbers
    written as themselves, samples numbers, strings or null (anything else is
    left to the careful reader); the other three keys are not read, only
    counted."""

    values: dict[int, float | int | str | None]
    start_step: Raw | UnsetType = UNSET
    end_step: Raw | UnsetType = UNSET
    step_interval: Raw | UnsetType = UNSET


_FAST = msgspec.json.Decoder(dict[str, _Metric])


def _fast(raw: bytes) -> dict[str, dict[int, Any]] | None:
    """Each metric's samples by step, as the careful reader reads them, decoded
    in C straight into the training layout; None where that cannot be sure
    (the careful reader then reads the file, says where it breaks and which
    key is given twice).

    None when msgspec refuses the text (not JSON, not the layout, a step
    written otherwise than as itself ("01", "+1", "1.0"), a sample that is a
    boolean, list or object, NaN or a number past the floats' range, a lone
    surrogate); when 19 digits stand in a row or a step is "-0" (read
    otherwise by msgspec and the careful reader); and when a key is given
    twice: msgspec keeps the last of two equal keys silently, so its result
    is taken only when it holds as many keys as the text has key endings, one
    per key written (more where a string holds a colon)."""
    if (
        len(raw) > GOLDEN_MAX_BYTES
        or _LONG_NUMBER in raw.translate(_DIGITS_AS_ZERO)
        or _MINUS_ZERO_KEY in raw
    ):
        return None
    try:
        document = _FAST.decode(raw)
    except msgspec.MsgspecError:
        return None
    keys = len(document)
    for metric in document.values():
        keys += len(metric.values) + 1
        keys += (metric.start_step is not UNSET) + (metric.end_step is not UNSET)
        keys += metric.step_interval is not UNSET
    # Every key is followed by a colon: as many colons as keys, no key is
    # given twice (counted first, in one pass; then only the colons that end
    # a key, where a string holds one).
    if keys != raw.count(b":") and keys != len(_KEY_END.findall(raw)):
        return None
    return {name: metric.values for name, metric in document.items()}


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
    fast = _fast(raw)
    if fast is not None:  # the training layout, every key once, every step as itself
        return GoldenValues(metrics=fast)
    problems = _Problems(path, side, raw)
    try:
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
        and "" not in values  # "1" and "" join as "1" alone does
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


_KINDS = {type(None): "null", bool: "a boolean", str: "a string", list: "a list"}
_KINDS |= {int: "a number", float: "a number"}


def _kind(value: object) -> str:
    return _KINDS.get(type(value), "an object")  # JSON's types exactly; an object is _Object


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
            problems.append(_warning(document.locate([]), "model_config.yaml is no mapping"))
        elif "METRICS" not in data:
            return replace(DEFAULT_GATING, problems=tuple(problems))
        elif isinstance(data["METRICS"], list) and all(isinstance(m, str) for m in data["METRICS"]):
            return Gating(metrics=frozenset(data["METRICS"]), source=path, problems=tuple(problems))
        else:
            where = document.locate(["METRICS"])
            problems.append(_warning(where, "METRICS is no list of metric names"))
    return _defaulted(path, problems, "")


def unread_gating(path: str, why: str) -> Gating:
    """The gating of a case whose model_config.yaml is not read (too large, a
    link): the default, and a finding that says why."""
    return _defaulted(path, [], f"{why}: not read; ")


def _defaulted(path: str, problems: list[Finding], why: str) -> Gating:
    taken = f"{why}gated metrics taken as {', '.join(DEFAULT_GATED)} (the test's default)"
    return replace(DEFAULT_GATING, problems=(*problems, _warning(Location(path), taken)))


def _warning(location: Location, message: str) -> Finding:
    return finding(location, "golden-config", message, Severity.WARNING)
