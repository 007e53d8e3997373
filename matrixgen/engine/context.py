"""What every stage's checks see: the loaded tree and its expansion."""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from msgspec import Struct

from matrixgen.engine.expand import Expansion
from matrixgen.engine.load import RecipeTree
from matrixgen.model.jobs import Target
from matrixgen.model.references import ReferenceListing


class Generated(Protocol):
    """What the engine's checks read of a generation. The generation itself is
    built above this floor (matrixgen.pipeline); the checks of the later stages
    select through it, sharing its cache with the emitters."""

    @property
    def tree(self) -> RecipeTree: ...
    @property
    def expansion(self) -> Expansion: ...


G = TypeVar("G", bound=Generated)


class ValidationContext(Struct, Generic[G], frozen=True, kw_only=True):
    generation: G
    # The targets validate's checks look at: `resolve_targets` of the config and
    # the jobs, resolved once per generation (Generation.checked_targets).
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
