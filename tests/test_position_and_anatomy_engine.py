"""Engine additions made for the issue 3 pages: reorderings, typed dimensions, offset scores, the
encoder-decoder's permutation demo and forward steps, and parameter groups."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

import explorer
from explorer.analysis.activations import (
    POINTS,
    activation_values,
    depth_story,
    layer_statistics,
    points,
    value_histogram,
)
from explorer.analysis.position_analysis import (
    MAX_CURVES,
    default_dimensions,
    encoding_table,
    offset_scores,
    parse_dimensions,
    permutation_demo,
    reorder,
    repeated_token_scores,
)
from explorer.anatomy import forward_steps, parameter_counts, parameter_groups
from explorer.numbers import readable


def test_sinusoidal_table_is_the_formula_everywhere():
    table = encoding_table(explorer.build_model(explorer.ModelConfig(d_model=10, n_heads=2)), 60)
    p, i = np.meshgrid(np.arange(60), np.arange(5), indexing="ij")  # [P, D/2] position, pair
    angle = p / 10000 ** (2 * i / 10)
    np.testing.assert_allclose(table[:, 0::2], np.sin(angle), atol=1e-6)
    np.testing.assert_allclose(table[:, 1::2], np.cos(angle), atol=1e-6)
    longer = encoding_table(explorer.build_model(explorer.ModelConfig(d_model=10, n_heads=2)), 600)  # past max_tokens
    assert longer.shape == (600, 10)
    assert longer[599, 0] == pytest.approx(math.sin(599), abs=1e-5)


@pytest.mark.parametrize("how", ["reversed", "rotated by one", "shuffled"])
def test_reorderings_are_permutations(how):
    for n in (1, 2, 6):
        order = reorder(n, how, seed=3)
        assert sorted(order) == list(range(n))
        if n > 1:
            assert order != list(range(n))
    assert reorder(4, "reversed") == [3, 2, 1, 0]
    assert reorder(4, "rotated by one") == [1, 2, 3, 0]
    assert reorder(6, "shuffled", 1) == reorder(6, "shuffled", 1)
    with pytest.raises(explorer.ConfigError, match="not one of"):
        reorder(3, "sideways")


def test_permutation_demo_moves_maps_exactly_up_to_rounding_only_without_positions():
    demo = permutation_demo(explorer.ModelConfig(positional="none"), "I love AI", reorder(3, "rotated by one"))
    assert demo.shuffled == ["love", "AI", "I"]
    assert demo.order_invisible and demo.max_difference < 1e-6
    np.testing.assert_allclose(demo.permuted_attention, demo.shuffled_attention, atol=1e-6)
    causal = permutation_demo(explorer.ModelConfig(positional="none", mask="causal"), "I love AI")
    assert not causal.order_invisible  # the causal mask carries position
    decoder = permutation_demo(explorer.ModelConfig(positional="none", arch="decoder"), "I love AI")
    assert not decoder.order_invisible


def test_encoder_decoder_permutation_reorders_the_source_only():
    cfg = explorer.ModelConfig(positional="none", arch="encoder-decoder")
    demo = permutation_demo(cfg, "I love AI", target="x y")
    assert demo.order_invisible
    assert demo.attention.shape == (2, 4, 3, 3)  # the encoder's self-attention
    with_positions = permutation_demo(cfg.replace(positional="sinusoidal"), "I love AI", target="x y")
    assert not with_positions.order_invisible
    with pytest.raises(explorer.ConfigError, match="target"):
        permutation_demo(cfg, "I love AI")


def test_typed_dimensions():
    assert parse_dimensions("0, 1 6-9", 64) == [0, 1, 6, 7, 8, 9]
    assert parse_dimensions("3,3,2", 64) == [2, 3]
    assert parse_dimensions("  ", 64) == default_dimensions(64) == [0, 1, 8, 9, 16, 17, 32, 33]
    assert default_dimensions(1) == [0]
    assert default_dimensions(2) == [0, 1]
    assert all(d < 6 for d in default_dimensions(6))
    with pytest.raises(explorer.ConfigError, match="Dimension 64 does not exist"):
        parse_dimensions("0, 64", 64)
    with pytest.raises(explorer.ConfigError, match="Dimension 70 does not exist"):
        parse_dimensions("60-70", 64)
    with pytest.raises(explorer.ConfigError, match="not a whole number"):
        parse_dimensions("zero", 64)
    with pytest.raises(explorer.ConfigError, match="backwards"):
        parse_dimensions("9-3", 64)
    with pytest.raises(explorer.ConfigError, match=f"at most {MAX_CURVES}"):
        parse_dimensions("0-31", 64)


def test_rope_scores_on_a_repeated_token_depend_only_on_the_offset():
    rope = offset_scores(explorer.ModelConfig(positional="rope", n_layers=2), "cat", 24, layer=1, head=2)
    assert rope.scores.shape == (24, 24) and rope.offsets.tolist() == list(range(-23, 24))
    assert rope.spread < 1e-5
    shift = 5  # moving both positions by the same amount leaves the score alone
    np.testing.assert_allclose(rope.scores[shift:, shift:], rope.scores[:-shift, :-shift], atol=1e-5)
    assert np.ptp(rope.by_offset) > 1e-3  # ... but it does change with the offset
    assert rope.by_offset[23] == pytest.approx(rope.scores[4, 4], abs=1e-5)  # offset 0 is the diagonal
    assert rope.by_offset[23 + 2] == pytest.approx(rope.scores[7, 5], abs=1e-5)  # offset 2: query 7, key 5
    sinusoidal = offset_scores(explorer.ModelConfig(positional="sinusoidal"), "cat", 24)
    assert sinusoidal.spread > 0.1  # added positions: where both sit matters, not only the offset
    none = offset_scores(explorer.ModelConfig(positional="none"), "cat", 24)
    assert none.spread == 0.0 and np.ptp(none.by_offset) == 0.0  # no position at all: every score is the same


def test_offset_scores_skip_masked_keys():
    causal = offset_scores(explorer.ModelConfig(positional="rope", arch="decoder"), "a", 8)
    assert np.isneginf(causal.scores[0, 1])
    assert np.isnan(causal.by_offset[0])  # offset -7: key 7 positions after the query, all masked
    assert causal.spread < 1e-5


def test_encoder_decoder_forward_steps_include_both_stacks_and_cross_attention():
    cfg = explorer.ModelConfig(arch="encoder-decoder", n_heads=4, d_model=64, norm="pre")
    steps = forward_steps(cfg, 6, 3)
    sizes = dict(zip(steps["step"], steps["size"], strict=False))
    assert sizes["source tokens"] == "[6]" and sizes["target tokens"] == "[3]"
    assert sizes["decoder block × 2: cross-attention: scores Q K^T / sqrt(d_head)"] == "[4, 3, 6]"
    assert sizes["encoder block × 2: scores Q K^T / sqrt(d_head)"] == "[4, 6, 6]"  # mask none: no mask named
    assert list(steps["step"].iloc[-2:]) == ["decoder final LayerNorm", "decoder output"]
    assert "encoder output" in sizes
    plain = forward_steps(cfg.replace(arch="encoder"), 6)
    assert not plain["step"].str.contains("cross").any()


@pytest.mark.parametrize(
    "cfg",
    [
        explorer.ModelConfig(positional="learned", arch="encoder-decoder", norm="pre"),
        explorer.ModelConfig(arch="decoder"),
    ],
    ids=["encoder-decoder", "decoder"],
)
def test_parameter_groups_add_up_to_the_model(cfg):
    model = explorer.build_model(cfg)
    groups = parameter_groups(parameter_counts(model)).set_index("group")
    assert groups["parameters"].sum() == sum(p.numel() for p in model.parameters())
    assert "other" not in groups.index
    assert groups["share"].sum() == pytest.approx(1.0)
    d, f, layers = cfg.d_model, cfg.d_ff, cfg.n_layers
    stacks = 2 if cfg.arch == "encoder-decoder" else 1
    assert groups.loc["feed-forward", "parameters"] == stacks * layers * (2 * d * f + f + d)
    assert groups.loc["self-attention", "parameters"] == stacks * layers * (4 * d * d + 4 * d)
    assert ("cross-attention" in groups.index) == (cfg.arch == "encoder-decoder")
    assert ("positions (learned)" in groups.index) == (cfg.positional == "learned")


def test_decoder_stack_statistics_include_the_cross_attention_output():
    trace = explorer.run(explorer.ModelConfig(arch="encoder-decoder"), "a b c", "x y")
    assert points(trace.first) == POINTS
    assert points(trace.last) == ("residual", "attention output", "cross-attention output", "FFN hidden", "FFN output")
    stats = layer_statistics(trace.last).set_index(["layer", "point"])
    cross = trace.last.activations["blocks.1.cross.out"]
    assert stats.loc[(1, "cross-attention output"), "rms"] == pytest.approx(np.sqrt((cross.astype(float) ** 2).mean()))
    np.testing.assert_array_equal(activation_values(trace.last, 1, "cross-attention output"), cross)


def test_value_histogram_counts_every_value_once():
    values = np.array([[0.0, 0.0, 1.0], [2.0, -1.0, 0.5]], dtype=np.float32)
    bins = value_histogram(values, bins=3)
    assert list(bins.columns) == ["left", "right", "count", "exact_zeros"]
    assert bins["count"].tolist() == [1, 3, 2]  # [-1, 0), [0, 1), [1, 2] (the last edge included)
    assert bins["left"].iloc[0] == -1.0 and bins["right"].iloc[-1] == 2.0
    assert (bins["exact_zeros"] == 2).all()
    flat = value_histogram(np.full((2, 2), 3.0))
    assert flat["count"].sum() == 4


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_depth_story_tells_what_the_numbers_do(norm):
    cfg = explorer.ModelConfig(d_model=512, n_heads=8, n_layers=12, norm=norm)
    stats = layer_statistics(explorer.run(cfg, "the cat sat on the mat").first)
    story = depth_story(stats, norm)
    if norm == "pre":
        rms = stats[stats["point"] == "residual"]["rms"]
        assert "rising in every block" in story and f"{readable(rms.iloc[-1])} after block 11" in story
    else:
        assert "std 1.0000" in story and "12 blocks" in story


def test_the_pre_norm_story_does_not_call_a_fall_a_consequence_of_growth():
    # the learner review's case: a one-block pre-norm model whose residual RMS falls (1.335 -> 1.279)
    cfg = explorer.ModelConfig(norm="pre", d_model=8, n_heads=2, n_layers=1, d_ff=32, seed=2)
    stats = layer_statistics(explorer.run(cfg, "the cat sat on the mat").first)
    rms = stats[stats["point"] == "residual"].sort_values("layer")["rms"].to_numpy()
    assert rms[-1] < rms[0]
    story = depth_story(stats, "pre")
    assert "never normalised itself, so the residual" not in story
    assert "tends to grow with depth; here, though," in story and "rising in 0 of 1 blocks" in story


def test_the_depth_story_gives_its_numbers_with_three_digits_as_compare_does():
    """SmolLM2's story read "88.588 (input) ... 674.99× the input" where Compare said 88.6."""
    stats = pd.DataFrame(
        {"point": "residual", "layer": [-1, 0, 1], "rms": [0.131, 40.2, 88.588], "std": 1.0, "mean": 0.0}
    )
    story = depth_story(stats, "pre")
    assert "from 0.131 (input) to 88.6 after block 1, 676× the input" in story


def test_demonstrations_take_a_built_model_and_leave_it_unchanged():
    cfg = explorer.ModelConfig(positional="rope", n_layers=2)
    model = explorer.build_model(cfg)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    from_model = permutation_demo(model, "I love AI", [2, 0, 1])
    from_config = permutation_demo(cfg, "I love AI", [2, 0, 1])
    np.testing.assert_array_equal(from_model.shuffled_attention, from_config.shuffled_attention)
    scores = repeated_token_scores(model, "a", 12)
    assert scores.shape == (2, 4, 12, 12)
    one = offset_scores(model, "a", 12, layer=1, head=3, scores=scores)
    assert one.spread == offset_scores(cfg, "a", 12, layer=1, head=3).spread
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    with pytest.raises(explorer.ConfigError, match="ModelConfig"):
        permutation_demo(explorer.from_torch(torch.nn.TransformerEncoderLayer(16, 2, batch_first=True)), "a b")


@pytest.mark.parametrize("norm", ["res-post", "peri"])
def test_normalised_updates_bound_the_streams_growth_and_the_story_says_so(norm):
    """Each sub-layer adds a LayerNorm output of RMS below 1 (gain 1, bias 0 at init): by the triangle inequality the
    stream's RMS can rise by at most 1 per sub-layer, 2 per encoder block, whatever the sub-layers compute."""
    cfg = explorer.ModelConfig(d_model=64, n_heads=4, n_layers=8, norm=norm)
    stats = layer_statistics(explorer.run(cfg, "the cat sat on the mat").first)
    rms = stats[stats["point"] == "residual"].sort_values("layer")["rms"].to_numpy()
    assert (np.diff(rms) <= 2.0).all()
    story = depth_story(stats, norm)
    assert story.startswith(f"{norm.capitalize()}-norm") and f"{readable(rms[-1])} after block 7" in story
    norms = stats[stats["point"].str.contains("output LayerNorm out")]
    assert set(norms["point"]) == {"attn output LayerNorm out", "ffn output LayerNorm out"}
    assert (norms["rms"] <= 1.0).all()  # a LayerNorm output with gain 1 and bias 0 has RMS sqrt(var / (var + eps))
