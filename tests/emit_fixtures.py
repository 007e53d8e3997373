"""Recipe trees and helpers shared by the emitter tests (not a test module).

HOSTILE is a test case name full of shell syntax; every emitted script must
pass it to the launcher as one plain argument. It creates marker files
(never deletes anything) if any part of it is ever executed.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

from matrixgen.emit.common import EmitSettings
from matrixgen.emit.registry import resolve_settings
from matrixgen.model.jobs import Job, Selector, Target
from matrixgen.model.vocab import System
from matrixgen.pipeline import Generation, generate_from_files
from matrixgen.systems.gitlab.emitter import GitlabOwn

HOSTILE = "x; touch pwned1 $(touch pwned2) `touch pwned3` && touch pwned4 'q' \"dq\""
PWNED = ("pwned1", "pwned2", "pwned3", "pwned4")

CONFIG = """
    format_version: 2
    project: fixture
    vocabulary:
      platforms: [dgx_h100, dgx_gb200]
      environments: [dev, lts]
      scopes:
        github: [L0, L1]
        gitlab: [mr, nightly]
      tags: [latest, legacy]
    platforms:
      dgx_h100: {arch: amd64, runner_tags: [h100-runner]}
      dgx_gb200: {arch: arm64, runner_tags: [gb200-runner]}
    images:
      github: {repository: nvcr.io/nvidia/pytorch, tag: 26.09-py3}
      gitlab:
        amd64: {repository: registry.example.com/ci, tag: 26.09-amd64}
        arm64: {repository: registry.example.com/ci, tag: 26.09-arm64}
    systems:
      github: {}
      gitlab:
        launcher: echo launched
        retry: {max: 1, when: [runner_system_failure]}
        artifacts: {paths: [results/], when: always, expire_in: 1 week}
    targets:
      gh-l1-h100: {system: github, scope: L1, platform: dgx_h100, environment: dev, cadence: pr}
      gh-l0-gb200: {system: github, scope: L0, platform: dgx_gb200, environment: dev}
      gl-mr-h100: {system: gitlab, scope: mr, platform: dgx_h100, environment: dev}
      gl-mr-gb200:
        system: gitlab
        scope: mr
        platform: dgx_gb200
        environment: dev
        parent_job: build-image
        warmup: true
      gl-nightly-h100-lts:
        system: gitlab
        scope: nightly
        platform: dgx_h100
        environment: lts
        cadence: nightly
        image: custom/lts:26.09-py3
        timeout: 7200
      gl-nightly-gb200-lts: {system: gitlab, scope: nightly, platform: dgx_gb200, environment: lts}
"""

BUILDS = {
    "_build-dev.yaml": """
        type: build
        format_version: 2
        spec: {name: mcore-pyt-dev}
    """,
    "_build-lts.yaml": """
        type: build
        format_version: 2
        spec: {name: mcore-pyt-lts}
    """,
}

GPT = f"""
    type: basic
    format_version: 2
    spec:
      name: "{{test_case}}_{{environment}}_{{platforms}}"
      model: gpt
      build: mcore-pyt-{{environment}}
      nodes: 1
      gpus: 8
      platforms: dgx_h100
      env: {{NVTE_FLASH_ATTN_V4: "0"}}
      args: [--flash-attention-version, "2"]
    products:
      - test_case: [gpt3_tp1]
        products:
          - environment: [dev]
            scope: [mr, L1]
            platforms: [dgx_h100, dgx_gb200]
      - test_case: [{json.dumps(HOSTILE)}]
        products:
          - environment: [dev]
            scope: [mr, L1]
      - test_case: [gpt3_tagged]
        products:
          - environment: [dev]
            scope: [mr]
            tag: [latest, legacy]
            time_limit: [5400]
      - test_case: [gpt3_lts]
        products:
          - environment: [lts]
            scope: [nightly]
            cadence: [nightly]
            allow_failure: [true]
            time_limit: [2701]
"""

BERT = """
    type: basic
    format_version: 2
    spec:
      name: "{test_case}_{environment}_{platforms}"
      model: bert
      build: mcore-pyt-{environment}
      platforms: dgx_gb200
      n_repeat: 1
    products:
      - test_case: [bert_tp2]
        products:
          - environment: [dev]
            scope: [mr, L0]
      - test_case: [bert_tp4]
        products:
          - environment: [dev]
            scope: [mr]
"""

# A value GitLab would expand ($HOME) and a shell would run ($(...)): both must
# reach the job as written.
WEIRD_VALUE = "$HOME 'single' \"double\" $(touch pwned5)"
ODD = f"""
    type: basic
    format_version: 2
    spec:
      name: "{{test_case}}_{{environment}}_{{platforms}}"
      model: odd
      build: mcore-pyt-{{environment}}
      platforms: dgx_h100
      env: {{WEIRD: {json.dumps(WEIRD_VALUE)}}}
    products:
      - test_case: [odd_env]
        products:
          - environment: [dev]
            scope: [mr]
"""

V2_TREE: dict[str, str] = {
    "matrixgen.yaml": CONFIG,
    **BUILDS,
    "gpt.yaml": GPT,
    "bert.yaml": BERT,
    "odd.yaml": ODD,
}

# A format_version 1 tree, as Megatron-LM writes them: no config.
V1_TREE: dict[str, str] = {
    "_build-mcore-dev.yaml": """
        type: build
        format_version: 1
        maintainers: [mcore]
        spec: {name: mcore-pyt-dev}
    """,
    "h100/gpt.yaml": """
        type: basic
        format_version: 1
        maintainers: [mcore]
        loggers: [stdout]
        spec:
          name: "{test_case}_{environment}_{platforms}"
          model: gpt
          build: mcore-pyt-{environment}
          nodes: 1
          gpus: 8
          platforms: dgx_h100
          script: "echo {test_case}"
        products:
          - test_case: [gpt3_small]
            products:
              - environment: [dev]
                scope: [mr, mr-github]
              - environment: [dev]
                scope: [nightly]
          - test_case: [gpt3_flaky]
            products:
              - environment: [dev]
                scope: [mr]
                allow_failure: [true]
    """,
}


def tree_files(tree: Mapping[str, str]) -> dict[str, bytes]:
    """{path: bytes} as generate_from_files takes them (dedented like write_tree)."""
    return {rel: textwrap.dedent(text).lstrip("\n").encode("utf-8") for rel, text in tree.items()}


@cache
def v2_generation() -> Generation:
    """V2_TREE, loaded once for every test that only reads it."""
    return generate_from_files(tree_files(V2_TREE), root="fixture")


def target_jobs(name: str) -> tuple[Target, list[Job], EmitSettings]:
    """A target V2_TREE's config names, its jobs and its emitter settings."""
    gen = v2_generation()
    target = gen.tree.config.target(name)
    assert target is not None
    jobs = gen.jobs_for(target)
    return target, jobs, resolve_settings(target, gen.tree.config, jobs)


def replace_jobs(jobs: Iterable[Any], **changes: Any) -> list[Any]:
    return [msgspec.structs.replace(j, **changes) for j in jobs]


def workflow_for(matrices: list[dict[str, Any]]) -> str:
    """A workflow running each matrix literally (so the schema and actionlint see
    the rows and every `matrix.*` key the steps use), and a generator job whose
    outputs a fromJSON consumer reads the documented way."""
    jobs: dict[str, Any] = {
        "gen": {
            "runs-on": "ubuntu-latest",
            "outputs": {
                "shards": "${{ steps.gen.outputs.shards }}",
                "matrix": "${{ steps.gen.outputs.matrix }}",
            },
            "steps": [
                {"uses": "actions/checkout@v4"},
                {"id": "gen", "run": "matrixgen github --target-name t --github-output"},
            ],
        },
        "from-json": {
            "needs": "gen",
            "if": "${{ fromJSON(needs.gen.outputs.shards) > 0 }}",
            "strategy": {"fail-fast": False, "matrix": "${{ fromJSON(needs.gen.outputs.matrix) }}"},
            "runs-on": "ubuntu-latest",
            "timeout-minutes": "${{ matrix.timeout }}",
            "continue-on-error": "${{ matrix.continue-on-error == true }}",
            "steps": [{"run": 'echo "$CASE"', "env": {"CASE": "${{ matrix.test_case }}"}}],
        },
    }
    for i, matrix in enumerate(matrices):
        if not matrix["include"]:
            continue
        jobs[f"shard-{i}"] = {
            "strategy": {"fail-fast": False, "matrix": matrix},
            "runs-on": "ubuntu-latest",
            "timeout-minutes": "${{ matrix.timeout }}",
            "name": "${{ matrix.name }}",
            "steps": [
                {
                    "run": 'echo "$MODEL $CASE $PLATFORM $ENVIRONMENT $TAG $N"',
                    "env": {
                        "MODEL": "${{ matrix.model }}",
                        "CASE": "${{ matrix.test_case }}",
                        "PLATFORM": "${{ matrix.platform }}",
                        "ENVIRONMENT": "${{ matrix.environment }}",
                        "TAG": "${{ matrix.tag }}",
                        "N": "${{ matrix.n_repeat }}",
                    },
                }
            ],
        }
    return json.dumps({"name": "matrix", "on": {"pull_request": None}, "jobs": jobs}, indent=1)


def matrices_of(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The matrices of an emitted GitHub file, whichever of its two shapes."""
    if "matrices" in document:
        return list(document["matrices"])
    return [dict(document)]


def write_workflows(json_files: Iterable[Path], dest: Path) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for path in sorted(json_files):
        document = json.loads(path.read_text(encoding="utf-8"))
        workflow = dest / f"{path.stem}.yml"
        workflow.write_text(workflow_for(matrices_of(document)), encoding="utf-8")
        out.append(workflow)
    return out


def make_job(test_case: str = "case", **changes: object) -> Job:
    fields: dict = {
        "model": "gpt",
        "test_case": test_case,
        "environment": "dev",
        "platform": "dgx_h100",
        "tag": None,
        "scope": "mr",
        "cadence": ("pr",),
        "name": f"{test_case}_dev_dgx_h100",
        "build": None,
        "n_repeat": 1,
        "time_limit": 60,
    }
    fields.update(changes)
    return Job(**fields)


def bare_settings(**changes: object) -> EmitSettings:
    target = Target(
        name="t",
        system=System.GITLAB,
        selector=Selector(scope="mr", platform="dgx_h100", environment="dev"),
    )
    own = {k: changes.pop(k) for k in list(changes) if k in GitlabOwn.__struct_fields__}
    settings = EmitSettings(target=target, own=GitlabOwn(**{"launcher": "run", **own}))
    return msgspec.structs.replace(settings, **changes)
