"""Golden values compared (matrixgen.diff.goldens): each figure against a
naive reimplementation of its definition, the dangerous values (|old| < 1e-12,
"nan", NaN and infinities, missing steps, empty values, floats past their
range) as explicit examples, and every malformed file as a located finding."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from matrixgen.diff import golden_read as r
from matrixgen.diff import goldens as g
from matrixgen.model.errors import Severity
from matrixgen.util.values import json_value
from tests.golden_fixtures import finite as _finite
from tests.golden_fixtures import naive


def series(values: dict[str, Any]) -> dict[int, Any]:
    """Samples by step, as the reader keeps them (the last of two spellings)."""
    return {int(k): v for k, v in values.items()}


def compare(old: dict[str, Any] | None, new: dict[str, Any] | None) -> g.MetricChange:
    written = {int(k): k for k in new or {}}
    return g.compare_series(
        "lm loss",
        series(old) if old is not None else None,
        series(new) if new is not None else None,
        gated=True,
        spelled={s: k for s, k in written.items() if k != str(s)},
    )


DANGEROUS = [
    0.0,
    -0.0,
    5e-13,
    -5e-13,
    1e-12,
    1e308,
    -1e308,
    float("nan"),
    float("inf"),
    float("-inf"),
    "nan",
    "inf",
    "",
    None,
    True,
    [],
    {},
    10**200,
]
samples = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.sampled_from(DANGEROUS),
    st.text(max_size=3),
)
steps = st.one_of(
    st.integers(min_value=0, max_value=40).map(str),
    st.sampled_from(["01", "007", "-0"]),  # written otherwise than as themselves
)
metric_values = st.dictionaries(steps, samples, max_size=25)


# ---------------------------------------------------------------- comparing


@given(old=metric_values, new=metric_values)
@example(old={"1": 5e-13, "2": 2.0}, new={"1": 7.0, "2": 1.0})  # |old| < 1e-12: skipped
@example(old={"1": "nan", "2": 1.0}, new={"1": "nan", "2": 1.0})  # a "nan" on both sides
@example(old={"1": float("nan")}, new={"1": float("inf")})
@example(old={"1": 1.0, "2": 2.0, "3": 3.0}, new={"1": 1.0, "3": 3.5})  # a step missing
@example(old={}, new={})  # empty values
@example(old={"1": 1e-10}, new={"1": 1e308})  # a change past the floats' range
@example(old={"1": 1e308, "2": 1.0}, new={"1": -1e308, "2": 2.0})
@example(old={"1": 1, "2": 10**200}, new={"1": 1.0, "2": 10**200 + 1})
@example(old={"1": True}, new={"1": 1})  # a boolean is no number
@example(old={"1": 1.0, "2": 2.0}, new={"1": True, "2": 2.0})  # equal to 1.0, and no number
@example(old={"1": 1.0, "2": 0.0}, new={"1": 1, "2": 0.0})  # equal, an int on one side
@example(
    old={str(s): 1.0 + s for s in range(1, 3001)},  # a long file
    new={str(s): 1.0 + s * 1.001 for s in range(2, 3002)},
)
def test_every_figure_is_its_definition(old: dict[str, Any], new: dict[str, Any]) -> None:
    got = compare(old, new)
    want = naive(old, new)
    for name in ("steps_compared", "steps_added", "steps_removed", "steps_skipped"):
        assert getattr(got, name) == want[name], name
    assert got.non_finite_new == want["non_finite_new"]
    if want["mean"] is None:
        assert got.mean_rel_change_pct is None
    else:
        assert got.mean_rel_change_pct == pytest.approx(want["mean"], rel=1e-9, abs=1e-9)
    assert got.max_abs_rel_change_pct == want["max"]
    assert got.max_step == want["max_step"]
    # JSON never holds NaN or Infinity.
    json.dumps(json_value(got), allow_nan=False)


def _same(a: Any, b: Any) -> bool:
    if _finite(a) and _finite(b):
        return a == b
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


@given(old=metric_values, new=metric_values)
@example(old={"1": float("nan")}, new={"1": float("nan")})
@example(old={"1": 1}, new={"1": 1.0})
@example(old={"1": "nan"}, new={"1": float("nan")})  # the file's text differs
def test_swapping_the_sides_swaps_added_and_removed(
    old: dict[str, Any], new: dict[str, Any]
) -> None:
    forward, back = compare(old, new), compare(new, old)
    assert (forward.steps_added, forward.steps_removed) == (back.steps_removed, back.steps_added)
    assert forward.steps_compared == back.steps_compared
    assert (forward.status == "unchanged") == (back.status == "unchanged")
    a, b = series(old), series(new)  # by step: "01" and "1" are one
    same = a.keys() == b.keys() and all(_same(a[s], b[s]) for s in a)
    assert (forward.status == "unchanged") == same
    assert compare(None, new).status == "added" and compare(new, None).status == "removed"
    assert compare(None, new).steps_added == len(b)
    assert compare(old, None).steps_removed == len(a)


@given(values=metric_values)
@example(values={"1": 0.0, "2": "nan"})
@example(values={"1": 5e-13})
def test_an_unchanged_metric_is_unchanged_and_moves_by_nothing(values: dict[str, Any]) -> None:
    got = compare(values, dict(values))
    assert got.status == "unchanged"
    assert got.mean_rel_change_pct in (None, 0.0)
    assert got.max_abs_rel_change_pct in (None, 0.0)
    assert got.steps_added == got.steps_removed == 0


def test_the_sign_says_which_way() -> None:
    # (old - new) / old: positive when the new value is lower.
    lower = compare({"1": 2.0, "2": 4.0}, {"1": 1.0, "2": 4.0})
    assert lower.mean_rel_change_pct == pytest.approx(25.0)  # mean(0.5, 0) x 100
    assert lower.max_abs_rel_change_pct == pytest.approx(50.0) and lower.max_step == "1"
    higher = compare({"1": 2.0}, {"1": 3.0})
    assert higher.mean_rel_change_pct == pytest.approx(-50.0)


def test_a_metric_that_only_one_side_can_read_is_not_compared() -> None:
    old = r.parse_golden(b'{"a": {"values": {"1": 1}}, "b": {"values": [1]}}', "f.json", "base")
    new = r.parse_golden(
        b'{"a": {"values": {"1": 2}}, "b": {"values": {"1": 1}}}', "f.json", "head"
    )
    (only,) = g.compare_goldens(old, new, ["a", "b"])
    assert only.name == "a" and only.status == "changed"
    broken = r.parse_golden(b"{", "f.json", "base")
    assert g.compare_goldens(broken, new, ["a"]) == ()


def test_metrics_come_in_the_new_files_order_then_the_old_ones() -> None:
    old = r.parse_golden(b'{"x": {"values": {}}, "a": {"values": {}}}', "f.json", "base")
    new = r.parse_golden(b'{"b": {"values": {}}, "a": {"values": {}}}', "f.json", "head")
    got = g.compare_goldens(old, new, ["a"])
    assert [(m.name, m.status, m.gated) for m in got] == [
        ("b", "added", False),
        ("a", "unchanged", True),
        ("x", "removed", False),
    ]


# ---------------------------------------------------------------- reading


def golden_text(metrics: dict[str, dict[str, Any]]) -> bytes:
    return json.dumps(
        {
            name: {"start_step": 1, "end_step": 1, "step_interval": 1, "values": values}
            for name, values in metrics.items()
        },
        allow_nan=True,
    ).encode()


@given(metrics=st.dictionaries(st.text(max_size=8), metric_values, max_size=4))
@example(metrics={"lm loss": {"1": float("nan"), "2": "nan", "3": float("-inf")}})
@example(metrics={"iteration-time": {}})
@example(metrics={'a"b\n\\': {"7": 1}})
def test_a_file_reads_back_as_written(metrics: dict[str, dict[str, Any]]) -> None:
    assume(all(len({int(k) for k in v}) == len(v) for v in metrics.values()))  # no step twice
    got = r.parse_golden(golden_text(metrics), "f.json", "head")
    # A list, an object or a boolean is read, counted as non-finite, and said.
    odd = [
        v
        for values in metrics.values()
        for v in values.values()
        if isinstance(v, (bool, list, dict))
    ]
    assert got.readable
    assert [p.code for p in got.problems] == ["golden-value"] * len(odd)
    assert list(got.metrics) == list(metrics)
    for name, values in metrics.items():
        read = got.metrics[name]
        assert sorted(read) == sorted(int(k) for k in values)
        for key, value in values.items():
            assert got.spelled.get(name, {}).get(int(key), str(int(key))) == key
            assert json.dumps(read[int(key)], allow_nan=True) == json.dumps(value, allow_nan=True)


def problems_of(raw: bytes) -> list[tuple[str, str, int, int]]:
    got = r.parse_golden(raw, "t/golden.json", "head")
    return [(p.code, p.message, p.location.line, p.location.column) for p in got.problems]


def test_a_file_that_is_not_json_is_one_finding_at_its_line_and_column() -> None:
    ((code, message, line, column),) = problems_of(b'{"lm loss": {"values":\n  {"1": 1,, }}}')
    assert code == "golden-json" and (line, column) == (2, 11)
    assert message.startswith("head: not JSON (")
    assert r.parse_golden(b"\xff\xfe{", "f", "base").readable is False
    assert problems_of(b"")[0][0] == "golden-json"


def test_not_the_training_layout_is_one_finding_and_nothing_compared() -> None:
    inference = b'{"0": {"generated_text": "x", "logprobs": [1]}, "mem": 5}'
    got = r.parse_golden(inference, "t/golden.json", "head")
    assert not got.readable and not got.metrics
    ((problem),) = got.problems
    assert problem.code == "golden-layout" and problem.location.line == 1
    assert 'no entry has a "values" object' in problem.message
    for raw, shown in ((b"[1, 2]", "a list"), (b"3", "a number"), (b'"x"', "a string")):
        ((code, message, line, _),) = problems_of(raw)
        assert code == "golden-layout" and shown in message and line == 1


def test_each_bad_part_is_located_and_the_rest_is_read() -> None:
    raw = b"""{
  "lm loss": {"values": {"1": 1.0, "abc": 2.0, "1.5": 3, "\\u0661": 4, " 2": 5, "01": 6}},
  "num-zeros": {"values": [1, 2]},
  "mem": "big",
  "iteration-time": {"values": {"1": [1], "2": {"x": 1}, "3": false, "99999999999999999999": 1}}
}"""
    got = r.parse_golden(raw, "t/golden.json", "head")
    assert got.readable and got.unreadable == {"num-zeros", "mem"}
    found = {(p.code, p.location.line) for p in got.problems}
    assert ("golden-step", 2) in found  # "abc", "1.5", the Arabic-Indic one, " 2"
    assert ("golden-duplicate", 2) in found  # "1" and "01"
    assert ("golden-layout", 3) in found and ("golden-layout", 4) in found
    assert ("golden-value", 5) in found
    steps = [p for p in got.problems if p.code == "golden-step"]
    assert len(steps) == 5  # abc, 1.5, the Arabic-Indic digit, " 2", 20 digits
    assert got.metrics["lm loss"] == {1: 6} and got.spelled["lm loss"] == {1: "01"}
    assert sorted(got.metrics["iteration-time"]) == [1, 2, 3]


def test_an_empty_step_beside_a_step_is_a_finding() -> None:
    got = r.parse_golden(b'{"a": {"values": {"0": 0.5, "": 1.5}}}', "t/golden.json", "head")
    assert got.metrics == {"a": {0: 0.5}}
    assert [p.code for p in got.problems] == ["golden-step"]


def test_keys_given_twice_are_said_and_the_last_is_read() -> None:
    raw = b'{"a": {"values": {"1": 1}},\n "a": {"values": {"1": 2, "1": 3}}}'
    got = r.parse_golden(raw, "f.json", "head")
    codes = [p.code for p in got.problems]
    assert codes == ["golden-duplicate", "golden-duplicate"]
    assert got.metrics["a"] == {1: 3}


def test_each_kind_of_problem_is_listed_a_bounded_number_of_times() -> None:
    values = {f"s{i}": 1 for i in range(5000)}
    got = r.parse_golden(golden_text({"a": values}), "f.json", "head")
    assert len(got.problems) == r.PROBLEMS_PER_KIND + 1
    assert got.problems[-1].message == "head: and 4990 more problem(s) of this kind"


def test_a_file_past_the_bounds_is_refused_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(r, "GOLDEN_MAX_BYTES", 100)
    ((code, message, _, _),) = problems_of(golden_text({"a": {str(i): i for i in range(50)}}))
    assert code == "golden-json" and "more than the 100" in message
    monkeypatch.undo()
    deep = b"[" * 101 + b"]" * 101
    ((code, message, line, column),) = problems_of(deep)
    assert code == "golden-json" and "nested deeper than 100" in message
    assert (line, column) == (1, 101)
    too_big = r.too_large("f.json", "base", 17_000_000)
    assert not too_big.readable and too_big.problems[0].code == "golden-size"


def test_a_huge_whole_number_is_a_float_not_an_error() -> None:
    raw = golden_text({"a": {"1": 1}}).replace(b'"1": 1', b'"1": ' + b"9" * 5000)
    got = r.parse_golden(raw, "f.json", "head")
    assert not got.problems and got.metrics["a"][1] == float("inf")


def test_reading_and_comparing_cost_is_linear_in_the_size() -> None:
    def cost(n: int) -> float:
        metrics = {f"m{k}": {str(s): 1.0 + s / 7 for s in range(n)} for k in range(5)}
        raw = golden_text(metrics)
        start = time.process_time()
        old = r.parse_golden(raw, "f.json", "base")
        new = r.parse_golden(raw.replace(b".1", b".2"), "f.json", "head")
        g.compare_goldens(old, new, ["m0"])
        return time.process_time() - start

    cost(1000)  # warm up
    small, large = cost(20_000), cost(80_000)
    assert large < 8 * small + 0.05, (small, large)


# ---------------------------------------------------------------- gating


def test_a_key_given_twice_in_a_config_is_read_as_the_test_reads_it() -> None:
    got = r.read_gating(b"METRICS: [a]\nMETRICS: [b]\n", "c.yaml")  # yaml.safe_load: the last
    assert got.metrics == {"b"} and [p.severity for p in got.problems] == [Severity.WARNING]


def test_a_config_that_cannot_name_metrics_is_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError("parsed")

    monkeypatch.setattr(r, "parse_yaml", refuse)
    got = r.read_gating(b"MODEL_ARGS:\n  --x: 1\nbroken: [\n", "c.yaml")
    assert got == r.DEFAULT_GATING


def test_gated_metrics_are_the_configs_metrics_else_the_tests_default() -> None:
    listed = r.read_gating(
        b'MODEL_ARGS: {}\nMETRICS:\n  - "iteration-time"\n  - lm loss\n', "c.yaml"
    )
    assert listed.metrics == {"iteration-time", "lm loss"} and listed.source == "c.yaml"
    assert not listed.problems
    for raw in (None, b"MODEL_ARGS:\n  --x: 1\n"):
        plain = r.read_gating(raw, "c.yaml")
        assert plain.metrics == {"lm loss", "num-zeros"} and plain.source == "default"
        assert not plain.problems


@pytest.mark.parametrize(
    "raw",
    [
        b"METRICS: lm loss\n",
        b"METRICS:\n  - [1]\n",
        b"- METRICS\n",
        b"METRICS: [\n",
        b'"\\x4dETRICS": 1\n',  # spelt with an escape: read, and no list
    ],
)
def test_a_config_that_says_nothing_readable_keeps_the_default_and_a_warning(raw: bytes) -> None:
    got = r.read_gating(raw, "c.yaml")
    assert got.metrics == {"lm loss", "num-zeros"}
    assert got.problems and all(p.severity is Severity.WARNING for p in got.problems)
    assert all(p.location.file == "c.yaml" for p in got.problems)


# ---------------------------------------------------------------- showing


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0.0, "0%"),
        (-0.000267123, "-0.000267%"),
        (17.6711, "+17.7%"),
        (95.0, "+95.0%"),
        (123.4, "+123%"),
        (12345.6, "+12,346%"),
        (3e-9, "+<0.000001%"),
        (2e9, "+2.00e+09%"),
    ],
)
def test_percentages_keep_three_significant_digits(value: float, shown: str) -> None:
    assert g.pct(value) == shown


def test_figures_sum_and_pick_over_the_chosen_files() -> None:
    def metric(name: str, gated: bool, **kw: Any) -> g.MetricChange:
        return g.MetricChange(name=name, gated=gated, **{"status": "changed", **kw})

    files = (
        g.GoldenFile(
            path="a",
            status="changed",
            fields={"test_case": "a"},
            jobs=(g.GoldenJob("t", "gpt", "a"),),
            metrics=(
                metric(
                    "lm loss",
                    True,
                    mean_rel_change_pct=-3.0,
                    max_abs_rel_change_pct=4.0,
                    max_step="7",
                    steps_removed=2,
                ),
                metric(
                    "time",
                    False,
                    mean_rel_change_pct=50.0,
                    max_abs_rel_change_pct=90.0,
                    non_finite_new=1,
                ),
            ),
        ),
        g.GoldenFile(path="b", status="added", fields={"test_case": "b"}),
    )
    review = g.GoldenReview(template="x", files=files)
    every = review.figures()
    assert (every.files, every.orphans, every.missing, every.nonfinite) == (2, 1, 2, 1)
    assert (every.max, every.mean) == (4.0, 3.0)  # the ungated metric is left out
    assert every.places["max"] == "lm loss at step 7 of a"
    flat = g.GoldenReview(
        template="x",
        files=(
            g.GoldenFile(
                path="c",
                status="changed",
                fields={"test_case": "c"},
                metrics=(
                    metric(
                        "lm loss",
                        True,
                        status="unchanged",
                        mean_rel_change_pct=0.0,
                        max_abs_rel_change_pct=0.0,
                        max_step="1",
                    ),
                ),
            ),
        ),
    ).figures()
    assert (flat.max, flat.places["max"]) == (0.0, "lm loss at step 1 of c")  # measured: 0%
    only_b = review.figures(lambda case: case == "b")
    assert (only_b.files, only_b.others, only_b.max, only_b.orphans) == (1, 1, 0.0, 1)


# Sample texts the fast reader must read as the careful one does, or leave to it.
SAMPLE_TEXTS = [
    "NaN",  # not JSON: Python's json.dump writes it, the careful reader reads it
    "Infinity",
    "-Infinity",
    '"nan"',  # a string: counted as non-finite
    '"inf"',
    "-0",  # an int: 0
    "-0.0",  # negative zero, a float
    "0e0",
    "1e400",  # past the floats' range: infinite
    "-1e400",
    "1e-400",  # below it: 0.0
    str(2**64 - 1),
    str(2**64),  # past 64 bits
    str(2**64 + 1),
    str(-(2**63)),
    str(-(2**63) - 1),  # below 64 bits
    "9" * 25,
    "9" * 301,  # past _WHOLE_DIGITS: a float
    "0.12345678901234567890123",  # 20 digits in a row, not a whole number
    "true",  # no number: counted as non-finite, said
    "null",
    "[]",
    "{}",
    '"\\ud800"',  # a lone surrogate
    '"\\u00e9"',
    '"a\\":"',  # a key ending inside a string
]
STEP_KEYS = ["01", "-0", "-00", "+1", "-1", "x", "1.5", "", " 1", "\u0661", "1_0", "\\u0031"]
STEP_KEYS += ["9" * 18, "9" * 19, "-" + "9" * 18, "1" + "0" * 19]
EXTRA_KEYS = ["start_step", "end_step", "step_interval", "other", "values"]
_blank = st.sampled_from(["", " ", "\n  ", "\t"])


@st.composite
def golden_texts(draw: st.DrawFn) -> bytes:
    """A golden-values file as text: mostly the training layout, with the
    dangerous values, steps that are no whole number or are missing, keys given
    twice, other keys beside `values`, and now and then not the layout at all."""

    def obj(pairs: list[tuple[str, str]]) -> str:
        sep = draw(_blank)
        return "{" + ",".join(f"{sep}{json.dumps(k)}{draw(_blank)}:{v}" for k, v in pairs) + "}"

    sample = st.one_of(
        st.floats(allow_nan=False, allow_infinity=False).map(json.dumps),
        # Numbers written otherwise than Python writes them: rounded alike?
        st.from_regex(r"-?(0|[1-9][0-9]{0,8})\.[0-9]{1,9}([eE][-+]?[0-9]{1,3})?", fullmatch=True),
        st.integers(min_value=-(2**70), max_value=2**70).map(str),
        st.sampled_from(SAMPLE_TEXTS),
    )
    step = st.one_of(st.integers(0, 60).map(str), st.sampled_from(STEP_KEYS))
    metrics = []
    for name in draw(st.lists(st.sampled_from(["lm loss", "num-zeros", 'a":', "é"]), max_size=4)):
        values = draw(st.lists(st.tuples(step, sample), max_size=12))  # a step may come twice
        entry = [("values", obj(values))] if draw(st.booleans()) or not values else []
        entry += [
            (k, draw(sample)) for k in draw(st.lists(st.sampled_from(EXTRA_KEYS), max_size=2))
        ]
        metrics.append((name, obj(draw(st.permutations(entry)))))
    if not metrics:
        return draw(st.sampled_from([b"{}", b"[]", b"1"]))
    return obj(metrics).encode()


def _careful(raw: bytes) -> r.GoldenValues:
    real = r._fast
    try:
        r._fast = lambda data: None  # type: ignore[assignment]
        return r.parse_golden(raw, "f.json", "head")
    finally:
        r._fast = real


def _layout(metrics: dict[str, dict[str, str]]) -> bytes:
    body = ", ".join(
        f'{json.dumps(name)}: {{"start_step": 1, "values": {{'
        + ", ".join(f'"{k}": {v}' for k, v in values.items())
        + "}}"
        for name, values in metrics.items()
    )
    return ("{" + body + "}").encode()


@given(raw=golden_texts())
@example(raw=_layout({"lm loss": {"1": "NaN", "2": '"nan"', "3": "Infinity"}}))
@example(raw=_layout({"lm loss": {"1": str(2**64), "2": str(-(2**63) - 1), "3": "9" * 301}}))
@example(raw=_layout({"lm loss": {"1": "-0.0", "2": "-0", "3": "0.0"}}))
@example(raw=_layout({"lm loss": {"1": "1e400", "2": "-1e400", "3": "1e-400"}}))
@example(raw=_layout({"lm loss": {"1": "2.2250738585072012e-308", "2": "1.00000000000000005"}}))
@example(raw=_layout({"lm loss": {"1": "1.5", "3": "2.5"}, "num-zeros": {}}))  # missing steps
@example(raw=_layout({"lm loss": {"x": "1", "01": "2", "-1": "3", "1.5": "4", "": "5"}}))
@example(raw=b'{"a": {"values": {"1": 1, "2": 2, "1": 3}}}')  # a step twice
@example(raw=b'{"a": {"values": {"0": 0.0, "": 0.0}}}')  # an empty step beside a step
@example(raw=b'{"a": {"values": {"1": 1}}, "a": {"values": {"1": 2}}}')  # a metric twice
@example(raw=b'{"a": {"values": {"1": 1}, "values": {"2": 2}}}')
@example(raw=_layout({'x":': {"1": "1"}}))  # a key ending inside a string
@example(raw=_layout({"lm loss": {"1": "true", "2": "[]", "3": "{}", "4": "null"}}))
@example(raw=_layout({"lm loss": {"1": '"\\ud800"', "2": '"\\u00e9"'}}))
@example(raw=_layout({"lm loss": {"\\u0031": "1", "1": "2"}}))  # one step, spelled twice
@example(raw=_layout({"lm loss": {"1": "1", "01": "2", "-0": "3", "0": "4"}}))
@example(raw=_layout({"lm loss": {"9" * 18: "1", "9" * 19: "2", "-1": "3"}}))
@example(raw=b'{"a:b": {"values": {"1": "x:y"}}}')  # colons inside strings
@example(raw=b'{"a": {"values": {"1": 1}, "other": 2}}')  # a key the layout lacks
@example(raw=b'{"a": {"end_step": 3}}')  # no values
@example(raw=b'\xef\xbb\xbf{"a": {"values": {"1": 1}}}')  # a byte order mark
@example(raw=b'{"a": {"values": {"1": "\xff"}}}')  # no UTF-8
@example(raw=b"[]")
def test_the_fast_reader_reads_what_the_careful_one_reads(raw: bytes) -> None:
    """Whatever the text, the fast reader's values, spellings and findings are
    the careful reader's (NaN and 1e+400 spelled alike by repr, an int told
    from a float, -0.0 from 0.0)."""
    assert repr(r.parse_golden(raw, "f.json", "head")) == repr(_careful(raw))


def test_the_fast_reader_reads_the_usual_file_and_leaves_the_rest() -> None:
    usual = _layout({"lm loss": {"1": "10.5", "2": "10.25"}, "num-zeros": {"1": "3", "2": '"nan"'}})
    assert r._fast(usual) == {"lm loss": {1: 10.5, 2: 10.25}, "num-zeros": {1: 3, 2: "nan"}}
    for raw in (
        b'{"a": {"values": {"1": 1, "2": 2, "1": 3}}}',  # msgspec keeps the last "1" silently
        _layout({"lm loss": {"1": "NaN"}}),
        _layout({"lm loss": {"1": str(2**64)}}),
        _layout({"lm loss": {"1": "true"}}),
        _layout({"lm loss": {"01": "1"}}),  # a step written otherwise than as itself
        _layout({"lm loss": {"-0": "1"}}),
        _layout({"lm loss": {"9" * 19: "1"}}),  # no whole number to the careful reader
        b'{"a": {"values": {"1": 1}, "other": 2}}',
    ):
        assert r._fast(raw) is None, raw
    got = r.parse_golden(b'{"a": {"values": {"1": 1, "2": 2, "1": 3}}}', "f.json", "head")
    assert [p.code for p in got.problems] == ["golden-duplicate"]
