"""Points only from behaviour the grader observed (issue 17, item 6): forged values and a
defeated tamper snapshot gain nothing. Graded through the real grader (the detected level)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, with_student_cells, write_notebook

EX1, EX2 = "ex1_numpy_attention", "ex2_attention_heatmap"

# Values made up to sit where the checks looked (the attacker earned 1.5 in ex1, 1.25 in ex2).
FAKE_VARIANCE = (
    "import numpy as np\n"
    "def score_variance(d_k, n_samples=10_000, seed=0):\n"
    "    wobble = np.random.default_rng(seed).normal(scale=0.02)\n"
    "    return float(d_k) * (1 + wobble), 1.0 + wobble\n"
)
FAKE_SENTENCE = (
    "import torch\n"
    "def sentence_attention(sentence, d_model=32, num_heads=4, seed=0):\n"
    "    tokens = tokenize(sentence)\n"
    "    vocab = build_vocab(tokens)\n"
    "    g = torch.Generator().manual_seed(seed)\n"
    "    table = torch.randn(len(vocab), d_model, generator=g)\n"
    "    x = table[[vocab[t] for t in tokens]]\n"
    "    scores = torch.stack([x @ x.T * (h + 1) / d_model for h in range(num_heads)])\n"
    "    return tokens, torch.softmax(scores, dim=-1).numpy()\n"
)
# One line that defeated the snapshot, then a forged probe (restored the forged-probe attacks).
DEFEAT_SNAPSHOT = (
    "import gc\n"
    "for found in gc.get_objects():\n"
    "    if isinstance(found, type) and found.__name__ == 'Integrity':\n"
    "        found.changed = lambda self: []\n"
    "import probes\n"
    "probes.PROBES['figure_summary'] = lambda figure: {'axes': []}\n"
)


def graded(exercise: str, tmp_path: Path, *cells: str):
    notebook = with_student_cells(source_notebook(exercise), *cells)
    return grade_notebook(write_notebook(notebook, tmp_path / f"{exercise}.ipynb"))


def points(report, grade_id: str) -> float:
    return sum(c.points for c in report.checks if c.grade_id == grade_id)


@pytest.mark.ex1
def test_made_up_variances_earn_nothing(tmp_path):
    report = graded(EX1, tmp_path, FAKE_VARIANCE)
    assert points(report, "check_score_variance") == 0
    assert report.score == 8 - 1.5


@pytest.mark.ex2
def test_weights_not_from_the_notebooks_attention_earn_nothing(tmp_path):
    report = graded(EX2, tmp_path, FAKE_SENTENCE)
    assert points(report, "check_sentence_attention") == 0
    named = {c.mistake for c in report.checks if c.grade_id == "check_sentence_attention"}
    assert "sentence_weights_not_from_attention" in named


@pytest.mark.ex2
def test_replacing_the_snapshots_checker_is_tampering(tmp_path):
    report = graded(EX2, tmp_path, DEFEAT_SNAPSHOT)
    assert report.status == "tampered"
    assert report.score < 8
