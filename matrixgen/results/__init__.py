"""Quarantine from evidence: JUnit XML results of CI runs stored per run, job and
test, verdicts on them, entries drafted and lifts proposed from them, and the
pytest plugin that applies a job's node-level entries. A feature over the core;
its modules and what it contributes to the report and the diff:
docs/architecture.md.
"""
