"""What flipping a trained checkpoint's norm placement did, in numbers and in plain words."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.compare import head_ranking
from explorer.config import ModelConfig
from explorer.numbers import readable
from explorer.trace import Trace

# A head "changed" when the mean Jensen-Shannon divergence of its rows reaches 0.1 bit (0 = same rows, 1 = rows
# on disjoint keys): about what separates attention spread evenly over two keys from 80 % on one of them.
CHANGED_BITS = 0.1


@dataclass(frozen=True)
class FlipEffect:
    """A (as trained) against B (the same weights, the other norm placement) on one text."""

    n_heads: int  # every head of every layer
    n_changed: int  # heads whose mean JS divergence reaches CHANGED_BITS
    most_changed: tuple[int, int, float]  # (layer, head, bits) of the head that changed most
    first_changed_layer: int | None  # the first layer with a changed head, None when none changed
    rms_a: np.ndarray  # [L + 1] residual RMS over depth (index 0: the input), as trained
    rms_b: np.ndarray  # [L + 1] the same, with the norm flipped


def flip_effect(trace_a: Trace, trace_b: Trace) -> FlipEffect:
    """Compare two runs of one checkpoint on one text: as trained (A) and with its norm placement flipped (B)."""
    ranking = head_ranking(trace_a.first.self_attention, trace_b.first.self_attention)
    changed = ranking[ranking["js_divergence"] >= CHANGED_BITS]
    top = ranking.iloc[0]
    return FlipEffect(
        n_heads=len(ranking),
        n_changed=len(changed),
        most_changed=(int(top["layer"]), int(top["head"]), float(top["js_divergence"])),
        first_changed_layer=int(changed["layer"].min()) if len(changed) else None,
        rms_a=_rms_over_depth(trace_a),
        rms_b=_rms_over_depth(trace_b),
    )


def _rms_over_depth(trace: Trace) -> np.ndarray:
    residual = trace.residual.astype(np.float64)  # [L + 1, T, D]
    return np.sqrt((residual**2).mean(axis=(1, 2)))  # [L + 1]


def flip_words(effect: FlipEffect, a: ModelConfig, b: ModelConfig, title: str) -> str:
    """The effect in plain words, for a reader who knows what post- and pre-norm mean."""
    layer, head, bits = effect.most_changed
    heads = (
        f"{effect.n_changed} of its {effect.n_heads} heads attend differently (a mean Jensen–Shannon divergence of "
        f"{CHANGED_BITS} bit or more), from layer {effect.first_changed_layer} on; the most changed is layer {layer} "
        f"head {head} ({bits:.2f} bit)."
        if effect.n_changed
        else f"none of its {effect.n_heads} heads attends much differently (every one below {CHANGED_BITS} bit)."
    )
    last = len(effect.rms_a) - 1
    stream = (
        f"The residual stream's RMS after the last block goes from {readable(effect.rms_a[-1])} to "
        f"{readable(effect.rms_b[-1])} (block {last - 1})."
    )
    if b.norm == "pre":
        why = (
            "Pre-norm never normalises the stream itself, only each sub-layer's copy of it, so what post-norm kept "
            "near unit size now piles up block after block."
        )
    else:
        why = (
            "Post-norm normalises the stream after every block, so the growth the pre-norm model relied on (a few "
            "large directions carried from block to block) is squashed each time."
        )
    return (
        f"{title} was trained {a.norm}-norm. Run {b.norm}-norm on the very same weights, {heads} {stream} {why} "
        "B is therefore not a model anyone trained: it shows how much the trained computation depends on where "
        "the norm sits."
    )
