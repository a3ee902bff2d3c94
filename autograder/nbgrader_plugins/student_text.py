"""A markdown or raw cell a student wrote, as the autograded notebook keeps it: one block of
clean HTML, in a bordered region labelled as the student's, that formgrader and the feedback page
show as it is.

Formgrader renders a markdown cell with nbconvert's markdown renderer and nothing else (no
cleaning: a `[link](javascript:...)` stays a live link in the instructor's session), then MathJax
typesets the whole page (HTML entities decoded first: `&#92;style` is `\\style` to it). So the
student's text is rendered here, on its way into the autograded notebook:
- markdown by the renderer formgrader uses (nbconvert's mistune, with its math handling); a raw
  cell is shown as the text it is;
- the math in the rendered text (`$...$`, `$$...$$`: found in the decoded text, as MathJax
  finds it) as MathML, its TeX decoded and neutralised (mathml.text_with_math);
- the allow-list cleaner last (allow_list.py): links only to http(s), mailto and
  the page itself; MathML that cannot size, colour or move anything;
- headings as bold paragraphs: a student's "# Score: 10.0 / 10.0" is no heading of the page;
  a link that lost its href is its text (it would look like a link and do nothing);
- wrapped in a region with a border, a label ("Written by the student", in the notebook's
  language), room to scroll sideways (nothing in it widens the page) and the classes that keep
  MathJax out of it (tex2jax_ignore; mathjax_ignore for MathJax 3);
- on one line: a single HTML block, which markdown passes through untouched.
The feedback page (feedback.py) takes the body back out of the block and labels it for the
student ("Your answer").
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

from autograder.nbgrader_plugins.allow_list import clean_student_html
from autograder.nbgrader_plugins.mathml import text_with_math
from autograder.nbgrader_plugins.page_text import words

BLOCK_CLASS = "attn-student-text"
# classes MathJax 2 and 3 skip: nothing in the region is typeset
NO_MATHJAX = "tex2jax_ignore mathjax_ignore"
REGION_STYLE = (
    "border:2px dashed #b58900;border-radius:4px;padding:2px 10px 6px;margin:4px 0;"
    "background:#fffdf5;max-width:100%;overflow-x:auto;overflow-wrap:anywhere"
)
LABEL_STYLE = "font:600 12px/1.8 sans-serif;color:#7a5c00;margin:0 0 2px"
_BLOCK = re.compile(
    rf'<div class="{BLOCK_CLASS} [^"]*"[^>]*><div class="attn-student-label"[^>]*>[^<]*</div>'
    r'<div class="attn-student-body">(.*)</div></div>\s*\Z',
    re.S,
)
_HEADING = re.compile(r"<(/?)h[1-6]>")
# What is rendered: rendering and cleaning grow faster than linearly with nesting and math
# (10,000 math spans took 17 s at autograde), so a cell past these is shown as its text.
MAX_RENDERED = 64 * 1024  # characters of one cell
MAX_MATH = 500  # math spans of one cell ($ signs / 2)
MAX_TAGS = 2000  # "<" of one cell
_CUT_ENTITY = re.compile(r"&[#\w]*$")  # an entity cut in half at the end
# a link the cleaner took the href of (links do not nest: the parser closed any open one)
_DEAD_LINK = re.compile(r"<a\b(?![^>]*\shref=)[^>]*>(.*?)</a>", re.S)


class _MathInText(HTMLParser):
    """Cleaned HTML written out again, with the math in its text as MathML (not in code, pre
    or MathML, where MathJax does not look either)."""

    LITERAL = frozenset({"code", "pre", "math"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.literal = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.literal += tag in self.LITERAL
        self.parts.append(self.get_starttag_text() or "")

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        self.parts.append(self.get_starttag_text() or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.LITERAL and self.literal:
            self.literal -= 1
        self.parts.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        escaped = html.escape(data, quote=False)
        self.parts.append(escaped if self.literal else text_with_math(data))


def markdown_html(source: str) -> str:
    """`source` rendered as formgrader renders markdown (nbconvert's mistune), without the
    anchor links of its headings."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    renderer = IPythonRenderer(escape=False, exclude_anchor_links=True)
    return MarkdownWithMath(renderer=renderer).render(source)


def student_html(source: str, cell_type: str) -> str:
    """The body of a student's cell: rendered, math as MathML, cleaned, headings demoted, dead
    links their text."""
    too_much = (
        len(source) > MAX_RENDERED
        or source.count("$") > 2 * MAX_MATH
        or source.count("<") > MAX_TAGS
    )
    if cell_type == "raw" or too_much:
        shown = html.escape(source[:MAX_RENDERED], quote=False)[:MAX_RENDERED]
        return f"<pre>{_CUT_ENTITY.sub('', shown)}</pre>"
    parser = _MathInText()
    parser.feed(clean_student_html(markdown_html(source)))
    parser.close()
    cleaned = clean_student_html("".join(parser.parts))
    demoted = _HEADING.sub(lambda m: "</strong></p>" if m[1] else "<p><strong>", cleaned)
    return _DEAD_LINK.sub(r"\1", demoted).strip()


def region(body: str, label: str, style: bool) -> str:
    """`body` in the student's labelled region; `style` inline (formgrader's page may not
    carry our CSS), else the classes alone (the feedback page's CSS styles them). The region,
    which may scroll sideways, takes the keyboard's focus and is named by its label."""
    region_style = f' style="{REGION_STYLE}"' if style else ""
    label_style = f' style="{LABEL_STYLE}"' if style else ""
    name = html.escape(label)
    return (
        f'<div class="{BLOCK_CLASS} {NO_MATHJAX}" tabindex="0" role="region" aria-label="{name}"'
        f"{region_style}>"
        f'<div class="attn-student-label"{label_style}>{name}</div>'
        f'<div class="attn-student-body">{body}</div></div>'
    )


def student_block(source: str, cell_type: str, lang: str) -> str:
    """A student's markdown or raw cell as the autograded notebook keeps it (module doc): one
    line, no blank line, so one HTML block."""
    body = student_html(source, cell_type)
    block = region(body, words("Written by the student", lang), style=True)
    return block.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "&#10;") + "\n"


def block_body(source: str) -> str | None:
    """The body of a `student_block` (None when `source` is not one)."""
    found = _BLOCK.match(source)
    return found[1] if found else None
