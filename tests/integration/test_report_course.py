"""`attn-grade report` end to end: a real ex1 course, autograded, then the page in Chromium."""

from __future__ import annotations

import csv
import json
import re

import pytest

from autograder.core.results import REPORT_KEY
from tests.support.chromium import images, rendered_dom, screenshot, visible_text
from tests.support.nbgrader_helpers import attn_grade, submission_text

pytestmark = [pytest.mark.slow, pytest.mark.ex1]
EXERCISE = "ex1_numpy_attention"
# dave hands in alice's work with the variables renamed and a comment added
RENAMES = {
    "queries": "qs",
    "keys": "ks",
    "values": "vs",
    "shifted": "centred",
    "exps": "e",
    "scores": "logits",
    "weights": "attn",
    "ours": "mine",
    "theirs": "ref",
    "dots": "products",
    "rng": "generator",
}
# erin writes her own correct solution
HONEST = {
    "make_qkv": """
def make_qkv(seq_len=4, d_k=8, seed=0):
    gen = np.random.default_rng(seed)
    out = []
    for _ in range(3):
        out.append(gen.standard_normal(size=(seq_len, d_k)))
    return tuple(out)
""",
    "softmax": """
def softmax(x, axis=-1):
    top = x.max(axis=axis, keepdims=True)
    p = np.exp(x - top)
    p /= p.sum(axis=axis, keepdims=True)
    return p
""",
    "scaled_dot_product_attention": """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scale = 1.0 / np.sqrt(Q.shape[-1])
    logits = np.einsum("...qd,...kd->...qk", Q, K) * scale
    if mask is not None:
        logits = np.where(mask, logits, -np.inf)
    p = softmax(logits)
    return np.einsum("...qk,...kd->...qd", p, V), p
""",
    "max_abs_diff_vs_torch": """
def max_abs_diff_vs_torch(Q, K, V, mask=None):
    t = [torch.tensor(a) for a in (Q, K, V)]
    m = None if mask is None else torch.tensor(np.array(mask, dtype=bool))
    expected = F.scaled_dot_product_attention(*t, attn_mask=m).numpy()
    got = scaled_dot_product_attention(Q, K, V, mask)[0]
    return float(abs(got - expected).max())
""",
    "score_variance": """
def score_variance(d_k, n_samples=10_000, seed=0):
    g = np.random.default_rng(seed)
    a = g.standard_normal((n_samples, d_k))
    b = g.standard_normal((n_samples, d_k))
    s = np.einsum("nd,nd->n", a, b)
    return float(s.var()), float((s / d_k ** 0.5).var())
""",
}
COURSE_ID = "cs-attention-2026"


def solution_cells(notebook: dict):
    for cell in notebook["cells"]:
        nbgrader = cell["metadata"].get("nbgrader", {})
        if nbgrader.get("solution") and cell["cell_type"] == "code":
            yield nbgrader["grade_id"], cell


def renamed_copy(notebook: dict) -> dict:
    copy = json.loads(json.dumps(notebook))
    for _, cell in solution_cells(copy):
        source = "".join(cell["source"])
        for old, new in RENAMES.items():
            source = re.sub(rf"\b{old}\b", new, source)
        cell["source"] = "# my own work\n" + source.replace("\n\n", "\n\n\n")
    return copy


def honest(notebook: dict) -> dict:
    copy = json.loads(json.dumps(notebook))
    for grade_id, cell in solution_cells(copy):
        cell["source"] = HONEST[grade_id].strip() + "\n"
    return copy


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory):
    course = tmp_path_factory.mktemp("report") / "course"
    built = attn_grade("build", EXERCISE, "--course", str(course), "--course-id", COURSE_ID)
    assert built.returncode == 0, built.stderr
    release = course / "release" / EXERCISE / f"{EXERCISE}.ipynb"
    texts = {s: submission_text(release, EXERCISE, s) for s in ("alice", "bob", "carol")}
    alice = json.loads(texts["alice"])
    alice["metadata"][REPORT_KEY] = {"checks": [], "status": "ok"}  # a forged report is dropped
    texts["alice"] = json.dumps(alice)
    texts["dave"] = json.dumps(renamed_copy(alice))
    texts["erin"] = json.dumps(honest(json.loads(release.read_text())))
    texts["notjson"] = "{ not a notebook"
    for student, text in texts.items():
        path = course / "submitted" / student / EXERCISE / f"{EXERCISE}.ipynb"
        path.parent.mkdir(parents=True)
        path.write_text(text)
    done = attn_grade("autograde", EXERCISE, "--course", str(course), "--workers", "2")
    assert done.returncode == 0, done.stderr
    return course


def test_report_of_a_graded_course(graded_course, tmp_path):
    out = tmp_path / "batch.html"
    done = attn_grade("report", "--course", str(graded_course), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert f"report: {out}" in done.stdout
    rows = list(csv.DictReader((tmp_path / "batch-checks.csv").open()))
    sdpa = next(r for r in rows if r["check"] == "test_sdpa_single_head_matches_reference")
    # alice, dave, erin pass; bob (no_sqrt_scaling) and carol (blank) fail; notjson not graded
    assert (sdpa["graded"], sdpa["passed"], sdpa["mistakes"]) == ("5", "3", "no_sqrt_scaling x1")
    assert float(sdpa["point_biserial"]) > 0 and sdpa["upper_lower"] == "1.000"

    dom = rendered_dom(out)
    text = visible_text(dom)
    assert "6 submissions in 1 exercises" in text, text
    assert f"<title>Batch report: {COURSE_ID}</title>" in out.read_text(), "titled by course id"
    # alice, bob and dave wrote the answer; carol and erin left it blank; notjson is graded 0
    assert "waiting for a hand grade 3 of 6 (6 points)" in text, text
    assert re.search(r"no_sqrt_scaling : the scores were not divided by sqrt\(d_k\) ×1 bob", text)
    assert "notjson ex1_numpy_attention invalid_notebook the file is not valid JSON" in text
    assert "None were recorded: no submission has the status tampered" in text
    pairs = re.findall(r"(\d) (\w+) ↔ (\w+) (\d\.\d\d) \d\.\d\d \d\.\d\d", text)
    assert pairs[0][1:3] == ("alice", "dave") and float(pairs[0][3]) >= 0.9, pairs
    erin = [float(score) for _, a, b, score in pairs if "erin" in (a, b)]
    assert erin and max(erin) < 0.5, pairs
    assert "carol" not in {name for _, a, b, _ in pairs for name in (a, b)}  # wrote nothing
    (histogram,) = images(dom)
    assert len(histogram) > 2000
    screenshot(out, "report-course.png", height=3000)
