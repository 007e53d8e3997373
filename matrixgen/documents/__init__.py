"""The documents a recipe tree holds, each read once into located values and findings."""
