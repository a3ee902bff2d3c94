"""Seeded hidden inputs for checks: every dimension distinct, so transpositions show."""

from __future__ import annotations

import numpy as np


def distinct_sizes(rng: np.random.Generator, count: int, low: int = 2, high: int = 12) -> list[int]:
    """`count` different integers in [low, high), in random order."""
    return [int(size) for size in rng.choice(np.arange(low, high), size=count, replace=False)]


def random_bool_mask(
    rng: np.random.Generator, shape: tuple[int, ...], keep: float = 0.6
) -> np.ndarray:
    """A boolean mask (True = may attend) where no row (last axis) is fully blocked."""
    mask = rng.random(shape) < keep
    rows = mask.reshape(-1, shape[-1])
    empty = ~rows.any(axis=1)
    rows[empty, rng.integers(0, shape[-1], size=int(empty.sum()))] = True
    return rows.reshape(shape)


def mask_hiding(rng: np.random.Generator, shape: tuple[int, ...], hidden: int) -> np.ndarray:
    """A random bool mask (True = may attend) in which key `hidden` is visible to query `hidden`
    only, and no row is fully blocked."""
    keep = random_bool_mask(rng, shape)
    keep[..., hidden] = False
    keep[..., hidden, hidden] = True
    rows = keep.reshape(-1, shape[-1])
    empty = np.flatnonzero(~rows.any(axis=1))
    others = [k for k in range(shape[-1]) if k != hidden]
    rows[empty, rng.choice(others, size=empty.size)] = True
    return rows.reshape(shape)
