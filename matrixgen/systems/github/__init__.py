"""GitHub Actions: targets are matrices a workflow reads through step outputs."""

from __future__ import annotations

from matrixgen.systems.home import Home

HOME = Home(
    name="github",
    label="GitHub",
    package=__name__,
    events=("pull_request", "merge_group", "schedule", "workflow_dispatch", "push"),
    job_variable="GITHUB_ACTIONS",
    tiers=r"L[01]",
    # Megatron-LM's unit-test buckets (`jet-buckets`) run here beside GitLab.
    also_runs=("unit-tests",),
    annotates=True,
    step_output_option="--github-output",
    example_scope="L1",
    ci_files=(".github/workflows/*.y*ml",),
    labels_expression="toJSON(github.event.pull_request.labels.*.name)",
    commands=(("jet-buckets", "jet_buckets"),),
    parts=frozenset({"commands", "emitter", "megatron", "settings", "outputs"}),
    variables={
        "commit": "GITHUB_SHA",
        "ref": "GITHUB_REF_NAME",
        "source": "GITHUB_EVENT_NAME",
        "workspace": "GITHUB_WORKSPACE",
        "step_outputs": "GITHUB_OUTPUT",
    },
)
