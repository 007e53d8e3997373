"""Small pure helpers shared by every layer (they import nothing from matrixgen)."""
