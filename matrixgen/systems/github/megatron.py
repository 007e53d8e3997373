"""Megatron-LM's unit-test bucket matrix for GitHub (`matrixgen jet-buckets`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from msgspec import Struct

from matrixgen.documents.recipe import RecipeFile
from matrixgen.emit.limits import Notice, limit_notices
from matrixgen.engine.targets import target_name
from matrixgen.model.errors import Location, RecipeError
from matrixgen.model.jobs import Job, Selector, Target
from matrixgen.model.vocab import DEFAULT_CADENCE, System, resolve_scope
from matrixgen.quarantine.apply import applying_entries, combined_mark
from matrixgen.quarantine.jobenv import script_reaches_plugin
from matrixgen.systems.github.limits import matrix_rows, output_size
from matrixgen.util.escape import json_for_log

if TYPE_CHECKING:
    from matrixgen.pipeline import Generation


class BucketMatrix(Struct, frozen=True, kw_only=True):
    """The GitHub unit-test matrix of one recipe: a row per bucket, in file order."""

    rows: tuple[Any, ...]
    skipped: tuple[tuple[Any, str], ...] = ()  # (bucket, entry ids)
    notices: tuple[Notice, ...] = ()


def bucket_matrix(
    recipe: RecipeFile,
    generation: Generation,
    *,
    system: System,
    scope: str,
    environment: str,
    tag: str,
    platform: str | None,
) -> BucketMatrix:
    """Every test case named in the recipe's blocks, as `{"bucket": name}` (the
    workflow's yq reads every name of every block), less the buckets a skip entry
    takes out of this place. An allow-failure entry cannot be carried by the
    matrix (the workflow reads no such field): it is said, and the bucket runs."""
    spec = recipe.data.get("spec") if isinstance(recipe.data.get("spec"), dict) else {}
    names = [
        name
        for block in (recipe.data.get("products") or [])
        if isinstance(block, dict) and isinstance(block.get("test_case"), list)
        for name in block["test_case"]
    ]
    model = spec.get("model") if isinstance(spec.get("model"), str) else ""
    where = platform or (spec.get("platforms") if isinstance(spec.get("platforms"), str) else "")
    selector = Selector(scope=scope, environment=environment, platform=where, tag=tag)
    target = Target(name=target_name(system, selector), system=system, selector=selector)
    entries = generation.quarantine.entries
    known = {j.test_case for j in generation.jobs}
    rows: list[Any] = []
    skipped: list[tuple[Any, str]] = []
    notices: list[Notice] = []
    for name in names:
        applying = (
            applying_entries(
                _bucket_job(name, model, selector, spec, recipe), entries, target, known
            )
            if isinstance(name, str) and entries
            else []
        )
        mark = combined_mark(applying) if applying else None
        if mark is not None and mark.action == "skip":
            skipped.append((name, mark.id))
            continue
        rows.append({"bucket": name})
        if mark is None:
            continue
        if mark.node_ids and (why := script_reaches_plugin(spec)) is not None:
            raise RecipeError(
                f"entry {mark.id} ({mark.action}) cannot reach the tests of bucket {name} in "
                f"{target.name}: {recipe.path}'s script {why} (docs/megatron.md)"
            )
        if mark.action == "allow-failure":
            notices.append(
                Notice(
                    "bucket-allow-failure",
                    f"entry {mark.id} (allow-failure) on bucket {name}: the bucket matrix has "
                    "no field for it, so the bucket still blocks (use skip, or mute its node ids)",
                )
            )
    what = f"the bucket matrix of {recipe.rel}"
    size = len(_matrix_json(rows).encode("utf-8"))
    notices += limit_notices(matrix_rows(len(rows), what), output_size(size, what))
    return BucketMatrix(rows=tuple(rows), skipped=tuple(skipped), notices=tuple(notices))


def _bucket_job(
    name: str, model: str, selector: Selector, spec: Mapping[str, Any], recipe: RecipeFile
) -> Job:
    """A bucket as the job an entry is matched against (the matrix row has no
    more than its name: the rest is the place asked for)."""
    return Job(
        model=model,
        test_case=name,
        environment=selector.environment or "",
        platform=selector.platform or "",
        tag=selector.tag,
        scope=resolve_scope(selector.scope or ""),
        cadence=DEFAULT_CADENCE,
        name=name,
        build=None,
        n_repeat=1,
        time_limit=1,
        spec=spec,
        recipe=recipe.rel,
        source=Location(recipe.path),
    )


def bucket_text(matrix: BucketMatrix) -> str:
    """Compact JSON on one line, as `jq -c` writes it, safe to print in a log."""
    return _matrix_json(matrix.rows) + "\n"


def _matrix_json(rows: Sequence[Any]) -> str:
    return json_for_log(json.dumps(list(rows), ensure_ascii=False, separators=(",", ":")))
