"""LaTeX math as MathML, which browsers render without MathJax (Chromium >= 109, Firefox,
Safari): in markdown (the feedback page's RenderMathOffline) and in the text of a student's
rendered cell (student_text.py). Whatever MathML comes out is cleaned afterwards
(allow_list.py). Before that, the TeX macros that would reach CSS, links or extensions in
MathJax (or in MathML attributes) are shown as text (`neutralise_tex`).
"""

from __future__ import annotations

import html
import re

MATHML_NS = "http://www.w3.org/1998/Math/MathML"
# a backslash, also as an HTML character reference (`&#92;`, `&#x5c;`, `&bsol;`, `&amp;#92;`)
_BACKSLASH = r"(?:\\|&(?:amp;)*(?:#0*92|#[xX]0*5[cC]|bsol);?)"
# MathJax macros that set CSS, links, ids or classes, or load extensions
TEX_MACROS = re.compile(
    _BACKSLASH + r"(style|href|class|cssId|require|unicode|data|html|toggle|mmlToken|bbox|"
    r"texttip|mathtip|toolTip|statusline)(?![A-Za-z])"
)

# $$display$$ or $inline$ (not `$ 5 and $ 6`: no space inside the dollars of inline math)
# Inline math as pandoc reads it: `$` then a non-space, a non-space then `$` not followed by a
# digit; also not touching an ASCII letter or digit outside (US$5, $5 and $6 stay prices), but
# any other script may touch it (`$L$인`: a Korean particle follows its word directly).
_MATH = re.compile(
    r"\$\$(.+?)\$\$|(?<![\\$A-Za-z0-9])\$(?=\S)([^$\n]+?)(?<=\S)\$(?![A-Za-z0-9$])", re.S
)
_CODE = re.compile(r"(```.*?```|~~~.*?~~~|`[^`\n]*`)", re.S)
# characters markdown would still act on between the tags of inline MathML
_MARKDOWN = {c: f"&#{ord(c)};" for c in "*_\\`[]~|$"}


def neutralise_tex(source: str) -> str:
    """`\\style{..}{x}` -> `\\text{style}{..}{x}`: shown as text, never run by MathJax; also
    when its backslash is written as an HTML entity (`&#92;style`, which MathJax reads after
    the browser decoded it)."""
    return TEX_MACROS.sub(lambda match: r"\text{" + match[1] + "}", source)


def _mathml(latex: str, display: bool) -> str | None:
    from latex2mathml.converter import convert

    try:
        mathml = convert(latex.strip(), display="block" if display else "inline")
    except Exception:  # noqa: BLE001 - LaTeX it cannot read stays as written
        return None
    text = lambda match: ">" + "".join(_MARKDOWN.get(c, c) for c in match[1]) + "<"  # noqa: E731
    # without the namespace attribute, which HTML does not need: nbconvert's heading renderer
    # (an XML parser) would make it `ns0:math`, which no browser renders and the allow-list drops
    return re.sub(r">([^<]+)<", text, mathml.replace(f' xmlns="{MATHML_NS}"', "", 1))


def math_to_mathml(markdown: str) -> str:
    """`$...$` and `$$...$$` outside code, as MathML; anything it cannot convert unchanged."""

    def replace(match: re.Match) -> str:
        display = match[1] is not None
        return _mathml(match[1] if display else match[2], display) or match[0]

    parts = _CODE.split(markdown)
    return "".join(p if i % 2 else _MATH.sub(replace, p) for i, p in enumerate(parts))


def decoded(text: str, rounds: int = 8) -> str:
    """`text` with HTML character references decoded until none is left (`&amp;#92;` is a
    backslash too): what some later reader might make of it."""
    for _ in range(rounds):
        once = html.unescape(text)
        if once == text:
            break
        text = once
    return text


def text_with_math(text: str) -> str:
    """Plain text (the decoded text of an HTML element) as HTML: escaped, each math span as
    MathML, its TeX decoded and neutralised first (`\\style`, `\\href`, ... shown as text)."""
    out, last = [], 0
    for match in _MATH.finditer(text):
        out.append(html.escape(text[last : match.start()], quote=False))
        display = match[1] is not None
        latex = neutralise_tex(decoded(match[1] if display else match[2]))
        out.append(_mathml(latex, display) or html.escape(match[0], quote=False))
        last = match.end()
    out.append(html.escape(text[last:], quote=False))
    return "".join(out)
