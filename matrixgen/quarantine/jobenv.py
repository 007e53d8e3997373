"""How a test process learns which quarantine entries concern it.

Node-level entries (pytest node ids) act inside the test process: the pytest
plugin reads the quarantine file named by QUARANTINE_VARIABLE and the job's
place and identity from the JOB_VARIABLES. A recipe's script sets them (see
docs/megatron.md); a job whose script never names QUARANTINE_VARIABLE cannot
honour a node-level entry, and emitters refuse to pretend it does.
"""

from __future__ import annotations

QUARANTINE_VARIABLE = "MATRIXGEN_QUARANTINE"

# Field of the job -> the variable that carries it into the test process.
JOB_VARIABLES: dict[str, str] = {
    "system": "MATRIXGEN_SYSTEM",
    "scope": "MATRIXGEN_SCOPE",
    "platform": "MATRIXGEN_PLATFORM",
    "environment": "MATRIXGEN_ENVIRONMENT",
    "model": "MATRIXGEN_MODEL",
    "test_case": "MATRIXGEN_TEST_CASE",
    "tag": "MATRIXGEN_TAG",
}


def reaches_plugin(script_text: str) -> bool:
    """Whether a job's script hands the quarantine file to its test process."""
    return QUARANTINE_VARIABLE in script_text
