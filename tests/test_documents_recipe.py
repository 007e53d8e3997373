"""documents.recipe holds the recipe shape the published schema states: its
values are named as the schema's properties, required where the schema requires
them, and each key list it checks against is the schema's list."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from matrixgen.documents import recipe
from matrixgen.documents import recipe_fields as fields
from matrixgen.documents.recipe import RecipeFile
from matrixgen.documents.schema import json_schema
from matrixgen.documents.yamlio import parse_yaml
from matrixgen.model.errors import Findings
from matrixgen.model.vocab import RecipeType


def file_fields(cls: type) -> tuple[set[str], set[str]]:
    """(every field, the required ones) of a Struct, leaving out what reading adds."""
    fields = [f for f in msgspec.structs.fields(cls) if f.name not in recipe.READ_FIELDS]
    return {f.name for f in fields}, {f.name for f in fields if f.required}


# The values reading makes are named as the declaration names the keys, and
# required where both format versions require them (a format_version 1 block
# may go without products).
@pytest.mark.parametrize(
    ("cls", "declared"),
    [(recipe.RecipeDoc, fields.RecipeV2), (recipe.Block, fields.Block)],
    ids=["RecipeDoc", "Block"],
)
def test_each_value_is_named_as_the_declaration_names_its_keys(cls: type, declared: type) -> None:
    names, needed = file_fields(cls)
    v2, v2_needed = file_fields(declared)
    v1_needed = file_fields(fields.RecipeV1 if declared is fields.RecipeV2 else fields.BlockV1)[1]
    tag = {"format_version"} if declared is fields.RecipeV2 else set()
    assert names == v2 | tag
    assert needed == (v2_needed & v1_needed) | tag


def test_the_key_lists_read_the_declaration_as_the_schema_does() -> None:
    """Each list the reader checks keys against is what the published schema
    (made from the same Structs) says of them."""
    schema = json_schema(fields.RECIPE)
    v2 = next(
        p["then"]
        for p in schema["allOf"]
        if p["if"]["properties"].get("format_version") == {"const": 2}
    )
    defs = schema["$defs"]
    assert set(v2["properties"]) == fields.TOP_KEYS
    assert set(defs["block_v2"]["properties"]) == fields.BLOCK_KEYS
    assert set(defs["spec_v2"]["properties"]) == fields.KNOWN_SPEC_KEYS_V2
    assert set(defs["row_v2"]["properties"]) == fields.ROW_KEYS_V2
    assert fields.ATTRIBUTE_KEYS_V2 < fields.ROW_KEYS_V2
    spec = defs["spec_v2"]["properties"]
    # Each integer of the spec but `timeout` (the emitters read it as written)
    # is a count of each job.
    counts = {k: r["minimum"] for k, r in spec.items() if r.get("type") == "integer"}
    del counts["timeout"]
    assert counts == fields.COUNT_MINIMUM == {"nodes": 1, "gpus": 0, "n_repeat": 1, "time_limit": 1}
    shapes = {
        str: {"type": "string"},
        tuple[str, ...]: {"type": "array", "items": {"type": "string"}},
        dict[str, str]: {"type": "object", "additionalProperties": {"type": "string"}},
        dict[str, Any]: {"type": "object", "additionalProperties": {}},
    }
    for key, want in fields.SPEC_SHAPES_V2.items():
        rule = {k: v for k, v in spec[key].items() if k != "description"}
        assert rule == shapes[want], key


def read(text: str, kind: RecipeType = RecipeType.BASIC) -> recipe.RecipeDoc:
    findings = Findings()
    document = parse_yaml(text.encode(), "r.yaml", findings)
    assert document is not None and not findings.items
    version = document.data.get("format_version", 1)
    rf = RecipeFile(
        path="r.yaml", rel="r.yaml", document=document, kind=kind, format_version=version
    )
    return recipe.read_recipe(rf, None)


def test_each_value_keeps_the_findings_of_its_own_reading() -> None:
    doc = read(
        """
type: basic
format_version: 2
spec: {name: n, model: m, build: b}
products:
  - test_case: [a]
    products:
      - {scope: [mr], platforms: [p], environment: [dev]}
      - {scope: mr}
  - test_case: [b]
    cadence: [daily]
    products:
      - {scope: [mr]}
"""
    )
    assert not doc.findings
    first, second = doc.products
    assert first.usable and first.test_case == "a" and not first.findings
    good, bad = first.products
    assert good.usable and good.axes == ("scope", "platforms", "environment")
    assert good.values == (["mr"], ["p"], ["dev"])
    assert good.location is not None and (good.location.line, good.location.column) == (8, 9)
    assert not bad.usable
    assert [(f.code, f.location.line) for f in bad.findings] == [("axis-type", 9)]
    # A block whose cadence is wrong yields no rows, and says why, itself.
    assert not second.usable and second.products == ()
    assert [f.code for f in second.findings] == ["cadence-value"]


def test_a_file_that_is_not_a_recipe_has_no_blocks() -> None:
    doc = read("type: basic\nformat_version: 2\nspec: [1]\nproducts: []\n")
    assert doc.spec is None and doc.products == ()
    assert [f.code for f in doc.findings] == ["spec-type"]


def test_rows_are_every_mapping_row_of_every_mapping_block() -> None:
    data = {
        "products": [{"products": [{"a": [1]}, 3, {}]}, 7, {"products": "x"}, {"products": [{}]}]
    }
    assert [where for where, _ in recipe.rows(data)] == [
        ("products", 0, "products", 0),
        ("products", 0, "products", 2),
        ("products", 3, "products", 0),
    ]
    assert list(recipe.rows({"products": {"not": "a list"}})) == []
