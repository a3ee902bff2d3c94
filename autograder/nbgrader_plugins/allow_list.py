"""The allow-list every piece of student-written HTML goes through last, on every page: after
markdown and after math became MathML, so MathML attributes made from `\\style{...}` or
`\\href{...}` are removed too.

No `style`, `class` or `id` (nothing that positions an element or borrows the page's CSS), no
event handler, no <style>/<script>/<iframe>/<form>/<img>, links only to http(s), mailto and
in-page anchors (`href` checked as the browser reads it: entities decoded, no whitespace or
case trick, no relative link into the server), and for MathML only the presentational elements
and the attributes that do not size, colour or move things (a fraction's line at most 0.25em
thick, no negative scriptlevel). Our own report cell keeps the classes that style it.
"""

from __future__ import annotations

import re

import bleach

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
