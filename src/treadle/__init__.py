"""treadle."""
