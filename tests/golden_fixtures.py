"""The golden-values figures as the issue defines them, worked out in a few
lines over plain JSON values (not a test module): what the comparison's tests
hold matrixgen's figures to."""

from __future__ import annotations

import math
import statistics
from typing import Any


def finite(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def naive(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """One metric's figures from its two `values` objects {step: value}."""
    o = {int(k): v for k, v in old.items()}
    n = {int(k): v for k, v in new.items()}
    both = sorted(s for s in o if s in n and finite(o[s]) and finite(n[s]))
    measured = []
    for s in both:
        if abs(o[s]) < 1e-12:
            continue
        rel = (float(o[s]) - float(n[s])) / float(o[s])
        if math.isfinite(100 * abs(rel)):
            measured.append((s, rel))
    largest = max((100 * abs(r) for _, r in measured), default=None)
    return {
        "steps_compared": len(both),
        "steps_added": len(set(n) - set(o)),
        "steps_removed": len(set(o) - set(n)),
        "steps_skipped": len(both) - len(measured),
        "non_finite_new": sum(not finite(v) for v in n.values()),
        "mean": 100 * statistics.fmean(r for _, r in measured) if measured else None,
        "max": largest,
        # The step as the new file writes it (the last of two spellings of one step).
        "max_step": {int(k): k for k in new}[
            next(s for s, r in measured if 100 * abs(r) == largest)
        ]
        if measured
        else None,
    }
