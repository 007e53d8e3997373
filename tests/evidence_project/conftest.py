"""A small real pytest project: the evidence tests run it many times (make_runs.py)
to make JUnit reports. The suite around it must not collect its tests."""

import os

if os.environ.get("EVIDENCE_PROJECT_RUN") != "1":
    collect_ignore_glob = ["*"]
