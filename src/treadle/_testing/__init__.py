"""The testing kit behind :mod:`treadle.testing`: a deterministic harness and the replay check."""
