"""What heads do page: remove heads and see the output change, each head's share of the prediction, and every
layer's guess (the logit lens).

Heads are removed for every page (the sidebar's "Heads removed", the URL's ablate=L1H3,L2H5): this page shows what
that changed against the same model with every head (state.base_trace), and a click on a head of the board below
removes it or puts it back (views.ablation_controls.toggle_head).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from explorer.ablation import Head, head_name, heads_text, parse_heads
from explorer.analysis.ablation_effects import embedding_cosine, prediction_change
from explorer.analysis.logit_lens import can_read_out, lens_refusal, output_stack, reads_next_piece
from explorer.config import ConfigError, ModelConfig
from explorer.heads_text import (
    alone_sentence,
    attribution_sentence,
    change_sentence,
    change_text,
    cosine_sentence,
    effect_sentence,
    head_changes,
    heads_list,
    lens_sentence,
    most_changed_head,
    piece_odds,
    top_effects_sentence,
    top_heads_sentence,
)
from explorer.model import Transformer
from explorer.prediction import can_predict
from explorer.text_reading import quoted
from explorer.trace import AttentionMaps, Trace
from pictures.boards import board
from pictures.heads_charts import after_before_figure, after_before_panel, attention_change_figure, clickable_board
from pictures.output_charts import ablation_board_figure, attribution_board_figure, board_width, lens_grid_figure
from views.ablation_controls import MODE_WORDS, toggle_head
from views.heads_caches import ablation_effects_of, attribution_of, direct_change_of, lens_of, top_pieces_of
from views.matrix_view import show_board
from views.query_params import URL_BOOLEAN, url_int, warn_junk_url
from views.state import app_state, base_trace_maker, session_model, sidebar_run, trace_maker, weights_note
from views.text_notes import part_character_note
from views.widgets import (
    NUMBER_SELECT_PX,
    PLOTLY_CONFIG,
    clamp_view,
    code_text,
    download,
    markdown_literal,
    model_line,
    plain,
    plotly_chart,
    static_table,
    stretch_toggle,
    view_download,
)

PIECE_PX = 260
TOP_PIECES = 10  # the pieces the piece selector offers: the likeliest after the text
# What an encoder-decoder's ablation board holds, which its caption would otherwise leave to guess
ENCODER_DECODER_BOARD = (
    " In this encoder-decoder the board's heads are the encoder's self-attention heads, and the embedding is the mean "
    "of the decoder's outputs: an encoder head reaches it only through the decoder's cross-attention."
)
LENS_WINDOW = 32  # positions the lens reads of a longer text unless asked for all: the last ones
ROUND_KEY = "_heads_board_round"  # counts the board's clicks: each round draws the board under a new key
VIEW_FOR_KEY = "_heads_view_for"  # the heads removed when the after − before map's selectors were last drawn
CHANGE_STRETCH_HELP = (
    "Off: the darkest colours are the largest |after − before|. On: the top 1 % of |after − before|, so that a few "
    "large changes (on a long text, often a column or the diagonal) do not leave every other cell white."
)
Figures = list[Callable[[], go.Figure]]  # the view's figures for the HTML download, each made only when asked for
SAID: list[str] = []  # this run's sentences, for the HTML download too (the page's script runs afresh each time)


def summary(cfg: ModelConfig, trace: Trace) -> str:
    return f"{model_line(cfg, trace)}. Eval mode, {weights_note()}."


def removed_words(removed: tuple[Head, ...], mode: str) -> str:
    """ "L23H0 and L29H1 removed (output set to zero)"."""
    return f"{heads_list(removed)} removed ({MODE_WORDS[mode]})"


def say(sentence: str) -> None:
    """A sentence of the page (plain text from explorer.heads_text, shown as written: a piece it quotes may hold
    "$", "*" or a backslash), which the HTML download repeats."""
    st.markdown(markdown_literal(sentence))
    SAID.append(sentence)


def csv_download(label: str, frame: pd.DataFrame, name: str, key: str) -> None:
    download(label, partial(frame.to_csv, index=False), name, "text/csv", key)


# --- 1. What changed


def what_changed(model: Transformer, before: Trace, after: Trace, removed: tuple[Head, ...], mode: str) -> Figures:
    """The output before and after the heads were removed, and the attention of the layers above them."""
    st.subheader("What changed")
    st.caption(f"The same model and text with every head (before) and with {removed_words(removed, mode)}: after.")
    if can_predict(model):
        prediction_table(model, before, after)
    else:
        say(cosine_sentence(removed, embedding_cosine(before, after)))
    figures = attention_change(before.first.self_attention, after.first.self_attention, removed)
    if after.last is not after.first:
        st.caption(
            "These are the encoder's self-attention weights, where the heads were removed. The decoder reads the "
            "encoder's changed output through its cross-attention, so its attention changes too: see the Attention "
            "page, which shows the model without the heads."
        )
    return figures


def prediction_table(model: Transformer, before: Trace, after: Trace) -> None:
    """The next pieces of either run with their probability before and after, and the change."""
    table = prediction_change(model, before, after, k=TOP_PIECES)
    st.caption(
        f"The {TOP_PIECES} likeliest next pieces of either run, with their probability and rank before and after the "
        "heads were removed, and the change (after − before)." + part_character_note(model.tokenizer, table["piece"])
    )
    shown = table[["rank", "rank_after", "text", "probability_before", "probability_after", "change"]].rename(
        columns={
            "rank": "rank before",
            "rank_after": "rank after",
            "text": "next piece",
            "probability_before": "before",
            "probability_after": "after",
            "change": "change",
        }
    )
    shown["next piece"] = shown["next piece"].map(quoted)  # so a leading space shows: ' Paris'
    formats = {"before": "{:.3f}", "after": "{:.3f}", "change": "{:+.3f}"}
    static_table(shown, formats=formats)  # a piece "-" or "#" as itself
    csv_download("Next pieces before and after (CSV)", table, "next_pieces_before_after.csv", "heads_csv_prediction")


def attention_change(before: AttentionMaps, after: AttentionMaps, removed: tuple[Head, ...]) -> Figures:
    """How much each layer's weights moved, and one head's after − before map (heads_layer, heads_head in the URL;
    the head that moved most unless picked)."""
    changes = head_changes(before, after)  # [L, H]
    per_layer = changes.mean(axis=1)  # [L]
    say(change_sentence(per_layer, removed))
    if not changes.any():  # every removed head is in the last layer: an empty chart and a blank map would say nothing
        return []
    plotly_chart(attention_change_figure(per_layer, removed), "heads_change")
    default_layer, default_head = most_changed_head(changes)
    layers, heads = list(range(before.n_layers)), list(range(before.n_heads))
    clamp_view("heads_layer", layers, "layer")
    clamp_view("heads_head", heads, "head")
    other_heads = st.session_state.get(VIEW_FOR_KEY, removed) != removed  # the map's picture changed
    for key, value in (("heads_layer", default_layer), ("heads_head", default_head)):
        if other_heads or (key not in st.session_state and key not in st.query_params):
            st.session_state[key] = value  # open on the head that moved most, unless the link or a pick says
    st.session_state[VIEW_FOR_KEY] = removed
    controls = st.container(horizontal=True, vertical_alignment="bottom")
    layer = controls.selectbox("Layer", layers, key="heads_layer", bind="query-params", width=NUMBER_SELECT_PX)
    head = controls.selectbox("Head", heads, key="heads_head", bind="query-params", width=NUMBER_SELECT_PX)
    stretch = stretch_toggle(controls, CHANGE_STRETCH_HELP)
    moved = change_text(changes[default_layer, default_head])
    st.caption(
        "One head's weights, after − before. It opens on the head whose weights moved most "
        f"({head_name((default_layer, default_head))}, by {moved} per cell on average); pick another above."
    )
    show_board(board([after_before_panel(before, after, layer, head, stretch)]), key="heads_diff")
    return [partial(attention_change_figure, per_layer, removed), head_change_later(layer, head, stretch)]


def head_change_later(layer: int, head: int, stretch: bool) -> Callable[[], go.Figure]:
    """What makes after_before_figure of one head on the click: the traces' makers, not the maps (the download
    would hold both traces: views/state.py)."""
    make_before, make_after = base_trace_maker(), trace_maker()
    return lambda: after_before_figure(
        make_before().first.self_attention, make_after().first.self_attention, layer, head, stretch
    )


# --- 2. Which heads make this prediction


def board_key() -> str:
    """The board's key this round: a new one after each click, so the next click starts from no selection (Plotly
    would take a second click on the same cell as clearing the first)."""
    return f"heads_board_{st.session_state.get(ROUND_KEY, 0)}"


def pick_from_board(key: str) -> None:
    """on_select of a board: remove the head clicked, or put it back (views.ablation_controls.toggle_head)."""
    event = st.session_state.get(key)
    points = event.selection.points if event is not None else []
    names = [p.get("customdata") for p in points if isinstance(p.get("customdata"), str)]
    if not names:
        return
    st.session_state[ROUND_KEY] = st.session_state.get(ROUND_KEY, 0) + 1
    toggle_head(parse_heads(names[0])[0])


def show_head_board(figure: go.Figure, values: np.ndarray, value_title: str) -> None:
    """A layers × heads board whose cells remove or put back their head on a click."""
    key = board_key()
    st.plotly_chart(
        clickable_board(figure, values, value_title),
        key=key,
        on_select=partial(pick_from_board, key),
        selection_mode="points",
        theme=None,
        width=board_width(values.shape[1]),
        config=PLOTLY_CONFIG,
    )


def piece_choice(before: Trace) -> str:
    """The piece whose logit is shared out (heads_piece in the URL, as the vocabulary spells it): the likeliest next
    piece unless another of the ten likeliest is picked."""
    top = top_pieces_of(before, TOP_PIECES)
    options = top["piece"].tolist()
    texts = dict(zip(top["piece"], top["text"], strict=True))
    chances = dict(zip(top["piece"], top["probability"], strict=True))
    warn_junk_url({"heads_piece": options})
    piece = st.selectbox(
        "Piece",
        options,
        key="heads_piece",
        bind="query-params",
        width=PIECE_PX,
        help=f"Whose logit the board shares out: one of the ten likeliest {read_out_words(session_model())}. The "
        "first is the model's own output. The list spells them as the vocabulary does (Ġ: a space), as a link "
        "keeps them.",
    )
    rank = options.index(piece) + 1
    st.caption(
        f"Sharing out the logit of {markdown_literal(quoted(texts[piece]))} (the vocabulary's `{code_text(piece)}`), "
        "the model's "
        + ("top guess" if rank == 1 else f"guess number {rank}")
        + f" with every head (p = {chances[piece]:.3f})."
        + part_character_note(session_model().tokenizer, [piece])
    )
    return piece


def attribution_section(model: Transformer, before: Trace, after: Trace, removed: tuple[Head, ...]) -> Figures:
    """The direct logit attribution board of the full model, with what removing heads really did beside their
    direct share."""
    piece = piece_choice(before)
    attribution = attribution_of(before, piece)  # heads [L, H] of the full model
    say(attribution_sentence(attribution))
    st.caption(
        "Red: the head raises this piece's logit; blue: lowers it. The board is of the full model (every head "
        "present), so each cell is what that head writes when nothing is removed; removed heads are crossed. "
        "**Click a head to remove it** (click it again to put it back): *What changed* above then shows what it "
        "really does, through every layer after it."
    )
    show_head_board(attribution_board_figure(attribution, removed), attribution.heads, "effect on the logit")
    say(top_heads_sentence(attribution))
    if removed:
        odds_before = piece_odds(model, before, attribution.token_id)
        odds_after = piece_odds(model, after, attribution.token_id)
        direct = float(sum(attribution.heads[layer, head] for layer, head in removed))
        expected = direct_change_of(before, removed, after.ablate_with, piece) if after.ablate_with == "mean" else None
        say(effect_sentence(removed, attribution.text, odds_before, odds_after, direct, expected, attribution.n_layers))
    frame = head_frame(attribution.heads, "direct_logit_attribution", removed)
    csv_download("Attribution board (CSV)", frame, f"attribution_{slug(attribution.piece)}.csv", "heads_csv_board")
    return [partial(attribution_board_figure, attribution, removed)]


def head_frame(values: np.ndarray, column: str, removed: tuple[Head, ...]) -> pd.DataFrame:
    """A [L, H] board as a table: layer, head, its name, the value, whether the head is removed."""
    layers, heads = (a.ravel() for a in np.indices(values.shape))
    pairs = [(int(layer), int(head)) for layer, head in zip(layers, heads, strict=True)]
    return pd.DataFrame(
        {
            "layer": layers,
            "head": heads,
            "name": [head_name(pair) for pair in pairs],
            column: np.asarray(values, dtype=np.float64).ravel(),
            "removed": [pair in removed for pair in pairs],
        }
    )


def slug(piece: str) -> str:
    """A piece as a file name part: "ĠParis" -> "Paris"."""
    return "".join(c if c.isalnum() else "_" for c in piece.replace("Ġ", "")).strip("_") or "piece"


def ablation_section(cfg: ModelConfig, before: Trace, after: Trace, removed: tuple[Head, ...], mode: str) -> Figures:
    """Every head's effect on the sentence embedding, each removed alone."""
    st.caption(
        "This model has no read-out to words, so a head's part is measured on what the model gives: the sentence "
        "embedding (the mean of the last layer's outputs, as sentence-transformers pools MiniLM). Each cell is 1 − "
        f"cosine between the embedding with that head removed alone (its {MODE_WORDS[mode]}) and the full "
        "model's: 0 = no change. **Click a head to remove it** (click it again to put it back)."
        + (ENCODER_DECODER_BOARD if cfg.reads_target else "")
    )
    text = str(st.session_state.get("tokens") or " ".join(before.first.tokens))
    target = st.session_state.get("target") if cfg.reads_target else None
    effects = ablation_effects_of(cfg, text, target, mode, before)  # [L, H]
    show_head_board(ablation_board_figure(effects, removed), effects, "1 − cosine")
    say(top_effects_sentence(effects))
    if removed:
        say(alone_sentence(removed, embedding_cosine(before, after), effects))
    board = head_frame(effects, "one_minus_cosine", removed)
    board.insert(4, "removed_alone_with", mode)  # each cell: that head alone, its output set to zero or to its mean
    csv_download("Ablation board (CSV)", board, "head_ablation.csv", "heads_csv_board")
    return [partial(ablation_board_figure, effects, removed)]


# --- 3. Every layer's guess


def read_out_words(model: Transformer) -> str:
    """What the read-out at the last position gives, as the Piece help says it."""
    if reads_next_piece(model):
        return "pieces after the text"
    return "pieces at the last position's output (an encoder gives each position its own output, not the next piece)"


def cell_guess(model: Transformer) -> str:
    """What a lens cell guesses, as the caption says it."""
    return "the next piece at that position" if reads_next_piece(model) else "that position's output"


def lens_positions(n_tokens: int) -> tuple[int, ...] | None:
    """The positions the lens reads: all of a short text; of a longer one the last LENS_WINDOW, unless the toggle
    (heads_lens_all in the URL) asks for every one."""
    if n_tokens <= LENS_WINDOW:
        return None
    every = st.toggle(
        f"Every position ({n_tokens})",
        key="heads_lens_all",
        bind="query-params",
        help=f"Off: the last {LENS_WINDOW} positions, ending with the last one, whose output the boards share out. "
        "On: all "
        f"{n_tokens}, read out after every block: about 3 s per 100 positions for SmolLM2 on two cores.",
    )
    return None if every else tuple(range(n_tokens - LENS_WINDOW, n_tokens))


def lens_section(model: Transformer, trace: Trace, removed: tuple[Head, ...]) -> Figures:
    """The logit lens grid of the model shown, or the sentence saying why it does not apply."""
    st.subheader("Every layer's guess")
    if not can_read_out(model):
        st.info(lens_refusal(model), icon=":material/visibility_off:")
        return []
    tokens = trace.last.labels
    lens = lens_of(trace, lens_positions(len(tokens)))
    n_layers = int(lens["layer"].max()) + 1
    which = f"the model with {heads_list(removed)} removed" if removed else "the model"
    final_norm = output_stack(model, trace).norm is not None
    route = "the final norm and the read-out" if final_norm else "the read-out; a post-norm stack has no final norm"
    st.caption(
        f"The residual stream after each block of {which}, read out as if it were the last block's (through {route}: "
        f"the logit lens, nostalgebraist 2020). Each cell is that block's top guess for {cell_guess(model)}, "
        "coloured by its probability; hover lists its five likeliest. The top row, after the last block, is the "
        "model's own output: its right-most cell is the output at the last position."
        + part_character_note(model.tokenizer, lens["piece"])
    )
    say(lens_sentence(lens, len(tokens) - 1, n_layers))
    next_piece = reads_next_piece(model)
    plotly_chart(lens_grid_figure(lens, tokens, final_norm, next_piece), "heads_lens")
    kept = lens if not removed else lens.assign(heads_removed=heads_text(removed), removed_with=trace.ablate_with)
    csv_download("Logit lens (CSV)", kept, "logit_lens.csv", "heads_csv_lens")
    return [partial(lens_grid_figure, lens, tokens, final_norm, next_piece)]


def main() -> None:
    st.title("What heads do")
    run = sidebar_run("Fix the setting named above (in the sidebar) to see what the heads do.")
    if run is None:
        return
    cfg, trace = run
    state = app_state()
    model = session_model()
    removed, mode = tuple(state.ablated), state.ablate_with
    before = state.base_trace  # `trace` itself when no head is removed
    st.caption(summary(cfg, trace))
    # a whole number out of range is clamp_view's to name (it shows the nearest); anything else is junk
    numbers = {k: None for k in ("heads_layer", "heads_head") if url_int(st.query_params.get(k, "0")) is None}
    warn_junk_url({"heads_lens_all": URL_BOOLEAN, "stretch": URL_BOOLEAN, **numbers})
    top = st.container(horizontal=True, vertical_alignment="bottom")
    figures: Figures = []
    try:
        if removed:
            figures += what_changed(model, before, trace, removed, mode)
        else:
            st.info(
                "No head is removed. Click a head on the board below, or pick heads under *Heads removed* in the "
                "sidebar, to see what the model does without it.",
                icon=":material/touch_app:",
            )
        st.subheader("Which heads make this prediction" if can_read_out(model) else "Which heads shape the embedding")
        if can_read_out(model):
            figures += attribution_section(model, before, trace, removed)
        else:
            figures += ablation_section(cfg, before, trace, removed, mode)
        figures += lens_section(model, trace, removed)
    except ConfigError as e:
        st.error(str(e), icon=":material/error:")
    lines = [plain(summary(cfg, trace))] + ([removed_words(removed, mode) + "."] if removed else [])
    lines += SAID  # plain text already: plain() would take a piece "**" out of them
    view_download("What heads do", lines, lambda: [make() for make in figures], "heads", top)


main()
