"""IPython's shell as the sandbox child sees it: magics become harmless, shell escapes never
run, and IPython syntax is rewritten to plain Python (stdlib, plus IPython when installed)."""


class Shell:
    """Stands in for IPython's shell: magics become harmless, shell escapes never run."""

    def __init__(self, namespace: dict, notes: list):
        self.namespace = namespace
        self.notes = notes
        self.user_ns = namespace

    def _run(self, source: str):
        exec(compile(source, "<magic>", "exec"), self.namespace)

    def run_line_magic(self, name, line, _stack_depth=1):
        if name in ("time", "timeit", "prun"):
            self._run(line)
        else:
            self.notes.append(f"ignored %{name} {line}".strip())

    def run_cell_magic(self, name, line, cell):
        if name in ("time", "timeit", "capture", "prun"):
            self._run(cell)
        else:
            self.notes.append(f"ignored %%{name} cell magic")

    def system(self, command, *args, **kwargs):
        self.notes.append(f"ignored shell command: !{command}")

    getoutput = system

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def ipython_to_python(source: str) -> str:
    """IPython syntax rewritten to plain Python (here, in the child, under the cell's time
    limit: a crafted cell can make this transformation slow)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return source
    try:
        return TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - compile() then reports the syntax error
        return source
