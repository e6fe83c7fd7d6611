"""Sentences of the Attention page, as pure functions: how the head roles change when heads are measured by what
they add (‖α·f(x)‖, Kobayashi et al. 2020) rather than by their weights."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np

from explorer.ablation import Head, head_names
from explorer.analysis.head_roles import BROAD, ROLES, HeadRoles
from explorer.config_words import count

NORM = "‖α·f(x)‖"


def norms_line(norm: str) -> str:
    """The caption of the maps coloured by what heads add; in res-post and peri it says the sizes are taken before the
    norm on the sub-layer's output, which rescales each query's sum of heads (as Kobayashi et al. measure)."""
    line = (
        f"Colours show what each head adds, {NORM} (Kobayashi et al. 2020): the weight α times the size of the key's "
        "value vector as the head's output projection maps it. Hover gives both."
    )
    if norm in ("res-post", "peri"):
        line += (
            f" In {norm}-norm the heads' sum then passes through the norm on the attention's output, which rescales "
            "each query's sum by its own factor: these sizes are before that norm."
        )
    return line


def no_clear_role_text(roles: HeadRoles) -> str:
    """What the head-roles list says when no head has a clear role: that no role could be measured at all when no
    query may see two keys (a causal model's one piece, which may see only itself), or that the heads are mixed."""
    if np.isnan(roles.breadth).all():
        return (
            "No role can be measured on this sentence: no query may see more than one key, so no weight says where "
            "a head chooses to look. Type a longer text."
        )
    return "No head has one clear role on this sentence."


def role_counts(roles: HeadRoles, kept: np.ndarray | None = None) -> dict[str, int]:
    """{role: how many heads clearly have it}, for each of ROLES and "broad", in that order; of the heads `kept`
    ([L, H] bool) only, when given."""
    counted = np.ones(roles.labels.shape, dtype=bool) if kept is None else kept  # [L, H]
    return {role: int(((roles.labels == role) & counted).sum()) for role in (*ROLES, BROAD)}


def _change(name: str, before: int, after: int) -> str:
    """One role's change in words, e.g. "**the first token** loses 29 of its 30 heads (1 left)"."""
    if after < before:
        return f"**{name}** loses {before - after} of its {count(before, 'head')} ({after} left)"
    return f"**{name}** gains {count(after - before, 'head')} ({before} → {after})"


def _drop_detail(by_weights: HeadRoles, by_norms: HeadRoles, role: str, name: str, kept: np.ndarray) -> str:
    """For the role that loses most heads (of those `kept`, [L, H]): what they put on it, by weight and by what they
    add."""
    heads = (by_weights.labels == role) & kept  # [L, H]
    weight = float(np.nanmean(by_weights.share(role)[heads]))
    added = float(np.nanmean(by_norms.share(role)[heads]))
    return (
        f"The {count(int(heads.sum()), 'head')} that look mostly at {name} put {weight:.2f} of their weight there "
        f"on average, but {added:.2f} of what they add."
    )


def role_shift_text(
    by_weights: HeadRoles, by_norms: HeadRoles, names: Mapping[str, str], removed: Collection[Head] = ()
) -> str:
    """Markdown: how many heads each role (ROLES and broad; `names` says each in words) loses or gains on this
    sentence when roles are measured on the shares of what each head adds (norm_shares) instead of the weights, what
    the heads of the role that loses most put on it under each measure, and how many heads have no clear role. The
    heads the run `removed` are left out, and said to be: what they add no longer follows their weights (nothing, or
    their mean for every query), so their change would be the removal's, not the measure's."""
    kept = np.ones(by_weights.labels.shape, dtype=bool)  # [L, H]
    for layer, head in removed:
        kept[layer, head] = False
    before, after = role_counts(by_weights, kept), role_counts(by_norms, kept)
    changed = sorted((r for r in before if before[r] != after[r]), key=lambda r: before[r] - after[r], reverse=True)
    opening = f"**Measured by what the heads add** ({NORM}) rather than by their weights"
    one = len(removed) == 1
    left_out = (
        f" The removed {'head' if one else 'heads'} ({head_names(removed)}) "
        f"{'is' if one else 'are'} left out: what a removed head adds no longer follows its weights."
        if removed
        else ""
    )
    if not changed:
        return f"{opening}, every role keeps its number of heads on this sentence." + left_out
    kept_roles = [
        f"**{names[r]}** keeps its {count(before[r], 'head')}" for r in before if r not in changed and before[r]
    ]
    parts = [_change(names[r], before[r], after[r]) for r in changed] + kept_roles
    text = f"{opening}, on this sentence: " + "; ".join(parts) + "."
    most = changed[0]
    if before[most] > after[most] and most in ROLES:
        text += " " + _drop_detail(by_weights, by_norms, most, names[most], kept)
    unclear = int(((by_weights.labels == "") & kept).sum()), int(((by_norms.labels == "") & kept).sum())
    return (
        text + f" Heads with no clear role: {unclear[0]} by weight, {unclear[1]} by what they add (of "
        f"{int(kept.sum())})." + left_out
    )


def removed_roles_words(removed: tuple[Head, ...], mode: str, norms: bool) -> str:
    """What the roles board measures of the heads the run removed (with `mode`, "zero" or "mean"), by their weights
    or, with `norms`, by what they add ("" when none is removed)."""
    if not removed:
        return ""
    names = head_names(removed)
    if not norms:
        return f" Removed heads ({names}) are measured by the weights they still compute, where they look."
    if mode == "zero":
        return f" Removed heads ({names}) add nothing: no share, no role."
    return f" Removed heads ({names}) add their mean, the same row for every query: their shares are that row's."


def decoder_removal_text(kind: str, layer: int, removed: tuple[Head, ...]) -> str:
    """What the encoder's `removed` heads do to a decoder map (`kind` "decoder self-attention" or "cross-attention")
    of `layer`: the decoder keeps all its heads, but reads the encoder's output through cross-attention in every
    layer, so only layer 0's self-attention, which reads the target alone, is the full model's; the others come from a
    changed input (their weights can still match the full model's, e.g. over a single source token)."""
    names = head_names(removed)
    which = f"encoder's removed head {names}" if len(removed) == 1 else f"encoder's removed heads ({names})"
    if kind == "decoder self-attention" and layer == 0:
        changes = "changes" if len(removed) == 1 else "change"
        return (
            f"This map is the full model's: the {which} {changes} the encoder's output, but the decoder keeps all its "
            "heads, and its layer 0 self-attention reads the target alone, before any cross-attention."
        )
    reads = (
        "its keys and values are the encoder's output"
        if kind == "cross-attention"
        else "its input has passed through cross-attention to the encoder's output"
    )
    return (
        f"The decoder keeps all its heads, but this map comes from a changed input: {reads}, which lacks what the "
        f"{which} added."
    )
