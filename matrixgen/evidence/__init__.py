"""Quarantine from evidence: JUnit XML results of CI runs stored per run, job and
test (`junit`, `mapping`; the store: its schema in `tables`, opening it in
`store`, writing in `ingest`, reading in `queries`), verdicts on them (`flaky`),
entries drafted and lifts proposed from them (`propose`), the evidence shown
beside entries (`summary`), and the pytest plugin that applies a job's
node-level entries in its test process and marks muted tests in the JUnit XML
(`pytest_plugin`).

A feature over the core: it builds on the pipeline, quarantine, emitters and
views, and imports no other feature. What it adds to the report and the diff
it registers (`contributes`); the CLI hands it over.
"""
