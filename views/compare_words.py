"""What the Compare page says about A and B above the maps: both configurations in a line each, whether B runs on
A's very weights (and what only one of them has), what a flipped checkpoint's norm did, and which heads B removes."""

from __future__ import annotations

import streamlit as st

from explorer.ablation import Head, head_name, head_names
from explorer.compare import DEFAULT_TARGET, INPUT, can_share_weights, paired_attention
from explorer.compare_text import describe, shared_weights_text, trained_by
from explorer.config import PAD_TOKEN, CheckpointConfig, ModelConfig
from explorer.flip_story import flip_effect, flip_words
from explorer.pretrained import pretrained_title
from pictures.attention_panels import MEAN_NOTE
from views.ablation_controls import MODE_WORDS, Removal, downstream_words, removed_head_text
from views.caches import NO_REMOVAL, ranking_key, ranking_of, trace_of, weight_facts
from views.state import app_state, model_key
from views.widgets import code_text

B_NOT_DRAWN = "the problem with B is named above; A is shown alone until it is fixed."


def weights_message(a: ModelConfig, b: ModelConfig) -> None:
    """Whether B runs on A's very weights, checked tensor by tensor, or why it cannot."""
    if b == a:
        st.info("B is identical to A: every difference below is exactly 0. Change a field of B to compare.")
        return
    shareable, why = can_share_weights(a, b)
    if not shareable:
        st.warning(
            f"{why} The maps below are two different models side by side; per-layer statistics are compared layer "
            "by layer where both models have the layer.",
            icon=":material/link_off:",
        )
        return
    facts = weight_facts(a, b, model_key())
    if not facts["identical"]:  # model_for_b copies every shared tensor: this would be a bug, so say it loudly
        st.error("B should carry A's weights but some shared parameter differs.", icon=":material/error:")
        return
    a_trained_by = trained_by(a, session_trained=model_key() is not None)
    st.success(shared_weights_text(a, b, facts, a_trained_by), icon=":material/link:")


def removed_words(heads: tuple[Head, ...], mode: str) -> str:
    """ "head L1H3 (output set to zero)" or "heads L1H3, L2H5 (…)"."""
    return f"{'head' if len(heads) == 1 else 'heads'} {Removal(heads, mode).words}"


def whose_stack(a: ModelConfig) -> str:
    """ "'s encoder" for an encoder-decoder A, whose removed heads are its encoder's (the decoder keeps every head);
    "" otherwise."""
    return "'s encoder" if a.reads_target else ""


def no_gradients_note(a: ModelConfig) -> str:
    """Why the per-layer charts have no gradient norms: the objective predicts each token from the one before, so it
    needs two of them, in an encoder-decoder's target (the decoder's output is what predicts)."""
    where = " in the target (the decoder's input, whose output predicts)" if a.reads_target else ""
    padding = "" if isinstance(a, CheckpointConfig) else f", the second or a later one not {PAD_TOKEN}"
    return (
        f"No gradient norms: they need at least two tokens{where}{padding} (the objective predicts each token from "
        "the one before)."
    )


def heads_message(a: ModelConfig, b_run: Removal, removed_in_a: tuple[Head, ...]) -> None:
    """B = A with heads removed: both in a line each, then that B is A's very weights without those heads."""
    also = "" if not removed_in_a else f" (like A, also without {', '.join(map(head_name, removed_in_a))})"
    own = tuple(h for h in b_run.heads if h not in removed_in_a)
    without = removed_words(own, b_run.mode) if own else "more heads"
    st.markdown(f"**A** · {describe(a, a)}  \n**B** · A's very model without {without}{also}")
    if not own:
        st.info(
            "B removes no head of its own yet: pick the heads B removes above. Until then B is A and every "
            "difference below is exactly 0."
        )
        return
    st.success(
        f"B is A's very weights (the same model, not a copy) with {removed_words(own, b_run.mode)} removed. "
        f"{downstream_words(own, a.reads_target)}",
        icon=":material/link:",
    )


def say_what_differs(a: ModelConfig, b: ModelConfig | None, mode: str, text_a: str, text_b: str, traced: bool) -> None:
    """Both configurations in a line each (differences in bold), then whether B runs on A's weights."""
    if mode == INPUT:
        st.markdown(
            f"**A** and **B** · {describe(a, a)}  \n**A** reads `{code_text(text_a, 80)}` · **B** reads "
            f"`{code_text(text_b, 80)}`"
        )
        if traced:
            st.success(
                "A and B are the very same model (the same weights); only the input differs.", icon=":material/link:"
            )
        return
    if b is None or not traced:
        st.markdown(f"**A** · {describe(a, a)}  \n**B** · not drawn: {B_NOT_DRAWN}")
        return
    st.markdown(f"**A** · {describe(a, b)}  \n**B** · {describe(b, a)}")
    weights_message(a, b)
    if isinstance(a, CheckpointConfig) and isinstance(b, CheckpointConfig) and a.checkpoint == b.checkpoint:
        trace_b = trace_of(a, b, text_b, None, model_key(), *NO_REMOVAL)
        base = app_state().base_trace  # the flip alone: A with every head, as B runs
        pair = paired_attention(base, trace_b)[0]  # the first stack's self-attention, as the maps below
        ranking = ranking_of(pair, ranking_key(base, trace_b, None, pair.label))  # the maps' own, when none is removed
        effect = flip_effect(base, trace_b, ranking)
        st.info(flip_words(effect, a, b, pretrained_title(a.checkpoint)), icon=":material/insights:")
    if b.reads_target and not a.reads_target:
        st.caption(f"B's decoder reads the target `{DEFAULT_TARGET}` (A has no decoder).")


def removed_map_notes(removed: dict[str, str | None], head: Head, measure: str) -> list[str]:
    """A caption for each side ("A", "B") whose run removed the `head` shown (`removed`: how, "zero" or "mean", or
    None): what its map shows, the weights the head still computes or, with `measure` norms, what it adds."""
    notes = []
    for side, mode in removed.items():
        if mode is None:
            continue
        if measure == "norms" and mode == "mean":
            notes.append(f"{side}: layer {head[0]}, head {head[1]} {MEAN_NOTE}.")
            continue
        said = f"**{side}: {head_name(head)} is removed ({MODE_WORDS[mode]}).** "
        if measure == "norms":
            notes.append(said + "Its map shows what it adds: zero everywhere.")
        else:
            notes.append(said + removed_head_text(mode, norms=False) + " Show: norms draws what it adds.")
    return notes


def ranking_removed_words(removed: dict[str, tuple[Head, ...]]) -> str:
    """What the head ranking says of the heads each side removed: they still compute their weights, so their
    divergence is how those moved, not what the heads add ("" when no side removed any)."""
    named = "; ".join(f"{side}: {head_names(heads)}" for side, heads in removed.items() if heads)
    if not named:
        return ""
    return (
        f" Removed heads ({named}) still compute their weights, so their cells say how those weights moved, not "
        "what the heads add: Show: norms draws that."
    )


def identical_removed_words(removed: dict[str, tuple[Head, ...]], n_layers: int) -> str:
    """Why A and B attend identically though one side removed heads the other kept: a removed head still computes
    its weights and changes only the attention of the layers above it ("" when both removed the same heads)."""
    only = sorted(set(removed.get("A", ())) ^ set(removed.get("B", ())))  # removed on one side only
    if not only:
        return ""
    names = head_names(only)
    one = len(only) == 1
    where = (
        f" {names} {'is' if one else 'are'} in the last layer, which has none above it."
        if all(layer == n_layers - 1 for layer, _ in only)
        else ""
    )
    return (
        f" A removed head still computes its weights, and removing it changes only the attention of the layers above "
        f"it.{where} What {names} added is gone all the same: Show: norms draws it."
    )
