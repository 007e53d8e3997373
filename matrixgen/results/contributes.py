"""What the results store contributes to the other features' outputs, listed
here and nowhere else (`cli/features` hands it over): a light module, each
function named by its path and imported only when called."""

from __future__ import annotations

from matrixgen.views.contributions import DiffContribution, ReportContribution

# `matrixgen report`: every page's store words, the overview's expected
# GPU-hours, the board's evidence and last runs; the Flake history and Triage pages.
REPORT = (
    ReportContribution(
        name="evidence",
        pages=(("flakes.html", "Flake history"), ("triage.html", "Triage")),
        gather="matrixgen.results.site:gather",
    ),
)

# `matrixgen diff`: each quarantine entry's evidence line beside it.
DIFF = (DiffContribution(name="evidence", notes="matrixgen.results.summary:diff_notes"),)
