"""How tokens mix across layers: attention rollout and attention flow (Abnar and Zuidema 2020).

Abnar and Zuidema (2020), "Quantifying Attention Flow in Transformers", treat the stack as a layered graph: a node per
(layer, token), layer 0 the input tokens, layer l + 1 the stream after block l. The residual connection carries each
token's own stream past the attention, so block l mixes tokens by

    A~_l = residual * I + (1 - residual) * (mean over heads of A_l),  rows renormalised to sum to 1,

with A_l the block's self-attention weights [query, key] (the paper uses residual = 0.5). Rollout multiplies these
matrices; flow is the maximum flow through the graph whose edge from (l + 1, i) to (l, j) has capacity A~_l[i, j].
Both read the first stack's self-attention (the encoder's, for an encoder-decoder). Raw weights say where one head
of one layer looks; these estimate which input tokens an output position is made of after every block. A head the run
removed (explorer.ablation) mixes by what it really did: nothing when its output was zeroed, each key's mean weight
over the queries when it was replaced by its mean (norm_attention.effective_weights). That mean is the same for every
query, so through such a head a position receives tokens its mask hides from it (later ones, under a causal mask).

Flow is kept as max-flow values, not shares: the flow from position i to input token j is the most that can pass
from (L, i) to (0, j), each its own max-flow problem, at most 1, and a row can sum to more than 1 (on MiniLM, 14 to
22). The authors' code (samiraabnar/attention_flow, compute_flows) divides each output node's flows by their sum; this
does not, because a share would hide that several input tokens can each reach a position fully.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from explorer.analysis.norm_attention import effective_weights, mean_mixing, removed_heads
from explorer.arguments import whole_in
from explorer.config import ConfigError
from explorer.trace import AttentionMaps, Trace

DEFAULT_RESIDUAL = 0.5  # the paper's share for the residual connection
# scipy's maximum_flow takes integer capacities: capacities (each at most 1) are counted in units of 2^-24, so each
# edge is off by at most 3e-8 and a flow by at most that times the edges it crosses (well under 1e-5 below 300 edges
# a cut); the total stays far inside int32.
FLOW_UNITS = 2**24


def mixed_maps(trace: Trace) -> AttentionMaps:
    """The first stack's self-attention with each removed head's weights as it acted (effective_weights): what rollout
    and flow average, so that a raw average drawn beside them is the same A. The maps themselves without a removal."""
    maps = trace.first.self_attention
    if not trace.ablated:
        return maps
    return dataclasses.replace(maps, weights=effective_weights(trace, maps), scores=None)


def mean_reaches_hidden(trace: Trace) -> bool:
    """Whether a head the run replaced by its mean (explorer.ablation) weighs, for some position, a key that position's
    mask hides. The mean weighs each key by its mean over every query, the same for all: under a causal mask later
    tokens, but never [PAD] under a padding mask alone, which no query weighs to begin with."""
    if trace.ablate_with != "mean":
        return False
    maps = trace.first.self_attention
    hidden = ~maps.allowed  # [T, T]
    return any(
        bool((hidden & (mean_mixing(maps.weights[layer, head]) > 0)).any())  # [1, T] broadcast over the queries
        for layer, head in removed_heads(trace, maps)
    )


def augmented_attention(trace: Trace, residual: float = DEFAULT_RESIDUAL) -> np.ndarray:
    """[L, T, T] float64: A~_l = residual * I + (1 - residual) * mean over heads of A_l, each row divided by its sum
    (a row with no allowed key and residual 0 stays all zeros). Masked keys stay 0 except a token's own residual."""
    if not 0.0 <= residual <= 1.0:
        raise ConfigError(f"residual is {residual}; the residual connection's share must be between 0 and 1.")
    weights = effective_weights(trace, trace.first.self_attention)  # [L, H, T, T]: removed heads as they acted
    mean = weights.mean(axis=1, dtype=np.float64)  # [L, T, T], without a float64 copy of every head
    augmented = (1.0 - residual) * mean + residual * np.eye(mean.shape[-1])  # [L, T, T]
    totals = augmented.sum(axis=-1, keepdims=True)  # [L, T, 1]
    return np.divide(augmented, totals, out=np.zeros_like(augmented), where=totals > 0)


def attention_rollout(trace: Trace, residual: float = DEFAULT_RESIDUAL) -> np.ndarray:
    """[L, T, T] float32: attention rollout (Abnar and Zuidema 2020). Entry l is A~_l @ A~_(l-1) @ ... @ A~_0: row i,
    column j says how much of input token j reaches position i after block l (A~: augmented_attention). Each row sums
    to 1; a key no query may see gets 0 in every other position's row."""
    augmented = augmented_attention(trace, residual)  # [L, T, T]
    rolled = np.empty_like(augmented)  # [L, T, T]
    product = np.eye(augmented.shape[-1])  # [T, T]
    for layer, mixing in enumerate(augmented):
        product = mixing @ product  # [T, T]
        rolled[layer] = product
    return rolled.astype(np.float32)


def flow_edges(trace: Trace) -> int:
    """How many edges attention flow's graph has: layers x tokens x tokens. One flow solves a max-flow problem per
    input token on it (explorer.mixing_text.flow_work is what the Mixing page's limit counts)."""
    n_layers, _, n_tokens, _ = trace.attention.shape  # [L, H, T, T]
    return n_layers * n_tokens * n_tokens


def attention_flow(trace: Trace, query: int, residual: float = DEFAULT_RESIDUAL) -> np.ndarray:
    """[T] float64: attention flow (Abnar and Zuidema 2020), the maximum flow from position `query` after the last block
    to each input token, on the layered graph whose edge from (l + 1, i) to (l, j) has capacity A~_l[i, j]
    (augmented_attention). Each value is at most 1 and is its own max-flow problem, not a share: a row can sum to more
    than 1 (the authors' code divides a row by its sum; this keeps the values, see the module's docstring).
    Solved by scipy's maximum_flow (Dinic's algorithm) on integer capacities (FLOW_UNITS). -1 is the last position,
    as flow_figure takes it."""
    n_tokens = len(trace.first.tokens)
    return attention_flow_rows(trace, [whole_in("query", query, -n_tokens, n_tokens - 1) % n_tokens], residual)[0]


def attention_flow_rows(
    trace: Trace, queries: Sequence[int] | None = None, residual: float = DEFAULT_RESIDUAL
) -> np.ndarray:
    """[len(queries), T] float64: attention_flow for each of `queries` (None: every position), one graph for all."""
    augmented = augmented_attention(trace, residual)  # [L, T, T]
    n_layers, n_tokens, _ = augmented.shape
    queries = range(n_tokens) if queries is None else [whole_in("query", q, 0, n_tokens - 1) for q in queries]
    from scipy.sparse.csgraph import maximum_flow  # here: scipy costs every `import explorer` 0.3 s, only flow uses it

    graph = _flow_graph(augmented)
    flows = np.zeros((len(queries), n_tokens))  # [Q, T]
    for row, query in enumerate(queries):
        source = n_layers * n_tokens + query  # node (L, query): the position after the last block
        for token in range(n_tokens):  # node (0, token): the input token
            flows[row, token] = maximum_flow(graph, source, token).flow_value / FLOW_UNITS
    return flows


def _flow_graph(augmented: np.ndarray):
    """The layered graph as a sparse [N, N] int32 capacity matrix, N = (L + 1) * T, node (l, t) = l * T + t: an edge
    from (l + 1, i) to (l, j) of capacity A~_l[i, j] in FLOW_UNITS, for every nonzero A~_l[i, j]."""
    n_layers, n_tokens, _ = augmented.shape
    layer, query, key = np.nonzero(augmented)  # [E] each
    capacity = np.rint(augmented[layer, query, key] * FLOW_UNITS).astype(np.int32)  # [E]
    keep = capacity > 0
    sources = (layer[keep] + 1) * n_tokens + query[keep]
    targets = layer[keep] * n_tokens + key[keep]
    n_nodes = (n_layers + 1) * n_tokens
    from scipy.sparse import csr_array

    return csr_array((capacity[keep], (sources, targets)), shape=(n_nodes, n_nodes))
