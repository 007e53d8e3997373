"""`matrixgen report`: a static HTML site of what matrixgen knows, for people
who would rather look than read tables.

Pages: Overview (jobs and GPU-hours per pipeline), Selection (cases x
platforms per pipeline, with what quarantine does to each), Quarantine board,
Flake history (a test-by-run grid from the results store) and Triage. Every
figure comes from the function that computes it for the other commands
(`views.cost`, `pipeline.Generation.selection`, `quarantine.apply`,
`evidence.flaky`, `evidence.summary`); this package only lays them out.

The site is HTML with inline CSS and SVG: no script, no font, no request to any
other host (each page's Content-Security-Policy forbids them), and every string
from a recipe tree, quarantine file or results store is escaped for its place
(`util.escape.html_text`, `html_attribute`, `html_link`).
"""
