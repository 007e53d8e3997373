"""The published JSON Schemas (schema/ at the repo root) and validation against them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from typing import Any

from matrixgen.documents.yamlio import YamlDocument
from matrixgen.engine.errors import Findings, Severity


@cache
def _validator(name: str) -> Any:
    """The validator of one published schema, read the first time one is asked for."""
    from importlib import resources

    import jsonschema  # heavy: only when a schema check runs

    text = (resources.files("matrixgen") / "schema" / f"{name}.schema.json").read_text("utf-8")
    schema = json.loads(text)
    cls = jsonschema.validators.validator_for(schema)
    return jsonschema.validators.extend(cls, {"required": _required})(schema)


def _required(validator: Any, required: list[str], instance: Any, schema: Any) -> Iterator[Any]:
    """jsonschema's `required`, each error pointing at its property in the
    keyword's list (schema path `.../required/INDEX`, as `items` errors point at
    their item): `error.validator_value[error.relative_schema_path[-1]]` is the
    missing property."""
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    for index, name in enumerate(required):
        if name not in instance:
            yield ValidationError(f"{name!r} is a required property", schema_path=[index])


def check_against_schema(
    name: str,
    document: YamlDocument,
    findings: Findings,
    *,
    severity: Severity = Severity.ERROR,
    data: Any = None,
    leave_out: Callable[[Any], bool] | None = None,
    within: Sequence[str | int] = (),
) -> None:
    """Add one finding per schema violation, located in the document.

    `leave_out` is asked of each jsonschema error (its `validator` keyword, its
    `absolute_path`, its `schema`): the ones it answers True for are left to a
    check that reports them better (or the caller reports them itself), never
    chosen by their message's text. Messages name paths below `within` (an
    error at `within` itself names none)."""
    validator = _validator(name)
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
    message = error.message
    if len(message) > 200:
        message = message[:197] + "..."
    return message.replace("\n", " ")
