"""Where the residual stream's energy sits: each token's norm and largest value over depth, the token that carries
a massive activation (Sun et al. 2024) and how much of the attention, and of what the heads add, lands on it."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import pandas as pd

from explorer.ablation import Head, HeadAblation
from explorer.analysis.activations import token_norms
from explorer.analysis.norm_attention import mean_mixing
from explorer.config import PAD_TOKEN
from explorer.trace import AttentionMaps, StackTrace, Trace

# Sun, Chen, Kolter & Liu 2024, "Massive Activations in Large Language Models" (section 2): "activations with
# magnitudes larger than 100 and at the same time at least or about 1,000 times larger than the median magnitude of
# its hidden state". Read here as both at once: |x| > MASSIVE_VALUE and |x| >= MASSIVE_RATIO x the median |x| of the
# residual stream after that block (every token and unit of it).
MASSIVE_VALUE = 100.0
MASSIVE_RATIO = 1000.0
MEASURES = ("norm", "max")  # token_energy: the L2 norm of each token's residual vector, or its largest |x|


@dataclass(frozen=True)
class MassiveActivation:
    """One token's massive activation in the residual stream: where it is, from which block, and how large."""

    position: int  # the token's index in the stack's tokens
    piece: str  # the token as axes label it (StackTrace.labels: SmolLM2's "Ġthe" as "␣the")
    block: int  # the first block after which the stream holds it
    blocks: tuple[int, ...]  # every block after which it is massive (it can fade in the last blocks)
    unit: int  # the d_model unit of its largest |x| after `block`
    value: float  # that |x|, after `block`
    ratio: float  # value / the median |x| of the stream after `block`
    others: tuple[int, ...]  # positions of other tokens with a massive activation after some block


def token_max_abs(stack: StackTrace) -> np.ndarray:
    """[L + 1, T] the largest |x| of each token's residual vector, at the input and after each block."""
    return np.abs(stack.residual).max(axis=-1)


def token_energy(stack: StackTrace, measure: str = "norm") -> np.ndarray:
    """[L + 1, T] each token's residual vector measured by `measure`: "norm" (‖x‖₂) or "max" (max |x|)."""
    if measure not in MEASURES:
        raise ValueError(f"measure is one of {', '.join(MEASURES)}, not {measure!r}")
    return token_norms(stack) if measure == "norm" else token_max_abs(stack)


def median_magnitude(stack: StackTrace) -> np.ndarray:
    """[L + 1] the median |x| of the residual stream at the input and after each block (every token and unit)."""
    n = stack.residual.shape[0]
    return np.median(np.abs(stack.residual).reshape(n, -1), axis=-1)


def massive_mask(stack: StackTrace) -> np.ndarray:
    """[L, T] bool: after block l, token t holds a massive activation (the rule stated at MASSIVE_VALUE)."""
    peaks = token_max_abs(stack)[1:]  # [L, T] after each block; the input embeddings are left out
    medians = median_magnitude(stack)[1:, None]  # [L, 1]
    return (peaks > MASSIVE_VALUE) & (peaks >= MASSIVE_RATIO * medians)


def massive_activation(trace: Trace | StackTrace) -> MassiveActivation | None:
    """The token with a massive activation in the residual stream (of the first stack, given a Trace), or None.

    Rule (Sun et al. 2024): a value with |x| > 100 that is at least 1000 times the median |x| of the stream after
    the same block, all tokens and units. The median over the whole stream, not the token's own vector, is the
    paper's "its hidden state", and it is what a massive token stands out from; both thresholds are needed, since a
    stream of tiny values makes a ratio of 1000 easy and a stream that grows everywhere makes 100 easy. When several
    tokens qualify, the one whose |x| gets largest is named, the others listed.
    """
    stack = trace.first if isinstance(trace, Trace) else trace
    massive = massive_mask(stack)  # [L, T]
    if not massive.any():
        return None
    peaks = token_max_abs(stack)[1:]  # [L, T]
    candidates = massive.any(axis=0)  # [T]
    position = int(np.argmax(np.where(massive, peaks, -np.inf).max(axis=0)))
    blocks = tuple(int(b) for b in np.flatnonzero(massive[:, position]))
    block = blocks[0]
    vector = np.abs(stack.residual[block + 1, position])  # [D]
    value = float(vector.max())
    return MassiveActivation(
        position=position,
        piece=stack.labels[position],
        block=block,
        blocks=blocks,
        unit=int(vector.argmax()),
        value=value,
        ratio=value / float(median_magnitude(stack)[block + 1]),
        others=tuple(int(t) for t in np.flatnonzero(candidates) if t != position),
    )


def _seeing(allowed: np.ndarray, key: int) -> np.ndarray:
    """[Tq] bool: the queries allowed to see `key` and at least one other key. A query that may see only that key (a
    causal model's first token) gives it all of its weight whatever the head does, so it is left out."""
    allowed = np.asarray(allowed, dtype=bool)  # [Tq, Tk]
    return allowed[:, key] & (allowed.sum(axis=-1) > 1)


def padding_queries_counted(maps: AttentionMaps, key: int | None = None) -> int:
    """How many [PAD] queries the per-head averages count: those with an allowed key (analysis.stats), or, given
    `key`, those token_shares averages over (_seeing: they may see `key` and another key). A padding mask hides
    [PAD] keys, not their rows: a [PAD] query still attends to every real token."""
    padding = np.array([token == PAD_TOKEN for token in maps.query_tokens], dtype=bool)  # [Tq]
    allowed = np.asarray(maps.allowed, dtype=bool)  # [Tq, Tk]
    counted = allowed.any(axis=-1) if key is None else _seeing(allowed, key)  # [Tq]
    return int((padding & counted).sum())


def _kept_mean(values: np.ndarray, kept: np.ndarray | None) -> np.ndarray:
    """[L] the mean of values [L, H, Q] over the kept heads (kept [L, H] bool; None: every head) and the queries; NaN
    for a layer with no head kept."""
    if kept is None:
        return values.mean(axis=(1, 2))
    counts = kept.sum(axis=1) * values.shape[2]  # [L]
    sums = np.where(kept[:, :, None], values, 0.0).sum(axis=(1, 2))  # [L]
    return np.divide(sums, counts, out=np.full(len(sums), np.nan), where=counts > 0)


def kept_heads(shape: tuple[int, int], removed: Collection[Head]) -> np.ndarray | None:
    """[L, H] bool: the heads a run kept, given the (layer, head) pairs it removed; None when it removed none."""
    if not removed:
        return None
    return HeadAblation.of(removed, *shape).removed[0].numpy() == 0  # [L, H]: the run's own removal, inverted


def key_share(weights: np.ndarray, allowed: np.ndarray, key: int, kept: np.ndarray | None = None) -> np.ndarray:
    """[L] the share one key gets in each layer: weights [L, H, Tq, Tk] (each query row summing to 1, or 0 when it
    sees nothing) at column `key`, averaged over the kept heads (kept_heads; None: all) and over the queries allowed
    to see that key and another one (_seeing); NaN when there are none."""
    queries = _seeing(allowed, key)  # [Tq]
    if not queries.any():
        return np.full(weights.shape[0], np.nan)
    return _kept_mean(weights[:, :, queries, key].astype(np.float64), kept)  # [L]


def norm_key_share(norms: np.ndarray, allowed: np.ndarray, key: int, kept: np.ndarray | None = None) -> np.ndarray:
    """[L] key_share of norm_shares(norms) (norms: norm_attention's [L, H, Tq, Tk] ‖α·f(x)‖), the share of what the
    heads add that comes from `key`, without a second [L, H, Tq, Tk] array: only that key's column is divided by
    its rows' sums (a row that adds nothing counts 0, as norm_shares leaves it), over the kept heads (key_share)."""
    queries = _seeing(allowed, key)  # [Tq]
    if not queries.any():
        return np.full(norms.shape[0], np.nan)
    totals = norms.sum(axis=-1, dtype=np.float64)[:, :, queries]  # [L, H, Tq']
    column = norms[:, :, queries, key].astype(np.float64)  # [L, H, Tq']
    return _kept_mean(np.divide(column, totals, out=np.zeros_like(column), where=totals > 0), kept)  # [L]


def token_shares(
    maps: AttentionMaps,
    position: int,
    norms: np.ndarray | None = None,
    removed: Collection[Head] = (),
    removed_with: str = "zero",
) -> pd.DataFrame:
    """layer, weights, norms: per layer, the share of attention weight on the token at `position` (key_share of the
    weights that mix the heads' outputs) and of what the heads add (norm_key_share of `norms`, norm_attention of the
    same maps, [L, H, Tq, Tk]; NaN without it). A head `removed` (layer, head) with zero adds nothing and is left out
    of both: counted as a share of 0 it made the token look as if it passed on less than it is looked at. One replaced
    by its mean (`removed_with` "mean") still adds, mixed by each key's weight averaged over the queries
    (norm_attention.mean_mixing), and counts with those weights, as norm_attention counts it."""
    mean = removed_with == "mean"
    kept = None if mean else kept_heads(maps.weights.shape[:2], removed)  # [L, H] or None
    weights = key_share(_mean_mixed(maps.weights, removed) if mean else maps.weights, maps.allowed, position, kept)
    added = norm_key_share(norms, maps.allowed, position, kept) if norms is not None else np.full(len(weights), np.nan)
    return pd.DataFrame({"layer": np.arange(len(weights)), "weights": weights, "norms": added})


def _mean_mixed(weights: np.ndarray, removed: Collection[Head]) -> np.ndarray:
    """[L, H, Tq, Tk] the weights that mix each head's output when the `removed` heads are replaced by their mean:
    theirs averaged over the queries (mean_mixing), copied only when a head is removed."""
    if not removed:
        return weights
    mixing = weights.copy()  # [L, H, Tq, Tk]
    for layer, head in removed:
        mixing[layer, head] = mean_mixing(mixing[layer, head])  # [1, Tk] broadcast over the queries
    return mixing


def largest_activation(stack: StackTrace) -> tuple[int, int, float, float]:
    """block, position, |x|, ratio: the largest |x| of the stream after any block, where it is, and its ratio to
    the median |x| of the stream after that block (what massive_activation's rule tests)."""
    peaks = token_max_abs(stack)[1:]  # [L, T]
    block, position = np.unravel_index(int(np.argmax(peaks)), peaks.shape)
    value = float(peaks[block, position])
    return int(block), int(position), value, value / float(median_magnitude(stack)[block + 1])


def focus_token(stack: StackTrace) -> tuple[int, int | None]:
    """position, block: the token with a massive activation and the block it appears after; without one, the token
    with the largest |x| after any block, and None."""
    finding = massive_activation(stack)
    if finding is not None:
        return finding.position, finding.block
    return largest_activation(stack)[1], None
