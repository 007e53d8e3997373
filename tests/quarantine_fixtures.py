"""Recipe trees with a quarantine file, shared by the quarantine tests (not a test
module)."""

from __future__ import annotations

CONFIG = """
format_version: 2
vocabulary:
  platforms: [dgx_h100, dgx_gb200]
  environments: [dev, lts]
  scopes: {github: [L0, L1], gitlab: [mr, mr-slim, nightly]}
  tags: [latest, legacy]
quarantine:
  tracker_base: https://github.com/acme/ml/issues/
  grace_days: 7
"""


BUILD_V2 = """
type: build
format_version: 2
spec: {name: "img-dev"}
"""


# Two EP8 cases on H100 (GitHub L1, GitLab mr, one also mr-slim), a GB200 case,
# and a unit-test bucket whose name looks like a glob.
RECIPE_V2 = """
type: basic
format_version: 2
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: moe
  build: img-dev
  platforms: dgx_h100
products:
  - test_case: [ep8_dist_opt]
    products:
      - {environment: [dev], scope: [L1, mr, mr-slim], platforms: [dgx_h100, dgx_gb200]}
  - test_case: [ep8_muon]
    products:
      - {environment: [dev], scope: [L1, mr], platforms: [dgx_h100]}
  - test_case: [cp2_one_node]
    products:
      - {environment: [dev], scope: [L1, nightly], platforms: [dgx_gb200]}
"""


UNIT_V2 = """
type: basic
format_version: 2
spec:
  name: "{test_case}_{environment}_{tag}"
  model: unit-tests
  build: img-dev
  platforms: dgx_h100
  # The jobs run Megatron-LM's launcher: the script hands the quarantine to pytest.
  script: |-
    export MATRIXGEN_QUARANTINE=quarantine.yaml MATRIXGEN_SCOPE={scope} MATRIXGEN_TAG={tag}
    pytest {test_case}
products:
  - test_case: [tests/unit_tests/models/**/*.py]
    products:
      - {environment: [dev], scope: [mr], tag: [latest, legacy]}
  - test_case: [tests/unit_tests/models/test_gpt.py]
    products:
      - {environment: [dev], scope: [mr], tag: [latest]}
"""


QUARANTINE = """
# Quarantines of the EP8 cases (kept comment)
entries:
  - id: ep8-dist-opt
    tracker: "#7201"
    kind: flaky
    action: skip
    match: {model: moe, test_case: ep8_dist_opt, platforms: [dgx_h100]}
    where: [github/L1, gitlab/mr, gitlab/mr-slim]
    owner: alice
    added: 2025-01-10
    expires: 2099-01-01
    reason: hangs in EP8 all-to-all
  - id: ep8-muon
    tracker: https://github.com/acme/ml/issues/7734
    kind: broken
    action: allow-failure
    match: {test_case: ep8_muon}
    where: [gitlab/mr]
    owner: bob
    expires: 2099-01-01
    reason: loss mismatch
  - id: unit-bucket
    tracker: "#7958"
    kind: flaky
    action: deselect
    match: {test_case: "tests/unit_tests/models/**/*.py", tags: [latest]}
    node_ids: ["tests/unit_tests/models/test_moe.py::test_router[dev]"]
    owner: carol
    expires: 2099-01-01
    reason: flaky_in_dev
"""


def v2_files(quarantine: str | None = QUARANTINE, config: str = CONFIG) -> dict[str, str]:
    files = {
        "matrixgen.yaml": config,
        "_build.yaml": BUILD_V2,
        "moe.yaml": RECIPE_V2,
        "unit.yaml": UNIT_V2,
    }
    if quarantine is not None:
        files["quarantine.yaml"] = quarantine
    return files


RECIPE_V1 = """
type: basic
format_version: 1
maintainers: [mcore]
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: gpt
  build: mcore-pyt-{environment}
  platforms: dgx_a100
products:
  - test_case: [tc_a]
    products:
      - {environment: [dev], scope: [mr, mr-github], platforms: [dgx_h100]}
      - {environment: [lts], scope: [nightly]}
  - test_case: [tc_b]
    products:
      - {environment: [dev], scope: [mr, mr-github-slim], platforms: [dgx_h100]}
"""


BUILD_V1 = """
type: build
format_version: 1
spec: {name: "mcore-pyt-dev"}
"""


def v1_files(quarantine: str | None = None) -> dict[str, str]:
    files = {
        "_build-dev.yaml": BUILD_V1,
        "_build-lts.yaml": BUILD_V1.replace("dev", "lts"),
        "h100/gpt.yaml": RECIPE_V1,
    }
    if quarantine is not None:
        files["quarantine.yaml"] = quarantine
    return files
