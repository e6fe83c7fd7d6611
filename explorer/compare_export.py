"""Downloads of a comparison: one self-describing JSON, and CSV tables of the per-layer figures and the maps."""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
import pandas as pd

from explorer.compare import MapPair, head_ranking
from explorer.config import ModelConfig

NOTE = (
    "a and b are the two configurations (a is the sidebar). difference[layer][head][query][key] = A's attention "
    "weight minus B's (post-softmax, eval mode, per head); a weight is exactly 0 where the query may not attend to "
    "the key (allowed_a / allowed_b false). js_divergence is the Jensen-Shannon divergence in bits between A's and "
    "B's attention rows, averaged over the queries that have an allowed key in both. per_layer: residual RMS / std "
    "over all tokens and units (layer -1 = the input to the first block), the L2 norm of each block's parameter "
    "gradients for the objective in gradient_objective (A's and B's, each named when they differ), and the mean "
    "over heads of the self-attention entropy in nats."
)

NORMS_NOTE = (
    " norms_difference[layer][head][query][key] = A's ||alpha * f_h(x)|| minus B's, what each head adds from each key "
    "(Kobayashi et al. 2020; explorer.norm_export's norm_note), each side from its own model; a head replaced by its "
    "mean adds to every query from every key, so it can be non-zero where allowed is false."
)


def _floats(array: np.ndarray) -> Any:
    """Nested lists of Python floats (float32 values are exactly representable); NaN becomes null."""
    values = np.asarray(array, dtype=np.float64)
    return np.where(np.isfinite(values), values, None).tolist()


def _records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows of a per_layer_comparison table as plain Python values; NaN (a side without that layer) is None."""
    rows = []
    for row in table[["statistic", "layer", "a", "b", "a_minus_b"]].to_dict("records"):
        rows.append(
            {
                "statistic": str(row["statistic"]),
                "layer": int(row["layer"]),
                **{k: float(row[k]) if np.isfinite(row[k]) else None for k in ("a", "b", "a_minus_b")},
            }
        )
    return rows


def pair_dict(pair: MapPair, aligned: bool = False, measured: MapPair | None = None) -> dict[str, Any]:
    """One kind of attention: tokens, masks, the difference maps of the layers both have (when their heads and
    tokens match), the head ranking when A and B have the same shape, and why anything is left out; with
    `measured` (the pair carrying ‖α·f(x)‖), norms_difference beside the weights' difference."""
    out: dict[str, Any] = {"kind": pair.label, "stack": pair.stack, "b_aligned_to_a_tokens": aligned}
    for side, maps in (("a", pair.a), ("b", pair.b)):
        out[f"{side}_shape"] = None if maps is None else list(maps.weights.shape)
        out[f"{side}_query_tokens"] = None if maps is None else list(maps.query_tokens)
        out[f"{side}_key_tokens"] = None if maps is None else list(maps.key_tokens)
        out[f"allowed_{side}"] = None if maps is None else np.asarray(maps.allowed, bool).tolist()
    common = pair.common_layers
    out["difference"] = out["head_ranking"] = out["not_compared"] = None
    if common:
        assert pair.a is not None and pair.b is not None
        out["difference"] = _floats(pair.a.weights[:common] - pair.b.weights[:common])  # [L][H][Tq][Tk]
    if common and measured is not None:
        assert measured.a is not None and measured.b is not None
        out["norms_difference"] = _floats(measured.a.weights[:common] - measured.b.weights[:common])  # [L][H][Tq][Tk]
    if pair.same_shape:
        assert pair.a is not None and pair.b is not None
        out["head_ranking"] = head_ranking(pair.a, pair.b).to_dict(orient="records")
    else:
        out["not_compared"] = _why_not(pair)
    return out


def _why_not(pair: MapPair) -> str:
    if pair.a is None or pair.b is None:
        return f"only {'B' if pair.a is None else 'A'} has {pair.label}"
    shapes = (
        f"A's maps are {list(pair.a.weights.shape)} and B's {list(pair.b.weights.shape)} ([layers, heads, query, key])"
    )
    if pair.common_layers:
        return (
            f"{shapes}: the difference covers layers 0 to {pair.common_layers - 1}, which both have; heads are "
            "ranked only when the shapes are the same"
        )
    return f"{shapes}: maps can only be subtracted when they have the same heads and tokens"


def comparison_dict(
    a: ModelConfig,
    b: ModelConfig,
    inputs: dict[str, Any],
    sharing: str,
    pairs: list[MapPair],
    per_layer: dict[str, pd.DataFrame],
    gradient_objective: str,
    aligned: bool = False,
    measured: list[MapPair] | None = None,
) -> dict[str, Any]:
    """Everything the Compare page shows, as plain data: both configurations, the inputs, whether the weights
    are shared, per-layer figures per stack, what their gradient norms measure (`gradient_objective`: A's and B's,
    compare_text.objectives_text), and every pair of attention maps with A - B; with `measured` (the pairs carrying
    ‖α·f(x)‖, in the same order: what the page draws with Show: norms), A - B of those too."""
    norms = [None] * len(pairs) if measured is None else measured
    return {
        "a": a.to_dict(),
        "b": b.to_dict(),
        "inputs": inputs,
        "weights": sharing,
        "attention": [pair_dict(p, aligned and p.stack == 0, n) for p, n in zip(pairs, norms, strict=True)],
        "per_layer": {stack: _records(table) for stack, table in per_layer.items()},
        "gradient_objective": gradient_objective,
        "note": NOTE + ("" if measured is None else NORMS_NOTE),
    }


def comparison_json(*args: Any, **kwargs: Any) -> str:
    """comparison_dict as JSON text (UTF-8, tokens unescaped; NaN written as null)."""
    return json.dumps(comparison_dict(*args, **kwargs), ensure_ascii=False)


def layers_csv(per_layer: dict[str, pd.DataFrame]) -> str:
    """stack, statistic, layer, a, b, a_minus_b: one row per statistic and layer (empty where a side lacks it)."""
    frames = [table.assign(stack=stack) for stack, table in per_layer.items()]
    frame = pd.concat(frames, ignore_index=True)[["stack", "statistic", "layer", "a", "b", "a_minus_b"]]
    return frame.to_csv(index=False)


NORM_COLUMNS = ["a_norm", "b_norm", "a_minus_b_norm"]


def maps_frame(pair: MapPair, measured: MapPair | None = None) -> pd.DataFrame:
    """kind, layer, head, query_index, query_token, key_index, key_token, b_query_token, b_key_token, a, b,
    a_minus_b (the weights), allowed_a, allowed_b: one row per cell of every layer and head both have
    (MapPair.common_layers; an empty frame when none). The tokens are A's; B's are the same unless B reads another
    input. With `measured` (the same pair carrying ‖α·f(x)‖ as its weights: what Compare draws with Show: norms),
    a_norm, b_norm and a_minus_b_norm too."""
    columns = ["kind", "layer", "head", "query_index", "query_token", "key_index", "key_token"]
    columns += ["b_query_token", "b_key_token", "a", "b", "a_minus_b", "allowed_a", "allowed_b"]
    n_layers = pair.common_layers
    if not n_layers:
        return pd.DataFrame(columns=columns + ([] if measured is None else NORM_COLUMNS))
    assert pair.a is not None and pair.b is not None
    a, b = pair.a.weights[:n_layers], pair.b.weights[:n_layers]  # [L, H, Tq, Tk] each
    _, n_heads, tq, tk = a.shape
    layer, head, q, k = (x.ravel() for x in np.indices((n_layers, n_heads, tq, tk)))
    frame = pd.DataFrame(
        {
            "kind": pair.label,
            "layer": layer,
            "head": head,
            "query_index": q,
            "query_token": np.asarray(pair.a.query_tokens, dtype=object)[q],
            "key_index": k,
            "key_token": np.asarray(pair.a.key_tokens, dtype=object)[k],
            "b_query_token": np.asarray(pair.b.query_tokens, dtype=object)[q],
            "b_key_token": np.asarray(pair.b.key_tokens, dtype=object)[k],
            "a": a.ravel(),
            "b": b.ravel(),
            "a_minus_b": (a - b).ravel(),
            "allowed_a": np.asarray(pair.a.allowed, bool)[q, k],
            "allowed_b": np.asarray(pair.b.allowed, bool)[q, k],
        },
        columns=columns,
    )
    if measured is not None:
        assert measured.a is not None and measured.b is not None
        norm_a, norm_b = measured.a.weights[:n_layers], measured.b.weights[:n_layers]  # [L, H, Tq, Tk] each
        frame["a_norm"], frame["b_norm"], frame["a_minus_b_norm"] = (
            norm_a.ravel(),
            norm_b.ravel(),
            (norm_a - norm_b).ravel(),
        )
    return frame


def maps_csv(pairs: list[MapPair], measured: list[MapPair] | None = None) -> str:
    """maps_frame of every pair that can be subtracted, as one CSV text; with `measured` (the pairs carrying
    ‖α·f(x)‖, in the same order), the norm columns too."""
    frames = [maps_frame(pair, None if measured is None else measured[i]) for i, pair in enumerate(pairs)]
    return pd.concat(frames, ignore_index=True).to_csv(index=False)


def read_maps_csv(text: str) -> pd.DataFrame:
    """Read maps_csv back, a, b and a_minus_b (and the norm columns, when there) as float32 (the values the page
    computed), tokens as written."""
    tokens = {column: str for column in ("query_token", "key_token", "b_query_token", "b_key_token")}
    frame = pd.read_csv(io.StringIO(text), dtype=tokens, keep_default_na=False)
    for column in ("a", "b", "a_minus_b", *(c for c in NORM_COLUMNS if c in frame)):
        frame[column] = frame[column].astype(np.float32)
    return frame
