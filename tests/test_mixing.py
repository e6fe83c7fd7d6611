"""Attention rollout and flow (Abnar and Zuidema 2020): the recursion, known answers on constructed attention, and
flow checked against a second max-flow solver (networkx) and against cut bounds."""

from __future__ import annotations

import numpy as np
import pytest

import explorer
from explorer.analysis.mixing import (
    attention_flow,
    attention_flow_rows,
    attention_rollout,
    augmented_attention,
    flow_edges,
)
from explorer.config import ConfigError
from explorer.trace import AttentionMaps, StackTrace, Trace

nx = pytest.importorskip("networkx")

# Capacities are rounded to 2^-24 (mixing.FLOW_UNITS) for scipy's integer solver: each edge is off by at most 2^-25,
# and a flow by at most that times the edges of a minimum cut, at most L * T * T edges here: under 1e-5 for these.
FLOW_TOLERANCE = 1e-5


def trace_of(weights: np.ndarray, allowed: np.ndarray | None = None) -> Trace:
    """A Trace holding only the given self-attention weights [L, H, T, T] (all that rollout and flow read)."""
    n_layers, _, n_tokens, _ = weights.shape
    allowed = np.ones((n_tokens, n_tokens), dtype=bool) if allowed is None else allowed
    tokens = [f"t{i}" for i in range(n_tokens)]
    maps = AttentionMaps("self-attention", weights.astype(np.float32), weights, allowed, tokens, tokens)
    residual = np.zeros((n_layers + 1, n_tokens, 1), dtype=np.float32)
    stack = StackTrace("encoder", tokens, maps, None, residual, residual[-1])
    return Trace(config=None, stacks=(stack,))


def random_attention(n_layers: int, n_heads: int, n_tokens: int, seed: int, causal: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(n_layers, n_heads, n_tokens, n_tokens)) * 2.0
    if causal:
        scores = np.where(np.tril(np.ones((n_tokens, n_tokens), dtype=bool)), scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def networkx_flow(weights: np.ndarray, query: int, residual: float) -> np.ndarray:
    """The paper's construction, independently: a networkx DiGraph with float capacities, one max flow per input."""
    n_layers, _, n_tokens, _ = weights.shape
    graph = nx.DiGraph()
    for layer in range(n_layers):
        mixed = residual * np.eye(n_tokens) + (1 - residual) * weights[layer].mean(axis=0)
        mixed = mixed / mixed.sum(axis=-1, keepdims=True)
        for i in range(n_tokens):
            for j in range(n_tokens):
                if mixed[i, j] > 0:
                    graph.add_edge((layer + 1, i), (layer, j), capacity=float(mixed[i, j]))
    return np.array(
        [
            nx.maximum_flow_value(graph, (n_layers, query), (0, j)) if graph.has_node((0, j)) else 0.0
            for j in range(n_tokens)
        ]
    )


def test_identity_attention_makes_rollout_the_identity():
    weights = np.broadcast_to(np.eye(5), (3, 2, 5, 5)).copy()
    rollout = attention_rollout(trace_of(weights))
    np.testing.assert_allclose(rollout, np.broadcast_to(np.eye(5), (3, 5, 5)), atol=1e-7)


def test_one_layer_rollout_is_the_augmented_attention():
    weights = random_attention(1, 3, 6, seed=1)
    mean = weights[0].mean(axis=0)
    expected = 0.5 * np.eye(6) + 0.5 * mean  # rows already sum to 1: the renormalisation changes nothing
    np.testing.assert_allclose(attention_rollout(trace_of(weights))[0], expected, atol=1e-6)


@pytest.mark.parametrize("residual", [0.0, 0.3, 0.5, 1.0])
def test_rollout_is_the_product_of_the_augmented_layers(residual):
    weights = random_attention(4, 2, 5, seed=2)
    rollout = attention_rollout(trace_of(weights), residual)
    product = np.eye(5)
    for layer in range(4):
        mixed = residual * np.eye(5) + (1 - residual) * weights[layer].mean(axis=0)
        product = (mixed / mixed.sum(axis=-1, keepdims=True)) @ product
        np.testing.assert_allclose(rollout[layer], product, atol=1e-6)
    np.testing.assert_allclose(rollout.sum(axis=-1), 1.0, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_flow_equals_networkx_and_respects_cut_bounds(seed, causal):
    weights = random_attention(3, 2, 5, seed=seed, causal=causal)
    trace = trace_of(weights)
    flows = attention_flow_rows(trace)  # [T, T]
    augmented = augmented_attention(trace)
    for query in range(5):
        np.testing.assert_allclose(flows[query], networkx_flow(weights, query, 0.5), atol=FLOW_TOLERANCE)
    # Two cuts bound every flow: the source's own out-edges (they sum to 1) and the sink's in-edges.
    assert (flows <= 1.0 + FLOW_TOLERANCE).all()
    into_sink = augmented[0].sum(axis=0)  # [T]: capacity into input token j
    assert (flows <= into_sink[None, :] + FLOW_TOLERANCE).all()
    assert (flows >= 0).all()
    if causal:  # nothing reaches back from a position to a later input token
        assert (flows[np.triu_indices(5, k=1)] == 0).all()


def test_one_query_row_is_the_row_of_every_query():
    weights = random_attention(2, 3, 4, seed=5)
    trace = trace_of(weights)
    np.testing.assert_array_equal(attention_flow(trace, 2), attention_flow_rows(trace)[2])
    assert flow_edges(trace) == 2 * 4 * 4


def test_masked_padding_gets_no_rollout_and_no_flow_from_other_positions():
    model = explorer.build_model(explorer.ModelConfig(mask="padding", n_layers=3))
    trace = explorer.run(model, "the cat sat [PAD] [PAD]")
    rollout = attention_rollout(trace)
    flows = attention_flow_rows(trace, [0, 1, 2])
    assert (rollout[:, :3, 3:] == 0).all()
    assert (flows[:, 3:] == 0).all()
    assert (flows[:, :3] > 0).all()


def test_bad_arguments_say_what_to_do():
    trace = trace_of(random_attention(1, 1, 3, seed=0))
    with pytest.raises(ConfigError, match="between 0 and 1"):
        attention_rollout(trace, residual=1.5)
    for query in (3, -4, 1.5):  # 1.5 had quietly been position 1
        with pytest.raises(ConfigError, match=f"query is a whole number from -3 to 2; got {query}"):
            attention_flow(trace, query)
    np.testing.assert_array_equal(attention_flow(trace, -1), attention_flow(trace, 2))  # as flow_figure takes -1


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_a_removed_head_mixes_what_it_really_mixed(mode):
    """A head the run removed mixes nothing (zero) or by each key's mean weight over the queries (mean): the augmented
    attention is built from those weights, not from the weights the head computed and the trace still shows."""
    weights = random_attention(2, 3, 5, seed=4)
    base = trace_of(weights)
    removed = Trace(config=None, stacks=base.stacks, ablated=((1, 0), (1, 2)), ablate_with=mode)
    acted = weights.copy()
    for head in (0, 2):
        acted[1, head] = 0.0 if mode == "zero" else weights[1, head].mean(axis=0, keepdims=True)
    expected = augmented_attention(trace_of(acted))
    np.testing.assert_allclose(augmented_attention(removed), expected, atol=1e-12)
    np.testing.assert_allclose(augmented_attention(removed)[0], augmented_attention(base)[0], atol=0)
    assert np.abs(augmented_attention(removed)[1] - augmented_attention(base)[1]).max() > 1e-3
