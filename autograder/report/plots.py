"""Plots of the report as data: URIs (PNG), so the page needs no network and no files."""

from __future__ import annotations

import base64
import io

from matplotlib.figure import Figure

from autograder.report.stats import ExerciseSummary, histogram


def png_uri(figure: Figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def score_histogram(summary: ExerciseSummary) -> str:
    """Histogram of the exercise's auto scores (one bar per whole point), as a PNG data URI."""
    bins = histogram(summary.scores, summary.max_score)
    figure = Figure(figsize=(4.2, 2.4))
    axes = figure.add_subplot()
    axes.bar([b for b, _ in bins], [n for _, n in bins], width=0.8, color="#3b6ea5")
    if summary.mean is not None:
        axes.axvline(summary.mean, color="#c0392b", linestyle="--", linewidth=1, label="mean")
        axes.legend(frameon=False, fontsize=8)
    axes.set_xlabel(f"auto score (of {summary.max_score:g})", fontsize=9)
    axes.set_ylabel("submissions", fontsize=9)
    axes.set_xticks([b for b, _ in bins])
    # MaxNLocator (the default) takes integer=; the stubs type the base Locator
    axes.yaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]
    axes.tick_params(labelsize=8)
    axes.spines[["top", "right"]].set_visible(False)
    return png_uri(figure)
