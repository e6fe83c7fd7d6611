"""Which heads changed most, on the Compare page: the head ranking as a clickable [layer, head] heatmap and, when
asked for, a table; a click on either shows that head in the attention section above."""

from __future__ import annotations

from functools import partial

import pandas as pd
import streamlit as st

from explorer.ablation import Head
from pictures.boards import board
from pictures.compare_charts import ranking_panel
from views.compare_words import identical_removed_words, ranking_removed_words
from views.matrix_view import picked_value, show_board

ROUND_KEY = "_compare_table_round"
RANKING_PX = 760  # px the ranking heatmap's panel may take, at 1400 px


def pick_head(layer: int, head: int) -> None:
    """Show this layer and head in the attention section (a callback: it runs before the selectors are drawn)."""
    st.session_state["layer"], st.session_state["head"] = layer, head


def pick_from_table(ranking: pd.DataFrame, key: str) -> None:
    """on_select of the ranking table: show the chosen row's head, then clear the selection (a new table key)."""
    event = st.session_state.get(key)
    rows = event.selection.rows if event is not None else []
    if rows:
        row = ranking.iloc[rows[0]]
        pick_head(int(row["layer"]), int(row["head"]))
        st.session_state[ROUND_KEY] = st.session_state.get(ROUND_KEY, 0) + 1


def pick_from_map() -> None:
    """on_pick of the ranking heatmap: show the clicked head (row = layer, column = head) above."""
    picked = picked_value("ranking_map")
    if picked is not None:
        pick_head(int(picked["row"]), int(picked["col"]))


def ranking_section(
    ranking: pd.DataFrame,
    layer: int,
    head: int,
    padded: bool = False,
    removed: dict[str, tuple[Head, ...]] | None = None,
) -> None:
    """The heads ranked by JS divergence: a clickable [layer, head] heatmap, and the table when asked for (a
    table costs the browser a large script to load, so the page does not draw one unasked). `padded`: a [PAD] query's
    row is among those averaged, which the caption says (head roles leave them out). `removed`: the heads each side
    ("A", "B") removed from these maps, which still compute their weights, as the sentences say."""
    removed = removed or {}
    st.subheader("Which heads changed most")
    if (ranking["js_divergence"] == 0).all() and (ranking["max_abs_difference"] == 0).all():
        n_layers = int(ranking["layer"].max()) + 1
        st.info(
            "A and B attend identically in every head: every difference is exactly 0."
            + identical_removed_words(removed, n_layers)
        )
    st.caption(
        "Jensen-Shannon divergence between A's and B's attention row of each query, in bits (0 = the same "
        "distribution, 1 = no key in common), averaged over the queries"
        + (", [PAD] queries included: a padding mask hides [PAD] keys, not their rows" if padded else "")
        + ". Click a head to show it above."
        + ranking_removed_words(removed)
    )
    show_table = st.toggle(
        "Show the ranking table",
        key="ranking_table",
        bind="query-params",  # a link to the page with its table shown opens with it
        help="Every head, most changed first, with its largest |A − B|; select a row to show that head above.",
    )
    panel = ranking_panel(ranking, layer, head, panel_px=RANKING_PX)
    show_board(board([panel]), key="ranking_map", on_pick=pick_from_map)
    if not show_table:
        return
    shown = ranking.copy()
    shown.insert(0, "rank", range(1, len(shown) + 1))
    table_key = f"ranking_{st.session_state.get(ROUND_KEY, 0)}"
    st.dataframe(  # under the map: beside it, half of a projector's page cut the divergences to "0"
        shown,
        hide_index=True,
        key=table_key,
        on_select=partial(pick_from_table, ranking, table_key),
        selection_mode="single-row",
        height=min(420, 38 + 35 * len(shown)),
        column_config={
            "js_divergence": st.column_config.NumberColumn("JS divergence (bits)", format="%.4f"),
            "max_abs_difference": st.column_config.NumberColumn("max |A − B|", format="%.4f"),
        },
    )
