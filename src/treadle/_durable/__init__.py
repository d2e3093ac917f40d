"""Durability: safe serialization of checkpoint values and framing of stored blobs."""
