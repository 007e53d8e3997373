"""What a feature adds to another's output, declared in the core so that the
feature that shows it (the report, the diff) never imports the one that
computes it (docs/architecture.md). A contribution names its function by module
path, imported only when called: the CLI reads the lists at start-up."""

from __future__ import annotations

import datetime as dt
import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from msgspec import Struct

if TYPE_CHECKING:
    from matrixgen.model.jobs import Target
    from matrixgen.pipeline import Generation
    from matrixgen.quarantine.apply import Hit
    from matrixgen.quarantine.model import Entry
    from matrixgen.views.cost import Measured
    from matrixgen.views.page import Frame


def load(path: str) -> Callable[..., Any]:
    """The function a contribution names ("package.module:function"), imported now."""
    module, _, name = path.partition(":")
    return cast("Callable[..., Any]", getattr(importlib.import_module(module), name))


class SiteRequest(Struct, frozen=True, kw_only=True):
    """What the report gives each contribution to compute from; what it reads of
    the command's `options` (`db`, `triage`) is its own business."""

    generation: Generation
    targets: tuple[Target, ...]
    hits: Mapping[str, list[Hit]]
    since_days: int
    today: dt.date
    options: Mapping[str, object]


class SitePart(Protocol):
    """What one contribution computed for one site, and how it shows on the
    report's pages and its own."""

    @property
    def subtitle(self) -> str:
        """Its words in every page's subtitle."""

    @property
    def measured(self) -> Measured | None:
        """Measured durations for the overview's cost figures (None: none)."""

    def board_headers(self) -> Sequence[str]:
        """The columns it adds to the quarantine board."""

    def board_cells(self, entry: Entry) -> Sequence[str]:
        """An entry's cells of those columns, escaped."""

    def note(self, page: str) -> str:
        """HTML it adds at the end of one of the report's own pages ("": nothing)."""

    def pages(self, frame: Frame) -> dict[str, str]:
        """Its own pages, {file name: page}, in its navigation order."""


class ReportContribution(Struct, frozen=True, kw_only=True):
    """A feature's part of `matrixgen report`: its pages (file, title) in the
    navigation's order and the function that computes its `SitePart` from a
    `SiteRequest` ("package.module:function", imported when the report runs)."""

    name: str
    pages: tuple[tuple[str, str], ...]
    gather: str

    def computed(self, request: SiteRequest) -> SitePart:
        return cast("SitePart", load(self.gather)(request))


class DiffContribution(Struct, frozen=True, kw_only=True):
    """A feature's note beside each quarantine entry a selection diff names.
    `notes` names the function that, given the diff's generations (base, head),
    the ids it wants and the command's options, returns {entry id: note}, or
    None when the feature has nothing to say of this diff (no results store)."""

    name: str
    notes: str

    def computed(
        self,
        generations: Sequence[Generation],
        wanted: frozenset[str],
        options: Mapping[str, object],
    ) -> dict[str, str] | None:
        return cast("dict[str, str] | None", load(self.notes)(generations, wanted, options))
