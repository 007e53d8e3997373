"""A small real pytest project for the triage tests: tests/triage_fixtures.py
runs it several times (baseline runs on main, runs of a merge request). The
suite around it must not collect its tests."""

import os

if os.environ.get("TRIAGE_PROJECT_RUN") != "1":
    collect_ignore_glob = ["*"]
