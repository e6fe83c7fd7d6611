"""Per-layer activation statistics of one stack: what the residual stream and each sub-layer carry."""

from __future__ import annotations

import numpy as np
import pandas as pd

from explorer.numbers import readable
from explorer.trace import StackTrace

POINTS = ("residual", "attention output", "FFN hidden", "FFN output")  # where a histogram can look
CROSS_POINT = "cross-attention output"  # also there in the decoder of an encoder-decoder
STATISTICS = ("mean", "std", "rms", "max_abs")
_KEYS = {"attention output": "attn.out", CROSS_POINT: "cross.out", "FFN hidden": "ffn.hidden", "FFN output": "ffn.out"}


def points(stack: StackTrace) -> tuple[str, ...]:
    """The points of this stack's blocks: POINTS, with the cross-attention output after the attention output
    when the blocks have cross-attention."""
    if "blocks.0.cross.out" not in stack.activations:
        return POINTS
    return POINTS[:2] + (CROSS_POINT,) + POINTS[2:]


def activation_values(stack: StackTrace, layer: int, point: str) -> np.ndarray:
    """The values at one point of one block, as [T, width]. 'residual' at layer l is the stream after block l
    (layer -1: the input to the first block)."""
    if point == "residual":
        return stack.residual[layer + 1]  # [T, D]
    return stack.activations[f"blocks.{layer}.{_KEYS[point]}"]  # [T, D] or [T, F]


def layer_statistics(stack: StackTrace) -> pd.DataFrame:
    """layer, point, mean, std, rms, max_abs over all tokens and units; the residual's layer -1 is the input.
    Also each norm's input and output ('attn LayerNorm in' ...; 'attn output LayerNorm in' ... for the norm on a
    sub-layer's output in res-post and peri), which show what the norms undo."""
    rows = [_row(-1, "residual", stack.residual[0])]
    n_layers = stack.residual.shape[0] - 1
    norms = [
        (label, key)
        for name in ("attn", "cross", "ffn")
        for label, key in ((name, f"{name}.ln"), (f"{name} output", f"{name}.out_ln"))
        if f"blocks.0.{key}_in" in stack.activations
    ]  # (row label, trace name before _in / _out): the input-side norm first, as the block runs them
    for layer in range(n_layers):
        rows += [_row(layer, point, activation_values(stack, layer, point)) for point in points(stack)]
        for label, key in norms:
            rows.append(_row(layer, f"{label} LayerNorm in", stack.activations[f"blocks.{layer}.{key}_in"]))
            rows.append(_row(layer, f"{label} LayerNorm out", stack.activations[f"blocks.{layer}.{key}_out"]))
    return pd.DataFrame(rows)


def token_norms(stack: StackTrace) -> np.ndarray:
    """[L + 1, T] float64: the L2 norm of each token's residual vector, at the input and after each block. Squared in
    float64 a layer at a time: float32 overflows past |x| of about 1e19 (an imported model's own inputs can be that
    large), and a float64 copy of SmolLM2's whole stream on 512 pieces would be 73 MB."""
    return np.stack([np.linalg.norm(layer.astype(np.float64), axis=-1) for layer in stack.residual])  # [L + 1, T]


def ffn_zero_fraction(stack: StackTrace) -> pd.DataFrame:
    """layer, zero_fraction: the share of feed-forward hidden units that are exactly 0 (ReLU's dead half)."""
    n_layers = stack.residual.shape[0] - 1
    fractions = [float((stack.activations[f"blocks.{i}.ffn.hidden"] == 0).mean()) for i in range(n_layers)]
    return pd.DataFrame({"layer": range(n_layers), "zero_fraction": fractions})


def value_histogram(values: np.ndarray, bins: int = 60) -> pd.DataFrame:
    """left, right, count: equal-width bins from the smallest to the largest value (all values counted; the
    last bin includes its right edge), plus exact_zeros, the number of values that are exactly 0 (the same on
    every row), which a ReLU makes common and a bin hides."""
    flat = np.asarray(values, dtype=np.float64).ravel()
    low, high = float(flat.min()), float(flat.max())
    if low == high:  # one value: a single bin around it
        low, high = low - 0.5, high + 0.5
    counts, edges = np.histogram(flat, bins=bins, range=(low, high))
    return pd.DataFrame(
        {"left": edges[:-1], "right": edges[1:], "count": counts, "exact_zeros": int((flat == 0).sum())}
    )


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


def depth_story(stats: pd.DataFrame, norm: str, norm_kind: str = "LayerNorm") -> str:
    """One or two sentences on what the residual stream does over depth, with the numbers of this run; `norm_kind`:
    the model's kind of norm (anatomy.norm_name), whose bias, if it has one, the final norm adds."""
    residual = stats[stats["point"] == "residual"].sort_values("layer")
    rms = residual["rms"].to_numpy()
    after = residual[residual["layer"] >= 0]
    n_blocks = len(after)
    if norm == "post":
        low, high = after["std"].min(), after["std"].max()
        spread = f"{low:.4f}" if f"{low:.4f}" == f"{high:.4f}" else f"{low:.4f} to {high:.4f}"
        blocks = "its one block" if n_blocks == 1 else f"each of the {n_blocks} blocks"
        # a trained LayerNorm's gain and bias move the stream off std 1 (MiniLM: 0.45 to 0.62), which "re-normalised"
        # alone left unexplained
        scaled = "" if abs(low - 1) < 0.01 and abs(high - 1) < 0.01 else ", the scale its learned gain and bias set"
        return (
            f"Post-norm: every block ends with a LayerNorm, so the residual stream after {blocks} is re-normalised: "
            f"std {spread}{scaled}, mean within {readable(after['mean'].abs().max(), 2)} of 0 (the input had RMS "
            f"{rms[0]:.3f})."
        )
    steps = np.diff(rms)
    trend = (
        "rising in every block" if (steps > 0).all() else f"rising in {int((steps > 0).sum())} of {len(steps)} blocks"
    )
    grew = rms[-1] > rms[0]
    growth = (
        f"the residual RMS goes from {readable(rms[0])} (input) to {readable(rms[-1])} after block {n_blocks - 1}, "
        f"{readable(rms[-1] / rms[0])}× the input, {trend}"
    )
    final = (
        "Only the final norm, after the last block, brings it back to RMS 1, times its gain (1 at initialisation, "
        "learned in training)."
        if norm_kind == "RMSNorm"  # no bias
        else "Only the final norm, after the last block, brings it back to RMS 1, times its gain, plus its bias (1 "
        "and 0 at initialisation, learned in training)."
    )
    if norm == "pre":
        return (
            "Pre-norm: each sub-layer reads a normalised copy but adds its output to a stream that is never "
            f"normalised itself, {'so' if grew else 'so it tends to grow with depth; here, though,'} {growth}"
            f"{'' if grew else ': a sub-layer can also add something that cancels part of the stream'}. {final}"
        )
    reads = "reads the raw stream" if norm == "res-post" else "reads a normalised copy"
    return (
        f"{norm.capitalize()}-norm: each sub-layer {reads} and adds a normalised output, RMS about its norm's gain "
        "(1 before training), so the stream can grow by at most about that much per sub-layer, however large the "
        f"sub-layer's own output: {growth}. {final}"
    )
