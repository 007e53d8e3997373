"""`matrixgen report`: a static HTML site of what matrixgen knows, for people
who would rather look than read tables.

Its own pages: Overview (jobs and GPU-hours per pipeline), Selection (cases x
platforms per pipeline, with what quarantine does to each) and the Quarantine
board; the features it is handed (`views.contributions.ReportContribution`,
listed by `cli.features`) add theirs (the results store: Flake history and
Triage) and their columns and notes on these. Every figure comes from the
function that computes it for the other commands (`views.cost`,
`pipeline.Generation.selection`, `quarantine.apply`); this package only lays
them out and imports no other feature.

The site is HTML with inline CSS and SVG: no script, no font, no request to any
other host (each page's Content-Security-Policy forbids them), and every string
from a recipe tree, quarantine file or results store is escaped for its place
(`util.escape.html_text`, `html_attribute`, `html_link`).
"""
