"""ex3's uses_positions and train_classifier_seeded are decided from behaviour ("Hidden means
hidden", item 2): a model that only looks like it has a TransformerEncoder fed with positions,
or a train_classifier that is seeded only in what it reports, earns nothing from them. Each
attack earned those points before (the control, a catalogued honest mistake, earns none)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.core.registry import reference_module
from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, write_notebook

pytestmark = pytest.mark.ex3
EX3 = "ex3_transformer_classifier"
POSITIONS = "test_transformer_classifier_uses_positions"
SEEDED = "test_train_classifier_seeded"

CLASSIFIER = """
class TransformerClassifier(nn.Module):
    def __init__(self, vocab_size=100, d_model=64, nhead=4, num_layers=2, num_classes=2,
                 dim_feedforward=128, dropout=0.0):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
                                           batch_first=True)
        self.encoder = {encoder}
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, x):
        {forward}
"""
REAL_ENCODER = "nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)"
# Order-dependent logits from models that only look like a TransformerEncoder fed positions.
FAKES = {
    # a module named like the encoder, never run; the first token decides the logits
    "an-imposter-never-run": """
_Fake = type("TransformerEncoder", (nn.Module,), {"__module__": "torch.nn.modules.transformer"})
"""
    + CLASSIFIER.format(
        encoder="_Fake()", forward="return self.head(self.pos(self.embed(x))[:, 0])"
    ),
    # a real encoder without positions; the order enters after it (the last token's state)
    "positions-after-the-encoder": CLASSIFIER.format(
        encoder=REAL_ENCODER, forward="return self.head(self.encoder(self.embed(x))[:, -1])"
    ),
    # a subclass of the real encoder whose forward is not the encoder's (a running sum)
    "a-subclass-with-its-own-forward": """
class _Encoder(nn.TransformerEncoder):
    def forward(self, src, *args, **kwargs):
        return src.cumsum(dim=1) / 10
"""
    + CLASSIFIER.format(
        encoder=REAL_ENCODER.replace("nn.TransformerEncoder", "_Encoder"),
        forward="return self.head(self.encoder(self.pos(self.embed(x))).mean(dim=1))",
    ),
    # a class whose metaclass puts the real TransformerEncoder in its MRO
    "an-mro-that-names-the-real-class": """
class _Meta(type):
    def mro(cls):
        return [cls, *nn.TransformerEncoder.__mro__]

class _Encoder(nn.Module, metaclass=_Meta):
    def __init__(self):
        nn.Module.__init__(self)
        self.num_layers = 2

    def forward(self, src, *args, **kwargs):
        return src.cumsum(dim=1) / 10
"""
    + CLASSIFIER.format(
        encoder="_Encoder()",
        forward="return self.head(self.encoder(self.pos(self.embed(x))).mean(dim=1))",
    ),
}

TRAIN = inspect.getsource(reference_module(EX3).train_classifier)
# Trainers seeded only in what they report.
UNSEEDED = {
    # a history made up from the seed; the model is never trained
    "a-made-up-history": """
def train_classifier(model, X, y, epochs=30, batch_size=64, lr=1e-3, seed=0):
    return [1.0 / (epoch + 1) + seed * 1e-4 for epoch in range(epochs)]
""",
    # the model trained in the global random order; the history of a seeded copy reported
    "a-seeded-copy-reports-the-history": TRAIN.replace(
        "def train_classifier(", "def _seeded_history("
    )
    + """
import copy
def train_classifier(model, X, y, epochs=30, batch_size=64, lr=1e-3, seed=0):
    history = _seeded_history(copy.deepcopy(model), X, y, epochs, batch_size, lr, seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(X))
        for start in range(0, len(X), batch_size):
            rows = order[start : start + batch_size]
            loss = F.cross_entropy(model(X[rows]), y[rows])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return history
""",
    # seeded batches, then noise from the global generator on the trained weights
    "global-noise-after-seeded-training": TRAIN.replace(
        "def train_classifier(", "def _seeded_training("
    )
    + """
def train_classifier(model, X, y, epochs=30, batch_size=64, lr=1e-3, seed=0):
    state = torch.get_rng_state()
    history = _seeded_training(model, X, y, epochs, batch_size, lr, seed)
    torch.set_rng_state(state)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(1e-3 * torch.randn_like(parameter))
    return history
""",
}


def points(cells: dict[str, str], check: str, tmp_path: Path, name: str) -> float:
    notebook = source_notebook(EX3, replace=cells)
    path = write_notebook(notebook, tmp_path / name / f"{EX3}.ipynb")
    report = grade_notebook(path, only=[check])
    (result,) = [c for c in report.checks if c.name == check]
    return result.points


@pytest.fixture(scope="module")
def controls(tmp_path_factory):
    """Honest mistakes: no positional encoding; shuffling with the global generator."""
    where = tmp_path_factory.mktemp("controls")
    mistakes = catalogue_for(EX3)
    no_positions, unseeded = mistakes["no_positional_encoding"], mistakes["train_ignores_seed"]
    return {
        POSITIONS: points({no_positions.target: no_positions.source}, POSITIONS, where, "p"),
        SEEDED: points({unseeded.target: unseeded.source}, SEEDED, where, "s"),
    }


@pytest.mark.parametrize("fake", sorted(FAKES))
def test_a_model_that_looks_positional_earns_no_position_points(fake, controls, tmp_path):
    assert controls[POSITIONS] == 0
    assert points({"TransformerClassifier": FAKES[fake]}, POSITIONS, tmp_path, fake) == 0


@pytest.mark.parametrize("trainer", sorted(UNSEEDED))
def test_a_trainer_seeded_only_in_its_report_earns_no_seed_points(trainer, controls, tmp_path):
    assert controls[SEEDED] == 0
    assert points({"train_classifier": UNSEEDED[trainer]}, SEEDED, tmp_path, trainer) == 0
