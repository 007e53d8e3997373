"""What every stage's checks see: the loaded tree and its expansion."""

from __future__ import annotations

from dataclasses import dataclass

from matrixgen.engine.expand import Expansion
from matrixgen.engine.load import RecipeTree


@dataclass(frozen=True, slots=True)
class ValidationContext:
    tree: RecipeTree
    expansion: Expansion
