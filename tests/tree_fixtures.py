"""Recipe trees written as text, and a shipped or hand-written tree, shared by the
loading, expansion, validation and CLI tests (not a test module)."""

from __future__ import annotations

import re
from pathlib import Path

BUILD = """
type: build
format_version: 1
spec:
  name: mcore-pyt-{env}
  platforms: [linux/amd64]
"""


def v1_tree(products: str, spec_extra: str = "") -> dict[str, str]:
    return {
        "_build-dev.yaml": BUILD.replace("{env}", "dev"),
        "_build-lts.yaml": BUILD.replace("{env}", "lts"),
        "h100/gpt.yaml": f"""
type: basic
format_version: 1
spec:
  name: "{{test_case}}_{{environment}}_{{platforms}}"
  model: gpt
  build: mcore-pyt-{{environment}}
  nodes: 1
  gpus: 8
  n_repeat: 5
  platforms: dgx_a100
{spec_extra}
products:
{products}
""",
    }


def v2_tree(products: str, spec_extra: str = "") -> dict[str, str]:
    return {
        "matrixgen.yaml": """
format_version: 2
vocabulary:
  platforms: [dgx_h100, dgx_gb200]
  environments: [dev, lts]
  scopes: {github: [L0, L1], gitlab: [mr, mr-slim, nightly]}
  tags: [latest, legacy]
defaults:
  time_limit: 2700
  n_repeat: 5
""",
        "_build.yaml": """
type: build
format_version: 2
spec: {name: "img-{environment}"}
""".replace("{environment}", "dev"),
        "gpt.yaml": f"""
type: basic
format_version: 2
spec:
  name: "{{test_case}}_{{environment}}_{{platforms}}"
  model: gpt
  build: img-{{environment}}
  platforms: dgx_h100
  env: {{NVTE_FLASH_ATTN_V4: 0, SHARED: spec}}
  args: ["--flash-attention-version", "2"]
{spec_extra}
products:
{products}
""",
    }


HAND_TREE = {
    "_build-mcore-dev.yaml": """
type: build
format_version: 1
spec: {name: mcore-pyt-dev, platforms: [linux/amd64]}
""",
    "h100/gpt.yaml": """
type: basic
format_version: 1
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: gpt
  build: mcore-pyt-{environment}
  platforms: dgx_a100
products:
  - test_case: [a_mr_and_github]
    products:
      - environment: [dev]
        scope: [mr, mr-github]
        platforms: [dgx_h100]
  - test_case: [b_nightly_default_platform]
    products:
      - environment: [dev]
        scope: [nightly]
  - test_case: [c_weekly_block_cadence]
    cadence: [pr]
    products:
      - environment: [dev]
        scope: [weekly]
        platforms: [dgx_h100]
  - test_case: [d_slim]
    products:
      - environment: [dev]
        scope: [mr-github-slim, mr-slim]
        platforms: [dgx_h100]
  - test_case: [e_broken]
    products:
      - environment: [dev]
        scope: [mr-broken]
        platforms: [dgx_h100]
  - test_case: [f_l2_written_as_tier]
    products:
      - environment: [dev]
        scope: [L2]
        cadence: [nightly]
        platforms: [dgx_h100]
""",
}


REPO = Path(__file__).resolve().parents[1]


SHIPPED = REPO / "recipes"


LOCATED = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning): ")


def findings_of(err: str) -> list[re.Match]:
    return [m for line in err.splitlines() if (m := LOCATED.match(line))]
