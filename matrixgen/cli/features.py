"""The features whose contributions other features show, listed once: the
report and the diff loop over what this module hands them and never import a
feature. Each feature lists its contributions in its own `contributes`
module, imported here only when a command asks (never at start-up)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matrixgen.views.contributions import DiffContribution, ReportContribution

# One line per contributing feature, in the order its contributions show.
FEATURES = ("matrixgen.evidence.contributes",)


def report_contributions() -> tuple[ReportContribution, ...]:
    """Every feature's part of `matrixgen report`, in FEATURES' order."""
    return tuple(
        c for module in FEATURES for c in getattr(importlib.import_module(module), "REPORT", ())
    )


def diff_contributions() -> tuple[DiffContribution, ...]:
    """Every feature's notes beside the entries of `matrixgen diff`, in FEATURES' order."""
    return tuple(
        c for module in FEATURES for c in getattr(importlib.import_module(module), "DIFF", ())
    )
