"""Reading heatmaps from `figure_summary` data (autograder/sandbox/inside/probes.py).

A summary describes a student's matplotlib figure as plain data: its axes, their images or
meshes (values, extent, origin, cell corners) and their major ticks (location and both labels).
These helpers turn it into what a student sees on screen: which value sits in which cell, and
which label names which cell. The data comes from the submission, so whatever is not shaped
like a heatmap fails through `ensure` with a message for the student.
"""

from __future__ import annotations

import numpy as np

from autograder.authoring.expect import close, ensure


def heatmap_of(summary: dict, what: str = "the figure") -> tuple[dict, dict]:
    """(axes, mappable) of the one heatmap outside any colorbar; fail if there is not exactly
    one."""
    found = [
        (axes, mappable)
        for axes in summary["axes"]
        if not axes["is_colorbar"]
        for mappable in axes["mappables"]
    ]
    ensure(
        len(found) == 1,
        f"{what} should hold one heatmap (imshow, matshow or pcolormesh) besides its colorbar; "
        f"found {len(found)}",
    )
    return found[0]


def has_colorbar(summary: dict, mappable: dict) -> bool:
    """Whether the heatmap `mappable` has a colorbar, or the figure has colorbar axes."""
    return mappable["has_colorbar"] or any(axes["is_colorbar"] for axes in summary["axes"])


def _levels(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values (up to rounding) and each value's index among them."""
    span = float(np.ptp(values)) or 1.0
    keys = np.round((values - values.min()) / span, 6)
    levels, index = np.unique(keys, return_inverse=True)
    return levels * span + values.min(), index.reshape(values.shape)


def _cell_centres(mappable: dict, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x and y data coordinates of the centre of every cell, in the array's layout."""
    if "coordinates" in mappable:  # pcolormesh: corners (rows + 1, cols + 1, xy)
        corners = np.asarray(mappable["coordinates"], dtype=float)
        centres = (corners[:-1, :-1] + corners[1:, 1:] + corners[:-1, 1:] + corners[1:, :-1]) / 4
        return centres[..., 0], centres[..., 1]
    # imshow / matshow: extent (left, right, bottom, top); row 0 at the top or the bottom
    left, right, bottom, top = mappable["extent"]
    rows, cols = values.shape[:2]
    xs = left + (np.arange(cols) + 0.5) * (right - left) / cols
    start, end = (top, bottom) if mappable.get("origin") == "upper" else (bottom, top)
    ys = start + (np.arange(rows) + 0.5) * (end - start) / rows
    x_centres, y_centres = np.meshgrid(xs, ys)
    return x_centres, y_centres


def cell_grid(mappable: dict, length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cells as seen on screen: grid[r, c] is the value of the cell with the r-th smallest y
    centre and the c-th smallest x centre; also those x and y centres. Fail unless the heatmap
    is a `length`×`length` grid."""
    values = np.asarray(mappable["array"], dtype=float)
    x_centres, y_centres = _cell_centres(mappable, values)
    if values.ndim == 1 and values.size == x_centres.size:
        values = values.reshape(x_centres.shape)
    ensure(
        values.shape == x_centres.shape,
        f"the heatmap should be a {length}×{length} grid of values, got an array of shape "
        f"{values.shape}",
    )
    xs, columns = _levels(x_centres)
    ys, rows = _levels(y_centres)
    ensure(
        len(xs) == len(ys) == length and values.size == length * length,
        f"the heatmap should be a {length}×{length} grid of cells for {length} tokens; its "
        f"cells sit in {len(ys)} rows and {len(xs)} columns",
    )
    grid = np.full((length, length), np.nan)
    grid[rows, columns] = values
    return grid, xs, ys


def orientation(grid: np.ndarray, matrix: np.ndarray) -> tuple[bool, bool] | None:
    """(rows flipped, columns flipped) under which the grid shows `matrix`, if any."""
    for flip_rows in (False, True):
        for flip_columns in (False, True):
            shown = matrix[::-1] if flip_rows else matrix
            shown = shown[:, ::-1] if flip_columns else shown
            if close(grid, shown, atol=1e-6, rtol=1e-5):
                return flip_rows, flip_columns
    return None


def tick_label(tick: dict) -> str:
    """The text a major tick shows: its bottom/left label if visible, else its top/right one
    (matshow labels the top), else ''."""
    if tick["label1_visible"]:
        return tick["label1"]
    if tick["label2_visible"]:
        return tick["label2"]
    return ""


def ticks_of(axes: dict, axis: str) -> list[tuple[float, str]]:
    """(location, label) of the major ticks of `axis` ("x" or "y") inside the axes' limits,
    sorted by location."""
    low, high = sorted(axes[f"{axis}lim"])
    slack = 1e-9 * max(1.0, high - low)
    return sorted(
        (tick["location"], tick_label(tick))
        for tick in axes[f"{axis}majorticks"]
        if low - slack <= tick["location"] <= high + slack
    )


def tick_placement(ticks: list[tuple[float, str]], centres: np.ndarray) -> str | None:
    """Where `ticks` (from `ticks_of`) sit against the cells whose centres are `centres`:
    "centres" (one tick per cell, at its centre), "edges" (one per cell, half a cell off) or
    None."""
    if len(ticks) != len(centres):
        return None
    positions = np.array([location for location, _ in ticks])
    width = abs(float(centres[1] - centres[0]))
    if np.allclose(positions, centres, atol=1e-3 * width, rtol=0):
        return "centres"
    if np.allclose(np.abs(positions - centres), width / 2, atol=1e-3 * width):
        return "edges"
    return None
