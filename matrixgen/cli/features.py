"""The features whose contributions the report and the diff show, listed once
(they never import a feature); each feature's `contributes` module is imported
only when a command asks."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matrixgen.views.contributions import DiffContribution, ReportContribution

# One line per contributing feature, in the order its contributions show.
FEATURES = ("matrixgen.results.contributes",)


def report_contributions() -> tuple[ReportContribution, ...]:
    return tuple(
        c for module in FEATURES for c in getattr(importlib.import_module(module), "REPORT", ())
    )


def diff_contributions() -> tuple[DiffContribution, ...]:
    return tuple(
        c for module in FEATURES for c in getattr(importlib.import_module(module), "DIFF", ())
    )
