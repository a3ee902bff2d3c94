"""A demo cell run as Jupyter's inline backend would show it, in the child's process: printed
text (bounded), the figures shown or left open (PNG), and the cell's last expression. Runs in
the child; the parent checks everything again (grading/outputs.py)."""

import ast
import io
import sys

from failures import describe
from shell import ipython_to_python

# What one demo cell may show (the parent checks again: the child is not trusted with limits).
DISPLAY_TEXT = 32 * 1024
DISPLAY_FIGURES = 8
DISPLAY_PIXELS = 1600  # longest side of a rendered figure


class BoundedText(io.TextIOBase):
    """stdout/stderr of a demo cell: keeps the first `limit` characters, counts the rest."""

    def __init__(self, limit: int):
        self.parts: list[str] = []
        self.limit, self.size, self.dropped = limit, 0, 0

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        text = str(text)
        room = max(self.limit - self.size, 0)
        self.parts.append(text[:room])
        self.size += min(len(text), room)
        self.dropped += max(len(text) - room, 0)
        return len(text)

    def take(self) -> str:
        text, self.parts = "".join(self.parts), []
        return text


class Display:
    """Runs one demo cell as Jupyter's inline backend would show it: printed text, the figures
    shown or left open, and the cell's last expression (a Figure, or its repr)."""

    def __init__(self, namespace: dict):
        self.namespace = namespace
        self.outputs: list[dict] = []
        self.pngs: list[bytes] = []
        self.shown: set[int] = set()
        self.text = BoundedText(DISPLAY_TEXT)

    def flush_text(self) -> None:
        text = self.text.take()
        if text:
            self.outputs.append({"type": "stream", "text": text})

    def figure(self, figure) -> None:
        if id(figure) in self.shown:
            return
        self.shown.add(id(figure))
        self.flush_text()
        if len(self.pngs) >= DISPLAY_FIGURES:
            self.outputs.append({"type": "note", "text": "more figures than are shown"})
            return
        width, height = figure.get_size_inches()
        dpi = min(72.0, DISPLAY_PIXELS / max(width, height, 0.01))
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
        self.outputs.append({"type": "png", "blob": len(self.pngs)})
        self.pngs.append(buffer.getvalue())

    def open_figures(self, pyplot) -> None:
        for number in pyplot.get_fignums():
            self.figure(pyplot.figure(number))
        pyplot.close("all")

    def run(self, source: str, filename: str) -> None:
        import matplotlib

        matplotlib.use("agg", force=True)
        import matplotlib.pyplot as pyplot
        from matplotlib.figure import Figure

        try:
            tree = ast.parse(source, filename)
        except SyntaxError:  # magics such as %matplotlib inline: plain Python first
            tree = ast.parse(ipython_to_python(source), filename)
        last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        if last is not None:
            tree.body.pop()
        pyplot.close("all")  # as Jupyter's inline backend: each cell shows its own figures
        show, pyplot.show = pyplot.show, lambda *args, **kwargs: self.open_figures(pyplot)
        streams = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = self.text
        try:
            exec(compile(tree, filename, "exec"), self.namespace)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), filename, "eval"), self.namespace)
                if isinstance(value, Figure):
                    self.figure(value)
                elif value is not None:
                    self.flush_text()
                    self.outputs.append({"type": "result", "text": repr(value)[:DISPLAY_TEXT]})
        except BaseException as error:  # noqa: BLE001 - student code may raise anything
            self.flush_text()
            described = describe(error)
            self.outputs.append(
                {"type": "error", "text": f"{described['type']}: {described['message']}"}
            )
        finally:
            sys.stdout, sys.stderr = streams
            pyplot.show = show
            try:
                self.open_figures(pyplot)
            except BaseException as error:  # noqa: BLE001 - a figure that cannot be drawn
                self.outputs.append({"type": "error", "text": f"{type(error).__name__}: {error}"})
            self.flush_text()
            if self.text.dropped:
                self.outputs.append(
                    {"type": "note", "text": f"{self.text.dropped} more characters not shown"}
                )
