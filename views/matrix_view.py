"""The matrix-view component: draws an explorer.matrix_view board in the page (the drawing is matrix_view.js)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import streamlit as st

HERE = Path(__file__).parent
_matrix_view = st.components.v2.component(
    "matrix_view", js=(HERE / "matrix_view.js").read_text(), css=(HERE / "matrix_view.css").read_text()
)


def show_board(board: dict, key: str, on_pick: Callable[[], None] | None = None) -> dict | None:
    """Draw the board; returns the `pick` of the panel clicked in this run (None otherwise).

    `on_pick` runs first, as a callback, when a pickable panel is clicked: read the click there with
    `picked_value(key)`."""
    result = _matrix_view(data=board, key=key, on_pick_change=on_pick or (lambda: None))
    return getattr(result, "pick", None)


def picked_value(key: str) -> dict | None:
    """Inside an on_pick callback: the `pick` of the panel just clicked."""
    state = st.session_state.get(key)
    return getattr(state, "pick", None) if state is not None else None
