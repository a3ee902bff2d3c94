"""Named mistakes of ex8_additive_attention (each a wrong version of a contract function or
class). The first two are in lesson 002's own AdditiveAttention snippet."""
# ruff: noqa: F811 - every mistake redefines the function it replaces

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.authoring import Catalogue

CATALOGUE = Catalogue("ex8_additive_attention")


# -- AdditiveAttention ---------------------------------------------------------------------------
@CATALOGUE.mistake(
    "softmax_over_the_singleton_axis",
    "the softmax was taken over the last axis of scores of shape (B, S, 1), so every weight is "
    "1: squeeze the scores to (B, S) and normalise over the S annotations",
    check="test_additive_matches_the_reference_on_its_weights",
)
class AdditiveAttention(nn.Module):
    def __init__(self, enc_dim, dec_dim, attn_dim):
        super().__init__()
        self.W_h = nn.Linear(enc_dim, attn_dim, bias=False)
        self.W_s = nn.Linear(dec_dim, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def forward(self, annotations, state, mask=None):
        scores = self.v(torch.tanh(self.W_h(annotations) + self.W_s(state).unsqueeze(1)))
        if mask is not None:
            scores = scores.masked_fill(~mask.bool().unsqueeze(-1), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights * annotations).sum(dim=1), weights.squeeze(-1)


@CATALOGUE.mistake(
    "tanh_missing",
    "the tanh is missing: score_i = v^T tanh(W_h h_i + W_s s)",
    check="test_additive_matches_the_reference_on_its_weights",
)
class AdditiveAttention(nn.Module):
    def __init__(self, enc_dim, dec_dim, attn_dim):
        super().__init__()
        self.W_h = nn.Linear(enc_dim, attn_dim, bias=False)
        self.W_s = nn.Linear(dec_dim, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def forward(self, annotations, state, mask=None):
        scores = self.v(self.W_h(annotations) + self.W_s(state).unsqueeze(1)).squeeze(-1)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights


@CATALOGUE.mistake(
    "scores_squeezed_without_an_axis",
    "the scores were squeezed without naming the axis: with one sample (B = 1) the batch axis "
    "goes too, so the weights lose their (B, S) shape; squeeze(-1)",
    check="test_additive_matches_the_reference_on_its_weights",
)
class AdditiveAttention(nn.Module):
    def __init__(self, enc_dim, dec_dim, attn_dim):
        super().__init__()
        self.W_h = nn.Linear(enc_dim, attn_dim, bias=False)
        self.W_s = nn.Linear(dec_dim, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def forward(self, annotations, state, mask=None):
        scores = self.v(torch.tanh(self.W_h(annotations) + self.W_s(state).unsqueeze(1))).squeeze()
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights


@CATALOGUE.mistake(
    "state_not_broadcast",
    "the decoder state's projection W_s s was not broadcast over the S annotations "
    "(unsqueeze it to (B, 1, attn_dim))",
    check="test_additive_matches_the_reference_on_its_weights",
)
class AdditiveAttention(nn.Module):
    def __init__(self, enc_dim, dec_dim, attn_dim):
        super().__init__()
        self.W_h = nn.Linear(enc_dim, attn_dim, bias=False)
        self.W_s = nn.Linear(dec_dim, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def forward(self, annotations, state, mask=None):
        scores = self.v(torch.tanh(self.W_h(annotations) + self.W_s(state))).squeeze(-1)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights


@CATALOGUE.mistake(
    "mask_after_softmax",
    "the mask was applied after the softmax: the kept weights no longer sum to 1 (block the "
    "scores with -inf before the softmax)",
    check="test_additive_matches_the_reference_on_its_weights",
)
class AdditiveAttention(nn.Module):
    def __init__(self, enc_dim, dec_dim, attn_dim):
        super().__init__()
        self.W_h = nn.Linear(enc_dim, attn_dim, bias=False)
        self.W_s = nn.Linear(dec_dim, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def forward(self, annotations, state, mask=None):
        features = torch.tanh(self.W_h(annotations) + self.W_s(state).unsqueeze(1))
        weights = F.softmax(self.v(features).squeeze(-1), dim=-1)
        if mask is not None:
            weights = weights.masked_fill(~mask.bool(), 0.0)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights


@CATALOGUE.mistake(
    "mask_polarity_flipped",
    "the mask was read the wrong way round: True means the annotation may be attended to",
    check="test_additive_matches_the_reference_on_its_weights",
)
class AdditiveAttention(nn.Module):
    def __init__(self, enc_dim, dec_dim, attn_dim):
        super().__init__()
        self.W_h = nn.Linear(enc_dim, attn_dim, bias=False)
        self.W_s = nn.Linear(dec_dim, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def forward(self, annotations, state, mask=None):
        features = torch.tanh(self.W_h(annotations) + self.W_s(state).unsqueeze(1))
        scores = self.v(features).squeeze(-1)
        if mask is not None:
            scores = scores.masked_fill(mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights


# -- MultiplicativeAttention ---------------------------------------------------------------------
@CATALOGUE.mistake(
    "general_score_scaled",
    "Luong's general score s^T W_a h_i has no scaling: it was divided by sqrt(dec_dim)",
    check="test_multiplicative_matches_the_reference_on_its_weights",
)
class MultiplicativeAttention(nn.Module):
    def __init__(self, enc_dim, dec_dim):
        super().__init__()
        self.W_a = nn.Linear(enc_dim, dec_dim, bias=False)

    def forward(self, annotations, state, mask=None):
        scores = (self.W_a(annotations) * state.unsqueeze(1)).sum(dim=-1)
        scores = scores / math.sqrt(state.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights


@CATALOGUE.mistake(
    "softmax_over_the_batch",
    "the softmax normalised over the batch axis instead of over the S annotations",
    check="test_multiplicative_matches_the_reference_on_its_weights",
)
class MultiplicativeAttention(nn.Module):
    def __init__(self, enc_dim, dec_dim):
        super().__init__()
        self.W_a = nn.Linear(enc_dim, dec_dim, bias=False)

    def forward(self, annotations, state, mask=None):
        scores = (self.W_a(annotations) * state.unsqueeze(1)).sum(dim=-1)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=0)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights


# -- ScaledDotAttention --------------------------------------------------------------------------
@CATALOGUE.mistake(
    "dot_not_scaled",
    "the dot product was not divided by sqrt(dim)",
    check="test_scaled_dot_matches_the_formula",
)
class ScaledDotAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, annotations, state, mask=None):
        scores = (annotations * state.unsqueeze(1)).sum(dim=-1)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights


@CATALOGUE.mistake(
    "dot_divided_by_dim",
    "the dot product was divided by dim instead of sqrt(dim)",
    check="test_scaled_dot_matches_the_formula",
)
class ScaledDotAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, annotations, state, mask=None):
        scores = (annotations * state.unsqueeze(1)).sum(dim=-1) / self.dim
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights


# -- attention_parameter_counts ------------------------------------------------------------------
@CATALOGUE.mistake(
    "count_forgets_the_bias",
    "the additive count forgets the bias of W_s (attn_dim more parameters)",
    check="test_parameter_counts_match_the_modules",
)
def attention_parameter_counts(enc_dim, dec_dim, attn_dim):
    return {
        "additive": enc_dim * attn_dim + dec_dim * attn_dim + attn_dim,
        "multiplicative": enc_dim * dec_dim,
        "dot": 0,
    }


@CATALOGUE.mistake(
    "multiplicative_count_with_a_bias",
    "the multiplicative count adds a bias that W_a does not have (bias=False)",
    check="test_parameter_counts_match_the_modules",
)
def attention_parameter_counts(enc_dim, dec_dim, attn_dim):
    return {
        "additive": enc_dim * attn_dim + dec_dim * attn_dim + attn_dim + attn_dim,
        "multiplicative": enc_dim * dec_dim + dec_dim,
        "dot": 0,
    }


# -- make_pointer_task ---------------------------------------------------------------------------
@CATALOGUE.mistake(
    "targets_argmin",
    "the target is the annotation with the smallest dot product instead of the largest",
    check="test_pointer_task_data",
)
def make_pointer_task(n_samples, seq_len=8, dim=16, seed=0):
    generator = torch.Generator().manual_seed(seed)
    annotations = torch.randn(n_samples, seq_len, dim, generator=generator)
    states = torch.randn(n_samples, dim, generator=generator)
    targets = (annotations * states.unsqueeze(1)).sum(dim=-1).argmin(dim=-1)
    return annotations, states, targets


# -- train_pointer -------------------------------------------------------------------------------
@CATALOGUE.mistake(
    "batch_losses_not_weighted",
    "the epoch loss is the plain mean of the batch losses: weight each by its number of "
    "samples (the last batch may be smaller)",
    check="test_train_pointer_reports_the_sample_weighted_loss",
)
def train_pointer(module, annotations, states, targets, epochs=30, batch_size=64, lr=1e-2, seed=0):
    torch.manual_seed(seed)
    order_generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(module.parameters(), lr=lr)
    module.train()
    history = []
    for _ in range(epochs):
        order = torch.randperm(len(targets), generator=order_generator)
        losses = []
        for start in range(0, len(targets), batch_size):
            rows = order[start : start + batch_size]
            _, weights = module(annotations[rows], states[rows])
            picked = weights.gather(1, targets[rows].unsqueeze(1)).squeeze(1)
            loss = -torch.log(picked.clamp_min(1e-12)).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        history.append(sum(losses) / len(losses))
    return history


@CATALOGUE.mistake(
    "batch_size_ignored",
    "train_pointer ignores its batch_size argument (always 64): use the batch_size it is given",
    check="test_train_pointer_reports_the_sample_weighted_loss",
)
def train_pointer(module, annotations, states, targets, epochs=30, batch_size=64, lr=1e-2, seed=0):
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(module.parameters(), lr=lr)
    module.train()
    history, n = [], len(targets)
    for _ in range(epochs):
        order, total = torch.randperm(n, generator=generator), 0.0
        for start in range(0, n, 64):
            rows = order[start : start + 64]
            _, weights = module(annotations[rows], states[rows])
            picked = weights.gather(1, targets[rows].unsqueeze(1)).squeeze(1)
            loss = -torch.log(picked.clamp_min(1e-12)).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(rows)
        history.append(total / n)
    return history


@CATALOGUE.mistake(
    "log_likelihood_not_negated",
    "the loss is the log-likelihood itself, not its negative: training pushes the target's "
    "weight down",
    check="test_train_pointer_reports_the_sample_weighted_loss",
)
def train_pointer(module, annotations, states, targets, epochs=30, batch_size=64, lr=1e-2, seed=0):
    torch.manual_seed(seed)
    order_generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(module.parameters(), lr=lr)
    module.train()
    history = []
    for _ in range(epochs):
        order = torch.randperm(len(targets), generator=order_generator)
        total = 0.0
        for start in range(0, len(targets), batch_size):
            rows = order[start : start + batch_size]
            _, weights = module(annotations[rows], states[rows])
            picked = weights.gather(1, targets[rows].unsqueeze(1)).squeeze(1)
            loss = torch.log(picked.clamp_min(1e-12)).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(rows)
        history.append(total / len(targets))
    return history


# -- pointer_accuracy ----------------------------------------------------------------------------
@CATALOGUE.mistake(
    "accuracy_in_percent",
    "the accuracy is a fraction between 0 and 1, not a percentage",
    check="test_pointer_accuracy_of_a_pointing_module",
)
def pointer_accuracy(module, annotations, states, targets):
    module.eval()
    with torch.no_grad():
        _, weights = module(annotations, states)
    return 100.0 * float((weights.argmax(dim=-1) == targets).float().mean())


@CATALOGUE.mistake(
    "pointer_accuracy_with_gradients",
    "pointer_accuracy runs the module with gradients on; measure under torch.no_grad() (or "
    "torch.inference_mode())",
    check="test_pointer_accuracy_of_a_pointing_module",
)
def pointer_accuracy(module, annotations, states, targets):
    module.eval()
    _, weights = module(annotations, states)
    return float((weights.argmax(dim=-1) == targets).float().mean())


@CATALOGUE.mistake(
    "pointer_accuracy_in_training_mode",
    "pointer_accuracy runs the module in training mode; call module.eval() before measuring "
    "(restoring the previous mode afterwards is fine)",
    check="test_pointer_accuracy_of_a_pointing_module",
)
def pointer_accuracy(module, annotations, states, targets):
    with torch.no_grad():
        _, weights = module(annotations, states)
    return float((weights.argmax(dim=-1) == targets).float().mean())


# -- validity round 4: a breaker for every clause and every argument ---------------------------
@CATALOGUE.mistake(
    "additive_W_h_with_bias",
    "W_h has a bias: in AdditiveAttention only W_s has one (W_h and v are bias=False)",
    check="test_additive_parameters",
)
class AdditiveAttention(nn.Module):
    def __init__(self, enc_dim, dec_dim, attn_dim):
        super().__init__()
        self.W_h = nn.Linear(enc_dim, attn_dim, bias=True)
        self.W_s = nn.Linear(dec_dim, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def forward(self, annotations, state, mask=None):
        scores = self.v(torch.tanh(self.W_h(annotations) + self.W_s(state).unsqueeze(1))).squeeze(
            -1
        )
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights


@CATALOGUE.mistake(
    "attn_dim_ignored",
    "AdditiveAttention ignores attn_dim: its hidden layer has enc_dim units",
    check="test_additive_parameters",
)
class AdditiveAttention(nn.Module):
    def __init__(self, enc_dim, dec_dim, attn_dim):
        super().__init__()
        self.W_h = nn.Linear(enc_dim, enc_dim, bias=False)
        self.W_s = nn.Linear(dec_dim, enc_dim)
        self.v = nn.Linear(enc_dim, 1, bias=False)

    def forward(self, annotations, state, mask=None):
        scores = self.v(torch.tanh(self.W_h(annotations) + self.W_s(state).unsqueeze(1))).squeeze(
            -1
        )
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights


@CATALOGUE.mistake(
    "additive_mask_ignored",
    "AdditiveAttention's forward ignores its mask: blocked annotations still get weight",
    check="test_additive_matches_the_reference_on_its_weights",
)
class AdditiveAttention(nn.Module):
    def __init__(self, enc_dim, dec_dim, attn_dim):
        super().__init__()
        self.W_h = nn.Linear(enc_dim, attn_dim, bias=False)
        self.W_s = nn.Linear(dec_dim, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def forward(self, annotations, state, mask=None):
        scores = self.v(torch.tanh(self.W_h(annotations) + self.W_s(state).unsqueeze(1))).squeeze(
            -1
        )
        if False:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights


@CATALOGUE.mistake(
    "W_a_with_bias",
    "W_a has a bias: Luong's general score uses nn.Linear(enc_dim, dec_dim, bias=False)",
    check="test_multiplicative_weights_and_parameters",
)
class MultiplicativeAttention(nn.Module):
    def __init__(self, enc_dim, dec_dim):
        super().__init__()
        self.W_a = nn.Linear(enc_dim, dec_dim, bias=True)

    def forward(self, annotations, state, mask=None):
        scores = (self.W_a(annotations) * state.unsqueeze(1)).sum(dim=-1)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights


@CATALOGUE.mistake(
    "multiplicative_mask_ignored",
    "MultiplicativeAttention's forward ignores its mask: blocked annotations still get weight",
    check="test_multiplicative_matches_the_reference_on_its_weights",
)
class MultiplicativeAttention(nn.Module):
    def __init__(self, enc_dim, dec_dim):
        super().__init__()
        self.W_a = nn.Linear(enc_dim, dec_dim, bias=False)

    def forward(self, annotations, state, mask=None):
        scores = (self.W_a(annotations) * state.unsqueeze(1)).sum(dim=-1)
        if False:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights


@CATALOGUE.mistake(
    "context_not_weighted",
    "the context is the plain mean of the annotations: it is their sum weighted by the attention "
    "weights",
    check="test_multiplicative_matches_the_reference_on_its_weights",
)
class MultiplicativeAttention(nn.Module):
    def __init__(self, enc_dim, dec_dim):
        super().__init__()
        self.W_a = nn.Linear(enc_dim, dec_dim, bias=False)

    def forward(self, annotations, state, mask=None):
        scores = (self.W_a(annotations) * state.unsqueeze(1)).sum(dim=-1)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return annotations.mean(dim=1), weights


@CATALOGUE.mistake(
    "dot_with_a_learned_scale",
    "ScaledDotAttention has a parameter (a learned scale): it has none, the scale is 1/sqrt(dim)",
    check="test_scaled_dot_weights_and_no_parameters",
)
class ScaledDotAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.scale = nn.Parameter(torch.tensor(1.0 / math.sqrt(dim)))

    def forward(self, annotations, state, mask=None):
        scores = (annotations * state.unsqueeze(1)).sum(dim=-1) * self.scale
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights


@CATALOGUE.mistake(
    "dot_mask_ignored",
    "ScaledDotAttention's forward ignores its mask: blocked annotations still get weight",
    check="test_scaled_dot_matches_the_formula",
)
class ScaledDotAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, annotations, state, mask=None):
        scores = (annotations * state.unsqueeze(1)).sum(dim=-1) / math.sqrt(self.dim)
        if False:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights


@CATALOGUE.mistake(
    "pointer_task_float64",
    "the annotations and states are float64: they are standard normal float32 (torch.randn's "
    "default)",
    check="test_pointer_task_data",
)
def make_pointer_task(n_samples, seq_len=8, dim=16, seed=0):
    generator = torch.Generator().manual_seed(seed)
    annotations = torch.randn(n_samples, seq_len, dim, generator=generator, dtype=torch.float64)
    states = torch.randn(n_samples, dim, generator=generator, dtype=torch.float64)
    return annotations, states, (annotations * states.unsqueeze(1)).sum(-1).argmax(-1)


@CATALOGUE.mistake(
    "pointer_task_ignores_seed",
    "make_pointer_task ignores its seed: it draws from the global random generator, so the same "
    "seed gives other data (use torch.Generator().manual_seed(seed))",
    check="test_pointer_task_data",
)
def make_pointer_task(n_samples, seq_len=8, dim=16, seed=0):
    annotations = torch.randn(n_samples, seq_len, dim)
    states = torch.randn(n_samples, dim)
    return annotations, states, (annotations * states.unsqueeze(1)).sum(-1).argmax(-1)


@CATALOGUE.mistake(
    "pointer_task_ignores_seq_len",
    "make_pointer_task ignores seq_len: every sample has the default 8 annotations",
    check="test_pointer_task_data",
)
def make_pointer_task(n_samples, seq_len=8, dim=16, seed=0):
    generator = torch.Generator().manual_seed(seed)
    annotations = torch.randn(n_samples, 8, dim, generator=generator)
    states = torch.randn(n_samples, dim, generator=generator)
    return annotations, states, (annotations * states.unsqueeze(1)).sum(-1).argmax(-1)


@CATALOGUE.mistake(
    "pointer_task_ignores_dim",
    "make_pointer_task ignores dim: annotations and states always have the default 16 features",
    check="test_pointer_task_data",
)
def make_pointer_task(n_samples, seq_len=8, dim=16, seed=0):
    generator = torch.Generator().manual_seed(seed)
    annotations = torch.randn(n_samples, seq_len, 16, generator=generator)
    states = torch.randn(n_samples, 16, generator=generator)
    return annotations, states, (annotations * states.unsqueeze(1)).sum(-1).argmax(-1)


@CATALOGUE.mistake(
    "epochs_ignored",
    "train_pointer ignores epochs: it always trains for the default 30 epochs",
    check="test_train_pointer_reports_the_sample_weighted_loss",
)
def train_pointer(module, annotations, states, targets, epochs=30, batch_size=64, lr=1e-2, seed=0):
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(module.parameters(), lr=lr)
    module.train()
    history, n = [], len(targets)
    for _ in range(30):
        order, total = torch.randperm(n, generator=generator), 0.0
        for start in range(0, n, batch_size):
            rows = order[start : start + batch_size]

            def loss_of():
                _, weights = module(annotations[rows], states[rows])
                picked = weights.gather(1, targets[rows].unsqueeze(1)).squeeze(1)
                return -torch.log(picked.clamp_min(1e-12)).mean()

            loss = loss_of()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            total += loss.item() * len(rows)
        history.append(total / n)
    return history


@CATALOGUE.mistake(
    "lr_ignored",
    "train_pointer ignores lr: Adam always gets the default 1e-2",
    check="test_train_pointer_reports_the_sample_weighted_loss",
)
def train_pointer(module, annotations, states, targets, epochs=30, batch_size=64, lr=1e-2, seed=0):
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-2)
    module.train()
    history, n = [], len(targets)
    for _ in range(epochs):
        order, total = torch.randperm(n, generator=generator), 0.0
        for start in range(0, n, batch_size):
            rows = order[start : start + batch_size]

            def loss_of():
                _, weights = module(annotations[rows], states[rows])
                picked = weights.gather(1, targets[rows].unsqueeze(1)).squeeze(1)
                return -torch.log(picked.clamp_min(1e-12)).mean()

            loss = loss_of()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            total += loss.item() * len(rows)
        history.append(total / n)
    return history


@CATALOGUE.mistake(
    "train_pointer_ignores_seed",
    "train_pointer ignores its seed: the batch order comes from the global random generator, so "
    "the same seed gives other losses",
    check="test_train_pointer_is_deterministic_for_a_seed",
)
def train_pointer(module, annotations, states, targets, epochs=30, batch_size=64, lr=1e-2, seed=0):
    optimizer = torch.optim.Adam(module.parameters(), lr=lr)
    module.train()
    history, n = [], len(targets)
    for _ in range(epochs):
        order, total = torch.randperm(n), 0.0
        for start in range(0, n, batch_size):
            rows = order[start : start + batch_size]

            def loss_of():
                _, weights = module(annotations[rows], states[rows])
                picked = weights.gather(1, targets[rows].unsqueeze(1)).squeeze(1)
                return -torch.log(picked.clamp_min(1e-12)).mean()

            loss = loss_of()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            total += loss.item() * len(rows)
        history.append(total / n)
    return history


@CATALOGUE.mistake(
    "pointer_batches_in_order",
    "the samples are visited in the same order every epoch and for every seed: draw the order of "
    "the mini-batches from the seed, so that the seed changes the history",
    check="test_train_pointer_is_deterministic_for_a_seed",
)
def train_pointer(module, annotations, states, targets, epochs=30, batch_size=64, lr=1e-2, seed=0):
    torch.manual_seed(seed)
    optimizer = torch.optim.Adam(module.parameters(), lr=lr)
    module.train()
    history, n = [], len(targets)
    for _ in range(epochs):
        order, total = torch.arange(n), 0.0
        for start in range(0, n, batch_size):
            rows = order[start : start + batch_size]

            def loss_of():
                _, weights = module(annotations[rows], states[rows])
                picked = weights.gather(1, targets[rows].unsqueeze(1)).squeeze(1)
                return -torch.log(picked.clamp_min(1e-12)).mean()

            loss = loss_of()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            total += loss.item() * len(rows)
        history.append(total / n)
    return history


@CATALOGUE.mistake(
    "losses_after_each_update",
    "each batch's loss was reported after its update: report the loss computed before it",
    check="test_train_pointer_reports_the_sample_weighted_loss",
)
def train_pointer(module, annotations, states, targets, epochs=30, batch_size=64, lr=1e-2, seed=0):
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(module.parameters(), lr=lr)
    module.train()
    history, n = [], len(targets)
    for _ in range(epochs):
        order, total = torch.randperm(n, generator=generator), 0.0
        for start in range(0, n, batch_size):
            rows = order[start : start + batch_size]

            def loss_of():
                _, weights = module(annotations[rows], states[rows])
                picked = weights.gather(1, targets[rows].unsqueeze(1)).squeeze(1)
                return -torch.log(picked.clamp_min(1e-12)).mean()

            loss = loss_of()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                loss = loss_of()
            total += loss.item() * len(rows)
        history.append(total / n)
    return history


@CATALOGUE.mistake(
    "pointer_last_maximum_on_ties",
    "on a tie the last of the largest weights was taken: a sample counts when its first "
    "largest weight is on the target",
    check="test_pointer_accuracy_of_a_pointing_module",
)
def pointer_accuracy(module, annotations, states, targets):
    module.eval()
    with torch.no_grad():
        _, weights = module(annotations, states)
    last = weights.shape[-1] - 1 - weights.flip(-1).argmax(dim=-1)
    return float((last == targets).float().mean())


@CATALOGUE.mistake(
    "pointer_optimizer_never_steps",
    "the optimizer never updates the weights (optimizer.step() is missing), so the module learns "
    "nothing",
    check="test_train_pointer_learns_the_task_with_multiplicative",
)
def train_pointer(module, annotations, states, targets, epochs=30, batch_size=64, lr=1e-2, seed=0):
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(module.parameters(), lr=lr)
    module.train()
    history, n = [], len(targets)
    for _ in range(epochs):
        order, total = torch.randperm(n, generator=generator), 0.0
        for start in range(0, n, batch_size):
            rows = order[start : start + batch_size]
            _, weights = module(annotations[rows], states[rows])
            picked = weights.gather(1, targets[rows].unsqueeze(1)).squeeze(1)
            loss = -torch.log(picked.clamp_min(1e-12)).mean()
            optimizer.zero_grad()
            loss.backward()
            total += loss.item() * len(rows)
        history.append(total / n)
    return history
