"""Per-layer activation statistics, and the post-norm vs pre-norm story they must make visible."""

import numpy as np
import pytest
import torch

import explorer
from explorer.analysis.activations import (
    activation_values,
    depth_story,
    ffn_zero_fraction,
    layer_statistics,
    token_norms,
)

TOKENS = "the cat sat on the mat"


def deep(norm: str) -> explorer.Trace:
    return explorer.run(explorer.ModelConfig(d_model=512, n_heads=8, n_layers=12, d_ff=2048, norm=norm), TOKENS)


def residual_rms(stats):
    return stats[stats["point"] == "residual"].set_index("layer")["rms"]


def test_pre_norm_residual_rms_rises_layer_after_layer():
    rms = residual_rms(layer_statistics(deep("pre").first))
    assert list(rms.index) == list(range(-1, 12))
    assert (np.diff(rms.to_numpy()) > 0).all()


def test_post_norm_renormalises_the_stream_after_every_block():
    stats = layer_statistics(deep("post").first)
    after_blocks = stats[(stats["point"] == "residual") & (stats["layer"] >= 0)]
    np.testing.assert_allclose(after_blocks["std"], 1.0, atol=1e-3)
    np.testing.assert_allclose(after_blocks["mean"], 0.0, atol=1e-4)


def test_statistics_are_those_of_the_values():
    trace = explorer.run(explorer.ModelConfig(), TOKENS)
    stats = layer_statistics(trace.first).set_index(["layer", "point"])
    hidden = trace.first.activations["blocks.1.ffn.hidden"]
    row = stats.loc[(1, "FFN hidden")]
    assert row["mean"] == pytest.approx(hidden.mean(), rel=1e-5)
    assert row["max_abs"] == pytest.approx(np.abs(hidden).max())
    assert row["rms"] == pytest.approx(np.sqrt((hidden.astype(np.float64) ** 2).mean()))
    assert (1, "attn LayerNorm out") in stats.index
    np.testing.assert_array_equal(activation_values(trace.first, 0, "residual"), trace.residual[1])


def test_token_norms_and_relu_zero_fraction():
    trace = explorer.run(explorer.ModelConfig(activation="relu"), TOKENS)
    norms = token_norms(trace.first)
    assert norms.shape == (3, 6)
    assert norms[0, 1] == pytest.approx(np.linalg.norm(trace.residual[0, 1]))
    zeros = ffn_zero_fraction(trace.first)["zero_fraction"]
    assert ((zeros > 0.2) & (zeros < 0.8)).all()  # ReLU zeroes roughly half of random pre-activations
    gelu = explorer.run(explorer.ModelConfig(activation="gelu"), TOKENS)
    assert (ffn_zero_fraction(gelu.first)["zero_fraction"] == 0).all()


def test_a_trained_post_norm_stream_says_what_sets_its_scale(minilm_model):
    """MiniLM's stream after each block has std 0.45 to 0.62, not 1: its LayerNorms' learned gain and bias set that
    scale, which "re-normalised: std 0.4472 to 0.6192" alone left a learner to puzzle over."""
    story = depth_story(layer_statistics(explorer.run(minilm_model, TOKENS).first), "post")
    assert "re-normalised: std 0.4" in story and "the scale its learned gain and bias set" in story
    untrained = depth_story(layer_statistics(deep("post").first), "post")  # gain 1, bias 0: std 1.0000
    assert "std 1.0000, mean" in untrained and "gain" not in untrained


def test_the_pre_norm_story_names_the_final_norms_bias_where_a_layernorm_has_one():
    """A trained pre-norm LayerNorm's output is RMS 1 times its gain plus its bias: the sentence had named the gain
    alone, which holds for an RMSNorm (no bias) and for a LayerNorm only while its bias is 0."""
    model = explorer.build_model(explorer.ModelConfig(norm="pre"))
    with torch.no_grad():
        model.first_stack.norm.bias.fill_(0.5)  # as training might leave it
    trace = explorer.run(model, "the cat sat on the mat")
    out = trace.first.output.astype(np.float64)  # [T, D], after the final norm
    assert np.sqrt((out**2).mean()) > 1.05  # the bias moved it off RMS 1 (its gain is still 1)
    stats = layer_statistics(trace.first)
    assert "times its gain, plus its bias (1 and 0 at initialisation" in depth_story(stats, "pre", "LayerNorm")
    assert "bias" not in depth_story(stats, "pre", "RMSNorm")  # an RMSNorm has none
