"""What every stage's checks see: the loaded tree and its expansion."""

from __future__ import annotations

from msgspec import Struct

from matrixgen.engine.expand import Expansion
from matrixgen.engine.load import RecipeTree
from matrixgen.engine.references import ReferenceListing


class ValidationContext(Struct, frozen=True):
    tree: RecipeTree
    expansion: Expansion
    # The reference tree's files, when the caller listed them (validate on disk);
    # None: references are not checked (a tree read from git, generate by default).
    references: ReferenceListing | None = None
