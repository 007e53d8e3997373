"""GitLab's settings: what `systems.gitlab` and each gitlab target take (the
home's `settings` part, on the documents floor; the config's declaration makes
`systems.gitlab` and the targets from `SETTINGS`).
"""

# Annotations are evaluated where they are written (no `from __future__ import
# annotations`): the targets of each system are made from the settings' fields.
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from msgspec import Meta

from matrixgen.model.sections import (
    NON_BLANK,
    Retries,
    RetryReason,
    Section,
    SystemSettings,
    Text,
    Texts,
    Unique,
)


class Retry(Section, frozen=True, kw_only=True):
    max: Retries
    when: Annotated[tuple[RetryReason, ...], Unique, Meta(min_length=1)] | None = None


class Artifacts(Section, frozen=True, kw_only=True):
    paths: Texts | None = None
    exclude: Texts | None = None
    when: Literal["on_success", "on_failure", "always"] | None = None
    expire_in: Text | None = None
    name: Text | None = None
    untracked: bool | None = None


class GitlabSettings(SystemSettings, frozen=True, kw_only=True):
    retry: Retries | Retry | None = None
    parent_job: Annotated[str, Meta(min_length=1, max_length=128)] | None = None
    launcher: Annotated[str, Meta(min_length=1, pattern=NON_BLANK)] | None = None
    warmup: bool | None = None
    artifacts: Artifacts | None = None

    SCHEMA: ClassVar[Mapping[str, Any]] = {
        "description": "Settings of GitLab targets (child pipeline jobs)."
    }
    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        **SystemSettings.DESCRIPTIONS,
        "retry": "Retries of a failed job: at most 2 (GitLab's limit), on the failure reasons "
        "listed. Default: max 2 when runner_system_failure, stuck_or_timeout_failure, "
        "api_failure.",
        "parent_job": "A job of the parent pipeline every job needs ({pipeline: "
        "$PARENT_PIPELINE_ID, job: ...}); the trigger job passes PARENT_PIPELINE_ID: "
        "$CI_PIPELINE_ID.",
        "launcher": "Shell command each job runs, followed by the job's quoted fields (--model "
        "... --test-case ...). A recipe's spec.launcher wins for its jobs.",
        "warmup": "true: the first job runs alone and every other job needs it.",
    }


SETTINGS = GitlabSettings
