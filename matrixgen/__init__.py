"""matrixgen: declarative YAML test recipes -> CI job matrices, with quarantine."""

__version__ = "0.1.0"
