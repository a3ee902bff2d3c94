"""Start-up time savings for our own processes.

jsonschema imports the optional `rfc3987_syntax` (pulled in by jupyter-events) when nbformat
loads; building its grammar costs about 2 s per process. It only validates the rarely used
`iri` string formats, which notebooks do not use, so our processes skip it.
"""

import sys


def skip_slow_optional_imports() -> None:
    # `import rfc3987_syntax` -> ImportError (None in sys.modules is the documented way)
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
