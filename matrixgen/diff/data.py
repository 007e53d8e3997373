"""The diff as data: the JSON document (`matrixgen diff --format json`, its
shape in docs/reviewing.md and `schema/diff.schema.json`), and the per-pipeline
and cost summaries the text and the comment show of it. A pipeline
(system/scope[/cadence], as `stats --cost` names it) sums its targets; the
summary sums every target, so a job added to two targets counts twice, as the
table shows it. A target object echoes the selector as configured (a scope
stays "nightly"); every target is listed, unchanged ones with empty lists.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from matrixgen.diff.model import (
    QuarantineChange,
    SelectionDiff,
    TargetDiff,
)
from matrixgen.util import jsontext
from matrixgen.util.escape import json_for_log
from matrixgen.util.values import json_value
from matrixgen.views.cost import Cost, hours, pipeline_name, signed_hours

# The job lists of a TargetDiff that its counts and the summary count.
_COUNTED = ("added", "removed", "changed", "quarantine")


def to_json_data(diff: SelectionDiff) -> dict[str, Any]:
    """The documented JSON shape."""
    return {
        "base": diff.base,
        "head": diff.head,
        "targets": [_target_data(t) for t in diff.targets],
        "summary": summary_data(diff),
        "findings": {
            "added": json_value(diff.findings_added),
            "removed": json_value(diff.findings_removed),
        },
        "notes": list(diff.notes),
        **({"evidence": dict(diff.evidence)} if diff.evidence is not None else {}),
        **({"golden_changes": json_value(diff.goldens.files)} if diff.goldens is not None else {}),
    }


def _quarantine_data(q: QuarantineChange) -> dict[str, Any]:
    return {
        "change": q.change,
        "job": json_value(q.job),
        "old": json_value(q.old),
        "new": json_value(q.new),
        **({"habit": json_value(q.habit)} if q.habit is not None else {}),
        **({"parser": q.parser} if q.parser is not None else {}),
    }


def render_json(diff: SelectionDiff) -> str:
    return json_for_log(jsontext.pretty(to_json_data(diff)))


def _target_data(t: TargetDiff) -> dict[str, Any]:
    starts, stops = t.running_changes()
    return {
        # A holding pen is no system's target.
        "target": {**json_value(t.target.place), **({"system": None} if t.holding_pen else {})},
        "name": t.target.name,
        "added": [json_value(j) for j in t.added],
        "removed": [json_value(j) for j in t.removed],
        "changed": [
            {"job": json_value(c.head), "fields": {k: [v[0], v[1]] for k, v in c.fields.items()}}
            for c in t.changed
        ],
        "quarantine": [_quarantine_data(q) for q in t.quarantine],
        "moved_out": [{"job": json_value(m.job), "to": m.target} for m in t.moved_out],
        "moved_in": [{"job": json_value(m.job), "from": m.target} for m in t.moved_in],
        "duplicates": [
            {
                "change": d.change,
                "job": json_value(d.job),
                "locations": [str(w) for w in d.locations],
            }
            for d in t.duplicates
        ],
        "settings": {k: [v[0], v[1]] for k, v in t.settings.items()},
        "exists": t.exists,
        **({"holding_pen": True} if t.holding_pen else {}),
        "counts": {
            **{k: len(getattr(t, k)) for k in (*_COUNTED, "moved_out", "moved_in")},
            "parser": t.parser_counts(),
            "starts": len(starts),
            "stops": len(stops),
        },
        "jobs": {"base": t.base_jobs, "head": t.head_jobs},
        **_cost_fields(t.base_cost, t.head_cost),
    }


def _cost_fields(before: Cost, after: Cost) -> dict[str, float]:
    """GPU-hours before, after and the change, as rounded figures whose
    difference is the change shown."""
    out: dict[str, float] = {}
    for prefix, a, b in (
        ("gpu_hours", before.gpu_hours_max, after.gpu_hours_max),
        ("weighted_gpu_hours", before.weighted_max, after.weighted_max),
    ):
        old, new = round(a, 3), round(b, 3)
        out[f"{prefix}_before"] = old
        out[f"{prefix}_after"] = new
        out[f"{prefix}_delta"] = round(new - old, 3) + 0.0  # never -0.0
    return out


def cost_totals(targets: Sequence[TargetDiff]) -> tuple[Cost, Cost]:
    """One run of each of the targets, before and after."""
    return sum((t.base_cost for t in targets), Cost()), sum((t.head_cost for t in targets), Cost())


def pipelines(diff: SelectionDiff) -> list[tuple[str, list[TargetDiff]]]:
    """The targets of each pipeline (one run of it), in pipeline order."""
    grouped: dict[str, list[TargetDiff]] = defaultdict(list)
    for t in diff.targets:
        if not t.holding_pen:  # no pipeline runs a holding pen
            grouped[pipeline_name(t.target)].append(t)
    return sorted(grouped.items())


def _pipeline_data(name: str, targets: Sequence[TargetDiff]) -> dict[str, Any]:
    before = sum(t.base_jobs for t in targets)
    after = sum(t.head_jobs for t in targets)
    return {
        "pipeline": name,
        "jobs_before": before,
        "jobs_after": after,
        "jobs_delta": after - before,
        **_cost_fields(*cost_totals(targets)),
    }


def summary_data(diff: SelectionDiff) -> dict[str, Any]:
    """The per-target counts and costs summed over every target."""
    targets = diff.targets
    parser = [t.parser_counts() for t in targets]
    return {
        "targets": len(targets),
        "targets_changed": sum(not t.unchanged for t in targets),
        **{k: sum(len(getattr(t, k)) for t in targets) for k in _COUNTED},
        "moved": sum(len(t.moved_out) for t in targets),
        "moves": [{"from": a, "to": b, "jobs": n} for (a, b), n in moves(diff)],
        "parser": {k: sum(p[k] for p in parser) for k in ("added", "removed")},
        "findings_added": len(diff.findings_added),
        "findings_removed": len(diff.findings_removed),
        "duplicates": sum(len(t.duplicates) for t in diff.targets),
        **_cost_fields(*cost_totals(diff.targets)),
        "pipelines": [_pipeline_data(n, ts) for n, ts in pipelines(diff)],
    }


def moves(diff: SelectionDiff) -> list[tuple[tuple[str, str], int]]:
    """((from, to), jobs) for each pair of targets jobs moved between, in order."""
    return sorted(
        Counter((t.target.name, m.target) for t in diff.targets for m in t.moved_out).items()
    )


def cost_change(pipeline: Mapping[str, Any], name: str | None = None) -> str:
    """ "+6 jobs, +12.5 GPU-h per run of gitlab/mr" (the weighted change beside it
    where platform weights make it differ); `name` shows the pipeline (escaped
    for where it goes), the figures being the diff's own text."""
    jobs = pipeline["jobs_delta"]
    text = f"{jobs:+d} jobs" if jobs else "0 jobs"
    text += f", {signed_hours(pipeline['gpu_hours_delta'])} GPU-h"
    if pipeline["weighted_gpu_hours_delta"] != pipeline["gpu_hours_delta"]:
        text += f" ({signed_hours(pipeline['weighted_gpu_hours_delta'])} weighted)"
    return text + f" per run of {pipeline['pipeline'] if name is None else name}"


def changed_pipelines(summary: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The pipelines whose job count or cost changes."""
    return [
        p
        for p in summary["pipelines"]
        if p["jobs_delta"] or p["gpu_hours_delta"] or p["weighted_gpu_hours_delta"]
    ]


def cost_line(summary: Mapping[str, Any], arrow: str = "->") -> str:
    return (
        f"{signed_hours(summary['gpu_hours_delta'])} GPU-h per run of every target "
        f"({hours(summary['gpu_hours_before'])} {arrow} {hours(summary['gpu_hours_after'])}; "
        "an upper bound, as stats --cost prices it)"
    )


def target_cost(t: TargetDiff, arrow: str = "->", unit: str = " GPU-h") -> str:
    before, after = hours(t.base_cost.gpu_hours_max), hours(t.head_cost.gpu_hours_max)
    if before == after:
        return f"{after}{unit}"
    return f"{signed_hours(t.gpu_hours_delta)}{unit} ({before} {arrow} {after})"
