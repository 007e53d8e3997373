"""Trees, revisions and helpers shared by the selection diff tests (not a test module)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from matrixgen.diff.compare import diff_generations
from matrixgen.diff.model import SelectionDiff, TargetDiff
from matrixgen.model.jobs import Selector, Target
from matrixgen.model.vocab import System
from matrixgen.pipeline import generate_from_files
from tests.gitrepo import GitRepo

CONFIG: dict[str, Any] = {
    "format_version": 2,
    "vocabulary": {
        "platforms": ["dgx_h100", "dgx_gb200"],
        "environments": ["dev", "lts"],
        "scopes": {"github": ["L0", "L1"], "gitlab": ["mr", "nightly"]},
    },
    "platforms": {"dgx_h100": {"arch": "amd64"}, "dgx_gb200": {"arch": "arm64"}},
    "images": {
        "github": {"repository": "nvcr.io/pytorch", "tag": "26.09"},
        "gitlab": {
            "amd64": {"repository": "reg/ci", "tag": "26.09-amd64"},
            "arm64": {"repository": "reg/ci", "tag": "26.09-arm64"},
        },
    },
    "quarantine": {"tracker_base": "https://github.com/example/mcore/issues/"},
    "targets": {
        "github-l1-h100": {
            "system": "github",
            "scope": "L1",
            "platform": "dgx_h100",
            "environment": "dev",
        },
        "github-l1-gb200": {
            "system": "github",
            "scope": "L1",
            "platform": "dgx_gb200",
            "environment": "dev",
        },
        "gitlab-mr-h100": {
            "system": "gitlab",
            "scope": "mr",
            "platform": "dgx_h100",
            "environment": "dev",
        },
        "gitlab-nightly-h100": {
            "system": "gitlab",
            "scope": "nightly",
            "platform": "dgx_h100",
            "environment": "dev",
            "cadence": "nightly",
        },
    },
}


BUILD = {"type": "build", "format_version": 2, "spec": {"name": "mcore-pyt-dev"}}


GPT: dict[str, Any] = {
    "type": "basic",
    "format_version": 2,
    "spec": {
        "name": "{test_case}_{environment}_{platforms}",
        "model": "gpt",
        "build": "mcore-pyt-{environment}",
        "nodes": 1,
        "gpus": 8,
        "platforms": "dgx_h100",
        "env": {"NVTE_FLASH_ATTN_V4": "0"},
        "args": ["--flash-attention-version", "2"],
        "script": "bash run.sh {test_case}\necho done",
    },
    "products": [
        {
            "test_case": ["gpt_a"],
            "products": [{"environment": ["dev"], "scope": ["mr", "nightly", "L1"]}],
        },
        {
            "test_case": ["gpt_b"],
            "products": [
                {
                    "environment": ["dev"],
                    "scope": ["mr", "L1"],
                    "platforms": ["dgx_h100", "dgx_gb200"],
                }
            ],
        },
        {"test_case": ["gpt_c"], "products": [{"environment": ["dev"], "scope": ["mr"]}]},
    ],
}


def v2_tree(gpt: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """{rel: data} of a small format_version 2 tree (data dumped to YAML later)."""
    tree: dict[str, Any] = {
        "matrixgen.yaml": copy.deepcopy(CONFIG),
        "_build-dev.yaml": copy.deepcopy(BUILD),
        "h100/gpt.yaml": copy.deepcopy(gpt if gpt is not None else GPT),
    }
    tree.update(extra)
    return tree


def encode(tree: Mapping[str, Any]) -> dict[str, bytes]:
    return {
        rel: data if isinstance(data, bytes) else yaml.safe_dump(data, sort_keys=False).encode()
        for rel, data in tree.items()
        if data is not None
    }


def gen(tree: Mapping[str, Any]):  # type: ignore[no-untyped-def]
    return generate_from_files(encode(tree), root="recipes")


def diff(base: Mapping[str, Any], head: Mapping[str, Any], **kwargs: Any) -> SelectionDiff:
    return diff_generations(gen(base), gen(head), **kwargs)


def by_name(result: SelectionDiff) -> dict[str, TargetDiff]:
    return {t.target.name: t for t in result.targets}


def block(test_case: str, **row: Any) -> dict[str, Any]:
    row = {"environment": ["dev"], **row}
    return {"test_case": [test_case], "products": [row]}


def quarantine_file(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"entries": list(entries)}


def entry(action: str = "skip", **extra: Any) -> dict[str, Any]:
    return {
        "id": "gpt-a-hang",
        "tracker": "#7201",
        "kind": "broken",
        "action": action,
        "match": {"model": "gpt", "test_case": "gpt_a"},
        "where": ["github/L1"],
        "owner": "mcore",
        "added": "2026-11-12",
        "expires": "2099-01-31",
        "reason": "hangs",
        **extra,
    }


V1_GPT: dict[str, Any] = {
    "type": "basic",
    "format_version": 1,
    "spec": {"name": "{test_case}", "model": "gpt", "platforms": "dgx_h100"},
    "products": [
        block("a", scope=["mr", "nightly"]),
        block("b", scope=["mr-github"]),
    ],
}


def dumped(tree: Mapping[str, Any]) -> dict[str, str]:
    return {rel: data.decode() for rel, data in encode(tree).items()}


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "repo")


@pytest.fixture
def in_repo(repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    monkeypatch.chdir(repo.top)
    return repo


def target(
    system: str, scope: str, platform: str = "dgx_h100", cadence: str | None = None
) -> Target:
    selector = Selector(scope=scope, platform=platform, environment="dev", cadence=cadence)
    name = "-".join(p for p in (system, scope, platform, cadence) if p)
    return Target(name=name, system=System(system), selector=selector)
