"""model/jobs.py: the values the pipeline passes on. What a job's JSON holds and
in which order, its duplicate and sort keys, what a quarantine mark writes, and
the needs a job's spec names."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from msgspec.structs import replace

from matrixgen.model.errors import Location
from matrixgen.model.jobs import Job, JobId, QuarantineMark, Selector, Target, spec_needs
from matrixgen.model.vocab import System
from matrixgen.systems.gitlab.settings import GitlabSettings
from matrixgen.util.values import json_value


def job(**changes: Any) -> Job:
    fields: dict[str, Any] = {
        "model": "gpt",
        "test_case": "tp2",
        "environment": "dev",
        "platform": "dgx_h100",
        "tag": None,
        "scope": "mr",
        "cadence": ("pr", "nightly"),
        "name": "gpt_tp2_dev",
        "build": "img-dev",
        "n_repeat": 2,
        "time_limit": 1800,
    }
    return Job(**{**fields, **changes})


def test_the_json_of_a_job_in_the_order_list_prints_it() -> None:
    """README "list --format json": identity first (tag before the axes), the
    scope as declared, tuples as lists, env as a mapping, where it came from
    (recipe) but not the row's location, the spec or the definitions."""
    marked = job(
        tag="latest",
        scope="L2",
        declared_scope="nightly",
        env=(("B", "2"), ("A", "1")),
        args=("--x", "1"),
        recipe="gpt.yaml",
        spec=MappingProxyType({"script": "run"}),
        source=Location("gpt.yaml", 3, 5),
        definitions=(Location("gpt.yaml", 3, 5), Location("gpt.yaml", 9, 5)),
    )
    data = json_value(marked)
    assert list(data) == [
        "model",
        "test_case",
        "tag",
        "environment",
        "platform",
        "scope",
        "cadence",
        "name",
        "build",
        "n_repeat",
        "time_limit",
        "nodes",
        "gpus",
        "allow_failure",
        "env",
        "args",
        "recipe",
    ]
    assert data["scope"] == "nightly"  # as declared, not the tier
    assert data["tag"] == "latest"
    assert data["cadence"] == ["pr", "nightly"]
    assert data["env"] == {"B": "2", "A": "1"}
    assert list(data["env"]) == ["B", "A"]  # in the order written
    assert data["args"] == ["--x", "1"]
    assert data["nodes"] is None and data["gpus"] is None and data["allow_failure"] is False


def test_a_quarantined_job_s_json_ends_with_its_mark() -> None:
    mark = QuarantineMark(id="e1", tracker="#7", action="mute", kind="flaky", node_ids=("a::b",))
    data = json_value(job(quarantine=mark))
    assert list(data)[-1] == "quarantine"
    assert data["quarantine"] == {
        "id": "e1",
        "tracker": "#7",
        "action": "mute",
        "kind": "flaky",
        "node_ids": ["a::b"],
    }


def test_a_mark_writes_its_node_lists_only_when_there_are_some() -> None:
    bare = QuarantineMark(id="e", tracker="#1", action="skip", kind="broken")
    assert json_value(bare) == {"id": "e", "tracker": "#1", "action": "skip", "kind": "broken"}
    muted = replace(bare, action="mute", node_ids=("t::a", "t::b"), muted=("t::b",))
    assert json_value(muted)["muted"] == ["t::b"]
    assert muted.deselected == ("t::a",)


def test_the_duplicate_key_is_identity_and_scope_with_none_as_empty() -> None:
    assert job().duplicate_key() == ("gpt", "tp2", "dev", "dgx_h100", "", "mr")
    assert job(tag="t", scope=None).duplicate_key() == ("gpt", "tp2", "dev", "dgx_h100", "t", "")
    # The cadence and everything else are not part of it.
    assert job(cadence=("nightly",), n_repeat=9).duplicate_key() == job().duplicate_key()
    assert job().identity == JobId("gpt", "tp2", "dev", "dgx_h100", "")


def test_the_sort_key_orders_by_identity_then_scope_then_cadence() -> None:
    jobs = [
        job(test_case="b"),
        job(scope="L1", cadence=("pr",)),
        job(scope="L1", cadence=("nightly",)),
        job(platform="dgx_gb200"),
        job(tag="latest"),
        job(environment="lts"),
    ]
    ordered = sorted(jobs, key=Job.sort_key)
    shown = [(j.test_case, j.environment, j.platform, j.tag, j.scope, j.cadence) for j in ordered]
    assert shown == [
        ("b", "dev", "dgx_h100", None, "mr", ("pr", "nightly")),
        ("tp2", "dev", "dgx_gb200", None, "mr", ("pr", "nightly")),
        ("tp2", "dev", "dgx_h100", None, "L1", ("nightly",)),
        ("tp2", "dev", "dgx_h100", None, "L1", ("pr",)),
        ("tp2", "dev", "dgx_h100", "latest", "mr", ("pr", "nightly")),
        ("tp2", "lts", "dgx_h100", None, "mr", ("pr", "nightly")),
    ]
    # A job without a tag sorts before one with a tag (None is ""), never an error.
    assert sorted([job(tag="a"), job(tag=None)], key=Job.sort_key)[0].tag is None


def test_where_a_job_was_read_does_not_make_it_another_job() -> None:
    here = job(recipe="a.yaml", source=Location("a.yaml", 1, 1))
    there = job(recipe="b.yaml", source=Location("b.yaml", 7, 3), declared_scope="mr")
    assert here == there and hash(here) == hash(there)
    assert here != job(n_repeat=3)
    assert here.locations == (Location("a.yaml", 1, 1),)


def test_a_target_is_its_name_system_and_selector() -> None:
    selector = Selector(scope="mr", platform="dgx_h100")
    a = Target(name="t", system=System.GITLAB, selector=selector)
    b = replace(
        a,
        settings=GitlabSettings(timeout_cap=60),
        description="d",
        rereads_recipe=True,
        n_repeat=1,
        lightweight=True,
    )
    assert a == b and hash(a) == hash(b)
    assert a != replace(a, system=System.GITHUB)
    assert json_value(a.place) == {
        "system": "gitlab",
        "scope": "mr",
        "platform": "dgx_h100",
        "environment": None,
        "cadence": None,
    }


def test_spec_needs_render_their_templates_and_keep_what_does_not_render() -> None:
    spec = MappingProxyType({"model": "gpt", "needs": ["warm_{model}", 3, "cold_{nope}"]})
    assert spec_needs(job(spec=spec)) == [(0, "warm_gpt"), (2, "cold_{nope}")]
    assert spec_needs(job()) == []
