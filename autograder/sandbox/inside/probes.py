"""Read-only inspectors the grader may ask the child to run on objects that stay in the child.

They return plain data only. They run on the student's objects, so their answers are only as
trustworthy as those objects: the parent treats them like any other output of the submission.
"""

from collections.abc import Callable
from typing import Any

if __package__:  # the grader's own tests import the runtime as a package
    from . import module_probes, numpy_only, trusted
else:  # in the child, the runtime's files are top-level modules
    import module_probes  # type: ignore[no-redef]
    import numpy_only  # type: ignore[no-redef]
    import trusted  # type: ignore[no-redef]

globals()["__builtins__"] = trusted.BUILTINS  # builtins as they were before student code ran


def _text(items) -> list[str]:
    return [item.get_text() for item in items]


def _major_ticks(axis) -> list[dict]:
    """Each major tick of an x or y axis with its two labels (bottom/left, top/right) paired."""
    axis.get_majorticklabels()  # places the ticks and sets their labels' text, as drawn
    return [
        {
            "location": float(tick.get_loc()),
            "label1": tick.label1.get_text(),
            "label1_visible": bool(tick.label1.get_visible()),
            "label2": tick.label2.get_text(),
            "label2_visible": bool(tick.label2.get_visible()),
        }
        for tick in axis.get_major_ticks()
    ]


def _mappable_summary(artist) -> dict:
    import numpy as np

    summary = {
        "kind": type(artist).__name__,
        "has_colorbar": getattr(artist, "colorbar", None) is not None,
        "array": np.ma.filled(np.ma.asarray(artist.get_array(), dtype=float), np.nan),
    }
    if hasattr(artist, "get_extent"):
        summary["extent"] = [float(value) for value in artist.get_extent()]
        summary["origin"] = str(getattr(artist, "origin", "upper"))
    if hasattr(artist, "get_coordinates"):
        summary["coordinates"] = np.asarray(artist.get_coordinates(), dtype=float)
    return summary


def figure_summary(figure) -> dict:
    """Axes, images/meshes (values, extent, origin), ticks and labels of a matplotlib figure.

    `xmajorticks` / `ymajorticks` pair every major tick with its labels; `xticks` and
    `xticklabels` (the visible labels, bottom/left ones first) are kept for older readers."""
    from matplotlib.figure import Figure

    if not isinstance(figure, Figure):
        raise TypeError(f"expected a matplotlib Figure, got {type(figure).__name__}")
    figure.draw_without_rendering()
    axes_list = []
    for axes in figure.axes:
        mappables = [*axes.images, *[c for c in axes.collections if hasattr(c, "get_coordinates")]]
        axes_list.append(
            {
                "is_colorbar": hasattr(axes, "_colorbar"),
                "mappables": [_mappable_summary(artist) for artist in mappables],
                "xticks": [float(tick) for tick in axes.get_xticks()],
                "yticks": [float(tick) for tick in axes.get_yticks()],
                "xticklabels": _text(axes.get_xticklabels()),
                "yticklabels": _text(axes.get_yticklabels()),
                "xmajorticks": _major_ticks(axes.xaxis),
                "ymajorticks": _major_ticks(axes.yaxis),
                "xlim": [float(value) for value in axes.get_xlim()],
                "ylim": [float(value) for value in axes.get_ylim()],
                "title": axes.get_title(),
                "titles": [axes.get_title(loc) for loc in ("center", "left", "right")],
                "xlabel": axes.get_xlabel(),
                "ylabel": axes.get_ylabel(),
            }
        )
    return {"axes": axes_list}


def returns(value):
    """A function that ignores its arguments and returns `value` (a stub to swap in)."""
    return lambda *args, **kwargs: value


def uniform_attention_class():
    """A stand-in for a notebook's MultiHeadAttention (same constructor and forward contract)
    whose attention weights are all 1/L: a function built on the notebook's class must then
    return exactly those weights."""
    import torch
    import torch.nn as nn

    class UniformAttention(nn.Module):
        def __init__(self, d_model, num_heads, *args, **kwargs):
            super().__init__()
            self.d_model, self.num_heads = d_model, num_heads
            self.head_dim = d_model // num_heads
            for name in ("W_q", "W_k", "W_v", "W_o"):
                setattr(self, name, nn.Linear(d_model, d_model))

        def forward(self, x, mask=None, return_attention=False):
            length = x.shape[-2]
            shape = (*x.shape[:-2], self.num_heads, length, length)
            weights = torch.full(shape, 1.0 / length, dtype=x.dtype)
            return (x, weights) if return_attention else x

    return UniformAttention


def inputs_after(function, args, kwargs):
    """[function(*args, **kwargs), args]: the arguments as they are after the call, for a
    contract that says a function leaves its inputs as they were."""
    result = function(*args, **kwargs)
    return [result, list(args)]


def stand_in(kind, name, number):
    """The proxy for the grader's stand-in `number`: the contract's own version of a function or
    class, which the grader swaps into the notebook while the checks of what is built on it run
    (`authoring.upstream.on_the_contracts`). Only the proxy is made here (remote.py, the same for
    every exercise); the contract's code runs in the grader, never in this process."""
    import remote

    return remote.make(kind, name, number)


PROBES: dict[str, Callable[..., Any]] = {
    "figure_summary": figure_summary,
    "returns": returns,
    "inputs_after": inputs_after,
    "uniform_attention_class": uniform_attention_class,
    "stand_in": stand_in,
    **module_probes.PROBES,
    **numpy_only.PROBES,
}
