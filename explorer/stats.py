"""Per-head statistics and tidy tables of attention, as numpy arrays and pandas DataFrames."""

from __future__ import annotations

import numpy as np
import pandas as pd

from explorer.trace import AttentionMaps


def check_layer_head(maps: AttentionMaps, layer: int, head: int | None) -> None:
    """Raise IndexError with a readable message for a layer or head the maps do not have."""
    if not 0 <= layer < maps.n_layers:
        raise IndexError(f"layer {layer} does not exist; this model has layers 0 to {maps.n_layers - 1}.")
    if head is not None and not 0 <= head < maps.n_heads:
        raise IndexError(f"head {head} does not exist; this model has heads 0 to {maps.n_heads - 1}.")


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
    """Entropy in nats of each attention row: [..., Tk] -> [...]; zero weights contribute 0 (0 log 0 = 0)."""
    p = np.asarray(weights, dtype=np.float64)
    safe = np.where(p > 0, p, 1.0)  # log(1) = 0 where p == 0
    return -(p * np.log(safe)).sum(axis=-1)


def head_entropy(maps: AttentionMaps) -> pd.DataFrame:
    """One row per (layer, head): mean entropy over queries that have allowed keys, and the uniform maximum.

    Columns: layer, head, entropy (nats), max_entropy (mean over the same queries of log(number of allowed
    keys): what uniform attention over the allowed keys would score), peakedness (1 - entropy / max_entropy:
    0 = uniform, 1 = one-hot; NaN when every query has a single allowed key). Rows with no allowed key are
    left out; if every row is empty, entropy and max_entropy are NaN.
    """
    valid = ~maps.empty_rows  # [Tq]
    ent = row_entropy(maps.weights)  # [L, H, Tq]
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
