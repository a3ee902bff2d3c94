"""Student-written text never reaches a page as markup that can do more than format text.

Two layers, both on everything a student wrote (markdown, math, HTML outputs):
- `clean_student_html`, an allow-list cleaner run LAST, on the final HTML of each student
  fragment of the feedback page (`FeedbackExporter`'s markdown2html and clean_html filters:
  after markdown and after the offline math rendering, so MathML attributes made from
  `\\style{...}` or `\\href{...}` are removed too). No `style`, `class` or `id` (nothing that
  positions an element or borrows the page's CSS), no event handler, no <style>/<script>/
  <iframe>/<form>/<img>, links only to http(s)/mailto/in-page anchors, and for MathML only the
  presentational elements and the attributes that do not size, colour or move things.
- `SanitizeStudentHTML` (an autograde preprocessor), for the autograded notebook that
  formgrader renders with nbgrader's own templates (MathJax in the browser): HTML in markdown
  and raw cells through nbconvert's SanitizeHTML, and the MathJax macros that reach CSS, links
  or extensions (`\\style`, `\\href`, `\\class`, `\\cssId`, `\\require`, ...) neutralised.
"""

from __future__ import annotations

import re

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
# MathJax macros that set CSS, links, ids or classes, or load extensions
TEX_MACROS = re.compile(
    r"\\(style|href|class|cssId|require|unicode|data|html|toggle|mmlToken|bbox|texttip|"
    r"mathtip|toolTip|statusline)(?![A-Za-z])"
)


# Outputs of the autograded notebook are ours (ClearOutput removed the student's): our report
# keeps the exact class attributes the page (and formgrader's bootstrap) styles it by, and
# nothing else.
REPORT_CLASSES = {
    "div": {"attn-grade-report"},
    "table": {"attn-grade-checks", "attn-grade-checks table table-condensed"},
    "td": {"result passed", "result failed"},
}


def _report_attributes(tag: str, name: str, value: str) -> bool:
    if name == "class":
        return value in REPORT_CLASSES.get(tag, set())
    return name in ATTRIBUTES.get(tag, [])


def clean_output_html(html: object) -> str:
    """An output's HTML: as `clean_student_html`, but our report keeps its classes."""
    return clean_student_html(html, attributes=_report_attributes)


def clean_student_html(html: object, attributes=None) -> str:
    """`html` with only formatting markup left (see module doc)."""
    text = html.decode() if isinstance(html, bytes) else str(html)
    return bleach.clean(
        text,
        tags=HTML_TAGS | MATHML_TAGS,
        attributes=attributes or ATTRIBUTES,
        protocols=PROTOCOLS,
        strip=True,
        strip_comments=True,
    )


def neutralise_tex(source: str) -> str:
    """`\\style{..}{x}` -> `\\text{style}{..}{x}`: shown as text, never run by MathJax."""
    return TEX_MACROS.sub(lambda match: r"\text{" + match[1] + "}", source)


class SanitizeStudentHTML(SanitizeHTML):
    """nbconvert's SanitizeHTML, enabled, for every markdown and raw cell that holds a `<`
    (markup needs one; cells without it keep their source, so their markdown renders as
    written) and for every output that is not plain text or an image; and, in every markdown
    cell, the MathJax macros of TEX_MACROS neutralised."""

    enabled = Bool(True).tag(config=True)

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "markdown" and "\\" in str(cell.source):
            cell.source = neutralise_tex(str(cell.source))
        if cell.cell_type in ("markdown", "raw") and "<" not in str(cell.source):
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)
