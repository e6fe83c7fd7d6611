"""Two configurations on the same weights: what changed, head by head."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import pandas as pd
import torch

from explorer.config import ConfigError, ModelConfig, parse_config
from explorer.model import Transformer, build_model, copy_shared_weights
from explorer.trace import AttentionMaps

SHAPE_FIELDS = ("arch", "d_model", "n_heads", "n_layers", "d_ff", "max_tokens")  # change the parameter shapes
B_PREFIX = "b_"  # B's fields in the URL: ?norm=post&b_norm=pre


def default_b(a: ModelConfig) -> ModelConfig:
    """B differs from A in norm placement only: the comparison most people come for."""
    return a.replace(norm="pre" if a.norm == "post" else "post")


def can_share_weights(a: ModelConfig, b: ModelConfig) -> tuple[bool, str]:
    """Whether B can run on A's very weights, and if not, a sentence saying why."""
    changed = [name for name in SHAPE_FIELDS if getattr(a, name) != getattr(b, name)]
    if changed:
        fields = ", ".join(f"{n} ({getattr(a, n)} vs {getattr(b, n)})" for n in changed)
        return False, f"A and B have different parameter shapes: {fields}. Their weights cannot be shared."
    if a.seed != b.seed:
        return False, f"A and B use different seeds ({a.seed} vs {b.seed}), so their weights differ on purpose."
    return True, "A and B share the very same weights; only the settings you changed differ."


def model_for_b(model_a: Transformer, b: ModelConfig) -> Transformer:
    """B's model: a fresh build, carrying A's parameters wherever B has a parameter of the same name and shape."""
    model_b = build_model(b)
    a = model_a.config
    if a is None or not can_share_weights(a, b)[0]:
        return model_b
    copy_shared_weights(model_a, model_b)
    return model_b


def same_parameters(model_a: Transformer, model_b: Transformer) -> bool:
    """True when every parameter the two models both have is identical, tensor by tensor."""
    params_b = dict(model_b.named_parameters())
    common = [(p, params_b[name]) for name, p in model_a.named_parameters() if name in params_b]
    return bool(common) and all(torch.equal(p, q) for p, q in common)


def attention_difference(a: AttentionMaps, b: AttentionMaps) -> np.ndarray:
    """[L, H, Tq, Tk] A - B, for maps of the same shape."""
    _check_same_shape(a, b)
    return a.weights - b.weights


def head_ranking(a: AttentionMaps, b: AttentionMaps) -> pd.DataFrame:
    """layer, head, js_divergence (bits, 0..1; mean over queries with allowed keys in both), max_abs_difference;
    most changed head first."""
    _check_same_shape(a, b)
    rows_used = ~(a.empty_rows | b.empty_rows)  # [Tq]
    divergence = js_divergence(a.weights[:, :, rows_used], b.weights[:, :, rows_used])  # [L, H, Tq']
    mean_divergence = divergence.mean(axis=-1) if rows_used.any() else np.zeros(a.weights.shape[:2])
    max_abs = np.abs(a.weights - b.weights).max(axis=(-2, -1))  # [L, H]
    layers, heads = np.indices(mean_divergence.shape)
    frame = pd.DataFrame(
        {
            "layer": layers.ravel(),
            "head": heads.ravel(),
            "js_divergence": mean_divergence.ravel(),
            "max_abs_difference": max_abs.ravel(),
        }
    )
    return frame.sort_values(["js_divergence", "layer", "head"], ascending=[False, True, True], ignore_index=True)


def js_divergence(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen-Shannon divergence in bits over the last axis of two distributions; 0 for equal rows, 1 at most."""
    p, q = p.astype(np.float64), q.astype(np.float64)
    m = (p + q) / 2
    return (_kl(p, m) + _kl(q, m)) / 2


def _kl(p: np.ndarray, m: np.ndarray) -> np.ndarray:
    terms = np.where(p > 0, p * np.log2(np.where(p > 0, p, 1) / np.where(m > 0, m, 1)), 0.0)
    return terms.sum(axis=-1)


def _check_same_shape(a: AttentionMaps, b: AttentionMaps) -> None:
    if a.weights.shape != b.weights.shape:
        raise ConfigError(
            f"A's attention is {list(a.weights.shape)} and B's is {list(b.weights.shape)} "
            "([layers, heads, query, key]); maps can only be subtracted when they have the same shape."
        )


def to_query(b: ModelConfig, a: ModelConfig) -> dict[str, str]:
    """B's fields that differ from default_b(A), as prefixed URL parameters."""
    reference = default_b(a)
    return {
        B_PREFIX + f.name: str(getattr(b, f.name))
        for f in dataclasses.fields(b)
        if getattr(b, f.name) != getattr(reference, f.name)
    }


def b_from_query(query: Mapping[str, str], a: ModelConfig) -> ModelConfig:
    """B from its prefixed URL parameters, on top of default_b(A)."""
    fields = {key.removeprefix(B_PREFIX): value for key, value in query.items() if key.startswith(B_PREFIX)}
    return parse_config(fields, base=default_b(a))
