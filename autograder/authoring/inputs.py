"""Seeded hidden inputs for checks: every dimension distinct, so transpositions show."""

from __future__ import annotations

import numpy as np


def distinct_sizes(rng: np.random.Generator, count: int, low: int = 2, high: int = 12) -> list[int]:
    """`count` different integers in [low, high), in random order."""
    return [int(size) for size in rng.choice(np.arange(low, high), size=count, replace=False)]


def random_bool_mask(
    rng: np.random.Generator, shape: tuple[int, ...], keep: float = 0.6
) -> np.ndarray:
    """A boolean mask (True = may attend) in which no row (last axis) is fully blocked and,
    with two or more keys, none is fully open: its complement is then a mask the contract
    allows too, so a mask read the wrong way round gives an answer to compare and to name,
    whatever the seed."""
    mask = rng.random(shape) < keep
    rows = mask.reshape(-1, shape[-1])
    _settle_rows(rng, rows)
    return rows.reshape(shape)


def _settle_rows(rng: np.random.Generator, rows: np.ndarray, fixed: int | None = None) -> None:
    """Open one key of every fully blocked row and, with two or more keys, block one key of
    every fully open row; key `fixed` is never chosen."""
    others = [k for k in range(rows.shape[1]) if k != fixed]
    empty = np.flatnonzero(~rows.any(axis=1))
    if empty.size:
        rows[empty, rng.choice(others, size=empty.size)] = True
    full = np.flatnonzero(rows.all(axis=1))
    if full.size and rows.shape[1] >= 2:
        rows[full, rng.choice(others, size=full.size)] = False


def mask_hiding(rng: np.random.Generator, shape: tuple[int, ...], hidden: int) -> np.ndarray:
    """A random bool mask (True = may attend) in which key `hidden` is visible to query `hidden`
    only, and no row is fully blocked or (with two or more keys) fully open."""
    keep = random_bool_mask(rng, shape)
    keep[..., hidden] = False
    keep[..., hidden, hidden] = True
    rows = keep.reshape(-1, shape[-1])
    _settle_rows(rng, rows, fixed=hidden)
    return rows.reshape(shape)
