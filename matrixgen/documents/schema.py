"""A document (the quarantine file, the project config, a recipe) is declared
once, as msgspec Structs. From that declaration `json_schema` writes the JSON
Schema published in schema/, `check_document` validates a read document with
jsonschema (every problem at once, located), and `decode` builds the typed
values with msgspec (a value it refuses located by msgspec's error path).

How a declaration reads as a schema:

- A Struct is an object of its fields; `forbid_unknown_fields` closes it
  (`additionalProperties: false`); a field without a default is required.
- `X | None = None`: the key is optional and null is no value of it (a file
  leaves the key out); `Meta(extra={"nullable": True})` takes null too.
- `Meta(extra={"required": True})` on a field with a default: the file must
  hold the key, and the reader still keeps a value without it (to say so in its
  own words, and list it).
- A Struct's `SCHEMA` (a ClassVar mapping) is added to its object: what no one
  field says (`if`/`then` over two fields, `dependentRequired`, a title); its
  `DESCRIPTIONS` (field name -> text) describe its keys.
- tuple and list: arrays; frozenset and set: arrays of unique items;
  `dict[K, V]`: an object whose keys follow K (`propertyNames`) and values V;
  `dt.date`: a YYYY-MM-DD string; an Enum or Literal: its values.
- A union of Structs tagged by one field (msgspec's `tag_field`): the tag's
  values, the fields every variant has alike, and each variant's own where the
  tag names it (`if`/`then`); `unevaluatedProperties: false` when they forbid
  unknown keys.
- A Struct used in more than one place, or named by a `SCHEMA_NAME` ClassVar,
  is written once under `$defs` (by that name, or its class name in snake case).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from typing import Any

import msgspec
import msgspec.inspect as mi

from matrixgen.documents.yamlio import YamlDocument
from matrixgen.model.errors import Findings, Location, Severity
from matrixgen.model.sections import END

DRAFT = "https://json-schema.org/draft/2020-12/schema"
DATE_PATTERN = f"^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}{END}"


# --------------------------------------------------------------------------- schemas


def json_schema(root: Any) -> dict[str, Any]:
    """The JSON Schema of a document whose top level is `root` (a Struct, or a
    type annotated with the document's `$id` and title): `$id`, title and
    description first, then the rules, then `$defs`."""
    writer = _Writer(root)
    info = mi.type_info(root)
    body = writer.struct_body(info) if isinstance(info, mi.StructType) else writer.type(info)
    head = {key: body.pop(key) for key in _HEAD_KEYS if key in body}
    defs = {name: writer.defs[name] for name in sorted(writer.defs)}
    return {"$schema": DRAFT, **head, **body, **({"$defs": defs} if defs else {})}


class _Writer:
    """One walk over a document's types, naming the Structs it meets more than once."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.defs: dict[str, Any] = {}
        self.names: dict[type, str] = {}
        self.shared = _shared_structs(root)

    def struct_ref(self, info: mi.StructType) -> dict[str, Any]:
        cls = info.cls
        if cls not in self.shared or cls is self.root:
            return self.struct_body(info)
        name = self.names.get(cls)
        if name is None:
            name = self.names[cls] = _def_name(cls)
            self.defs[name] = {}  # placed first: a Struct may refer to itself
            self.defs[name] = self.struct_body(info)
        return {"$ref": f"#/$defs/{name}"}

    def struct_body(self, info: mi.StructType) -> dict[str, Any]:
        extra: Mapping[str, Any] = getattr(info.cls, "SCHEMA", None) or {}
        out: dict[str, Any] = {k: v for k, v in extra.items() if k in _HEAD_KEYS}
        out["type"] = "object"
        if info.forbid_unknown_fields:
            out["additionalProperties"] = False
        required = [f.encode_name for f in info.fields if _required(f)]
        if required:
            out["required"] = required
        described: Mapping[str, str] = getattr(info.cls, "DESCRIPTIONS", None) or {}
        out["properties"] = {
            f.encode_name: self.field(f) | _described(described.get(f.name)) for f in info.fields
        }
        out.update((k, v) for k, v in extra.items() if k not in _HEAD_KEYS)
        return out

    def field(self, field: mi.Field) -> dict[str, Any]:
        nullable = _hints(field.type).get("nullable", False)
        return self.type(field.type, optional=field.default is None and not nullable)

    def type(self, info: mi.Type, *, optional: bool = False) -> dict[str, Any]:
        if isinstance(info, mi.Metadata):
            inner = self.type(info.type, optional=optional)
            return _merged(inner, info.extra_json_schema or {})
        if isinstance(info, mi.UnionType):
            return self.union(info, optional=optional)
        if isinstance(info, mi.StructType):
            return self.struct_ref(info)
        if isinstance(info, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
            out: dict[str, Any] = {"type": "array", "items": self.type(info.item_type)}
            if isinstance(info, (mi.SetType, mi.FrozenSetType)):
                out["uniqueItems"] = True
            return _bounded(out, info, "minItems", "maxItems")
        if isinstance(info, mi.DictType):
            out = {"type": "object"}
            # What a mapping's keys must be past being text: the key type's rules.
            keys = {k: v for k, v in _scalar(info.key_type).items() if k != "type"}
            if keys:
                out["propertyNames"] = keys
            out["additionalProperties"] = self.type(info.value_type)
            return _bounded(out, info, "minProperties", "maxProperties")
        return _scalar(info)

    def union(self, info: mi.UnionType, *, optional: bool) -> dict[str, Any]:
        types = [t for t in info.types if not (optional and isinstance(t, mi.NoneType))]
        structs = [t for t in types if isinstance(t, mi.StructType)]
        if structs and len(structs) == len(types) and structs[0].tag_field is not None:
            return self.tagged(structs)
        if len(types) == 1:
            return self.type(types[0])
        if all(isinstance(t, (mi.LiteralType, mi.EnumType, mi.NoneType)) for t in types):
            return {"enum": [v for t in types for v in _values(t)]}
        plain = [_scalar(t) for t in types if _plain_scalar(t)]
        if len(plain) == len(types):
            return {"type": [p["type"] for p in plain]}
        return {"anyOf": [self.type(t) for t in types]}

    def tagged(self, variants: list[mi.StructType]) -> dict[str, Any]:
        """A union of Structs told apart by one field: that field's values, the
        fields common to all variants, and each variant's where its tag is."""
        tag_field = variants[0].tag_field
        assert tag_field is not None
        common = [f for f in variants[0].fields if all(f in v.fields for v in variants[1:])]
        out: dict[str, Any] = {
            "type": "object",
            "required": [tag_field, *(f.encode_name for f in common if _required(f))],
            "properties": {tag_field: {"enum": [v.tag for v in variants]}}
            | {f.encode_name: self.field(f) for f in common},
        }
        # All closed: what no variant names is refused once, at the top; else each
        # closed variant refuses what it does not name (its tag included).
        closed = all(v.forbid_unknown_fields for v in variants)
        shared = [tag_field, *(f.encode_name for f in common)]
        out["allOf"] = [
            {
                "if": {"properties": {tag_field: {"const": v.tag}}, "required": [tag_field]},
                "then": self.variant(v, shared, closed),
            }
            for v in variants
        ]
        if closed:
            out["unevaluatedProperties"] = False
        return out

    def variant(self, info: mi.StructType, shared: list[str], closed: bool) -> dict[str, Any]:
        """One variant's own rules, where its tag names it: the keys every variant
        has are checked once, outside."""
        body = {k: s for k, s in self.struct_body(info).items() if k != "type"}
        own = {k: s for k, s in body["properties"].items() if k not in shared}
        if closed:
            body.pop("additionalProperties", None)
        elif info.forbid_unknown_fields:  # the shared keys are known here too
            own = {**dict.fromkeys(shared, True), **own}
        body["properties"] = own
        if "required" in body:
            body["required"] = [k for k in body["required"] if k not in shared]
            if not body["required"]:
                del body["required"]
        return body


def _merged(schema: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """`schema` with `extra`'s keywords; both `allOf` lists kept, the schema's first."""
    out = {**schema, **extra}
    if "allOf" in schema and "allOf" in extra:
        out["allOf"] = [*schema["allOf"], *extra["allOf"]]
    return out


def _described(text: str | None) -> dict[str, str]:
    return {"description": text} if text else {}


# The keys of a Struct's SCHEMA written before its object's own, in this order.
_HEAD_KEYS = ("$id", "title", "description")


def _def_name(cls: type) -> str:
    given = getattr(cls, "SCHEMA_NAME", None)
    if given:
        return str(given)
    return re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()


def _shared_structs(root: type) -> set[type]:
    """The Structs met more than once in the walk from `root`, or named for `$defs`."""
    seen: dict[type, int] = {}

    def walk(info: mi.Type) -> None:
        if isinstance(info, mi.StructType):
            seen[info.cls] = seen.get(info.cls, 0) + 1
            if seen[info.cls] == 1:
                for f in info.fields:
                    walk(f.type)
            return
        for child in _children(info):
            walk(child)

    walk(mi.type_info(root))
    return {cls for cls, n in seen.items() if n > 1 or getattr(cls, "SCHEMA_NAME", None)}


def _children(info: mi.Type) -> Iterator[mi.Type]:
    """The types a type is made of: each of its attributes (or their items) that is one."""
    for value in msgspec.structs.astuple(info):
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, mi.Type):
                yield item


def _hints(info: mi.Type) -> Mapping[str, Any]:
    return (info.extra or {}) if isinstance(info, mi.Metadata) else {}


def _required(field: mi.Field) -> bool:
    return field.required or bool(_hints(field.type).get("required"))


def _bounded(out: dict[str, Any], info: Any, low: str, high: str) -> dict[str, Any]:
    if info.min_length is not None:
        out[low] = info.min_length
    if info.max_length is not None:
        out[high] = info.max_length
    return out


def _plain_scalar(info: mi.Type) -> bool:
    """A scalar type without constraints: a union of such is a list of JSON types."""
    if isinstance(info, mi.StrType):
        return info.min_length is info.max_length is info.pattern is None
    if isinstance(info, (mi.IntType, mi.FloatType)):
        return all(getattr(info, attr) is None for attr, _ in _BOUNDS)
    return isinstance(info, (mi.BoolType, mi.NoneType))


def _values(info: mi.Type) -> list[Any]:
    if isinstance(info, mi.LiteralType):
        return list(info.values)
    if isinstance(info, mi.EnumType):
        return [member.value for member in info.cls]
    return [None]


def _scalar(info: mi.Type) -> dict[str, Any]:
    if isinstance(info, mi.StrType):
        out: dict[str, Any] = _bounded({"type": "string"}, info, "minLength", "maxLength")
        if info.pattern is not None:
            out["pattern"] = info.pattern
        return out
    if isinstance(info, (mi.IntType, mi.FloatType)):
        out = {"type": "integer" if isinstance(info, mi.IntType) else "number"}
        out.update((key, v) for attr, key in _BOUNDS if (v := getattr(info, attr)) is not None)
        return out
    if isinstance(info, mi.BoolType):
        return {"type": "boolean"}
    if isinstance(info, mi.NoneType):
        return {"type": "null"}
    if isinstance(info, mi.DateType):
        return {"type": "string", "pattern": DATE_PATTERN, "description": "YYYY-MM-DD."}
    if isinstance(info, (mi.LiteralType, mi.EnumType)):
        return {"enum": _values(info)}
    if isinstance(info, mi.AnyType):
        return {}
    raise TypeError(f"no JSON Schema for {info!r}")


_BOUNDS = (
    ("ge", "minimum"),
    ("gt", "exclusiveMinimum"),
    ("le", "maximum"),
    ("lt", "exclusiveMaximum"),
    ("multiple_of", "multipleOf"),
)


# --------------------------------------------------------------------------- checking


@cache
def _validator(root: Any) -> Any:
    """The validator of one document's schema, made the first time one is asked for."""
    import jsonschema  # heavy: only when a document is checked

    schema = json_schema(root)
    cls = jsonschema.validators.validator_for(schema)
    return jsonschema.validators.extend(cls, {"required": _required_each})(schema)


def _required_each(
    validator: Any, required: list[str], instance: Any, schema: Any
) -> Iterator[Any]:
    """jsonschema's `required`, each error's schema path ending at the missing
    property's index in the keyword's list (as `items` errors point at their item)."""
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    for index, name in enumerate(required):
        if name not in instance:
            yield ValidationError(f"{name!r} is a required property", schema_path=[index])


def check_document(
    root: Any,
    document: YamlDocument,
    findings: Findings,
    *,
    severity: Severity = Severity.ERROR,
    data: Any = None,
    leave_out: Callable[[Any], bool] | None = None,
    within: Sequence[str | int] = (),
) -> None:
    """Add one finding per way the document breaks its declaration, located in it.

    `leave_out` picks, by the jsonschema error's keyword, path or schema (never its
    message's text), the errors a better check reports. Messages name paths below
    `within`."""
    validator = _validator(root)
    instance = document.data if data is None else data
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
    for error in errors:
        if leave_out is not None and leave_out(error):
            continue
        path = list(error.absolute_path)
        where = "/".join(map(str, path[len(within) :])) or ("" if within else "(top level)")
        # A bad key (propertyNames) is reported at the key, not at its mapping.
        at_key = "propertyNames" in error.schema_path and isinstance(error.instance, str)
        findings.add(
            document.locate([*path, error.instance], key=True) if at_key else document.locate(path),
            "schema",
            f"{where}: {_short(error)}" if where else _short(error),
            severity,
        )


def _short(error: Any) -> str:
    """jsonschema messages can quote whole scripts; keep them to one short line."""
    if error.validator == "additionalProperties" and error.validator_value is False:
        return error.message.split(" (")[0] if len(error.message) > 200 else error.message
    if error.validator == "dependentRequired":
        # "'vocabulary' is a dependency of 'targets'", said the other way round.
        present = [k for k, needs in error.validator_value.items() if k in error.instance]
        for key in present:
            missing = [n for n in error.validator_value[key] if n not in error.instance]
            if missing:
                return f"{key} needs {', '.join(missing)} beside it"
    message, shown = error.message, repr(error.instance)
    if len(message) > 200 and len(shown) > 60:
        # The value it quotes shortened, so that what was expected is still said.
        message = message.replace(shown, shown[:57] + "...", 1)
    if len(message) > 200:
        message = message[:197] + "..."
    return message.replace("\n", " ")


# --------------------------------------------------------------------------- decoding


class DecodeError(Exception):
    """A value msgspec refused: where (in the document), and what was expected."""

    def __init__(self, location: Location, message: str) -> None:
        super().__init__(message)
        self.location = location
        self.message = message


_PATH_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def error_path(message: str) -> tuple[list[str | int], str]:
    """msgspec's `... - at `$.a[0].b`` as keys (["a", 0, "b"]) and the message before it."""
    text, sep, at = message.rpartition(" - at `")
    if not sep or not at.startswith("$"):
        return [], message
    # `[...]`: a mapping's key msgspec does not name, said as `*`.
    path = at[1:].rstrip("`").replace("[...]", ".*")
    steps = (found.groups() for found in _PATH_STEP.finditer(path))
    keys: list[str | int] = [int(index) if index is not None else name for name, index in steps]
    return keys, text


def decode(data: Any, into: Any, document: YamlDocument, within: Sequence[str | int] = ()) -> Any:
    """`data` (found at `within` in the document) as the declared type `into`;
    a DecodeError at the value msgspec refused."""
    try:
        return msgspec.convert(data, into)
    except msgspec.ValidationError as exc:
        keys, text = error_path(str(exc))
        path = [*within, *keys]
        where = "/".join(map(str, path)) or "(top level)"
        raise DecodeError(document.locate(path), f"{where}: {text}") from None
