"""What a pytest node id is, for every place that takes one as a test to leave out.

A node id is `path::name[::name...]`, optionally followed by a parameter part
`[...]`: `tests/unit_tests/test_a.py::TestK::test_b[tp2-bf16]`. It is never a
bare path or directory: pytest's `--deselect` matches by prefix, so
`tests/unit_tests/data/` would leave out every test under that folder.

The rule, as one pattern (`NODE_ID_PATTERN`, the quarantine schema's
`node_ids` items): the path and each name are one or more characters other
than `:`, `[` and line breaks; the parameter part is anything but line breaks,
in brackets. The leading `(?![^\\n]*\\n)` refuses a line break anywhere: it
makes the pattern mean the same under JavaScript's `$` and Python's `re.search`
(whose `$` also matches before a final line break).
"""

from __future__ import annotations

from matrixgen.util.patterns import name_pattern, whole

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
