"""Stable YAML for the pipelines CI reads: key order as built, strings quoted
wherever GitLab's YAML 1.1 reader would read them as something else."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from matrixgen.util.escape import YAML_WIDTH, yaml_double_quoted, yaml_for_log

# GitLab reads YAML with Ruby's Psych, a YAML 1.1 reader that turns more plain
# scalars into non-strings than PyYAML quotes for: `0,1,2,3` (commas dropped: the
# octal int 83), `1,000`, `01:30` (sexagesimal 90), `:x` (a symbol), `yEs`, `nO`.
# A plain scalar is only left plain where Psych takes it for a string at once: it
# starts like a word (Psych's own test) and is not one of the YAML 1.1 words.
_PSYCH_WORDLIKE = re.compile(r"[^\d.:-]?[A-Za-z_\s!@#$%^&*(){}<>|/\\~;=]+")
_YAML11_WORDS = frozenset({"~", "null", "yes", "true", "on", "no", "false", "off"})


def read_as_text_by_yaml11(value: str) -> bool:
    """Whether a YAML 1.1 reader (Psych) reads `value`, written plain, as that text."""
    if "\n" not in value and not _PSYCH_WORDLIKE.match(value):  # prefix
        return False
    return len(value) > 5 or value.lower() not in _YAML11_WORDS


_STR = "tag:yaml.org,2002:str"
_BOOL = "tag:yaml.org,2002:bool"
_INT = "tag:yaml.org,2002:int"
_NULL = "tag:yaml.org,2002:null"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"


def _style(value: str) -> str | None:
    if yaml_double_quoted(value):  # one line, safe to print in a CI log
        return '"'
    return None if read_as_text_by_yaml11(value) else "'"


class _Events:
    """The events PyYAML's SafeDumper emits for plain data (no alias, strings
    quoted where `read_as_text_by_yaml11` says), fed straight to the emitter:
    the representer, node tree and serializer cost several times more."""

    # (value, tag) -> (plain implicit, quoted implicit), as the serializer asks
    # the resolver; values repeat across jobs and targets.
    implicit: ClassVar[dict[tuple[str, str], tuple[bool, bool]]] = {}

    def __init__(self, emit: Any) -> None:
        import yaml

        self.emit = emit
        self.scalar = yaml.ScalarEvent
        self.resolver = yaml.resolver.Resolver()
        self.node = yaml.ScalarNode
        # An event is read, never changed, by the emitter: each distinct one is
        # made once per file (job after job repeats the same keys and values).
        self.mapping = (
            yaml.MappingStartEvent(None, _MAP, True, flow_style=False),
            yaml.MappingEndEvent(),
        )
        self.sequence = (
            yaml.SequenceStartEvent(None, _SEQ, True, flow_style=False),
            yaml.SequenceEndEvent(),
        )
        self.strings: dict[str, Any] = {}

    def flags(self, value: str, tag: str) -> tuple[bool, bool]:
        key = (value, tag)
        found = self.implicit.get(key)
        if found is None:
            resolve = self.resolver.resolve
            found = (
                resolve(self.node, value, (True, False)) == tag,
                resolve(self.node, value, (False, True)) == tag,
            )
            if len(self.implicit) > 200_000:
                self.implicit.clear()
            self.implicit[key] = found
        return found

    def put(self, value: Any) -> None:
        kind = type(value)
        if kind is str:
            event = self.strings.get(value)
            if event is None:
                event = self.strings[value] = self.scalar(
                    None, _STR, self.flags(value, _STR), value, style=_style(value)
                )
            self.emit(event)
        elif kind is dict:
            start, end = self.mapping
            self.emit(start)
            for key, item in value.items():
                self.put(key)
                self.put(item)
            self.emit(end)
        elif kind is list or kind is tuple:
            start, end = self.sequence
            self.emit(start)
            for item in value:
                self.put(item)
            self.emit(end)
        elif kind is bool:
            text = "true" if value else "false"
            self.emit(self.scalar(None, _BOOL, self.flags(text, _BOOL), text))
        elif kind is int:
            text = str(value)
            self.emit(self.scalar(None, _INT, self.flags(text, _INT), text))
        elif value is None:
            self.emit(self.scalar(None, _NULL, self.flags("null", _NULL), "null"))
        else:
            raise TypeError(f"cannot write {kind.__name__} to a GitLab pipeline")


def dump_yaml(document: dict[str, Any], header: str = "") -> str:
    """Stable YAML: key order as built, the C emitter when PyYAML has it."""
    import io

    import yaml

    stream = io.StringIO()
    emitter_class = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    emitter = emitter_class(stream, default_flow_style=False, allow_unicode=True, width=YAML_WIDTH)
    try:
        emit = emitter.emit
        emit(yaml.StreamStartEvent())
        emit(yaml.DocumentStartEvent(explicit=False))
        _Events(emit).put(document)
        emit(yaml.DocumentEndEvent(explicit=False))
        emit(yaml.StreamEndEvent())
    finally:
        emitter.dispose()
    return yaml_for_log(header + stream.getvalue())
