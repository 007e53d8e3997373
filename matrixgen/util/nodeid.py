"""What a pytest node id is, for every place that takes one as a test to leave out
(docs/security.md): `path::name[::name...]` with an optional `[...]` part,
never a bare path (pytest's `--deselect` matches by prefix).

The leading `(?![^\\n]*\\n)` of `NODE_ID_PATTERN` refuses a line break anywhere,
so the pattern means the same in JavaScript and in Python's `re.search`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from matrixgen.util.patterns import name_pattern, whole

T = TypeVar("T")

NODE_ID_PATTERN = r"^(?![^\n]*\n)[^:\[\n\r]+(::[^:\[\n\r]+)+(\[[^\n\r]*\])?$"
# The schema's pattern, for JavaScript readers too; in Python the whole text is
# matched, without the anchors.
_NODE_ID = name_pattern(NODE_ID_PATTERN.removeprefix("^").removesuffix("$"))


def is_node_id(text: str) -> bool:
    """Does `text` name tests inside a file (path::name...), not a path?"""
    return whole(_NODE_ID, text) is not None


def node_id_problem(text: str) -> str | None:
    """Why `text` is not a node id (for a message), or None when it is one."""
    if is_node_id(text):
        return None
    if "\n" in text or "\r" in text:
        return "it holds a line break"
    head = text.split("[", 1)[0]
    if "::" not in head:
        what = "a directory" if head.endswith(("/", "\\")) else "a bare path"
        return (
            f"it is {what}, not path::name: pytest deselects by prefix, so it would "
            "leave out every test under it"
        )
    return "expected path::name[::name...] with an optional [parameters] part"


def base_id(node_id: str) -> str | None:
    """`a.py::test_x` for `a.py::test_x[1-b]`; None for an id without parameters.
    The parameters start at the first `[` after the file's part: a folder may
    have brackets in its name, a class or function may not (a parameter id may
    hold anything, `::` too)."""
    first = node_id.find("::")
    cut = node_id.find("[", first + 2) if first >= 0 else -1
    if cut < 0 or not node_id.endswith("]") or node_id[cut - 1] == ":":
        return None
    return node_id[:cut]


def covers(named: str, node_id: str) -> bool:
    """Does an entry's node id `named` take in the test `node_id`? Exactly when
    they are equal, or `node_id` is a parametrised child of it (`named[...]`):
    never by prefix (`a.py::test_x` does not take in `a.py::test_x_after_restart`,
    nor `a.py::TestK` its methods), whatever pytest's `--deselect` would do. The
    one rule of the pytest plugin, triage and the lift evidence."""
    return node_id == named or base_id(node_id) == named


def decider(named: Mapping[str, T], node_id: str) -> T | None:
    """The value `named` holds for the node id that covers `node_id` (itself,
    else the function it parametrises), or None: `covers` as a lookup."""
    found = named.get(node_id)
    if found is None and (base := base_id(node_id)) is not None:
        found = named.get(base)
    return found
