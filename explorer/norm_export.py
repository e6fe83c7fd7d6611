"""Downloads of a map shown with what the heads add: explorer.export's CSV and JSON, with ‖α·f(x)‖ beside the weights
(a column, a field), so explorer.export's readers still read them."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from explorer.ablation import Head
from explorer.analysis.stats import check_layer_head
from explorer.config import ModelConfig
from explorer.export import attention_dict, export_frame
from explorer.trace import AttentionMaps

NORM_NOTE = (
    "norm[q][k] = ||alpha_qk * f_h(x_k)||, what the head adds to query q from key k (Kobayashi et al. 2020, "
    "'Attention is Not Only a Weight'): the weight times the size of key k's value vector projected by the head's "
    "slice of the output projection, f_h(x) = (x W_V^h + b_V^h) W_O^h. For the average of heads: the mean over heads. "
    "For a head the run removed, alpha is what mixes its output, not the weights it still computes: 0 when its output "
    "was set to zero; when it was set to its mean over the positions, each key's weight averaged over every query, the "
    "same row for every query, so keys a query may not see (allowed false) add to it too."
)


def norm_matrix(norms: np.ndarray, layer: int, head: int | None) -> np.ndarray:
    """[Tq, Tk] float32 ‖α·f(x)‖ of one head of norms [L, H, Tq, Tk], or the mean of the layer's heads (None)."""
    if head is None:
        return norms[layer].mean(axis=0, dtype=np.float64).astype(np.float32)  # [H, Tq, Tk] -> [Tq, Tk]
    return np.asarray(norms[layer, head], dtype=np.float32)


def norm_attention_csv(maps: AttentionMaps, norms: np.ndarray, layer: int, head: int | None) -> str:
    """explorer.export.attention_csv with a last column, norm: ‖α·f(x)‖ of each (query, key)."""
    check_layer_head(maps, layer, head)
    frame = export_frame(maps, layer, head)
    frame["norm"] = norm_matrix(norms, layer, head).ravel()
    return frame.to_csv(index=False)


def norm_attention_json(
    maps: AttentionMaps,
    norms: np.ndarray,
    layer: int,
    head: int | None,
    config: ModelConfig | None = None,
    removed: Sequence[Head] | None = None,
    removed_with: str = "zero",
) -> str:
    """explorer.export.attention_json with two more fields: norms ([Tq][Tk] ‖α·f(x)‖) and norm_note; `removed` and
    `removed_with` as attention_json takes them."""
    data = attention_dict(maps, layer, head, config, removed, removed_with)
    data["norms"] = [[float(v) for v in row] for row in norm_matrix(norms, layer, head)]  # float32, exact
    data["norm_note"] = NORM_NOTE
    return json.dumps(data, ensure_ascii=False)
