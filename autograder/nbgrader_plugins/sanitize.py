"""Student-written text never reaches a page as markup that can do more than format text.

Two layers, both on everything a student wrote (markdown, math, raw cells, HTML outputs):
- `clean_student_html`, an allow-list cleaner run LAST, on the final HTML of each student
  fragment (after markdown and after math became MathML, so MathML attributes made from
  `\\style{...}` or `\\href{...}` are removed too). No `style`, `class` or `id` (nothing that
  positions an element or borrows the page's CSS), no event handler, no <style>/<script>/
  <iframe>/<form>/<img>, links only to http(s), mailto and in-page anchors (`href` checked as
  the browser reads it: entities decoded, no whitespace or case trick), and for MathML only the
  presentational elements and the attributes that do not size, colour or move things (a
  fraction's line at most 0.25em thick, no negative scriptlevel).
- `SanitizeStudentHTML` (an autograde preprocessor), for the autograded notebook that
  formgrader renders with nbgrader's own templates (its markdown uncleaned, MathJax over the
  page): every markdown and raw cell the student wrote or changed becomes one block of clean,
  pre-rendered HTML in a region labelled as the student's that MathJax skips (student_text.py).
  Cells exactly as released (the instructor's text, an untouched answer) are left as they are,
  so nbgrader still grades an untouched answer zero by its checksum.
"""

from __future__ import annotations

import re
from pathlib import Path

import bleach
from nbconvert.preprocessors.sanitize import SanitizeHTML
from traitlets import Bool

HTML_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "div", "dl", "dt", "em", "h1",
    "h2", "h3", "h4", "h5", "h6", "hr", "i", "kbd", "li", "ol", "p", "pre", "s", "samp",
    "small", "span", "strong", "sub", "sup", "table", "tbody", "td", "tfoot", "th", "thead",
    "tr", "u", "ul", "wbr",
}  # fmt: skip
MATHML_TAGS = {
    "math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msub", "msup", "msubsup",
    "mfrac", "msqrt", "mroot", "mover", "munder", "munderover", "mtable", "mtr", "mtd",
    "mstyle", "mphantom", "menclose", "mfenced", "semantics", "annotation",
}  # fmt: skip
MATHML_ATTRIBUTES = [
    "display", "xmlns", "mathvariant", "stretchy", "fence", "separator", "accent",
    "accentunder", "displaystyle", "columnalign", "rowalign", "linethickness", "notation",
    "largeop", "movablelimits", "symmetric", "form", "encoding", "open", "close",
    "separators", "scriptlevel",
]  # fmt: skip
ATTRIBUTES = {
    "a": ["href", "title"],
    "abbr": ["title"],
    "td": ["colspan", "rowspan"],
    "th": ["colspan", "rowspan"],
    **{tag: MATHML_ATTRIBUTES for tag in MATHML_TAGS},
}
PROTOCOLS = {"http", "https", "mailto"}
# an href as the browser reads it (the parser decoded its entities): these, and nothing else
SAFE_HREF = re.compile(r"(https?://|mailto:|#)", re.I)
# a backslash, also as an HTML character reference (`&#92;`, `&#x5c;`, `&bsol;`, `&amp;#92;`)
_BACKSLASH = r"(?:\\|&(?:amp;)*(?:#0*92|#[xX]0*5[cC]|bsol);?)"
# MathJax macros that set CSS, links, ids or classes, or load extensions
TEX_MACROS = re.compile(
    _BACKSLASH + r"(style|href|class|cssId|require|unicode|data|html|toggle|mmlToken|bbox|"
    r"texttip|mathtip|toolTip|statusline)(?![A-Za-z])"
)
# a length no thicker than 0.25em (16 px text): a fraction's line, never a filled block
_THIN = re.compile(
    r"\s*(0|thin|medium|thick|0*(\.\d+)?(em|ex)|0*\.?\d*(px|pt)|0*\d{1,3}(\.\d*)?%)\s*"
)


# Outputs of the autograded notebook are ours (ClearOutput removed the student's): our report
# keeps the exact class attributes the page (and formgrader's bootstrap) styles it by, and
# nothing else.
REPORT_CLASSES = {
    "div": {"attn-grade-report", "attn-grade-report tex2jax_ignore"},
    "table": {"attn-grade-checks", "attn-grade-checks table table-condensed"},
    "td": {"result passed", "result failed"},
}


def _small(value: str) -> bool:
    """A line thickness that draws a line: at most 0.25em, 4px (3pt) or 200%."""
    if not _THIN.fullmatch(value):
        return False
    number = re.match(r"\s*([\d.]*)", value)
    amount = float(number[1]) if number and number[1] not in ("", ".") else 0.0
    unit = value.strip().lstrip("0123456789.")
    limit = {"em": 0.25, "ex": 0.5, "px": 4.0, "pt": 3.0, "%": 200.0}.get(unit, 0.0)
    return unit in ("", "thin", "medium", "thick") or amount <= limit


def _student_attributes(tag: str, name: str, value: str) -> bool:
    """An attribute the allow-list keeps (ATTRIBUTES), with a value that cannot run script,
    leave the page's links' schemes, or size things out of the page."""
    if name not in ATTRIBUTES.get(tag, []):
        return False
    if name == "href":
        return bool(SAFE_HREF.match(value.strip()))
    if name == "linethickness":
        return _small(value)
    if name == "scriptlevel":
        return value.strip() in ("0", "1", "2", "+1", "+2")
    return True


def _report_attributes(tag: str, name: str, value: str) -> bool:
    if name == "class":
        return value in REPORT_CLASSES.get(tag, set())
    return _student_attributes(tag, name, value)


def clean_output_html(html: object) -> str:
    """An output's HTML: as `clean_student_html`, but our report keeps its classes."""
    return clean_student_html(html, attributes=_report_attributes)


def clean_student_html(html: object, attributes=None) -> str:
    """`html` with only formatting markup left (see module doc)."""
    text = html.decode() if isinstance(html, bytes) else str(html)
    return bleach.clean(
        text,
        tags=HTML_TAGS | MATHML_TAGS,
        attributes=attributes or _student_attributes,
        protocols=PROTOCOLS,
        strip=True,
        strip_comments=True,
    )


def neutralise_tex(source: str) -> str:
    """`\\style{..}{x}` -> `\\text{style}{..}{x}`: shown as text, never run by MathJax; also
    when its backslash is written as an HTML entity (`&#92;style`, which MathJax reads after
    the browser decoded it)."""
    return TEX_MACROS.sub(lambda match: r"\text{" + match[1] + "}", source)


def given_texts(config, resources: dict) -> frozenset[str]:
    """The markdown and raw cells of the notebook as released (and in source/): the
    instructor's text, and the answers' stubs. Empty when the course has neither."""
    import nbformat
    from nbgrader.coursedir import CourseDirectory

    info = resources.get("nbgrader") or {}
    assignment, notebook = info.get("assignment"), info.get("notebook")
    if not assignment or not notebook:
        return frozenset()
    course = CourseDirectory(config=config)
    texts: set[str] = set()
    for step in (course.release_directory, course.source_directory):
        path = Path(course.format_path(step, ".", assignment)) / f"{notebook}.ipynb"
        try:
            given = nbformat.read(path, as_version=4)
        except (OSError, ValueError):
            continue
        texts |= {str(c.source) for c in given.cells if c.cell_type in ("markdown", "raw")}
    return frozenset(texts)


class SanitizeStudentHTML(SanitizeHTML):
    """Every markdown and raw cell a student wrote or changed, as a labelled block of clean,
    pre-rendered HTML that MathJax skips (student_text.py; a raw cell becomes a markdown cell
    showing its text); cells exactly as released stay as they are. nbconvert's SanitizeHTML,
    enabled, for the outputs of code cells."""

    enabled = Bool(True).tag(config=True)

    def preprocess(self, nb, resources):
        from autograder.nbgrader_plugins.page_text import language

        self._given = given_texts(self.config, resources)
        self._lang = language(nb.metadata)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, cell_index):
        from autograder.nbgrader_plugins.student_text import student_block

        if cell.cell_type not in ("markdown", "raw"):
            return super().preprocess_cell(cell, resources, cell_index)
        source = str(cell.source)
        if source in getattr(self, "_given", ()):
            return cell, resources
        cell.source = student_block(source, cell.cell_type, getattr(self, "_lang", "en"))
        if cell.cell_type == "raw":
            cell.cell_type = "markdown"
            for key in ("raw_mimetype", "format"):
                cell.metadata.pop(key, None)
        return cell, resources
