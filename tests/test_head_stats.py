"""Per-head mean attention distance and sparsity: exact values on hand-built maps, and a loop cross-check."""

from __future__ import annotations

import numpy as np
import pytest

import explorer
from explorer.activations_text import head_stats_caption
from explorer.analysis.stats import head_entropy, head_grid, head_mean_distance, head_sparsity, keys_for_mass
from explorer.trace import AttentionMaps

TOKENS = "the cat sat on the mat".split()


def maps_of(weights: np.ndarray, allowed: np.ndarray) -> AttentionMaps:
    """Maps with given weights [L, H, T, T]; the scores do not enter these statistics."""
    scores = np.where(allowed, 0.0, -np.inf).astype(np.float32) + np.zeros(weights.shape, dtype=np.float32)
    tokens = [f"t{i}" for i in range(allowed.shape[0])]
    return AttentionMaps("self-attention", weights.astype(np.float32), scores, allowed, tokens, tokens)


def uniform(allowed: np.ndarray, n_layers: int = 2, n_heads: int = 3) -> np.ndarray:
    n = allowed.sum(axis=-1, keepdims=True)
    row = np.divide(allowed, n, out=np.zeros(allowed.shape), where=n > 0)  # [T, T]
    return np.broadcast_to(row, (n_layers, n_heads, *allowed.shape)).copy()


def test_attending_to_yourself_is_distance_zero_and_the_reversed_diagonal_is_far():
    allowed = np.ones((6, 6), dtype=bool)
    itself = np.broadcast_to(np.eye(6), (2, 3, 6, 6)).copy()
    df = head_mean_distance(maps_of(itself, allowed))
    assert list(df.columns) == ["layer", "head", "distance", "uniform_distance"]
    assert df[["layer", "head"]].values.tolist() == [[layer, head] for layer in range(2) for head in range(3)]
    assert (df["distance"] == 0.0).all()
    mirrored = head_mean_distance(maps_of(itself[..., ::-1].copy(), allowed))
    assert mirrored["distance"].tolist() == pytest.approx([np.mean([5, 3, 1, 1, 3, 5])] * 6)  # |q - (5 - q)|
    # uniform over 6 keys: query q is on average sum_k |q - k| / 6 away; averaged over q that is 35/18
    assert df["uniform_distance"].iloc[0] == pytest.approx(35 / 18)


def test_uniform_causal_attention_matches_its_baseline():
    allowed = np.tril(np.ones((5, 5), dtype=bool))
    df = head_mean_distance(maps_of(uniform(allowed), allowed))
    expected = np.mean([np.mean(np.arange(q + 1)) for q in range(5)])  # query q sees 0..q, mean distance q / 2
    np.testing.assert_allclose(df["distance"], expected, rtol=1e-6)
    np.testing.assert_allclose(df["uniform_distance"], expected, rtol=1e-12)


def test_one_key_is_sparse_and_uniform_is_not():
    allowed = np.ones((10, 10), dtype=bool)
    one_hot = np.broadcast_to(np.eye(10)[::-1], (1, 2, 10, 10)).copy()
    df = head_sparsity(maps_of(one_hot, allowed))
    assert list(df.columns) == ["layer", "head", "keys_for_mass", "allowed_keys", "sparsity"]
    assert (df["keys_for_mass"] == 1).all() and (df["allowed_keys"] == 10).all()
    np.testing.assert_allclose(df["sparsity"], 0.9)  # one key of 10 holds all the weight
    flat = head_sparsity(maps_of(uniform(allowed, 1, 2), allowed))
    assert (flat["keys_for_mass"] == 9).all()  # 9 of 10 equal weights hold 90%: the float32 0.9 is not short
    np.testing.assert_allclose(flat["sparsity"], 0.1)


def test_keys_for_mass_counts_the_largest_weights_first():
    rows = np.array([[0.05, 0.6, 0.3, 0.05], [0.25, 0.25, 0.25, 0.25], [0.0, 0.0, 0.0, 0.0]], dtype=np.float32)
    assert keys_for_mass(rows).tolist() == [2, 4, 0]  # 0.6 + 0.3 = 0.9; an all-zero row needs nothing
    assert keys_for_mass(rows, 0.5).tolist() == [1, 2, 0]


def test_rows_without_allowed_keys_are_left_out():
    allowed = np.ones((4, 4), dtype=bool)
    allowed[:, 0] = False  # nobody may attend to key 0 ...
    allowed[2, :] = False  # ... and query 2 may attend to nothing
    weights = uniform(allowed, 1, 1)
    distance = head_mean_distance(maps_of(weights, allowed))
    valid_queries = [0, 1, 3]
    expected = np.mean([np.mean([abs(q - k) for k in (1, 2, 3)]) for q in valid_queries])
    assert distance["distance"].item() == pytest.approx(expected)
    sparsity = head_sparsity(maps_of(weights, allowed))
    assert sparsity["allowed_keys"].item() == 3
    assert sparsity["keys_for_mass"].item() == 3  # uniform over 3 keys needs all three for 90%
    assert sparsity["sparsity"].item() == pytest.approx(0.0)
    nobody = np.zeros((3, 3), dtype=bool)
    empty = maps_of(np.zeros((1, 2, 3, 3)), nobody)
    assert head_mean_distance(empty)["distance"].isna().all()
    assert head_sparsity(empty)["sparsity"].isna().all()


def test_statistics_agree_with_plain_loops_on_a_real_model():
    trace = explorer.run(explorer.ModelConfig(n_layers=2, n_heads=4, mask="causal+padding"), "a [PAD] b c d e f")
    maps = trace.attention_maps()["self-attention"]
    distance = head_mean_distance(maps).set_index(["layer", "head"])
    sparsity = head_sparsity(maps).set_index(["layer", "head"])
    for layer in range(2):
        for head in range(4):
            dists, shares = [], []
            for q in range(maps.allowed.shape[0]):
                keys = [k for k in range(maps.allowed.shape[1]) if maps.allowed[q, k]]
                if not keys:
                    continue
                w = maps.weights[layer, head, q].astype(np.float64)
                dists.append(sum(w[k] * abs(q - k) for k in keys))
                running, needed = 0.0, 0
                for value in sorted(w, reverse=True):
                    running += value
                    needed += 1
                    if running >= 0.9 - 1e-6:
                        break
                shares.append(1 - needed / len(keys))
            assert distance.loc[(layer, head), "distance"] == pytest.approx(np.mean(dists), rel=1e-6)
            assert sparsity.loc[(layer, head), "sparsity"] == pytest.approx(np.mean(shares), rel=1e-9)


def test_head_grid_puts_each_value_at_its_layer_and_head():
    allowed = np.ones((6, 6), dtype=bool)
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(6), size=(3, 2, 6))  # [L, H, T, T], rows sum to 1
    maps = maps_of(weights, allowed)
    df = head_entropy(maps)
    grid = head_grid(df, "entropy")
    assert grid.shape == (3, 2)
    assert grid[2, 1] == df.query("layer == 2 and head == 1")["entropy"].item()
    assert head_grid(head_mean_distance(maps), "distance").shape == (3, 2)


def test_the_caption_says_when_pad_queries_are_averaged_in():
    """A padding mask hides [PAD] keys, not their rows: MiniLM's [PAD] queries attend and the grids average them in;
    the caption had said only that queries with no allowed key are left out."""
    caption = head_stats_caption("self-attention", "encoder", 1.61, 2.37, padded=2)
    assert "[PAD] queries included: a padding mask hides [PAD] keys, not their rows" in caption
    assert "[PAD]" not in head_stats_caption("self-attention", "encoder", 1.61, 2.37)
