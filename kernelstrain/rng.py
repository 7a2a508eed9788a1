"""Random draws keyed by sha256: every random draw of the product comes from a random.Random
seeded from its parts (the profile's key, the seed, an episode index, a purpose) — never hash(),
never the global random (SPEC §8).
"""
from __future__ import annotations

import hashlib
import random


def seeded_rng(*parts) -> random.Random:
    """A Random seeded from the sha256 of its parts.

    >>> seeded_rng("kernelstrain", 0, 5).random() == seeded_rng("kernelstrain", 0, 5).random()
    True
    """
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


def rank(*parts) -> str:
    """A stable pseudo-random sort key."""
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()
