"""What flipping a trained checkpoint's norm placement did, in numbers and in plain words."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from explorer.analysis.placements import rms_over_depth
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


def flip_effect(trace_a: Trace, trace_b: Trace, ranking: pd.DataFrame | None = None) -> FlipEffect:
    """Compare two runs of one checkpoint on one text: as trained (A) and with its norm placement flipped (B).
    `ranking`: head_ranking of their first stack's self-attention, when the caller has it already."""
    if ranking is None:
        ranking = head_ranking(trace_a.first.self_attention, trace_b.first.self_attention)
    changed = ranking[ranking["js_divergence"] >= CHANGED_BITS]
    top = ranking.iloc[0]
    return FlipEffect(
        n_heads=len(ranking),
        n_changed=len(changed),
        most_changed=(int(top["layer"]), int(top["head"]), float(top["js_divergence"])),
        first_changed_layer=int(changed["layer"].min()) if len(changed) else None,
        rms_a=rms_over_depth(trace_a.first),
        rms_b=rms_over_depth(trace_b.first),
    )


# What each placement normalises (explorer.config.NORM_FORMULAS): a sub-layer's input, its output, the stream itself.
READS_NORMALISED = {"post": False, "pre": True, "res-post": False, "peri": True}  # f(Norm(x))
ADDS_NORMALISED = {"post": False, "pre": False, "res-post": True, "peri": True}  # x + Norm(f(.))
NORMALISES = {
    "pre": "each sub-layer's copy of it",
    "res-post": "what each sub-layer adds to it",
    "peri": "each sub-layer's copy of it and what the sub-layer adds",
}


def kept_range(rms: np.ndarray | None) -> str:
    """The residual RMS a post-norm stream kept after each block, in brackets ("" when not measured): a LayerNorm's
    trained gain sets it, not 1."""
    if rms is None or not len(rms):
        return ""
    low, high = readable(float(np.min(rms)), 2), readable(float(np.max(rms)), 2)
    return f" (an RMS of {low if low == high else f'{low} to {high}'} after each block here)"


def why_it_changes(a: str, b: str, rms_a: np.ndarray | None = None) -> str:
    """Why running weights made with placement `a` with placement `b` changes the computation, in a sentence or two.
    `rms_a`: A's residual RMS after each block, when measured (said for a post-norm A)."""
    if a == b:
        return f"Both are {a}-norm: nothing about the norms changed."
    if b == "post":
        return (
            "Post-norm normalises the stream after every sub-layer, so the growth the "
            f"{a}-norm model relied on (a few large directions carried from block to block) is squashed each time."
        )
    if a == "post":
        growth = "piles up block after block" if b == "pre" else "grows by one normalised update per sub-layer, at most"
        return (
            f"{b.capitalize()}-norm never normalises the stream itself, only {NORMALISES[b]}, so the stream, which "
            f"post-norm kept bounded{kept_range(rms_a)}, now {growth}."
        )
    parts = []
    if READS_NORMALISED[a] and READS_NORMALISED[b]:
        parts.append("the sub-layers still read the stream through the same trained input norms")
    elif READS_NORMALISED[a]:
        parts.append(f"the sub-layers now read the raw stream, which the {a}-norm model only ever saw through a norm")
    elif READS_NORMALISED[b]:
        parts.append(
            "the sub-layers now read the stream through input norms that start at identity (each token rescaled to "
            f"unit size), where the {a}-norm model read it raw"
        )
    if ADDS_NORMALISED[a] and ADDS_NORMALISED[b]:
        parts.append("what each sub-layer adds still goes through the same trained output norms")
    elif ADDS_NORMALISED[a]:
        parts.append(
            "what each sub-layer adds is no longer normalised, so each update keeps the size the sub-layer gives it"
        )
    elif ADDS_NORMALISED[b]:
        parts.append(
            "what each sub-layer adds now goes through output norms that start at identity, so each update is rescaled "
            f"to unit size per token, whatever size the {a}-norm model gave it"
        )
    joint = "but" if any(" still " in part for part in parts) else "and"
    return f"Neither placement normalises the stream itself. From {a}-norm to {b}-norm, {parts[0]}, {joint} {parts[1]}."


def flip_words(effect: FlipEffect, a: ModelConfig, b: ModelConfig, title: str) -> str:
    """The effect in plain words, for a reader who knows the four placements (A's trained one, B's any other)."""
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
    why = why_it_changes(a.norm, b.norm, effect.rms_a[1:])  # index 0 is the input
    return (
        f"{title} was trained {a.norm}-norm. Run {b.norm}-norm on the very same weights, {heads} {stream} {why} "
        "B is therefore not a model anyone trained: it shows how much the trained computation depends on where "
        "the norm sits."
    )
