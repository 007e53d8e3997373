"""A failure's reason (results/reasons.py): masking is idempotent, does not
change when a masked part does, and keeps apart what differs elsewhere."""

from __future__ import annotations

import re
import time

from hypothesis import example, given
from hypothesis import strategies as st

from matrixgen.results.junit import MESSAGE_LIMIT, Outcome
from matrixgen.results.reasons import REASON_LIMIT, kind_of, mask, reason

# Text that reaches every rule: digits, hex letters, quotes of both kinds, the
# characters a path, an address or a number is made of, blanks, placeholders'
# own characters, line breaks (CR, LF, and U+2028, which is not one here) and
# non-ASCII letters and digits.
_DANGEROUS = "0123456789abcdefxX.:-_/\\'\" \t\r\n\u2028()[]=,;<>…nqTtmp٣é"
TEXT = st.text(alphabet=st.sampled_from(list(_DANGEROUS)) | st.characters(), max_size=120)


@given(TEXT)
@example("")
@example("1234567890")
@example("x" * 100_000)
@example("1 " * 5_000)  # masks to a text longer than it was
@example("Ошибка: значение 5 ≠ 7 — ✓ ٣")
@example("first 1\nsecond 2")
@example("first 1\r\nsecond 2")
@example("line\u2028same line 3")
@example("""said 'a "b" c' and "it's" """)
@example("can't 'open")  # an apostrophe and an unterminated quote
@example("5'x' =7'y' /tmp/a5/b.txt: 0x7f 10.0.0.1:80")
@example("value <n> and <tmp> and '<q>'")  # placeholders in the message itself
@example("/tmp/x/tmp/y:")
@example("ab:cd:9g 1:2:3")
@example("x5abc1234567 deadbeef12 -0x1")
def test_masking_is_idempotent(text: str) -> None:
    once = mask(text)
    assert mask(once) == once
    assert "\n" not in once and "\r" not in once


# ----------------------------------------------------------------- masked parts

_WORDS = st.sampled_from(
    ["assert", "loss", "at", "step", "==", "!=", "failed", "KeyError:", "worker", "(", ")",
     "got", "expected", "on", "connect", "timeout", "écrit", "—", "of", "rank", "[", "]"]
)  # fmt: skip
_SEGMENT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=8)
_HEX = st.text(alphabet="0123456789abcdef", min_size=6, max_size=40).filter(
    lambda h: any(c.isdigit() for c in h)
)


def _values() -> dict[str, st.SearchStrategy[str]]:
    return {
        "number": st.one_of(
            st.integers(0, 10**15).map(str),
            st.floats(0, 1e9, allow_nan=False).map(lambda f: f"{f:.4f}"),
            st.tuples(st.integers(1, 9), st.integers(-20, 20)).map(lambda t: f"{t[0]}e{t[1]}"),
        ),
        "hex": _HEX,
        "uuid": st.uuids().map(str),
        "ipv4": st.tuples(
            st.lists(st.integers(0, 255), min_size=4, max_size=4),
            st.none() | st.integers(1, 65535),
        ).map(lambda t: ".".join(map(str, t[0])) + (f":{t[1]}" if t[1] else "")),
        "pointer": _HEX.map(lambda h: "0x" + h),
        "tmp": st.tuples(
            st.sampled_from(["/tmp", "/var/tmp", "/dev/shm", "/private/var/folders", "/tmp"]),
            st.lists(_SEGMENT, max_size=5),
            st.sampled_from(["", ".txt", ".log"]),
        ).map(lambda t: "/".join([t[0], *t[1]]) + (t[2] if t[1] else "")),
        "single": st.text(st.characters(exclude_characters="'\r\n"), max_size=30).map(
            lambda v: f"'{v}'"
        ),
        "double": st.text(st.characters(exclude_characters='"\r\n'), max_size=30).map(
            lambda v: f'"{v}"'
        ),
    }


_KINDS = sorted(_values())


@st.composite
def _templates(draw: st.DrawFn) -> list[tuple[str, str]]:
    """Parts of a message: ("word", text) or ("slot", kind), one blank apart."""
    parts = draw(
        st.lists(
            st.one_of(
                _WORDS.map(lambda w: ("word", w)),
                st.sampled_from(_KINDS).map(lambda k: ("slot", k)),
            ),
            min_size=1,
            max_size=10,
        )
    )
    return parts


def _fill(draw: st.DrawFn, parts: list[tuple[str, str]]) -> str:
    values = _values()
    return " ".join(text if what == "word" else draw(values[text]) for what, text in parts)


@given(data=st.data(), parts=_templates())
@example(data=None, parts=[("word", "KeyError:"), ("slot", "single")])
def test_a_reason_does_not_change_when_a_masked_part_does(
    data: st.DataObject | None, parts: list[tuple[str, str]]
) -> None:
    if data is None:  # the explicit example: two fixed fills
        first, second = "KeyError: 'layer.0'", "KeyError: 'decoder.layers.11.mlp'"
    else:
        first, second = _fill(data.draw, parts), _fill(data.draw, parts)
    assert mask(first) == mask(second), (first, second)
    assert reason("failure", first) == reason("failure", second)


@given(data=st.data(), parts=_templates(), others=_templates())
@example(data=None, parts=[("word", "loss")], others=[("word", "timeout")])
def test_different_words_or_kinds_are_different_reasons(
    data: st.DataObject | None,
    parts: list[tuple[str, str]],
    others: list[tuple[str, str]],
) -> None:
    words = [t for w, t in parts if w == "word"]
    if data is None:
        first, second = "loss", "timeout"
    else:
        first, second = _fill(data.draw, parts), _fill(data.draw, others)
    if (
        [w for w, _ in parts] == [w for w, _ in others]
        and words == [t for w, t in others if w == "word"]
        and [t for w, t in parts if w == "slot"] == [t for w, t in others if w == "slot"]
    ):
        return  # the same template: the test above
    if _shape(parts) != _shape(others):
        assert mask(first) != mask(second), (first, second)
    assert reason("failure", first) != reason("error", first)


def _shape(parts: list[tuple[str, str]]) -> list[str]:
    """What a template masks to, part by part (every slot kind to its placeholder)."""
    shown = {
        "tmp": "<tmp>",
        "single": "'<q>'",
        "double": '"<q>"',
        "ipv4": "<addr>",
        "pointer": "<addr>",
    }
    return [t if w == "word" else shown.get(t, "<n>") for w, t in parts]


def test_what_each_kind_of_value_masks_to() -> None:
    cases = {
        "assert 3 == 4": "assert <n> == <n>",
        "loss 2.31 at step 100, golden value 2.29": "loss <n> at step <n>, golden value <n>",
        "KeyError: 'layer.0'": "KeyError: '<q>'",
        "can't open /tmp/pytest-of-ci/pytest-3/test_a0/f.txt: errno 2": (
            "can't open <tmp>: errno <n>"
        ),
        r"C:\Users\ci\AppData\Local\Temp\x1\f.txt missing": "<tmp> missing",
        "connect to 10.0.0.12:29500 failed": "connect to <addr> failed",
        "segfault at 0x7fff5a3b in rank 3": "segfault at <addr> in rank <n>",
        "commit 4685540b4413 not found": "commit <n> not found",
        "bf16 vs fp8 on sm_90": "bf<n> vs fp<n> on sm_<n>",
        "  blanks\t\tand  tabs  ": "blanks and tabs",
        "first line 1\nsecond line": "first line <n>",
    }
    assert {text: mask(text) for text in cases} == cases


def test_a_reason_names_its_kind_and_is_bounded() -> None:
    assert reason("failure", "") == "failure (no message)"
    assert reason("error", "\nonly a second line") == "error (no message)"
    assert reason("failure", "boom 42") == "failure: boom <n>"
    long = reason("failure", "1 " * 10_000)
    assert len(long) == REASON_LIMIT and long.startswith("failure: <n> <n>")
    assert kind_of(Outcome.ERROR) == "error"
    assert kind_of(Outcome.FAILED) == "failure"
    assert kind_of(Outcome.MUTED, Outcome.ERROR) == "error"
    assert kind_of(Outcome.MUTED) == "failure"


def test_the_cost_of_a_reason_is_bounded_whatever_the_message() -> None:
    """Only MESSAGE_LIMIT characters are masked: a message of megabytes costs
    what its first 300 characters do (quotes that never close included)."""
    hostile = ["'" * 2_000_000, "/tmp/" + ":" * 2_000_000, "0" * 2_000_000, "a:" * 1_000_000]
    began = time.process_time()
    for text in hostile:
        reason("failure", text)
    assert time.process_time() - began < 1.0
    assert len(re.sub("<n>", "", mask("0" * MESSAGE_LIMIT))) == 0
