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
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def _reference_compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@given(_DATA)
def test_pretty_is_json_dumps_with_indent_2(value: Any) -> None:
    assert jsontext.pretty(value) == _reference_pretty(value)


@given(_DATA)
def test_compact_is_json_dumps_with_tight_separators(value: Any) -> None:
    assert jsontext.compact(value) == _reference_compact(value)


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
