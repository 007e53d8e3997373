"""JSON text through orjson is the standard library's text, byte for byte."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from enum import IntEnum, StrEnum
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from matrixgen.util import jsontext


class Colour(StrEnum):
    RED = "red"


class Size(IntEnum):
    BIG = 3


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()  # past 64 bits too
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()  # control characters, U+2028, astral planes, lone surrogates
    | st.sampled_from([Colour.RED, Size.BIG, "", "\x7f", "\u2028", "\ud800", 2**63, -(2**63) - 1])
)
_KEYS = st.text(max_size=8) | st.sampled_from([Colour.RED, "é", "\n"])
_DATA = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(_KEYS, inner, max_size=4)
    ),
    max_leaves=25,
)


def _reference_pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _reference_compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _outcome(write: Any, value: Any) -> str:
    try:
        return write(value)
    except ValueError:
        return "refused"  # a non-finite float: JSON has none


@given(_DATA)
def test_pretty_is_json_dumps_with_indent_2(value: Any) -> None:
    assert _outcome(jsontext.pretty, value) == _outcome(_reference_pretty, value)


@given(_DATA)
def test_compact_is_json_dumps_with_tight_separators(value: Any) -> None:
    assert _outcome(jsontext.compact, value) == _outcome(_reference_compact, value)


@given(_DATA)
def test_what_is_written_is_strict_json(value: Any) -> None:
    """orjson (which refuses NaN and Infinity) reads back every text written."""

    import orjson

    text = _outcome(jsontext.pretty, value)
    if text == "refused":
        assert jsontext._has_float(value)
        return
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        # orjson also refuses lone surrogates and ints past 64 bits; nothing else.
        assert "surrogate" in str(exc).lower() or "number" in str(exc).lower(), exc


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_a_non_finite_float_is_never_written(bad: float) -> None:
    for write in (jsontext.pretty, jsontext.compact):
        with pytest.raises(ValueError, match="not JSON compliant"):
            write({"gpu_hours": [1.0, bad]})


# ------------------------------------------------------------------ bounded reading

_FINITE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from('[]{}"\\'), max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=20,
)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


@given(_FINITE, st.integers(1, 8))
def test_load_bounded_reads_what_json_reads_within_the_depth(value: Any, limit: int) -> None:
    """Brackets inside strings do not count; a document exactly at the limit is
    read; one level more is refused, with its place."""
    text = jsontext.compact(value)
    if _depth(value) <= limit:
        assert jsontext.load_bounded(text, max_depth=limit) == json.loads(text)
    else:
        with pytest.raises(jsontext.JsonInputError, match=f"nested deeper than {limit} levels"):
            jsontext.load_bounded(text, max_depth=limit)


def test_a_deep_document_is_refused_without_recursing() -> None:
    for text, column in (
        ("[" * 60_000 + "]" * 60_000, 101),
        ('{"a":' * 60_000 + "1" + "}" * 60_000, 501),
    ):
        with pytest.raises(
            jsontext.JsonInputError, match=rf"deeper than 100 levels \(at 1:{column}\)"
        ):
            jsontext.load_bounded(text)
    assert jsontext.load_bounded("[" * 100 + "]" * 100) is not None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[NaN]", "NaN is not a JSON value"),
        ('{"a": -Infinity}', "-Infinity is not a JSON value"),
        ("[1,\n", r"not JSON \(Expecting value at 2:1\)"),
        (b"\xff", "not JSON"),
    ],
)
def test_load_bounded_refuses_what_is_not_json(text: str | bytes, message: str) -> None:
    with pytest.raises(jsontext.JsonInputError, match=message):
        jsontext.load_bounded(text)


def test_load_bounded_refuses_a_document_past_its_size() -> None:
    with pytest.raises(jsontext.JsonInputError, match="11 bytes, more than the 10"):
        jsontext.load_bounded('"123456789"', max_bytes=10)
    assert jsontext.load_bounded('"12345678"', max_bytes=10) == "12345678"


def test_jobs_as_listed_go_through_orjson() -> None:
    """The data of big outputs (no floats) takes the fast path, StrEnums included."""
    row = {
        "model": "gpt",
        "cadence": ["pr", "nightly"],
        "tag": None,
        "n_repeat": 5,
        "allow_failure": False,
        "env": {"A": "é\n"},
        "args": ("--x", "2"),
        "quarantine": {"action": Colour.RED},
    }
    assert jsontext._orjson([row] * 3, indent=True) == _reference_pretty([row] * 3)[:-1]
    assert jsontext._orjson([row], indent=False) == _reference_compact([row])


def test_a_float_anywhere_falls_back_to_the_standard_library() -> None:
    deep: Any = 1e-05
    for _ in range(5000):  # deeper than Python's recursion limit: no RecursionError
        deep = [deep]
    assert jsontext._has_float(deep)
    assert jsontext._orjson({"a": [{"b": 1e-05}]}, indent=True) is None
    assert (
        jsontext.pretty({"a": [{"b": 1e-05}]})
        == '{\n  "a": [\n    {\n      "b": 1e-05\n    }\n  ]\n}\n'
    )


@dataclasses.dataclass
class Point:
    x: int


@pytest.mark.parametrize("value", [Point(1), dt.date(2026, 1, 1), {("t",): 1}])
def test_what_json_refuses_is_still_refused(value: Any) -> None:
    with pytest.raises(TypeError):
        json.dumps(value)
    with pytest.raises(TypeError):
        jsontext.pretty(value)
