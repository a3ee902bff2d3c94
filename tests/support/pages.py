"""Reading a generated page as a student sees it."""

from __future__ import annotations

import html
import re
from pathlib import Path

# every word of the page's own (and nbgrader's) in English: none may be on a Korean page
ENGLISH_CHROME = (
    "Autograder report", "Your code", "Your written answer", "Written answer", "Comments",
    "Score:", "not graded yet", "(Top)", "YOUR ANSWER HERE", "Checks", "from automatic checks",
    "passed", "failed", "No response.", "Your answer", "Your text", "Written by the student",
)  # fmt: skip


def page_text(page: Path, code: bool = True) -> str:
    """The page's text; without `code`, without the notebook's code (what the student was given
    and wrote, in the language of code)."""
    body = page.read_text().split("<body>", 1)[1]
    if not code:
        body = re.sub(r'<div class="highlight[^"]*"><pre>.*?</pre>', " ", body, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())
