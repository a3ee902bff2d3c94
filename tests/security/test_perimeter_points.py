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


EX3 = "ex3_transformer_classifier"
# No TransformerEncoder and no LSTM: modules that report a structure they do not have.
FAKE_STRUCTURE = """
import torch
import torch.nn as nn

def _imposter(module_name, qualname):
    return type(qualname, (nn.Module,), {"__module__": module_name, "__qualname__": qualname})

class TransformerClassifier(nn.Module):
    def __init__(self, vocab_size=100, d_model=64, nhead=4, num_layers=2, num_classes=2,
                 dim_feedforward=128, dropout=0.0):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.head = nn.Linear(d_model, num_classes)
        fake = _imposter("torch.nn.modules.transformer", "TransformerEncoder")()
        fake.num_layers, fake.batch_first = num_layers, True
        self.encoder = fake
        self.encoder.layers = nn.ModuleList(
            [_imposter("torch.nn.modules.transformer", "TransformerEncoderLayer")()
             for _ in range(num_layers)])

    def forward(self, x):
        return self.head(self.embed(x).mean(dim=1))


class LSTMClassifier(nn.Module):
    def __init__(self, vocab_size=100, embed_dim=64, hidden_dim=64, num_classes=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim)
        self.head = nn.Linear(embed_dim, num_classes)
        self.lstm = _imposter("torch.nn.modules.rnn", "LSTM")()

    def forward(self, x):
        return self.head(self.embed(x).cumsum(dim=1)[:, -1])
"""


@pytest.mark.ex3
def test_a_structure_that_names_itself_earns_nothing(tmp_path):
    report = graded(EX3, tmp_path, FAKE_STRUCTURE)
    models = ("check_transformer_classifier", "check_lstm_classifier")
    classifiers = [c for c in report.checks if c.grade_id in models]
    assert classifiers and all(c.points == 0 for c in classifiers), [
        (c.name, c.points) for c in classifiers if c.points
    ]


# A real TransformerEncoder that forward never calls: the structure is there, the work is not.
UNUSED_ENCODER = """
import torch.nn as nn

class TransformerClassifier(nn.Module):
    def __init__(self, vocab_size=100, d_model=64, nhead=4, num_layers=2, num_classes=2,
                 dim_feedforward=128, dropout=0.0):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, x):
        return self.head(self.embed(x).mean(dim=1))
"""


@pytest.mark.ex3
def test_an_encoder_that_forward_never_calls_earns_no_structure_or_pooling_points(tmp_path):
    report = graded(EX3, tmp_path, UNUSED_ENCODER)
    paid = {c.name: c.points for c in report.checks if c.grade_id == "check_transformer_classifier"}
    for name in (
        "test_transformer_classifier_structure",
        "test_transformer_classifier_mean_pools_encoder_output",
    ):
        assert paid[name] == 0, paid
