"""What every stage's checks see: the loaded tree and its expansion."""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec import Struct

from matrixgen.engine.load import RecipeTree
from matrixgen.engine.model import Target
from matrixgen.engine.references import ReferenceListing

if TYPE_CHECKING:
    # Built above this floor (matrixgen.validate makes the context): the checks
    # of the later stages select through it, sharing its cache with the emitters.
    from matrixgen.engine.expand import Expansion
    from matrixgen.pipeline import Generation


class ValidationContext(Struct, frozen=True, kw_only=True):
    generation: Generation
    # The targets validate's checks look at: `resolve_targets` of the config and
    # the jobs (Generation.checked_targets).
    targets: tuple[Target, ...]
    # The reference tree's files, when the caller listed them (validate on disk);
    # None: references are not checked (a tree read from git, generate by default).
    references: ReferenceListing | None = None

    @property
    def tree(self) -> RecipeTree:
        return self.generation.tree

    @property
    def expansion(self) -> Expansion:
        return self.generation.expansion
