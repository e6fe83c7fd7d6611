"""Per-head statistics and tidy tables of attention, as numpy arrays and pandas DataFrames."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from explorer.arguments import whole_in
from explorer.trace import AttentionMaps

SMALLEST_FLOAT32 = np.finfo(np.float32).tiny  # the smallest normal float32, about 1.2e-38
CHUNK_FLOATS = 1 << 20  # row_entropy's buffer: 4 MB, two of them in a 2-core machine's caches


def check_layer_head(maps: AttentionMaps, layer: int, head: int | None) -> None:
    """A ConfigError naming what the maps have, for a layer or head they do not (-1 and 1.0 included: numpy would
    read the first as the last layer and fail deep inside on the second)."""
    whole_in("layer", layer, 0, maps.n_layers - 1)
    if head is not None:
        whole_in("head", head, 0, maps.n_heads - 1)


def head_average(maps: AttentionMaps, layer: int) -> np.ndarray:
    """[Tq, Tk] float32: the plain mean of one layer's heads (an average, not something the model computes)."""
    check_layer_head(maps, layer, None)
    return maps.weights[layer].mean(axis=0, dtype=np.float64).astype(np.float32)  # [H, Tq, Tk] -> [Tq, Tk]


def attention_matrix(maps: AttentionMaps, layer: int, head: int | None) -> np.ndarray:
    """[Tq, Tk] float32 weights of one head, or the head average when head is None."""
    check_layer_head(maps, layer, head)
    if head is None:
        return head_average(maps, layer)
    return np.asarray(maps.weights[layer, head], dtype=np.float32)


def row_entropy(weights: np.ndarray) -> np.ndarray:
    """Entropy in nats of each attention row: [..., Tk] -> [...]; zero weights contribute 0 (0 log 0 = 0).

    The rows go through in chunks of about CHUNK_FLOATS numbers, each into one reused buffer: the logs of MiniLM's
    [6, 12, 512, 512] weights had taken 151 MB of new memory, whose first writes cost this VM as much as the logs
    themselves (190-207 ms in a fresh process, against 75-103 ms chunked)."""
    p = np.asarray(weights, dtype=np.float32)
    rows = p.reshape(math.prod(p.shape[:-1]), p.shape[-1])  # [N, Tk]
    entropy = np.empty(len(rows), dtype=np.float64)  # [N]
    step = max(1, CHUNK_FLOATS // max(1, rows.shape[1]))
    buffer = np.empty((min(step, len(rows)), rows.shape[1]), dtype=np.float32)  # [step, Tk]
    for start in range(0, len(rows), step):
        part = rows[start : start + step]  # [n, Tk]
        log_p = buffer[: len(part)]
        # float32 logs, twice as fast; their error (about 1e-7 nats) adds up in float64 below. A weight of 0 takes
        # the log of the smallest float32 instead, finite, so it adds 0 x log = 0: 0 log 0 = 0 without a mask
        np.log(np.maximum(part, SMALLEST_FLOAT32, out=log_p), out=log_p)
        entropy[start : start + step] = -np.einsum("nk,nk->n", part, log_p, dtype=np.float64)
    return entropy.reshape(p.shape[:-1])  # [...]


def head_entropy(maps: AttentionMaps, entropy: np.ndarray | None = None) -> pd.DataFrame:
    """One row per (layer, head): mean entropy over queries that have allowed keys, and the uniform maximum.

    Columns: layer, head, entropy (nats), max_entropy (mean over the same queries of log(number of allowed
    keys): what uniform attention over the allowed keys would score), peakedness (1 - entropy / max_entropy:
    0 = uniform, 1 = one-hot; NaN when every query has a single allowed key). Rows with no allowed key are
    left out; if every row is empty, entropy and max_entropy are NaN. `entropy` [L, H, Tq] is row_entropy of
    maps.weights when the caller has it already.
    """
    valid = ~maps.empty_rows  # [Tq]
    ent = row_entropy(maps.weights) if entropy is None else entropy  # [L, H, Tq]
    if ent.shape != maps.weights.shape[:3]:
        raise ValueError(f"entropy has shape {ent.shape}; the maps have {maps.weights.shape[:3]} rows.")
    n_allowed = maps.allowed.sum(axis=-1)  # [Tq]
    layers, heads = np.meshgrid(np.arange(maps.n_layers), np.arange(maps.n_heads), indexing="ij")  # [L, H] each
    if valid.any():
        mean_ent = ent[:, :, valid].mean(axis=-1)  # [L, H]
        max_ent = float(np.log(n_allowed[valid]).mean())
    else:
        mean_ent = np.full(layers.shape, np.nan)
        max_ent = float("nan")
    with np.errstate(divide="ignore", invalid="ignore"):
        peaked = 1.0 - mean_ent / max_ent if max_ent > 0 else np.full(layers.shape, np.nan)
    return pd.DataFrame(
        {
            "layer": layers.ravel(),
            "head": heads.ravel(),
            "entropy": mean_ent.ravel(),
            "max_entropy": np.full(layers.size, max_ent),
            "peakedness": np.asarray(peaked).ravel(),
        }
    )


def attention_frame(maps: AttentionMaps, layer: int, head: int | None) -> pd.DataFrame:
    """Tidy table of one map, one row per (query, key); head None gives the head average.

    Columns: query_index, query_token, key_index, key_token, weight (float32; exactly 0 where masked),
    allowed (True = the query may attend to the key).
    """
    w = attention_matrix(maps, layer, head)  # [Tq, Tk]
    tq, tk = w.shape
    qi, ki = np.meshgrid(np.arange(tq), np.arange(tk), indexing="ij")  # [Tq, Tk] each
    return pd.DataFrame(
        {
            "query_index": qi.ravel(),
            "query_token": np.asarray(maps.query_tokens, dtype=object)[qi.ravel()],
            "key_index": ki.ravel(),
            "key_token": np.asarray(maps.key_tokens, dtype=object)[ki.ravel()],
            "weight": w.ravel(),
            "allowed": np.asarray(maps.allowed, dtype=bool).ravel(),
        }
    )


COVERED_MASS = 0.9  # head_sparsity: the share of a query's attention that its fewest keys must hold


def _valid_queries(maps: AttentionMaps) -> np.ndarray:
    """[Tq] bool: queries with at least one allowed key (the others have all-zero rows)."""
    return ~maps.empty_rows


def _head_frame(maps: AttentionMaps, columns: dict[str, np.ndarray]) -> pd.DataFrame:
    """layer, head, then one column per [L, H] array (or a scalar broadcast to every head)."""
    layers, heads = np.meshgrid(np.arange(maps.n_layers), np.arange(maps.n_heads), indexing="ij")  # [L, H] each
    data: dict[str, np.ndarray] = {"layer": layers.ravel(), "head": heads.ravel()}
    for name, values in columns.items():
        data[name] = np.broadcast_to(np.asarray(values, dtype=np.float64), layers.shape).ravel()
    return pd.DataFrame(data)


def head_mean_distance(maps: AttentionMaps) -> pd.DataFrame:
    """One row per (layer, head): how far, in positions, each head looks on average.

    Columns: layer, head, distance (mean over queries that have allowed keys of sum_k w[q, k] |q - k|),
    uniform_distance (the same for uniform attention over the allowed keys: a baseline that depends only on the
    mask and the length). 0 means every query attends to itself. NaN when no query has an allowed key.
    Meaningful for self-attention; for cross-attention q and k index different sentences.
    """
    valid = _valid_queries(maps)  # [Tq]
    tq, tk = maps.allowed.shape
    offset = np.abs(np.arange(tq)[:, None] - np.arange(tk)[None, :]).astype(np.float64)  # [Tq, Tk] |q - k|
    if not valid.any():
        nan = np.full((maps.n_layers, maps.n_heads), np.nan)
        return _head_frame(maps, {"distance": nan, "uniform_distance": np.nan})
    per_query = np.stack([(layer * offset).sum(axis=-1) for layer in maps.weights])  # [L, H, Tq], a layer at a time
    allowed = maps.allowed[valid].astype(np.float64)  # [Tv, Tk]
    uniform = ((allowed * offset[valid]).sum(axis=-1) / allowed.sum(axis=-1)).mean()
    return _head_frame(maps, {"distance": per_query[:, :, valid].mean(axis=-1), "uniform_distance": uniform})


def keys_for_mass(weights: np.ndarray, mass: float = COVERED_MASS) -> np.ndarray:
    """[..., Tk] -> [...]: the fewest keys whose weights add up to at least `mass` (0 for an all-zero row).
    A float32 row that should reach the mass exactly (0.9 + 0.1) is allowed a rounding slack of 1e-6."""
    ranked = -np.sort(-np.asarray(weights, dtype=np.float64), axis=-1)  # [..., Tk] largest first
    reached = np.cumsum(ranked, axis=-1) >= mass - 1e-6  # [..., Tk]
    count = reached.argmax(axis=-1) + 1  # the first index where the running sum reaches the mass
    return np.where(reached.any(axis=-1), count, 0)


def head_sparsity(maps: AttentionMaps, mass: float = COVERED_MASS) -> pd.DataFrame:
    """One row per (layer, head): how few keys carry most of each query's attention.

    Columns: layer, head, keys_for_mass (mean over queries with allowed keys of the fewest keys holding `mass`,
    0.9 by default, of the query's weight), allowed_keys (mean number of allowed keys over the same queries),
    sparsity (mean over those queries of 1 - keys_for_mass / allowed_keys: the share of its allowed keys a query
    can ignore and still keep 90% of its attention; 0 when it needs all of them, 1 - 1/n when one key of n
    suffices). NaN when no query has an allowed key.
    """
    valid = _valid_queries(maps)  # [Tq]
    if not valid.any():
        nan = np.full((maps.n_layers, maps.n_heads), np.nan)
        return _head_frame(maps, {"keys_for_mass": nan, "allowed_keys": np.nan, "sparsity": nan})
    needed = np.stack([keys_for_mass(layer[:, valid], mass) for layer in maps.weights]).astype(np.float64)  # [L, H, Tv]
    n_allowed = maps.allowed[valid].sum(axis=-1).astype(np.float64)  # [Tv]
    return _head_frame(
        maps,
        {
            "keys_for_mass": needed.mean(axis=-1),
            "allowed_keys": n_allowed.mean(),
            "sparsity": (1.0 - needed / n_allowed).mean(axis=-1),
        },
    )


def head_grid(df: pd.DataFrame, column: str) -> np.ndarray:
    """[L, H] float64 grid of one column of a per-head table (head_entropy, head_mean_distance, head_sparsity)."""
    n_layers, n_heads = int(df["layer"].max()) + 1, int(df["head"].max()) + 1
    grid = np.full((n_layers, n_heads), np.nan)
    grid[df["layer"].to_numpy(), df["head"].to_numpy()] = df[column].to_numpy(dtype=np.float64)
    return grid
