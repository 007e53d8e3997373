"""Hostile text and the reader of emitted runner commands, shared by the escaping tests
(not a test module)."""

from __future__ import annotations

import re

from hypothesis import strategies as st

HOSTILE = st.lists(
    st.sampled_from(
        [
            "::",
            "##[",
            "\n",
            "\r",
            "\r\n",
            " ",
            "\t",
            "\x1b[0K",
            "\u2028",
            "\x85",
            "\\",
            "%",
            ",",
            ":",
            "error",
            "add-mask",
            "stop-commands",
            "x",
            "é",
            "\ud800",
            "\u202e",
        ]
    )
).map("".join)


# What .NET's String.TrimStart() takes for white space (Char.IsWhiteSpace).
_DOTNET_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def runner_commands(output: str) -> list[str]:
    """The lines of output that GitHub's runner would run as workflow commands: it
    reads lines split at \\r, \\n or \\r\\n; a line is a command when it starts
    with `::` after white space, or holds the legacy `##[` anywhere."""
    lines = re.split(r"\r\n|\r|\n", output)
    return [line for line in lines if line.lstrip(_DOTNET_SPACE).startswith("::") or "##[" in line]
