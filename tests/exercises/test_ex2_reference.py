"""The reference of ex2_attention_heatmap behaves as EXERCISES.md says."""

from __future__ import annotations

import string

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from matplotlib.figure import Figure

from autograder._reference import ex2_attention_heatmap as ref
from autograder.sandbox.inside.probes import figure_summary

pytestmark = pytest.mark.ex2


# -- tokenize / build_vocab ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sentence", "tokens"),
    [
        ("The cat sat on the mat.", ["the", "cat", "sat", "on", "the", "mat"]),
        ("Don't!", ["dont"]),
        ("e-mail (A.B.C) x_y", ["email", "abc", "xy"]),
        ("  Tabs\tand\nnewlines\r\n  and   runs ", ["tabs", "and", "newlines", "and", "runs"]),
        ("“Curly” quotes — stay", ["“curly”", "quotes", "—", "stay"]),
        ("... ?! -", []),
        ("", []),
    ],
)
def test_tokenize_examples(sentence, tokens):
    assert ref.tokenize(sentence) == tokens


def test_tokenize_removes_every_punctuation_character():
    for mark in string.punctuation:
        assert ref.tokenize(f"A{mark}b {mark}C{mark} {mark}") == ["ab", "c"], mark


def test_build_vocab_ids_in_order_of_first_appearance():
    vocab = ref.build_vocab(["b", "a", "b", "c", "a", "d"])
    assert vocab == {"b": 0, "a": 1, "c": 2, "d": 3}
    assert list(vocab) == ["b", "a", "c", "d"]
    assert ref.build_vocab([]) == {}


# -- MultiHeadAttention --------------------------------------------------------------------------
def seeded_module(d_model: int, heads: int, seed: int = 0) -> ref.MultiHeadAttention:
    torch.manual_seed(seed)
    return ref.MultiHeadAttention(d_model, heads).double()


def torch_attention(module, x, mask=None):
    """The same projections, attention by F.scaled_dot_product_attention (float64)."""
    batch, length, d_model = x.shape
    heads = module.num_heads

    def split(t):
        return t.reshape(batch, length, heads, d_model // heads).transpose(1, 2)

    q, k, v = split(module.W_q(x)), split(module.W_k(x)), split(module.W_v(x))
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return module.W_o(context.transpose(1, 2).reshape(batch, length, d_model))


@pytest.mark.parametrize("mask_shape", [None, (5, 5), (3, 1, 5, 5)])
def test_mha_matches_scaled_dot_product_attention(mask_shape):
    batch, length, heads, d_model = 3, 5, 2, 8
    module = seeded_module(d_model, heads)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(batch, length, d_model, dtype=torch.float64, generator=generator)
    mask = None
    if mask_shape:
        mask = torch.rand(mask_shape, generator=generator) < 0.6
        mask[..., 0] = True  # never a fully blocked row
    with torch.no_grad():
        output, weights = module(x, mask=mask, return_attention=True)
        expected = torch_attention(module, x, mask)
        plain = module(x, mask=mask)
    assert output.shape == (batch, length, d_model)
    assert weights.shape == (batch, heads, length, length)
    torch.testing.assert_close(output, expected, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(plain, output, atol=0, rtol=0)
    ones = torch.ones(batch, heads, length, dtype=torch.float64)
    torch.testing.assert_close(weights.sum(-1), ones, atol=1e-12, rtol=0)
    if mask is not None:
        assert torch.all(weights[~mask.expand_as(weights)] == 0)


def test_mha_weights_match_nn_multihead_attention():
    batch, length, heads, d_model = 2, 7, 3, 12
    module = seeded_module(d_model, heads, seed=3)
    torch_mha = nn.MultiheadAttention(d_model, heads, batch_first=True).double()
    with torch.no_grad():
        torch_mha.in_proj_weight.copy_(
            torch.cat([module.W_q.weight, module.W_k.weight, module.W_v.weight])
        )
        torch_mha.in_proj_bias.copy_(torch.cat([module.W_q.bias, module.W_k.bias, module.W_v.bias]))
        torch_mha.out_proj.weight.copy_(module.W_o.weight)
        torch_mha.out_proj.bias.copy_(module.W_o.bias)
        x = torch.randn(batch, length, d_model, dtype=torch.float64)
        keep = torch.tril(torch.ones(length, length, dtype=torch.bool))
        ours, our_weights = module(x, mask=keep, return_attention=True)
        # nn.MultiheadAttention's boolean masks mark the *blocked* positions
        theirs, their_weights = torch_mha(x, x, x, attn_mask=~keep, average_attn_weights=False)
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(our_weights, their_weights, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize(("d_model", "heads"), [(10, 3), (12, 5), (7, 2)])
def test_mha_rejects_indivisible_d_model(d_model, heads):
    with pytest.raises(ValueError):
        ref.MultiHeadAttention(d_model, heads)


def test_mha_projections_are_linear_d_model_to_d_model():
    module = ref.MultiHeadAttention(12, 4)
    for name in ("W_q", "W_k", "W_v", "W_o"):
        layer = getattr(module, name)
        assert isinstance(layer, nn.Linear)
        assert (layer.in_features, layer.out_features) == (12, 12)


# -- sentence_attention --------------------------------------------------------------------------
SENTENCE = "The cat sat on the mat because it was tired"


def test_sentence_attention_types_shapes_rows():
    tokens, weights = ref.sentence_attention(SENTENCE, d_model=12, num_heads=3, seed=5)
    assert tokens == ref.tokenize(SENTENCE)
    assert isinstance(weights, np.ndarray)
    assert weights.shape == (3, len(tokens), len(tokens))
    assert np.all(weights >= 0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-6)
    assert ref.sentence_attention(SENTENCE)[1].shape == (4, len(tokens), len(tokens))


def test_sentence_attention_deterministic_and_seed_dependent():
    torch.manual_seed(1)
    first = ref.sentence_attention(SENTENCE, seed=7)[1]
    torch.manual_seed(2)
    again = ref.sentence_attention(SENTENCE, seed=7)[1]
    other = ref.sentence_attention(SENTENCE, seed=8)[1]
    np.testing.assert_array_equal(first, again)
    assert not np.allclose(first, other)


def test_sentence_attention_same_word_same_rows_and_columns():
    tokens, weights = ref.sentence_attention("the cat saw the dog", seed=2)
    assert tokens[0] == tokens[3] == "the"
    np.testing.assert_allclose(weights[:, 0], weights[:, 3], atol=1e-7)
    np.testing.assert_allclose(weights[:, :, 0], weights[:, :, 3], atol=1e-7)


# -- plot_attention ------------------------------------------------------------------------------
def test_plot_attention_heatmap_ticks_and_colorbar():
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(5), size=5)
    tokens = ["alpha", "beta", "gamma", "delta", "eps"]
    figure = ref.plot_attention(weights, tokens, title="one head")
    assert isinstance(figure, Figure)
    summary = figure_summary(figure)
    main = [axes for axes in summary["axes"] if not axes["is_colorbar"]]
    assert len(main) == 1 and len(main[0]["mappables"]) == 1
    assert any(axes["is_colorbar"] for axes in summary["axes"])
    axes, image = main[0], main[0]["mappables"][0]
    assert image["has_colorbar"]
    # imshow, origin upper, default extent: row i (query i) is centred at y = i, column j at x = j
    assert image["origin"] == "upper"
    assert image["extent"] == [-0.5, 4.5, 4.5, -0.5]
    np.testing.assert_array_equal(image["array"], weights)
    assert axes["xticks"] == axes["yticks"] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert axes["xticklabels"] == axes["yticklabels"] == tokens
    assert axes["title"] == "one head"


# -- strongest_attention -------------------------------------------------------------------------
def test_strongest_attention_reads_first_query_row_and_first_maximum():
    weights = np.array(
        [
            [0.1, 0.2, 0.6, 0.1],
            [0.7, 0.1, 0.1, 0.1],
            [0.1, 0.1, 0.1, 0.7],
            [0.25, 0.25, 0.25, 0.25],
        ]
    )
    tokens = ["a", "b", "c", "a"]
    assert ref.strongest_attention(weights, tokens, "a") == "c"  # row 0, not column 0 or row 3
    assert ref.strongest_attention(weights, tokens, "b") == "a"
    assert ref.strongest_attention(weights, ["w", "x", "y", "z"], "z") == "w"  # tie: first


@pytest.mark.parametrize("word", ["d", "A", "", "a "])
def test_strongest_attention_missing_word_raises_value_error(word):
    with pytest.raises(ValueError):
        ref.strongest_attention(np.eye(3), ["a", "b", "c"], word)
