"""A course whose student mallory writes hostile text everywhere a student can write text, built
once per test run (`built_once`) and read by the page tests: the feedback page and formgrader.

ex2: alice hands in the reference, mallory the reference plus hostile markdown (her written
answer, a cell she added, a prose cell of the release she edited), two raw cells, printed markup
and an exception message; ex5 in Korean: alice. Every hostile payload is named (`Vector`), so a
test can say which one got through. A link's script, when it runs, leaves a
`<pwned-marker data-vector=NAME>` in the page, writes `pwned-NAME.txt` into the course through
Jupyter's contents API and opens a terminal (what the instructor's session allows: issue "Hidden
means hidden", item 6); a math payload paints with the colour rgb(1, 2, 3); a forged heading
carries FORGED-NAME.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path

from tests.support.chromium import MARKER, planted
from tests.support.nbgrader_helpers import attn_grade, nbgrader, submission_text

EX2, EX5 = "ex2_attention_heatmap", "ex5_causal_mask"
FAKE_OUTPUT = "FAKE-OUTPUT-FROM-THE-SUBMISSION"
COLOUR = "rgb(1, 2, 3)"  # what every math payload paints with; nothing of ours uses it
HAND_COMMENT = "Good start, but **why** does it hold for $\\sqrt{d_k}$?"


def script(vector: str) -> str:
    """What a student's link runs in the instructor's session: a marker, a file written into
    the course through the contents API, a terminal (each names `vector`)."""
    return (
        "(function(){" + planted(vector) + ";"
        "var x=(document.cookie.match(/_xsrf=([^;]+)/)||[])[1]||'';"
        "var h={'X-XSRFToken':x,'Content-Type':'application/json'};"
        f"fetch('/api/contents/pwned-{vector}.txt',{{method:'PUT',headers:h,"
        f"body:JSON.stringify({{type:'file',format:'text',content:'{vector}'}})}});"
        "fetch('/api/terminals',{method:'POST',headers:h,body:'{}'});"
        "})()"
    )


def js(vector: str, scheme: str = "javascript") -> str:
    """A URL of `scheme` (obfuscated as a test needs it) that runs `script(vector)`; no space
    and balanced parentheses, so that it is a markdown link destination as it stands."""
    return f"{scheme}:eval(atob('{base64.b64encode(script(vector).encode()).decode()}'))"


@dataclass(frozen=True)
class Vector:
    name: str
    where: str  # answer, added, prose, raw, raw-html, error
    text: str


# links: every scheme but http(s), mailto and #anchors must lose its link, however written
DATA_URL = "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg=="
LINKS = [
    Vector("md-inline", "answer", f"[my derivation]({js('md-inline')})"),
    Vector("md-entity", "answer", f"[entity]({js('md-entity', 'jav&#x61;script')})"),
    Vector("md-tab", "answer", f"[tab]({js('md-tab', 'java&#9;script')})"),
    Vector("md-case", "answer", f"[case]({js('md-case', 'JaVaScRiPt')})"),
    Vector("md-reference", "answer", f"[reference][7]\n\n[7]: {js('md-reference')}\n"),
    Vector("md-autolink", "answer", f"<{js('md-autolink')}>"),
    Vector("md-data", "answer", f"[data]({DATA_URL})"),
    Vector("md-vbscript", "answer", "[vb](vbscript:msgbox(1))"),
    Vector("html-a", "answer", f'<a href="{js("html-a")}">html link</a>'),
    Vector("html-img", "answer", f'<img src=x onerror="{script("html-img")}">'),
    Vector(
        "html-svg",
        "answer",
        f'<svg onload="{script("html-svg")}"><a href="{js("html-svg-link")}">'
        '<text y="9">svg</text></a></svg>',
    ),
    Vector(
        "html-iframe",
        "answer",
        f'<iframe srcdoc="<script>{script("html-iframe")}</script>"></iframe>',
    ),
    Vector("added-md", "added", f"A cell of my own: [see here]({js('added-md')})"),
    Vector("prose-md", "prose", f"[an edited instruction]({js('prose-md')})"),
    Vector("raw-a", "raw", f'<a href="{js("raw-a")}">raw link</a> [raw md]({js("raw-a-md")})'),
    Vector("raw-html-a", "raw-html", f'<a href="{js("raw-html-a")}">raw html link</a>'),
]
# TeX that MathJax would typeset with a style, a link or a class, past the macro filter
SHADOW = "text-shadow:0 0 3px rgb(1,2,3)"
STYLES = [
    Vector("tex-decimal", "answer", f"&#36;&#92;style{{{SHADOW}}}{{S-decimal}}&#36;"),
    Vector("tex-bsol", "answer", "&#36;&bsol;style{color:rgb(1,2,3)}{S-bsol}&#36;"),
    Vector("tex-hex-href", "answer", f"&#36;&#x5c;href{{{js('tex-hex-href')}}}{{S-href}}&#36;"),
    Vector("tex-paren", "answer", "&#92;(&#92;style{background:rgb(1,2,3)}{S-paren}&#92;)"),
    Vector(
        "tex-env",
        "answer",
        "&#92;begin{equation}&#92;style{color:rgb(1,2,3)}{S-env}&#92;end{equation}",
    ),
    Vector("tex-double", "answer", "&#36;&amp;#92;style{color:rgb(1,2,3)}{S-double}&#36;"),
    Vector(
        "tex-class",
        "answer",
        "&#36;&#92;class{attn-grade-report}{&#92;cssId{forged}{S-class}}&#36;",
    ),
    Vector("tex-added", "added", f"&#36;&#92;style{{{SHADOW}}}{{S-added}}&#36;"),
    Vector("tex-raw", "raw", "$\\style{color:rgb(1,2,3)}{S-raw}$"),
    Vector("tex-error", "error", "$\\style{color:rgb(1,2,3)}{S-error}$"),
]
# math and markup that would make the page wider than the screen, or paint a block (each after
# its name, SIZE-NAME, so that a test can measure it)
SIZES = [
    Vector("size-hspace", "answer", "SIZE-hspace $a\\hspace{5000em}b$"),
    Vector("size-hspace-entity", "answer", "SIZE-hspace-entity &#36;a&#92;hspace{5000em}b&#36;"),
    Vector("size-kern", "answer", "SIZE-kern $a\\kern5000em b\\mkern9000mu c$"),
    Vector("size-rule", "answer", "SIZE-rule $\\rule{5000em}{1em}$"),
    Vector("size-genfrac", "answer", "SIZE-genfrac $\\genfrac{}{}{60em}{}{a}{b}$"),
    Vector("size-huge", "answer", "SIZE-huge $\\Huge\\Huge W$"),
    Vector("size-raise", "answer", "SIZE-raise $\\raise5000em{x}\\lower5000em{y}$"),
    Vector("size-phantom", "answer", "SIZE-phantom $\\phantom{\\hspace{5000em}}z$"),
    Vector(
        "size-mathml-thickness",
        "answer",
        'SIZE-mathml-thickness <math><mfrac linethickness="60em"><mi>a</mi><mi>b</mi></mfrac>'
        "</math>",
    ),
    Vector(
        "size-mathml-scriptlevel",
        "answer",
        'SIZE-mathml-scriptlevel <math><mstyle scriptlevel="-30"><mi>W</mi></mstyle></math>',
    ),
    Vector("size-added", "added", "SIZE-added &#36;&#92;hspace{9000em}&#36;"),
]
# text that looks like the grader's: a score heading, a check table
HEADINGS = [
    Vector("heading-atx", "answer", "# Score: 10.0 / 10.0 FORGED-atx"),
    Vector("heading-setext", "answer", "Score: 10.0 / 10.0 FORGED-setext\n==="),
    Vector("heading-html", "answer", "<h2>Score: 10.0 / 10.0 FORGED-html</h2>"),
    Vector(
        "heading-table",
        "answer",
        "| check | result | points |\n|---|---|---|\n| all | ✓ passed FORGED-table | 10 / 10 |",
    ),
    Vector("heading-added", "added", "## Score: 10.0 / 10.0 FORGED-added"),
    Vector("heading-raw-html", "raw-html", "<h1>Score: 10.0 / 10.0 FORGED-raw-html</h1>"),
]
VECTORS = [*LINKS, *STYLES, *SIZES, *HEADINGS]

ANSWER_ATTACK = (
    "My answer.\n\n"
    # a link that stays one (the probes click it: formgrader's page has no link of its own in
    # the notebook)
    "As in [the paper](https://arxiv.org/abs/1706.03762).\n\n"
    f'<img src=x onerror="{planted("answer-img")}">\n\n'
    f"<script>{planted('answer-script')}</script>\n\n"
    f'<svg><animate onbegin="{planted("answer-svg")}" attributeName=x dur=1s></svg>\n\n'
    # issue 17: math rendered after the cleaning became MathML attributes (an overlay, a link)
    r"$\style{position:fixed;top:0;left:0;width:100%;height:100%;background:white}"
    r"{\text{Score: 10.0 / 10.0 all checks passed}}$ and $\href{javascript:alert(1)}{link}$"
    r" and $\class{attn-grade-report}{x}$ and $\cssId{forged}{y}$ and $\sqrt{d_k}$"
    '\n\n<div style="position:fixed;top:0">covered</div>'
    '<a href="javascript:alert(2)">js</a>\n'
)
PRINTED = f'<img src=x onerror="{planted("printed")}">'
# A student cell that prints markup whenever the demo cells call tokenize().
PRINT_ATTACK = (
    "_tokenize = tokenize\n"
    "def tokenize(sentence):\n"
    f"    print({PRINTED!r})\n"
    "    return _tokenize(sentence)\n"
)
# An exception message that tries to close the report (fence, table), forge a score and, through
# MathJax, paint the report.
FORGED = (
    "```\n</td></tr></table></div>\n\n"
    f'<img src=x onerror="{planted("error")}"><h1 class=forged>Score: 10 / 10</h1>\n\n```'
    + "".join(f" {v.text}" for v in VECTORS if v.where == "error")
)
ERROR_ATTACK = f"raise ValueError({FORGED!r})\n"


def vectors_in(where: str) -> str:
    return "\n\n".join(v.text for v in VECTORS if v.where == where)


def cells_of(notebook: dict, grade_id: str) -> list[dict]:
    return [
        c
        for c in notebook["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id
    ]


def hostile(release: Path) -> str:
    """The reference, plus hostile text in every place a student writes (module doc)."""
    notebook = json.loads(submission_text(release, EX2, "alice"))
    answer = ANSWER_ATTACK + "\n\n" + vectors_in("answer") + "\n"
    cells_of(notebook, "answer_pattern")[0]["source"] = answer
    prose = next(
        c
        for c in notebook["cells"]
        if c["cell_type"] == "markdown" and "## 6." in "".join(c["source"])
    )
    prose["source"] = "".join(prose["source"]) + "\n\n" + vectors_in("prose")
    for source in (PRINT_ATTACK, ERROR_ATTACK):
        cell = {"cell_type": "code", "metadata": {"tags": [f'x"><b {MARKER}>']}, "outputs": []}
        cell |= {"id": f"attack-{len(notebook['cells'])}", "execution_count": None}
        notebook["cells"].append({**cell, "source": source})
    added = [
        ("markdown", {}, vectors_in("added")),
        ("raw", {}, vectors_in("raw")),
        ("raw", {"raw_mimetype": "text/html"}, vectors_in("raw-html")),
    ]
    for kind, metadata, source in added:
        cell = {"cell_type": kind, "metadata": metadata, "source": source}
        notebook["cells"].append({**cell, "id": f"attack-{len(notebook['cells'])}"})
    return json.dumps(notebook)


def with_fake_outputs(text: str) -> str:
    """Outputs a student could fake: they must never reach the autograded notebook."""
    notebook = json.loads(text)
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": FAKE_OUTPUT}]
    return json.dumps(notebook)


def build_course(root: Path) -> None:
    """ex2 (alice: reference, mallory: hostile) autograded by `nbgrader autograde`, ex5 in
    Korean (alice) by `attn-grade autograde`; mallory's written answer graded by hand, with a
    comment, then changed (under review); feedback generated for both."""
    course, exchange = root / "course", root / "exchange"
    exchange.mkdir(mode=0o777)
    built = attn_grade("build", EX2, "--course", str(course), "--exchange", str(exchange))
    assert built.returncode == 0, built.stderr
    built = attn_grade("build", EX5, "--lang", "ko", "--course", str(course))
    assert built.returncode == 0, built.stderr
    for exercise, students in ((EX2, ("alice", "mallory")), (EX5, ("alice",))):
        release = course / "release" / exercise / f"{exercise}.ipynb"
        for student in students:
            text = (
                hostile(release)
                if student == "mallory"
                else submission_text(release, exercise, "alice")
            )
            path = course / "submitted" / student / exercise / f"{exercise}.ipynb"
            path.parent.mkdir(parents=True)
            path.write_text(with_fake_outputs(text))
    nbgrader(course, "autograde", EX2)
    graded = attn_grade("autograde", EX5, "--course", str(course), "--workers", "2")
    assert graded.returncode == 0, graded.stderr
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        notebook = gradebook.find_submission_notebook(EX2, EX2, "mallory")
        answer = next(g for g in notebook.grades if g.name == "answer_pattern")
        answer.manual_score, answer.needs_manual_grade = 1.0, True  # graded, then resubmitted
        comment = next(c for c in notebook.comments if c.name == "answer_pattern")
        comment.manual_comment = HAND_COMMENT
        gradebook.db.commit()
    for exercise in (EX2, EX5):
        nbgrader(course, "generate_feedback", exercise)


def autograded(course: Path, student: str, exercise: str) -> dict:
    return json.loads(
        (course / "autograded" / student / exercise / f"{exercise}.ipynb").read_text()
    )


def feedback(course: Path, student: str, exercise: str) -> Path:
    return course / "feedback" / student / exercise / f"{exercise}.html"
