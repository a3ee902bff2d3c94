"""Similarity of the code students wrote, per exercise, with copydetect (winnowed k-gram
fingerprints, the MOSS algorithm).

copydetect tokenizes the code with Pygments and replaces every variable name with `V`, every
function name with `F`, every class name with `O` and every string with `S`, and drops
whitespace and comments; so renaming variables or reformatting does not hide a copy.
Fingerprints of the release notebook (the starter code and the solution stubs) are discarded
as boilerplate. A pair's score is the larger of the two shares of fingerprinted code that
the other submission also contains (1.0: one is contained in the other).
"""

from __future__ import annotations

import io
import itertools
from dataclasses import dataclass

import numpy as np

NOISE = 25  # shortest match that counts, in characters of normalised code (copydetect default)
WINDOW = 1  # winnowing window: 1 keeps every fingerprint (exact, and enough for notebooks)
TOP_PAIRS = 5  # pairs shown per exercise
CONTEXT_LINES = 3  # unmatched lines kept around the matching regions in the side-by-side view


@dataclass(frozen=True)
class Segment:
    text: str
    match: bool  # part of a region the other submission also contains


@dataclass(frozen=True)
class Pair:
    exercise: str
    first: str
    second: str
    share_first: float  # share of first's code found in second
    share_second: float
    segments_first: tuple[Segment, ...] = ()
    segments_second: tuple[Segment, ...] = ()

    @property
    def score(self) -> float:
        return max(self.share_first, self.share_second)


def _fingerprint(code: str, boilerplate: np.ndarray):
    from copydetect import CodeFingerprint

    return CodeFingerprint(
        "submission.py", NOISE, WINDOW, boilerplate, language="python", fp=io.StringIO(code)
    )


def boilerplate_hashes(starter: str) -> np.ndarray:
    """Fingerprints of the release's code: matches made of them are not evidence."""
    if not starter.strip():
        return np.array([], dtype=np.int64)
    return np.unique(np.array(sorted(_fingerprint(starter, np.array([])).hashes)))


def segments(code: str, slices: np.ndarray) -> tuple[Segment, ...]:
    """The code cut into matching and other regions (slices: 2 x n starts and ends)."""
    if slices.size == 0:
        return (Segment(code, False),)
    spans = sorted(zip(slices[0].astype(int), slices[1].astype(int), strict=True))
    merged: list[list[int]] = []
    for start, end in spans:
        start, end = max(0, start), min(len(code), end)
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        elif end > start:
            merged.append([start, end])
    parts, at = [], 0
    for start, end in merged:
        if start > at:
            parts.append(Segment(code[at:start], False))
        parts.append(Segment(code[start:end], True))
        at = end
    if at < len(code):
        parts.append(Segment(code[at:], False))
    return tuple(parts)


def trimmed(parts: tuple[Segment, ...], context: int = CONTEXT_LINES) -> tuple[Segment, ...]:
    """Long unmatched stretches shortened to their first and last `context` lines."""
    out = []
    for part in parts:
        lines = part.text.split("\n")
        if part.match or len(lines) <= 2 * context + 2:
            out.append(part)
            continue
        text = "\n".join([*lines[: context + 1], "   ...", *lines[-context - 1 :]])
        out.append(Segment(text, False))
    return tuple(out)


def compare(exercise: str, codes: dict[str, str], starter: str = "") -> list[Pair]:
    """Every pair of submissions of one exercise that wrote some code, most similar first."""
    from copydetect.detector import compare_files

    boilerplate = boilerplate_hashes(starter)
    prints = {s: _fingerprint(code, boilerplate) for s, code in codes.items() if code.strip()}
    pairs = []
    for first, second in itertools.combinations(sorted(prints), 2):
        a, b = prints[first], prints[second]
        if not a.hashes or not b.hashes:
            shares, slices = (0.0, 0.0), (np.array([]), np.array([]))
        else:
            _, shares, slices = compare_files(a, b)
        pairs.append(
            Pair(
                exercise,
                first,
                second,
                float(shares[0]),
                float(shares[1]),
                trimmed(segments(a.raw_code, np.asarray(slices[0]))),
                trimmed(segments(b.raw_code, np.asarray(slices[1]))),
            )
        )
    return sorted(pairs, key=lambda p: (-p.score, p.first, p.second))
