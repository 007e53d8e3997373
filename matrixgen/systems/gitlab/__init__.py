"""GitLab CI: targets are child pipelines a job of the parent pipeline triggers."""

from __future__ import annotations

from matrixgen.systems.home import Home

HOME = Home(
    name="gitlab",
    label="GitLab",
    package=__name__,
    events=("merge_request_event", "schedule", "push", "web", "api", "trigger"),
    job_variable="GITLAB_CI",
    tiers=None,
    example_scope="mr",
    ci_files=(".gitlab-ci.yml", ".gitlab/**/*.yml"),
    commands=(("jet-trigger", "jet_trigger"),),
    parts=frozenset({"commands", "emitter", "megatron", "settings"}),
    variables={
        "commit": "CI_COMMIT_SHA",
        "ref": "CI_COMMIT_REF_NAME",
        "source": "CI_PIPELINE_SOURCE",
        "diff_base": "CI_MERGE_REQUEST_DIFF_BASE_SHA",
    },
)
