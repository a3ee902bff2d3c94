"""Points only from behaviour the grader observed (issue 17, item 6): forged values and a
defeated tamper snapshot gain nothing. Graded through the real grader (the detected level)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, with_student_cells, write_notebook
from tests.support.student_cells import tinylm

EX1, EX2 = "ex1_numpy_attention", "ex2_attention_heatmap"
EX8 = "ex8_additive_attention"

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


# Made up with the spread an estimate from n_samples draws would have (issue 18 review,
# attacker F4: the formula is in the notebook's markdown), so the spread check passed: 8/8.
FAKE_VARIANCE_WITH_SPREAD = (
    "import numpy as np\n"
    "def score_variance(d_k, n_samples=10_000, seed=0):\n"
    "    spread = np.sqrt((2 * d_k**2 + 6 * d_k) / n_samples)\n"
    "    wobble = np.random.default_rng(seed).normal() * spread\n"
    "    return float(d_k + wobble), float((d_k + wobble) / d_k)\n"
)


@pytest.mark.ex1
def test_made_up_variances_with_the_sampling_spread_earn_nothing(tmp_path):
    report = graded(EX1, tmp_path, FAKE_VARIANCE_WITH_SPREAD)
    assert points(report, "check_score_variance") == 0
    failed = [c for c in report.checks if c.name == "test_score_variance_uses_its_arguments"]
    assert failed and "is never negative" in failed[0].message
    assert failed[0].mistake == "variance_not_sampled"


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


# A module that changes its weights as they load (issue 18 review, attacker F1): ex4's checks
# ran the reference on the weights read back, so a GroupedQueryAttention that zeroed W_o on load
# and computed no attention at all earned 8/8.
ZEROES_W_O_ON_LOAD = (
    "import torch\n"
    "import torch.nn as nn\n"
    "class GroupedQueryAttention(nn.Module):\n"
    "    def __init__(self, d_model, n_heads, n_kv_heads):\n"
    "        super().__init__()\n"
    "        if d_model % n_heads or n_heads % n_kv_heads:\n"
    "            raise ValueError('indivisible')\n"
    "        self.h, self.kv, self.hd = n_heads, n_kv_heads, d_model // n_heads\n"
    "        self.W_q = nn.Linear(d_model, d_model, bias=False)\n"
    "        self.W_k = nn.Linear(d_model, n_kv_heads * self.hd, bias=False)\n"
    "        self.W_v = nn.Linear(d_model, n_kv_heads * self.hd, bias=False)\n"
    "        self.W_o = nn.Linear(d_model, d_model, bias=False)\n"
    "    def load_state_dict(self, state, strict=True, **kw):\n"
    "        result = super().load_state_dict(state, strict=strict, **kw)\n"
    "        w = self.W_o.weight\n"
    "        if not torch.equal(w, torch.eye(w.shape[0], dtype=w.dtype)):\n"
    "            with torch.no_grad():\n"
    "                w.zero_()\n"
    "        return result\n"
    "    def forward(self, x, mask=None):\n"
    "        B, L, _ = x.shape\n"
    "        v = self.W_v(x).view(B, L, self.kv, self.hd)\n"
    "        heads = v.repeat_interleave(self.h // self.kv, dim=2)\n"
    "        return self.W_o(heads.reshape(B, L, -1) + 0 * self.W_k(x).sum())\n"
)
# The class of that attack: the notebook's own (correct) module, made to change what it was
# given as it loads. Its forward is right for the weights it holds, which are not those loaded.
CHANGES_WEIGHTS_ON_LOAD = (
    "import torch\n"
    "_Loaded = {name}\n"
    "class {name}(_Loaded):\n"
    "    def load_state_dict(self, state, strict=True, **kw):\n"
    "        result = super().load_state_dict(state, strict=strict, **kw)\n"
    "        with torch.no_grad():\n"
    "            for weight in self.parameters():\n"
    "                weight.mul_(0.5)\n"
    "        return result\n"
)


@pytest.mark.ex4
def test_a_module_that_zeroes_its_weights_on_load_earns_no_attention_points(tmp_path):
    report = graded("ex4_gqa_analysis", tmp_path, ZEROES_W_O_ON_LOAD)
    failed = {c.name: c.message for c in report.checks if not c.passed}
    assert "test_gqa_matches_reference_with_its_own_weights" in failed
    assert (
        "should be the weights just loaded"
        in failed["test_gqa_matches_reference_with_its_own_weights"]
    )
    assert points(report, "check_gqa_attention") <= 1.0  # the group check sees no attention
    assert report.score <= 5.0


@pytest.mark.parametrize(
    ("exercise", "name", "check"),
    [
        pytest.param(
            "ex4_gqa_analysis",
            "GroupedQueryAttention",
            "test_gqa_matches_reference_with_its_own_weights",
            marks=pytest.mark.ex4,
        ),
        pytest.param("ex6_rope", "RoPEAttention", None, marks=pytest.mark.ex6),
        pytest.param("ex7_kv_cache", "TinyLM", None, marks=pytest.mark.ex7),
        pytest.param(
            "ex8_additive_attention", "MultiplicativeAttention", None, marks=pytest.mark.ex8
        ),
    ],
)
def test_weights_changed_on_load_are_found_wherever_modules_are_loaded(
    exercise, name, check, tmp_path
):
    report = graded(exercise, tmp_path, CHANGES_WEIGHTS_ON_LOAD.format(name=name))
    found = [c for c in report.checks if "should be the weights just loaded" in c.message]
    assert found, [(c.name, c.message) for c in report.checks if not c.passed]
    assert all(c.points == 0 for c in found)
    assert report.score < 8
    if check is not None:
        assert check in {c.name for c in found}


# ex7 (issue 18 review of the de-cascade): generate and TinyLM are also accepted when they are
# right for the student's own model and attention. A model that replays what a bogus generate
# told it, and a TinyLM whose attention answers the grader's separate call differently, must
# not make that acceptance pay: the grader asks first, before the student's code sees the input.
SCRIPTED_MODEL = tinylm(
    """
    x = self.embed(tokens)
    past = 0 if cache is None else len(cache)
    logits = self.head(x + self.attn(x, cache))
    s, end = getattr(self, "_script", None), past + tokens.shape[1]
    if s is not None and s.shape[0] == tokens.shape[0] and end < s.shape[1] \\
            and torch.equal(s[:, past:end], tokens):
        logits = torch.zeros_like(logits)
        logits[torch.arange(s.shape[0]), -1, s[:, end]] = 10.0
    return logits
    """,
    after="""
    def generate(model, prompt, n_new, use_cache=True):
        out = torch.cat([prompt, torch.zeros(prompt.shape[0], n_new, dtype=prompt.dtype)], 1)
        model._script = out
        with torch.no_grad():
            n = kv_projections(prompt.shape[1], n_new, use_cache)
            if n:
                model.attn.W_k(torch.zeros(1, n, model.attn.W_k.in_features))
        return out
    """,
)
STASHED_ATTENTION = tinylm(
    """
    x = self.embed(tokens)
    self.attn(x, cache)
    self.attn._stash = x.detach().clone()
    return self.head(x)
    """,
    after="""
    _attention_forward = CachedSelfAttention.forward
    def _forward(self, x, cache=None):
        s = self.__dict__.get("_stash")
        if s is not None and cache is None and s.shape == x.shape and torch.equal(s, x):
            return torch.zeros_like(x)
        return _attention_forward(self, x, cache)
    CachedSelfAttention.forward = _forward
    """,
)


@pytest.mark.ex7
def test_a_model_replaying_a_bogus_generate_earns_no_generate_points(tmp_path):
    report = graded("ex7_kv_cache", tmp_path, SCRIPTED_MODEL)
    assert points(report, "check_generate") == 0
    assert points(report, "check_tinylm") == 1


@pytest.mark.ex7
def test_a_tinylm_without_attention_earns_nothing_from_a_stash(tmp_path):
    report = graded("ex7_kv_cache", tmp_path, STASHED_ATTENTION)
    assert points(report, "check_tinylm") == 0
    assert points(report, "check_cached_attention") == 3.5


# A third review: an upstream function that fails one cheap check of its own (so that its
# dependants may pass on it) and then, once the dependant has run, turns into almost nothing; the
# dependant never does its own job. Almost nothing is nothing, within ten times the tolerance.
STATEFUL_NEAR_IDENTITY_ROPE = {
    "apply_rope": """
_STATE = {"attn_used": False}
def apply_rope(x, offset=0, base=10000.0):
    if _STATE["attn_used"]:
        return x * (1 + 3e-6)
    half = x.shape[-1] // 2
    theta = rope_frequencies(x.shape[-1], base)
    positions = torch.arange(offset, offset + x.shape[-2], dtype=torch.float32).double()
    angles = positions[:, None] * theta[None, :]
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
""",
    "RoPEAttention": """
class RoPEAttention(nn.Module):
    def __init__(self, d_model, num_heads, base=10000.0):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads or (d_model // num_heads) % 2:
            raise ValueError("bad sizes")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, causal=True):
        _STATE["attn_used"] = True
        b, l, d = x.shape
        h = lambda t: t.view(b, l, self.num_heads, self.head_dim).transpose(1, 2)
        q, k, v = h(self.W_q(x)), h(self.W_k(x)), h(self.W_v(x))
        s = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if causal:
            s = s.masked_fill(torch.ones(l, l, dtype=torch.bool).triu(1), float("-inf"))
        return self.W_o((F.softmax(s, -1) @ v).transpose(1, 2).reshape(b, l, d))
""",
    "relative_scores": """
def relative_scores(q, k, positions, base=10000.0):
    _STATE["attn_used"] = False
    rq = apply_rope(q.expand(positions, q.shape[-1]), base=base)
    rk = apply_rope(k.expand(positions, k.shape[-1]), base=base)
    return rq @ rk.T
""",
}
STATEFUL_NEAR_ZERO_ATTENTION = {
    # the catalogued mistake that fails only test_cached_attention_fills_the_cache, then a switch
    "CachedSelfAttention": catalogue_for("ex7_kv_cache")["cache_stores_k_before_rope"].source
    + """
_FLAG = {"lm": False}
_honest_forward = CachedSelfAttention.forward
def _forward(self, x, cache=None):
    return torch.full_like(x, 2e-6) if _FLAG["lm"] else _honest_forward(self, x, cache)
CachedSelfAttention.forward = _forward
""",
    "TinyLM": tinylm("""
_FLAG["lm"] = True
return self.head(self.embed(tokens))
"""),
}
NO_BYTES = {
    "kv_cache_bytes": "def kv_cache_bytes(seq_len, n_kv_heads, head_dim, n_layers=1, "
    "batch_size=1, bytes_per_element=2):\n    return 0\n",
    "kv_cache_mib": "def kv_cache_mib(*args, **kwargs):\n    return 0.0\n",
}


def graded_with(exercise: str, tmp_path: Path, cells: dict[str, str]):
    notebook = source_notebook(exercise, replace=cells)
    return grade_notebook(write_notebook(notebook, tmp_path / f"{exercise}.ipynb"))


@pytest.mark.ex6
def test_a_rope_that_turns_into_almost_nothing_pays_no_attention_without_rope(tmp_path):
    report = graded_with("ex6_rope", tmp_path, STATEFUL_NEAR_IDENTITY_ROPE)
    assert points(report, "check_rope_attention") == 0


@pytest.mark.ex7
def test_an_attention_that_turns_into_almost_nothing_pays_no_tinylm_without_it(tmp_path):
    report = graded_with("ex7_kv_cache", tmp_path, STATEFUL_NEAR_ZERO_ATTENTION)
    assert points(report, "check_tinylm") == 0


@pytest.mark.ex4
def test_a_cache_of_no_bytes_vouches_for_nothing(tmp_path):
    report = graded_with("ex4_gqa_analysis", tmp_path, NO_BYTES)
    mib = next(c for c in report.checks if c.name == "test_kv_cache_mib")
    assert not mib.passed


# An independent attacker on ex8's training excuses (checks 10, first version): each module
# registers an empty buffer (a cheap fault: only the parameter checks fail), MultiplicativeAttention
# becomes a hard pointer in eval mode at the task's sizes, train_pointer trains only when called a
# second time in one check and reports made-up losses, and pointer_accuracy returns 1.0. It took
# the training checks' 2.0 points (7.25 of 8; it deserves 5.25).
EMPTY_BUFFER = (
    '\n        self.register_buffer("last_weights", torch.empty(0))  # cached for plotting'
)
ORACLE_MODULE = """
class MultiplicativeAttention(nn.Module):

    def __init__(self, enc_dim: int, dec_dim: int):
        super().__init__()
        self.W_a = nn.Linear(enc_dim, dec_dim, bias=False)
        self.register_buffer("last_weights", torch.empty(0))  # cached for plotting

    def forward(self, annotations, state, mask=None):
        if not self.training and annotations.shape[-1] == 16 == state.shape[-1]:
            # "inference": hard pointer
            dots = (annotations * state.unsqueeze(1)).sum(dim=-1)
            weights = F.one_hot(dots.argmax(-1), dots.shape[-1]).to(annotations.dtype)
            return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights
        scores = (self.W_a(annotations) * state.unsqueeze(1)).sum(dim=-1)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights
"""
TRAINS_ON_SECOND_CALLS = """
_LAST_SEED = [None]

def train_pointer(
    module, annotations, states, targets, epochs=30, batch_size=64, lr=1e-2, seed=0
) -> list[float]:
    fresh = torch.initial_seed() != _LAST_SEED[0]  # a check's first call
    torch.manual_seed(seed)
    _LAST_SEED[0] = torch.initial_seed()
    order_generator = torch.Generator().manual_seed(seed)
    parameters = [p for p in module.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(parameters, lr=lr) if parameters else None
    module.train()
    n = len(targets)
    for _ in range(epochs):
        order = torch.randperm(n, generator=order_generator)
        for start in range(0, n, batch_size):
            rows = order[start : start + batch_size]
            _, weights = module(annotations[rows], states[rows])
            if fresh or optimizer is None:
                continue
            picked = weights.gather(1, targets[rows].unsqueeze(1)).squeeze(1)
            loss = -torch.log(picked.clamp_min(1e-12)).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return [(epochs - e) * 1e-6 for e in range(epochs)]
"""
CONSTANT_ACCURACY = """
def pointer_accuracy(module, annotations, states, targets) -> float:
    was_training = module.training
    module.eval()
    with torch.no_grad():
        module(annotations[:1], states[:1])
    module.train(was_training)
    return 1.0
"""


@pytest.mark.ex8
def test_a_cheap_fault_and_an_oracle_module_earn_no_training_points(tmp_path):
    from autograder._reference import ex8_additive_attention as reference

    additive = inspect.getsource(reference.AdditiveAttention).replace(
        "self.v = nn.Linear(attn_dim, 1, bias=False)",
        "self.v = nn.Linear(attn_dim, 1, bias=False)" + EMPTY_BUFFER,
    )
    cells = {
        "AdditiveAttention": additive,
        "MultiplicativeAttention": ORACLE_MODULE,
        "train_pointer": TRAINS_ON_SECOND_CALLS,
        "pointer_accuracy": CONSTANT_ACCURACY,
    }
    notebook = source_notebook(EX8, replace=cells)
    report = grade_notebook(write_notebook(notebook, tmp_path / f"{EX8}.ipynb"))
    training = [c for c in report.checks if c.grade_id == "check_training"]
    assert len(training) == 5 and not any(c.passed for c in training), training


@pytest.mark.ex8
def test_a_weak_trainer_is_not_excused_by_a_cheap_module_fault(tmp_path):
    """SGD instead of Adam trains MultiplicativeAttention well enough but not
    AdditiveAttention; a buffer that fails only AdditiveAttention's parameter check must not
    excuse the additive half (only a fault of the module's values can explain a failure to
    learn)."""
    from autograder._reference import ex8_additive_attention as reference

    additive = inspect.getsource(reference.AdditiveAttention).replace(
        "self.v = nn.Linear(attn_dim, 1, bias=False)",
        "self.v = nn.Linear(attn_dim, 1, bias=False)" + EMPTY_BUFFER,
    )
    sgd = inspect.getsource(reference.train_pointer).replace("torch.optim.Adam", "torch.optim.SGD")
    cells = {"AdditiveAttention": additive, "train_pointer": sgd}
    notebook = source_notebook(EX8, replace=cells)
    path = write_notebook(notebook, tmp_path / f"{EX8}.ipynb")
    check = "test_train_pointer_learns_the_task_with_additive"
    report = grade_notebook(path, only=[check])
    (result,) = [c for c in report.checks if c.name == check]
    assert not result.passed, result


# A second attacker on the training checks (checks 10). Each earned points for a function that
# did not do its job.
EX5 = "ex5_causal_mask"
ACCURACY_BEHIND_THE_HOOKS_BACK = """
def next_token_accuracy(model, X, Y):
    import torch.nn.modules.module as M
    model.eval()
    saved = dict(M._global_forward_pre_hooks)
    M._global_forward_pre_hooks.clear()
    try:
        logits = model(X)  # gradients on, unseen
    finally:
        M._global_forward_pre_hooks.update(saved)
    with torch.no_grad():
        model(X[:1])  # one small call for the hook to see
    return float((logits.argmax(dim=-1) == Y).float().mean())
"""
ACCURACY_THAT_SETS_THE_WEIGHTS = """
def pointer_accuracy(module, annotations, states, targets):
    with torch.no_grad():
        for m in module.modules():
            if hasattr(m, "W_a"):
                m.W_a.weight.copy_(torch.eye(*m.W_a.weight.shape))
        module.eval()
        module(annotations, states)
    return 1.0
"""
# The reference model, except that in eval mode with the default sizes it reads the next token
# off the sine it knows; and a train_lm that never steps.
ORACLE_LM = """
_Right = CausalTransformer
class CausalTransformer(_Right):
    def __init__(self, vocab_size=50, d_model=64, n_layers=2, n_heads=4, max_len=128, dropout=0.0):
        super().__init__(vocab_size, d_model, n_layers, n_heads, max_len, dropout)
        self._sine = discretize_sine(50 + 2 * max_len + 2) if vocab_size == 50 else None

    def forward(self, x):
        if self._sine is None or self.training:
            return super().forward(x)
        windows = torch.stack([self._sine[o : o + x.shape[1]] for o in range(50)])
        best = (x[:, None, :] == windows[None]).sum(-1).argmax(-1)
        following = torch.stack([self._sine[o + 1 : o + 1 + x.shape[1]] for o in range(50)])
        logits = torch.zeros(*x.shape, 50)
        return logits.scatter(-1, following[best].unsqueeze(-1), 10.0)

_train = train_lm
def train_lm(model, X, Y, epochs=20, batch_size=64, lr=3e-3, seed=0):
    return _train(model, X, Y, epochs=epochs, batch_size=batch_size, lr=0.0, seed=seed)
"""


# An independent attacker on checks 11's first version: a load hook that copies embed.weight onto
# head.weight looked like tied weights, and under tied weights a TinyLM that swaps the two
# matrices cannot be told apart (8/8, deserved 7); a ScaledDotAttention that makes a learnable
# temperature on its first forward had no parameters when counted unrun.
TIED_BY_A_LOAD_HOOK = """
import torch, torch.nn as nn, torch.nn.functional as F
class TinyLM(nn.Module):
    def __init__(self, vocab_size=32, d_model=32, n_heads=4, n_kv_heads=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.attn = CachedSelfAttention(d_model, n_heads, n_kv_heads)
        self.head = nn.Linear(d_model, vocab_size)
        self.register_load_state_dict_post_hook(TinyLM._tie)

    @staticmethod
    def _tie(module, incompatible):
        with torch.no_grad():
            module.head.weight.copy_(module.embed.weight)

    def forward(self, tokens, cache=None):
        x = F.embedding(tokens, self.head.weight)
        h = x + self.attn(x, cache)
        return F.linear(h, self.embed.weight, self.head.bias)
"""
PARAMETER_ON_THE_FIRST_CALL = """
import math, torch, torch.nn as nn, torch.nn.functional as F
class ScaledDotAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, annotations, state, mask=None):
        if "log_temperature" not in self._parameters:
            self.log_temperature = nn.Parameter(torch.zeros(()))
        scores = (annotations * state.unsqueeze(1)).sum(dim=-1) / math.sqrt(self.dim)
        scores = scores * self.log_temperature.exp()
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights
"""


@pytest.mark.parametrize(
    ("exercise", "cells", "check"),
    [
        pytest.param(
            "ex7_kv_cache",
            TIED_BY_A_LOAD_HOOK,
            "test_tinylm_matches_the_reference_on_its_weights",
            marks=pytest.mark.ex7,
            id="a-load-hook-that-looks-like-tied-weights",
        ),
        pytest.param(
            EX8,
            PARAMETER_ON_THE_FIRST_CALL,
            "test_scaled_dot_weights_and_no_parameters",
            marks=pytest.mark.ex8,
            id="a-parameter-made-on-the-first-call",
        ),
        pytest.param(
            EX5,
            ACCURACY_BEHIND_THE_HOOKS_BACK,
            "test_next_token_accuracy_matches_predictions",
            marks=pytest.mark.ex5,
            id="hooks-cleared-then-one-small-call",
        ),
        pytest.param(
            EX8,
            ACCURACY_THAT_SETS_THE_WEIGHTS,
            "test_pointer_accuracy_of_a_pointing_module",
            marks=pytest.mark.ex8,
            id="accuracy-sets-the-weights-it-is-judged-on",
        ),
        pytest.param(
            EX5,
            ORACLE_LM,
            "test_train_lm_learns_the_sine",
            marks=pytest.mark.ex5,
            id="oracle-model-and-a-train_lm-that-never-steps",
        ),
    ],
)
def test_a_function_that_does_not_do_its_job_earns_nothing(exercise, cells, check, tmp_path):
    notebook = with_student_cells(source_notebook(exercise), cells)
    report = grade_notebook(write_notebook(notebook, tmp_path / f"{exercise}.ipynb"), only=[check])
    (result,) = [c for c in report.checks if c.name == check]
    assert not result.passed, result


@pytest.mark.parametrize(
    ("exercise", "checks"),
    [
        pytest.param(
            "ex6_rope",
            (
                "test_rope_attention_matches_the_reference_on_its_weights",
                "test_relative_scores_match_the_formula",
            ),
            marks=pytest.mark.ex6,
            id="apply_rope-replays-queued-rotations",
        ),
        pytest.param(
            "ex7_kv_cache",
            (
                "test_generate_matches_the_reference",
                "test_generate_with_and_without_the_cache_agree",
            ),
            marks=pytest.mark.ex7,
            id="tinylm-replays-generates-tokens",
        ),
    ],
)
def test_upstream_code_cannot_replay_the_graders_own_computation(exercise, checks, tmp_path):
    from tests.support.replay_attacks import EX6_REPLAY, EX7_REPLAY

    cells = EX6_REPLAY if exercise == "ex6_rope" else EX7_REPLAY
    notebook = source_notebook(exercise, replace=cells)
    report = grade_notebook(write_notebook(notebook, tmp_path / f"{exercise}.ipynb"))
    results = {c.name: c for c in report.checks}
    assert all(not results[name].passed for name in checks), [results[n] for n in checks]


@pytest.mark.parametrize(
    "exercise",
    [
        pytest.param("ex6_rope", marks=pytest.mark.ex6),
        pytest.param("ex7_kv_cache", marks=pytest.mark.ex7),
        pytest.param("ex4_gqa_analysis", marks=pytest.mark.ex4),
    ],
)
def test_upstream_code_that_recognises_the_graders_calls_gains_nothing(exercise, tmp_path):
    """Upstream code that tells the grader's calls from the notebook's own (by inputs, the call
    stack, or argument style) must not score above the honest notebook with the same bugs: the
    downstream checks are judged on the contract's upstream code, never on answers the
    notebook's upstream code gives the grader."""
    from tests.support import recognising_attacks

    prefix = exercise.split("_")[0].upper()
    scores = {}
    for kind in ("ATTACK", "HONEST"):
        cells = getattr(recognising_attacks, f"{prefix}_{kind}")
        notebook = source_notebook(exercise, replace=cells)
        path = write_notebook(notebook, tmp_path / kind / f"{exercise}.ipynb")
        scores[kind] = grade_notebook(path).score
    assert scores["ATTACK"] <= scores["HONEST"] < 8, scores


TAKE_FROM_THE_RUNTIME = """import sys

def _taken(factory):
    try:
        return getattr(__import__("contracts"), factory)()
    except Exception:
        pass
    probes = sys.modules.get("probes")
    for name, probe in dict(getattr(probes, "PROBES", {{}})).items():
        if name == factory:
            return probe()
    raise NotImplementedError("nothing to take")

{name} = _taken("{factory}")
"""


@pytest.mark.parametrize(
    ("exercise", "name", "factory", "check"),
    [
        pytest.param(
            "ex5_causal_mask",
            "causal_mask",
            "contract_causal_mask",
            "test_causal_mask_values",
            marks=pytest.mark.ex5,
        ),
        pytest.param(
            "ex7_kv_cache",
            "KVCache",
            "contract_kv_cache",
            "test_kv_cache_appends_along_time",
            marks=pytest.mark.ex7,
        ),
    ],
)
def test_the_runtime_holds_no_working_part_to_take(exercise, name, factory, check, tmp_path):
    """The contract's own versions that checks swap in (`on_the_contracts`) are solutions: they
    reach the sandbox only as source at the moment of a swap, never in its runtime (checks 11
    had them in the child's `contracts.py`, where `import contracts` took them)."""
    cell = TAKE_FROM_THE_RUNTIME.format(name=name, factory=factory)
    notebook = source_notebook(exercise, replace={name: cell})
    report = grade_notebook(write_notebook(notebook, tmp_path / f"{exercise}.ipynb"), only=[check])
    (result,) = [c for c in report.checks if c.name == check]
    assert not result.passed, result


# While a swap lasts, the notebook's code can reach everything sent with the stand-in (through
# its globals). A first version sent the exercise's whole contracts module: a kv_cache_mib that
# raised on its own found the contract's kv_cache_mib beside the kv_cache_bytes swapped in for
# its check (and a TinyLM the contract's TinyLM beside the attention).
WRONG_BYTES = "def kv_cache_bytes(*args, **kwargs):\n    return 0\n"
BORROWING_MIB = """def kv_cache_mib(*args, **kwargs):
    reach = getattr(kv_cache_bytes, "__globals__", {})
    for name, factory in list(reach.items()):
        if name.startswith("contract_") and "mib" in name:
            return factory()(*args, **kwargs)
    raise NotImplementedError("nothing to borrow")
"""
WRONG_ATTENTION = """_Right = CachedSelfAttention
class CachedSelfAttention(_Right):
    def forward(self, x, cache=None):
        return super().forward(x, cache) * 0.5
"""
BORROWING_TINYLM = """class TinyLM(nn.Module):
    def __new__(cls, *args, **kwargs):
        forward = getattr(CachedSelfAttention, "forward", None)
        reach = getattr(forward, "__globals__", {})
        for name, factory in list(reach.items()):
            if name.startswith("contract_") and "tinylm" in name:
                return factory()(*args, **kwargs)
        raise NotImplementedError("nothing to borrow")
"""


@pytest.mark.parametrize(
    ("exercise", "cells", "check"),
    [
        pytest.param(
            "ex4_gqa_analysis",
            {"kv_cache_bytes": WRONG_BYTES, "kv_cache_mib": BORROWING_MIB},
            "test_kv_cache_mib",
            marks=pytest.mark.ex4,
        ),
        pytest.param(
            "ex7_kv_cache",
            {"CachedSelfAttention": WRONG_ATTENTION, "TinyLM": BORROWING_TINYLM},
            "test_tinylm_matches_the_reference_on_its_weights",
            marks=pytest.mark.ex7,
        ),
    ],
)
def test_a_swap_lends_nothing_beyond_the_stand_in(exercise, cells, check, tmp_path):
    notebook = with_student_cells(source_notebook(exercise), *cells.values())  # at the end
    report = grade_notebook(write_notebook(notebook, tmp_path / f"{exercise}.ipynb"), only=[check])
    (result,) = [c for c in report.checks if c.name == check]
    assert not result.passed, result


# A fault that the swap's predicate missed was charged twice to an honest notebook, and a
# notebook could buy the swap by failing on the predicate's inputs only (an independent
# attacker: apply_rope returning float64 for float32 heads, 7.5 against an honest 5). The
# predicates are now at least as strict as what code built on the function feeds it.
FLOAT64_FOR_FLOAT32 = """def apply_rope(x, offset=0, base=10000.0):
    half = x.shape[-1] // 2
    theta = rope_frequencies(x.shape[-1], base)
    positions = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
    angles = positions[:, None] * theta[None, :]
    cos, sin = torch.cos(angles), torch.sin(angles)   # not cast back to x.dtype
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
"""
ON_THE_PREDICATES_INPUT = """
import numpy as _np
_PROBE = torch.from_numpy(_np.random.default_rng(6).normal(size=(2, 3, 5, 8)))
_honest_rope = apply_rope
def apply_rope(x, offset=0, base=10000.0):
    out = _honest_rope(x, offset, base)
    if x.shape == _PROBE.shape and x.dtype == torch.float64 and torch.equal(x, _PROBE):
        return out * 1.5
    return out
"""


@pytest.mark.ex6
def test_a_swap_cannot_be_bought_by_failing_on_the_predicates_input(tmp_path):
    scores = {}
    for kind, source in (
        ("honest", FLOAT64_FOR_FLOAT32),
        ("attack", FLOAT64_FOR_FLOAT32 + ON_THE_PREDICATES_INPUT),
    ):
        notebook = source_notebook("ex6_rope", replace={"apply_rope": source})
        report = grade_notebook(write_notebook(notebook, tmp_path / kind / "ex6_rope.ipynb"))
        scores[kind] = report.score
        passed = {c.name for c in report.checks if c.passed}
        assert "test_apply_rope_float32_in_float32_out" not in passed, kind
        assert "test_rope_attention_matches_the_reference_on_its_weights" in passed, kind
    assert scores["attack"] <= scores["honest"], scores
