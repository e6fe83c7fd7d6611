"""What the Compare page adds to explorer.compare: pairing maps, lining up two inputs, per-layer tables, URL values."""

import numpy as np
import pandas as pd
import pytest

import explorer
from explorer.analysis.activations import layer_statistics
from explorer.analysis.gradients import gradient_norms, layer_gradient_totals
from explorer.analysis.stats import head_entropy
from explorer.compare import (
    DEFAULT_TARGET,
    MapPair,
    align_pair,
    default_b,
    differing_fields,
    layer_values,
    layers_and_heads,
    model_for_b,
    paired_attention,
    per_layer_comparison,
    reorder_maps,
    reversed_text,
    target_of_b,
    token_order,
)
from views.query_params import check_b_value

TOKENS = "the cat sat on the mat"


def test_differing_fields():
    a = explorer.ModelConfig()
    assert differing_fields(a, a) == []
    assert differing_fields(a, default_b(a)) == ["norm"]
    assert differing_fields(a, a.replace(seed=2, mask="causal")) == ["mask", "seed"]


def test_pairs_by_role():
    a = explorer.ModelConfig()
    trace = explorer.run(a, TOKENS)
    (pair,) = paired_attention(trace, trace)
    assert (pair.label, pair.stack, pair.same_shape) == ("self-attention", 0, True)
    ed = explorer.run(a.replace(arch="encoder-decoder"), TOKENS, "le chat")
    labels = [(p.label, p.stack, p.a is None, p.b is None) for p in paired_attention(trace, ed)]
    assert labels == [
        ("self-attention (A) vs encoder self-attention (B)", 0, False, False),
        ("decoder self-attention", 1, True, False),
        ("cross-attention", 1, True, False),
    ]
    assert [p.label for p in paired_attention(ed, ed)] == [
        "encoder self-attention",
        "decoder self-attention",
        "cross-attention",
    ]
    assert not paired_attention(trace, explorer.run(a.replace(n_heads=8), TOKENS))[0].same_shape


def test_without_b_the_pairs_are_a_s_alone():
    ed = explorer.run(explorer.ModelConfig(arch="encoder-decoder"), TOKENS, "le chat")
    alone = paired_attention(ed, None)
    assert [(p.label, p.stack) for p in alone] == [(p.label, p.stack) for p in paired_attention(ed, ed)]
    assert all(p.b is None for p in alone)
    assert [p.a for p in alone] == [
        ed.stacks[0].self_attention,
        ed.stacks[1].self_attention,
        ed.stacks[1].cross_attention,
    ]


def test_layers_and_heads_offer_as_many_as_the_bigger_side(make_maps):
    small, big = make_maps(n_layers=2, n_heads=3), make_maps(n_layers=4, n_heads=2)
    assert layers_and_heads(MapPair("self-attention", 0, small, big)) == ([0, 1, 2, 3], [0, 1, 2])
    assert layers_and_heads(MapPair("cross-attention", 1, None, big)) == ([0, 1, 2, 3], [0, 1])


def test_b_s_default_text_is_a_s_words_reversed():
    assert reversed_text("the cat  sat") == "sat cat the"
    assert reversed_text("") == ""


def test_b_s_decoder_reads_a_s_target_or_the_default_one():
    encoder, ed = explorer.ModelConfig(), explorer.ModelConfig(arch="encoder-decoder")
    assert target_of_b(encoder, "le chat") is None
    assert target_of_b(ed, "le chat") == "le chat"
    assert target_of_b(ed, None) == DEFAULT_TARGET


def test_align_pair_reorders_what_reads_b_s_tokens():
    """Both axes of the stack reading the tokens, the keys of cross-attention; the decoder's self-attention (over
    the target, not the tokens) and a missing side stay as they are."""
    cfg = explorer.ModelConfig(arch="encoder-decoder")
    trace_a = explorer.run(cfg, TOKENS, "le chat")
    trace_b = explorer.run(cfg, " ".join(TOKENS.split()[::-1]), "le chat")
    order = token_order(trace_a.tokens, trace_b.tokens)
    encoder, decoder, cross = paired_attention(trace_a, trace_b)
    aligned = align_pair(encoder, order)
    assert aligned.a is encoder.a and aligned.b.query_tokens == aligned.b.key_tokens == TOKENS.split()
    np.testing.assert_array_equal(aligned.b.weights[:, :, 1, 2], encoder.b.weights[:, :, order[1], order[2]])
    assert align_pair(decoder, order) is decoder
    moved = align_pair(cross, order)
    assert moved.b.query_tokens == cross.b.query_tokens and moved.b.key_tokens == TOKENS.split()
    np.testing.assert_array_equal(moved.b.weights, cross.b.weights[..., order])
    lone = MapPair("self-attention", 0, encoder.a, None)
    assert align_pair(lone, order) is lone


def test_token_order_matches_occurrences():
    assert token_order("I love AI".split(), "AI love I".split()) == [2, 1, 0]
    assert token_order("a b a".split(), "a a b".split()) == [0, 2, 1]
    assert token_order("a b".split(), "a c".split()) is None
    assert token_order("a b".split(), "a b b".split()) is None


def test_reordered_maps_without_positions_match_up_to_rounding():
    """No positions and no mask: attention is permutation-equivariant, so reordering B's maps gives A's."""
    model = explorer.build_model(explorer.ModelConfig(positional="none", n_layers=3))
    a = explorer.run(model, TOKENS).attention_maps()["self-attention"]
    reversed_tokens = TOKENS.split()[::-1]
    b = explorer.run(model, reversed_tokens).attention_maps()["self-attention"]
    order = token_order(a.query_tokens, b.query_tokens)
    aligned = reorder_maps(b, order, order)
    assert aligned.query_tokens == a.query_tokens and aligned.key_tokens == a.key_tokens
    np.testing.assert_allclose(aligned.weights, a.weights, atol=1e-6)
    np.testing.assert_array_equal(aligned.weights[:, :, 2, 4], b.weights[:, :, order[2], order[4]])


def test_reorder_keys_only_keeps_the_mask_with_its_cells():
    trace = explorer.run(explorer.ModelConfig(mask="causal"), "a b c")
    maps = trace.attention_maps()["self-attention"]
    moved = reorder_maps(maps, None, [2, 0, 1])
    np.testing.assert_array_equal(moved.allowed, maps.allowed[:, [2, 0, 1]])
    np.testing.assert_array_equal(moved.weights, maps.weights[..., [2, 0, 1]])
    assert moved.query_tokens == maps.query_tokens and moved.key_tokens == ["c", "a", "b"]


def test_layer_values_come_from_the_activation_and_gradient_functions():
    cfg = explorer.ModelConfig(n_layers=3, norm="pre")
    model = explorer.build_model(cfg)
    stack = explorer.run(model, TOKENS).first
    totals = layer_gradient_totals(gradient_norms(model, TOKENS))
    values = layer_values(stack, totals)
    stats = layer_statistics(stack)
    residual = stats[stats["point"] == "residual"]

    def of(statistic):
        return values[values["statistic"] == statistic].set_index("layer")["value"]

    np.testing.assert_array_equal(of("residual RMS").to_numpy(), residual["rms"].to_numpy())
    np.testing.assert_array_equal(of("residual std").to_numpy(), residual["std"].to_numpy())
    assert list(of("residual RMS").index) == [-1, 0, 1, 2]
    np.testing.assert_array_equal(of("gradient norm").to_numpy(), totals["norm"].to_numpy())
    entropy = head_entropy(stack.self_attention)
    np.testing.assert_allclose(of("attention entropy").to_numpy(), entropy.groupby("layer")["entropy"].mean())
    assert "gradient norm" not in set(layer_values(stack)["statistic"])


def test_per_layer_comparison_fills_a_minus_b_on_common_layers_only():
    model_a = explorer.build_model(explorer.ModelConfig(n_layers=2))
    model_b = explorer.build_model(explorer.ModelConfig(n_layers=4))
    values_a = layer_values(explorer.run(model_a, TOKENS).first)
    values_b = layer_values(explorer.run(model_b, TOKENS).first)
    table = per_layer_comparison(values_a, values_b)
    rms = table[table["statistic"] == "residual RMS"].set_index("layer")
    assert list(rms.index) == [-1, 0, 1, 2, 3]
    assert rms.loc[[2, 3], "a"].isna().all() and rms.loc[[2, 3], "a_minus_b"].isna().all()
    np.testing.assert_array_equal(rms.loc[[-1, 0, 1], "a_minus_b"], rms.loc[[-1, 0, 1], "a"] - rms.loc[[-1, 0, 1], "b"])
    assert list(dict.fromkeys(table["statistic"])) == ["residual RMS", "residual std", "attention entropy"]
    only_a = per_layer_comparison(values_a, None)
    assert only_a["b"].isna().all() and len(only_a) == len(values_a)
    only_b = per_layer_comparison(None, values_b)
    assert only_b["a"].isna().all() and len(only_b) == len(values_b)


def test_b_equal_to_a_per_layer_differences_are_zero():
    cfg = explorer.ModelConfig(n_layers=3)
    model_a = explorer.build_model(cfg)
    model_b = model_for_b(model_a, cfg)
    values = [
        layer_values(explorer.run(m, TOKENS).first, layer_gradient_totals(gradient_norms(m, TOKENS)))
        for m in (model_a, model_b)
    ]
    table = per_layer_comparison(*values)
    assert (table["a_minus_b"] == 0).all()


@pytest.mark.parametrize(
    ("name", "raw", "value", "problem"),
    [
        ("norm", "pre", "pre", None),
        ("mask", "causal padding", "causal+padding", None),
        ("mask", "sideways", None, "not one of"),
        ("n_heads", "8", 8, None),
        ("n_heads", "abc", None, "whole number"),
        ("n_layers", "0", None, "outside 1 to 24"),
        ("dropout", "0.5", None, "do not include"),
    ],
)
def test_check_b_value(name, raw, value, problem):
    got, why = check_b_value(name, raw)
    assert got == value
    assert (why is None) if problem is None else (problem in why)


def test_layer_values_table_types():
    stack = explorer.run(explorer.ModelConfig(), TOKENS).first
    values = layer_values(stack)
    assert values["layer"].dtype == int and values["value"].dtype == float
    assert isinstance(per_layer_comparison(values, values), pd.DataFrame)
