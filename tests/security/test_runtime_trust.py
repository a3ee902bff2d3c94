"""Probes do not trust the notebook's runtime ("Hidden means hidden", item 2): a notebook that
replaces what a probe used to call (torch.is_grad_enabled, nn.Module's dispatcher, tensor
methods, builtins, torch's module registry, Tensor.backward) scores no more than its honest
control. Each attack scored more than its control before the probes took their references
before any student code ran (`sandbox/inside/trusted.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, with_student_cells, write_notebook

EX3, EX5 = "ex3_transformer_classifier", "ex5_causal_mask"
ACCURACY = "test_next_token_accuracy_matches_predictions"

# -- ex5: next_token_accuracy without torch.no_grad(), made to look evaluated without gradients --
# The honest control: the same function, no tricks (the probe sees the gradients: 0 points).
WITH_GRADIENTS = """
def next_token_accuracy(model, X, Y):
    model.eval()
    correct = 0
    for start in range(0, X.shape[0], 256):
        logits = model(X[start : start + 256])
        correct += (logits.argmax(dim=-1) == Y[start : start + 256]).sum().item()
    return correct / Y.numel()
"""
# The attack: torch.is_grad_enabled answers False to the probe's hook only.
LYING_GRAD_MODE = (
    WITH_GRADIENTS
    + """
import sys as _sys
_real_grad_mode = torch.is_grad_enabled
def _lying_grad_mode():
    if _sys._getframe(1).f_code.co_name in ("record", "before", "after"):
        return False
    return _real_grad_mode()
torch.is_grad_enabled = torch._C.is_grad_enabled = _lying_grad_mode
"""
)
# The same lie, installed for the call only and taken back before it returns (no trace left).
LYING_DURING_THE_CALL = """
import sys as _sys
def next_token_accuracy(model, X, Y):
    real = torch.is_grad_enabled, torch._C.is_grad_enabled
    def lie():
        if _sys._getframe(1).f_code.co_name in ("record", "before", "after"):
            return False
        return real[0]()
    torch.is_grad_enabled = torch._C.is_grad_enabled = lie
    try:
        model.eval()
        logits = model(X)
    finally:
        torch.is_grad_enabled, torch._C.is_grad_enabled = real
    return float((logits.argmax(dim=-1) == Y).float().mean())
"""
# nn.Module's dispatcher replaced for the call: the hooks run under no_grad, the forward passes
# with gradients and no hooks.
DISPATCHER_REPLACED = """
import torch.nn.modules.module as _dispatch
def next_token_accuracy(model, X, Y):
    real = nn.Module.__call__
    def call(self, *args, **kwargs):
        with torch.no_grad():
            for hook in list(_dispatch._global_forward_pre_hooks.values()):
                hook(self, args)
        return self.forward(*args, **kwargs)
    nn.Module.__call__ = call
    try:
        model.eval()
        logits = model(X)
    finally:
        nn.Module.__call__ = real
    return float((logits.argmax(dim=-1) == Y).float().mean())
"""
# The hooks called by hand under no_grad on the whole batch, the real evaluation without them.
HOOKS_CALLED_BY_HAND = """
import torch.nn.modules.module as _dispatch
def next_token_accuracy(model, X, Y):
    model.eval()
    hooks = _dispatch._global_forward_pre_hooks
    with torch.no_grad():
        for hook in list(hooks.values()):
            hook(model, (X,))
    saved = dict(hooks)
    hooks.clear()
    try:
        logits = model(X)
    finally:
        hooks.update(saved)
    return float((logits.argmax(dim=-1) == Y).float().mean())
"""
# The real evaluation behind the hooks' back, one small call without gradients for them to
# see, and Tensor.__len__ telling the hook that small call held every sample.
LYING_LENGTH = """
import sys as _sys
import torch.nn.modules.module as _dispatch
def next_token_accuracy(model, X, Y):
    model.eval()
    hooks = _dispatch._global_forward_pre_hooks
    saved = dict(hooks)
    hooks.clear()
    try:
        logits = model(X)
    finally:
        hooks.update(saved)
    real = torch.Tensor.__len__
    def length(self):
        if _sys._getframe(1).f_code.co_name in ("_batch_rows", "batch_rows"):
            return len(X)
        return real(self)
    torch.Tensor.__len__ = length
    try:
        with torch.no_grad():
            model(X[:1])
    finally:
        torch.Tensor.__len__ = real
    return float((logits.argmax(dim=-1) == Y).float().mean())
"""
# Genuine dispatcher calls, with the notebook's own global hooks around the probe's: one before
# it turns gradients off, one after it turns them back on, one forward hook detaches the output.
HOOKS_AROUND_THE_PROBES = """
import torch.nn.modules.module as _dispatch
def _off(module, args):
    torch._C._set_grad_enabled(False)
def _detach(module, args, out):
    if isinstance(out, tuple):
        return tuple(_detach(module, args, o) for o in out)
    return out.detach() if torch.is_tensor(out) else out
_hooks = [nn.modules.module.register_module_forward_pre_hook(_off),
          nn.modules.module.register_module_forward_hook(_detach)]
def next_token_accuracy(model, X, Y):
    model.eval()
    def on(module, args):
        torch._C._set_grad_enabled(True)
    late = nn.modules.module.register_module_forward_pre_hook(on)
    try:
        logits = model(X)
    finally:
        late.remove()
        torch._C._set_grad_enabled(True)
    return float((logits.argmax(dim=-1) == Y).float().mean())
"""
# The catalogued mistake (layers that are not chained), and a forward that replaces
# Tensor.backward so that every parameter gets a gradient (the probe's reach looked complete).
FILLED_GRADIENTS = (
    catalogue_for(EX5)["layers_not_chained"].source
    + """
_real_backward = torch.Tensor.backward
def _backward(self, *args, **kwargs):
    _real_backward(self, *args, **kwargs)
    for parameter in _FILLED:
        if parameter.grad is None:
            parameter.grad = torch.ones_like(parameter)
_FILLED = []
_Unchained = CausalTransformer
class CausalTransformer(_Unchained):
    def forward(self, x):
        _FILLED[:] = list(self.parameters())
        torch.Tensor.backward = _backward
        return super().forward(x)
"""
)


def scored(exercise: str, cells: dict[str, str], check: str, tmp_path: Path, name: str):
    notebook = source_notebook(exercise, replace=cells)
    path = write_notebook(notebook, tmp_path / name / f"{exercise}.ipynb")
    report = grade_notebook(path, only=[check])
    (result,) = [c for c in report.checks if c.name == check]
    return report, result


@pytest.fixture(scope="module")
def accuracy_control(tmp_path_factory):
    _, result = scored(
        EX5,
        {"next_token_accuracy": WITH_GRADIENTS},
        ACCURACY,
        tmp_path_factory.mktemp("control"),
        "control",
    )
    assert not result.passed and "with gradients on" in result.message, result
    return result.points


@pytest.mark.ex5
@pytest.mark.parametrize(
    "attack",
    [
        pytest.param(LYING_GRAD_MODE, id="is_grad_enabled-lies-to-the-hook"),
        pytest.param(LYING_DURING_THE_CALL, id="the-lie-only-during-the-call"),
        pytest.param(DISPATCHER_REPLACED, id="Module.__call__-runs-the-hooks-under-no_grad"),
        pytest.param(HOOKS_CALLED_BY_HAND, id="hooks-called-by-hand"),
        pytest.param(LYING_LENGTH, id="Tensor.__len__-lies-about-the-batch"),
        pytest.param(HOOKS_AROUND_THE_PROBES, id="own-hooks-switch-gradients-around-the-probes"),
    ],
)
def test_an_evaluation_with_gradients_cannot_look_like_one_without(
    attack, accuracy_control, tmp_path
):
    report, result = scored(EX5, {"next_token_accuracy": attack}, ACCURACY, tmp_path, "attack")
    assert result.points <= accuracy_control, (report.status, result)
    assert not result.passed


@pytest.mark.ex5
def test_a_replaced_backward_does_not_make_unused_layers_reach_the_output(tmp_path):
    check = "test_causal_transformer_output_shape"
    cells = {"CausalTransformer": FILLED_GRADIENTS}
    _, result = scored(EX5, cells, check, tmp_path, "attack")
    assert not result.passed and result.mistake == "layers_not_chained", result


# -- ex3: what module_summary and runs_through report ---------------------------------------------
# A module class that names itself TransformerEncoder, placed where torch keeps the real one.
IMPOSTER_IN_TORCHS_PLACE = """
import torch.nn.modules.transformer as _home

class TransformerEncoder(nn.Module):
    def __init__(self, d_model, num_layers):
        super().__init__()
        self.num_layers, self.batch_first = num_layers, True
        self.layers = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(num_layers)])

    def forward(self, x):
        for layer in self.layers:
            x = x + torch.relu(layer(x))
        return x

TransformerEncoder.__module__ = "torch.nn.modules.transformer"
_home.TransformerEncoder = TransformerEncoder  # module_summary looked here

class TransformerClassifier(nn.Module):
    def __init__(self, vocab_size=100, d_model=64, nhead=4, num_layers=2, num_classes=2,
                 dim_feedforward=128, dropout=0.0):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = PositionalEncoding(d_model)
        self.encoder = TransformerEncoder(d_model, num_layers)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, x):
        return self.head(self.encoder(self.pos(self.embed(x))).mean(dim=1))
"""
# The catalogued small LSTM (11,714 parameters against 73,474), and Tensor.numel telling
# module_summary its parameters are six times as many.
LYING_NUMEL = (
    catalogue_for(EX3)["lstm_too_small"].source
    + """
import sys as _sys
_SMALL = set()
_Small = LSTMClassifier
class LSTMClassifier(_Small):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _SMALL.update(id(p) for p in self.parameters())
_real_numel = torch.Tensor.numel
def _numel(self):
    if id(self) in _SMALL and _sys._getframe(1).f_code.co_name != "count_parameters":
        return 6 * _real_numel(self)
    return _real_numel(self)
torch.Tensor.numel = _numel
"""
)
# An encoder that forward never runs, and get_submodule pointing the probe at one that runs.
POINTED_ELSEWHERE = """
class TransformerClassifier(nn.Module):
    def __init__(self, vocab_size=100, d_model=64, nhead=4, num_layers=2, num_classes=2,
                 dim_feedforward=128, dropout=0.0):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.mix = nn.Linear(d_model, d_model)
        self.head = nn.Linear(d_model, num_classes)

    def get_submodule(self, target):  # where runs_through looked for the encoder
        return self.mix if target == "encoder" else super().get_submodule(target)

    def forward(self, x):
        return self.head(self.mix(self.pos(self.embed(x))).mean(dim=1))
"""

_IN_PLACE = "_home.TransformerEncoder = TransformerEncoder  # module_summary looked here\n"
_POINTING = (
    "    def get_submodule(self, target):  # where runs_through looked for the encoder\n"
    '        return self.mix if target == "encoder" else super().get_submodule(target)\n'
)

CHECKS = {
    "check_transformer_classifier": [
        "test_transformer_classifier_structure",
        "test_transformer_classifier_logits_per_sample",
        "test_transformer_classifier_mean_pools_encoder_output",
        "test_transformer_classifier_uses_positions",
        "test_transformer_classifier_runs_without_warnings",
    ],
    "check_lstm_classifier": [
        "test_lstm_classifier_structure_and_logits",
        "test_lstm_classifier_reads_the_whole_sequence",
        "test_lstm_parameter_count_comparable",
    ],
}


@pytest.mark.ex3
@pytest.mark.parametrize(
    ("cells", "control", "grade_id"),
    [
        pytest.param(
            {"TransformerClassifier": IMPOSTER_IN_TORCHS_PLACE},
            {"TransformerClassifier": IMPOSTER_IN_TORCHS_PLACE.replace(_IN_PLACE, "")},
            "check_transformer_classifier",
            id="an-imposter-in-torchs-module",
        ),
        pytest.param(
            {"LSTMClassifier": LYING_NUMEL},
            {"LSTMClassifier": catalogue_for(EX3)["lstm_too_small"].source},
            "check_lstm_classifier",
            id="numel-lies-to-module_summary",
        ),
        pytest.param(
            {"TransformerClassifier": POINTED_ELSEWHERE},
            {"TransformerClassifier": POINTED_ELSEWHERE.replace(_POINTING, "")},
            "check_transformer_classifier",
            id="get_submodule-points-elsewhere",
        ),
    ],
)
def test_a_module_cannot_tell_the_probes_what_it_is(cells, control, grade_id, tmp_path):
    assert control != cells
    scores = {}
    for kind, replace in (("attack", cells), ("control", control)):
        notebook = source_notebook(EX3, replace=replace)
        path = write_notebook(notebook, tmp_path / kind / f"{EX3}.ipynb")
        report = grade_notebook(path, only=CHECKS[grade_id])
        scores[kind] = sum(c.points for c in report.checks if c.grade_id == grade_id)
    assert scores["attack"] <= scores["control"], scores


# -- the tamper snapshot covers what the probes took, and cannot be blinded through builtins -----
REPLACEMENTS = {
    "torch.is_grad_enabled": "import torch\ntorch.is_grad_enabled = lambda: False",
    "the-dispatchers-code": "import torch.nn as nn\n"
    "nn.Module._call_impl.__code__ = (lambda self, *a, **k: self.forward(*a, **k)).__code__",
    "the-global-hook-dict": "import collections, torch.nn.modules.module as m\n"
    "m._global_forward_pre_hooks = collections.OrderedDict()",
    "the-kit": "import trusted\ntrusted._KIT = trusted._KIT._replace(grad_enabled=lambda: False)",
    "the-private-builtins": "import trusted\ntrusted.BUILTINS['isinstance'] = lambda *a: True",
    "a-probes-builtins": "import module_probes\nmodule_probes.__builtins__ = {}",
    # sorted() blinded the snapshot's comparison, then a forged probe went unseen
    "builtins-that-blind-the-snapshot": "import builtins, probes\n"
    "builtins.sorted = lambda *a, **k: []\n"
    "probes.PROBES['figure_summary'] = lambda figure: {'axes': []}",
}


@pytest.mark.ex1
@pytest.mark.parametrize("patch", sorted(REPLACEMENTS))
def test_replacing_what_the_probes_rely_on_is_tampering(patch, tmp_path):
    exercise = "ex1_numpy_attention"
    notebook = with_student_cells(source_notebook(exercise), REPLACEMENTS[patch])
    path = write_notebook(notebook, tmp_path / f"{exercise}.ipynb")
    report = grade_notebook(path, only=["test_make_qkv_shapes_and_dtype"])
    assert report.status == "tampered", report.messages
    assert report.score == 0


# -- ex7: generate with gradients behind the hooks' back, one small call for them to see ----------
GENERATE_WITH_GRADIENTS = """
def generate(model, prompt, n_new, use_cache=True):
    tokens, cache = prompt, (KVCache() if use_cache else None)
    for step in range(n_new):
        if cache is None:
            logits = model(tokens)
        else:
            logits = model(tokens if step == 0 else tokens[:, -1:], cache)
        tokens = torch.cat([tokens, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    return tokens
"""
GENERATE_BEHIND_THE_HOOKS = (
    GENERATE_WITH_GRADIENTS.replace("def generate(", "def _generate(")
    + """
import torch.nn.modules.module as _dispatch
def generate(model, prompt, n_new, use_cache=True):
    hooks = (_dispatch._global_forward_pre_hooks, _dispatch._global_forward_hooks)
    saved = [dict(h) for h in hooks]
    for h in hooks:
        h.clear()
    try:
        tokens = _generate(model, prompt, n_new, use_cache)
    finally:
        for h, s in zip(hooks, saved):
            h.update(s)
    with torch.no_grad():
        model(prompt[:1, :1])
    return tokens
"""
)


@pytest.mark.ex7
def test_generate_with_gradients_behind_the_hooks_earns_no_gradient_points(tmp_path):
    check = "test_generate_runs_without_gradients"
    scores = {}
    for kind, source in (
        ("control", GENERATE_WITH_GRADIENTS),
        ("attack", GENERATE_BEHIND_THE_HOOKS),
    ):
        _, result = scored("ex7_kv_cache", {"generate": source}, check, tmp_path, kind)
        scores[kind] = result.points
    assert scores["attack"] <= scores["control"] == 0, scores
