"""GitHub's settings: what `systems.github` and each github target take (the
home's `settings` part, on the documents floor; the config's declaration makes
`systems.github` and the targets from `SETTINGS`).
"""

# Annotations are evaluated where they are written (no `from __future__ import
# annotations`): the targets of each system are made from the settings' fields.
from collections.abc import Mapping
from typing import Any, ClassVar

from matrixgen.model.sections import SystemSettings


class GithubSettings(SystemSettings, frozen=True, kw_only=True):
    SCHEMA: ClassVar[Mapping[str, Any]] = {
        "description": "Settings of GitHub Actions targets (matrix rows)."
    }


SETTINGS = GithubSettings
