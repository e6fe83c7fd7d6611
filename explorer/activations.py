"""Per-layer activation statistics of one stack: what the residual stream and each sub-layer carry."""

from __future__ import annotations

import numpy as np
import pandas as pd

from explorer.trace import StackTrace

POINTS = ("residual", "attention output", "FFN hidden", "FFN output")  # where a histogram can look
STATISTICS = ("mean", "std", "rms", "max_abs")


def activation_values(stack: StackTrace, layer: int, point: str) -> np.ndarray:
    """The values at one point of one block, as [T, width]. 'residual' at layer l is the stream after block l
    (layer -1: the input, embedding + position)."""
    if point == "residual":
        return stack.residual[layer + 1]  # [T, D]
    key = {"attention output": "attn.out", "FFN hidden": "ffn.hidden", "FFN output": "ffn.out"}[point]
    return stack.activations[f"blocks.{layer}.{key}"]  # [T, D] or [T, F]


def layer_statistics(stack: StackTrace) -> pd.DataFrame:
    """layer, point, mean, std, rms, max_abs over all tokens and units; the residual's layer -1 is the input.
    Also each LayerNorm's input and output ('attn LayerNorm in' ...), which show what the norms undo."""
    rows = [_row(-1, "residual", stack.residual[0])]
    n_layers = stack.residual.shape[0] - 1
    sublayers = [name for name in ("attn", "cross", "ffn") if f"blocks.0.{name}.ln_in" in stack.activations]
    for layer in range(n_layers):
        rows += [_row(layer, point, activation_values(stack, layer, point)) for point in POINTS]
        for name in sublayers:
            rows.append(_row(layer, f"{name} LayerNorm in", stack.activations[f"blocks.{layer}.{name}.ln_in"]))
            rows.append(_row(layer, f"{name} LayerNorm out", stack.activations[f"blocks.{layer}.{name}.ln_out"]))
    return pd.DataFrame(rows)


def token_norms(stack: StackTrace) -> np.ndarray:
    """[L + 1, T] the L2 norm of each token's residual vector, at the input and after each block."""
    return np.linalg.norm(stack.residual, axis=-1)


def ffn_zero_fraction(stack: StackTrace) -> pd.DataFrame:
    """layer, zero_fraction: the share of feed-forward hidden units that are exactly 0 (ReLU's dead half)."""
    n_layers = stack.residual.shape[0] - 1
    fractions = [float((stack.activations[f"blocks.{i}.ffn.hidden"] == 0).mean()) for i in range(n_layers)]
    return pd.DataFrame({"layer": range(n_layers), "zero_fraction": fractions})


def _row(layer: int, point: str, values: np.ndarray) -> dict[str, float | int | str]:
    values = values.astype(np.float64)
    return {
        "layer": layer,
        "point": point,
        "mean": float(values.mean()),
        "std": float(values.std()),
        "rms": float(np.sqrt((values**2).mean())),
        "max_abs": float(np.abs(values).max()),
    }
