"""What the "What heads do" page says, computed from the numbers (no Streamlit here): how much the attention changed
when heads were removed, where the final guess first tops the logit lens, how a logit shares out, and what removing
heads really did beside their direct share."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from explorer.ablation import Head, head_name
from explorer.analysis.attribution import LogitAttribution
from explorer.config import NORM_ON_OUTPUT
from explorer.model import Transformer
from explorer.prediction import last_logits
from explorer.text_reading import quoted
from explorer.trace import AttentionMaps, Trace
from explorer.word_lists import listed


def heads_list(heads: Sequence[Head]) -> str:
    """((23, 0), (29, 1)) -> "L23H0 and L29H1"; "L1H3, L2H5 and L3H0" for more."""
    return listed([head_name(h) for h in heads])


def head_changes(before: AttentionMaps, after: AttentionMaps) -> np.ndarray:
    """[L, H]: the mean |after − before| of each head's weights over the cells it may attend to (both runs on one
    input, so one mask)."""
    allowed = np.asarray(before.allowed, dtype=bool)  # [Tq, Tk]
    changes = np.zeros(before.weights.shape[:2])  # [L, H]
    if not allowed.any():
        return changes
    # A layer at a time: a float64 copy of every map at once is 566 MB for SmolLM2 on 512 pieces, three of them 1.5 GB
    for layer, (new, old) in enumerate(zip(after.weights, before.weights, strict=True)):
        delta = new.astype(np.float64)  # [H, Tq, Tk]
        delta -= old
        np.abs(delta, out=delta)
        changes[layer] = delta[:, allowed].mean(axis=-1)
    return changes


def layer_changes(before: AttentionMaps, after: AttentionMaps) -> np.ndarray:
    """[L]: the mean |after − before| of a layer's weights over its heads and the cells they may attend to."""
    return head_changes(before, after).mean(axis=1)


def most_changed_head(changes: np.ndarray) -> Head:
    """(layer, head) whose weights changed most ([L, H] head_changes); the first on a tie."""
    layer, head = np.unravel_index(int(np.argmax(changes)), changes.shape)
    return int(layer), int(head)


def change_sentence(changes: np.ndarray, removed: Sequence[Head]) -> str:
    """What the per-layer chart shows, in words: the layers below the first removed head keep their attention (and
    so does that layer: a removed head still computes its weights), the ones above change this much."""
    first = min(layer for layer, _ in removed)
    n_layers = len(changes)
    names = heads_list(removed)
    if first == n_layers - 1:
        one = len(removed) == 1
        return (
            f"{names} {'is' if one else 'are'} in the last layer: no later layer reads what {'it' if one else 'they'} "
            "wrote, so no attention weight changes (a removed head still computes its weights; only its output is "
            "gone)."
        )
    later = changes[first + 1 :]
    same = f"Layers 0 to {first} attend" if first > 0 else "Layer 0 attends"
    said = (
        f"{same} exactly as before (a removed head still computes its weights; only what it "
        f"writes is gone, and layer {first} is the first to lose something)."
    )
    if not later.any():  # one token (a single key always gets weight 1), or a mean that equals the output
        return f"{said} No weight of a later layer moved either: every change is 0."
    top = first + 1 + int(np.argmax(later))
    return (
        f"{said} From layer {first + 1} on, every layer reads a changed stream: the weights moved most in layer {top}, "
        f"by {change_text(changes[top])} on average per cell (weights run from 0 to 1)."
    )


def change_text(value: float) -> str:
    """A mean |after − before| as the sentences write it: four decimals, or two significant digits below 0.0001
    (which four decimals would write 0.0000, as if nothing moved)."""
    return f"{value:.4f}" if value >= 5e-5 or value == 0 else f"{value:.1e}"


def piece_odds(model: Transformer, trace: Trace, token_id: int) -> tuple[float, float]:
    """(probability, logit) of one piece at the last position of the trace's output stack."""
    logits = last_logits(model, trace)  # [V]
    return float(torch.softmax(logits, dim=-1)[token_id]), float(logits[token_id])


def first_top_layer(lens: pd.DataFrame, position: int) -> tuple[int | None, int | None]:
    """(the first layer whose top guess at `position` is the last layer's, the layer from which it stays the top
    guess to the end); (None, None) for an empty lens."""
    tops = lens[(lens["position"] == position) & (lens["rank"] == 1)].sort_values("layer")
    if tops.empty:
        return None, None
    pieces = tops["piece"].tolist()
    layers = tops["layer"].tolist()
    final = pieces[-1]
    first = layers[pieces.index(final)]
    stays = layers[-1]
    for layer, piece in zip(reversed(layers), reversed(pieces), strict=True):
        if piece != final:
            break
        stays = layer
    return int(first), int(stays)


def lens_sentence(lens: pd.DataFrame, position: int, n_layers: int) -> str:
    """Where the final guess at `position` first tops the lens, and from where it stays on top."""
    first, stays = first_top_layer(lens, position)
    if first is None:
        return ""
    tops = lens[(lens["position"] == position) & (lens["rank"] == 1)].sort_values("layer")
    final = tops.iloc[-1]
    said = f"{quoted(final['text'])} (p = {final['probability']:.3f} after the last block, block {n_layers - 1})"
    if first == n_layers - 1:
        return (
            f"The model's guess {said} tops the guesses only at the last block: every earlier block's top guess is "
            "another piece."
        )
    if first == stays:
        return f"The model's guess {said} first tops the guesses at block {first}, and stays on top from there."
    return (
        f"The model's guess {said} first tops the guesses at block {first}, loses the top place after it, and holds "
        f"it for good from block {stays}."
    )


def attribution_sentence(attribution: LogitAttribution) -> str:
    """How the logit shares out: heads, feed-forward, embeddings and the rest, adding up to the logit."""
    a = attribution
    parts = [
        f"all {a.heads.size} heads {a.heads.sum():+.3f}",
        f"feed-forward blocks {a.feed_forward.sum():+.3f}",
        f"embeddings {a.embeddings:+.3f}",
    ]
    if a.rest != 0:
        what = "cross-attention, biases" if a.cross_attention is not None else "biases"
        parts.append(f"{what} {a.rest:+.3f}")
    return (
        f"The logit of {quoted(a.text)} at the last position is {a.logit:.3f}: {', '.join(parts)}, which add up to "
        f"{a.total:.3f}. Each head's cell is its direct share: what it writes into the stream, read out through "
        f"{norm_route(a.placement, a.final_norm)}the row of the read-out for this piece."
    )


def norm_route(placement: str, final_norm: bool) -> str:
    """The norms a head's output passes through on its way to the read-out, with their scales frozen, as the
    sentences name them: "the final norm (its scale frozen at this run's) and " for a pre-norm stack; every norm after
    it for a post-norm one, which has no final norm; "" when none."""
    if placement == "post":
        norms = ["every norm after it, from its own block's on"]
    elif placement in NORM_ON_OUTPUT:
        norms = ["its sub-layer's output norm"]
    else:
        norms = []
    if final_norm:
        norms.append("the final norm")
    if not norms:
        return ""
    scales = "its scale" if norms == ["the final norm"] else "their scales"
    return f"{' and '.join(norms)} ({scales} frozen at this run's) and "


SAME_CHANGE = 0.01  # |real change − (− direct share)| in logits below which the direct share is said to account for it


def effect_sentence(
    removed: Sequence[Head],
    text: str,
    before: tuple[float, float],
    after: tuple[float, float],
    direct: float,
    expected: float | None = None,
    n_layers: int | None = None,
) -> str:
    """What removing heads really did to a piece, beside their direct share: `before` and `after` are the piece's
    (probability, logit) in the runs with every head and without these; `direct` their summed direct attribution;
    `expected` what replacing their output would change the logit by had nothing after them changed
    (attribution.replaced_direct_change): −direct when it is set to zero (the default), less when it is set to its
    mean, whose own direct share stays. `n_layers`, the model's: heads all in its last layer have no later heads
    after them, only their block's feed-forward and the norms."""
    one = len(removed) == 1
    it, its, them = ("it", "Its", "it") if one else ("they", "Their", "them")
    change = after[1] - before[1]
    zeroed = expected is None
    expected = -direct if zeroed else expected
    share = f"{its} direct share of that logit was {direct:+.3f}"
    if not zeroed:
        share += f", and {its.lower()} mean output's is {direct + expected:+.3f}"
    said = (
        f"Removing {heads_list(removed)} took {quoted(text)} from p = {before[0]:.3f} to p = {after[0]:.3f}, its logit "
        f"from {before[1]:.3f} to {after[1]:.3f} ({change:+.3f}). {share}, so had nothing after {them} changed, the "
        f"logit would have moved by {expected:+.3f}: "
    )
    rest = f"the parts after {them} ({parts_after(removed, n_layers)})"
    if abs(change - expected) < SAME_CHANGE:
        return said + "the direct share accounts for the whole change."
    if change * expected < 0:
        undone = "made up for the loss" if expected < 0 else "undid the gain"
        return said + f"the logit moved the other way, so {rest} more than {undone}."
    if abs(change) > abs(expected):
        return said + f"the real change is larger, so {rest} built on what {it} wrote."
    return said + f"the real change is smaller, so {rest} made up for part of it."


def parts_after(removed: Sequence[Head], n_layers: int | None) -> str:
    """What lies between the removed heads and the read-out, as effect_sentence names it: later heads too, unless
    every removed head is in the last layer (`n_layers`; None: not known)."""
    first = min(layer for layer, _ in removed)
    if n_layers is not None and first == n_layers - 1:
        return f"block {first}'s feed-forward, the norms' scales"
    return "feed-forward blocks, later heads, the norms' scales"


def cosine_sentence(removed: Sequence[Head], cosine: float) -> str:
    """What removing heads did to the sentence embedding."""
    if cosine >= 1.0:  # to float64 rounding: no turn at all
        return (
            f"Removing {heads_list(removed)} leaves the sentence embedding (the mean of the last layer's outputs) "
            "pointing as the full model's does: cosine 1, so 1 − cosine = 0."
        )
    return (
        f"Removing {heads_list(removed)} turns the sentence embedding (the mean of the last layer's outputs) away "
        f"from the full model's: cosine {cosine:.4f}, so 1 − cosine = {1 - cosine:.3g} (0 would be no change)."
    )


def alone_sentence(removed: Sequence[Head], cosine: float, effects: np.ndarray) -> str:
    """The real effect of the heads removed together beside what the board gives for each alone ([L, H] 1 − cosine)."""
    if len(removed) == 1:
        layer, head = removed[0]
        if not effects.any():  # a board of zeros ranks nothing: every head ties
            return (
                "Every head's cell on the board is 0: removed alone, no head changes this sentence's embedding, so "
                f"{head_name(removed[0])} ranks with all the others."
            )
        rank = int((effects > effects[layer, head]).sum()) + 1
        return (
            f"{head_name(removed[0])} removed: 1 − cosine = {1 - cosine:.3g}, its cell on the board; it ranks {rank} "
            f"of the {effects.size} heads by its effect on this sentence."
        )
    alone = sum(float(effects[layer, head]) for layer, head in removed)
    return (
        f"{heads_list(removed)} removed together: 1 − cosine = {1 - cosine:.3g}; removed one at a time, their cells "
        f"on the board add up to {alone:.3g}. 1 − cosine does not add up even for heads that act independently: it "
        "grows as the square of a small turn, so turns the same way make more than the sum and opposite turns less; "
        "the two numbers alone do not say whether the heads work together or do the same job."
    )


def ranked_heads(values: np.ndarray, n: int = 3, lowest: bool = False) -> list[tuple[Head, float]]:
    """The n heads with the largest values of a [L, H] board (the smallest with `lowest`), with their values."""
    order = np.argsort(values, axis=None, kind="stable")
    picked = order[:n] if lowest else order[::-1][:n]
    return [((int(i // values.shape[1]), int(i % values.shape[1])), float(values.flat[i])) for i in picked]


def top_heads_sentence(attribution: LogitAttribution, n: int = 3) -> str:
    """The heads that raise the piece's logit most, and the one that lowers it most."""
    up = [f"{head_name(h)} ({v:+.3f})" for h, v in ranked_heads(attribution.heads, n) if v > 0]
    (low, value), *_ = ranked_heads(attribution.heads, 1, lowest=True)
    who = "The heads that write" if len(up) > 1 else "The head that writes"
    said = f"{who} {quoted(attribution.text)} most directly: {', '.join(up)}." if up else ""
    if value < 0:
        said += f" The one that holds it back most: {head_name(low)} ({value:+.3f})."
    return said.strip()


# 1 − cosine that float32 rounding alone makes: a single token's mean removal (which changes nothing) gives 1.6e-14 on
# the batched board, whose attention is torch's fused kernel; a real effect on MiniLM's board is 1e-7 and more
ROUNDING_TURN = 1e-12


def top_effects_sentence(effects: np.ndarray, n: int = 3) -> str:
    """The heads whose removal alone turns the sentence embedding most ([L, H] 1 − cosine)."""
    if effects.size == 1:  # a model of one head: nothing to rank it against
        return f"Removed, the model's only head turns the sentence embedding by 1 − cosine = {effects.flat[0]:.3g}."
    if float(np.max(effects)) < ROUNDING_TURN:
        return "Removed alone, no head turns the sentence embedding beyond float32 rounding: every cell is below 1e-12."
    top = [f"{head_name(h)} ({v:.3g})" for h, v in ranked_heads(effects, n)]
    return f"Removed alone, these heads turn the sentence embedding most (1 − cosine): {', '.join(top)}."
