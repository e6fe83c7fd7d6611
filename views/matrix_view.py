"""The matrix-view component: draws an pictures.boards board in the page (the drawing is matrix_view.js)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import streamlit as st

HERE = Path(__file__).parent
_matrix_view = st.components.v2.component(
    "matrix_view", js=(HERE / "matrix_view.js").read_text(), css=(HERE / "matrix_view.css").read_text()
)


def show_board(board: dict, key: str, on_pick: Callable[[], None] | None = None) -> None:
    """Draw the board. When a pickable panel is clicked, `on_pick` runs as a callback before the rerun: read the
    click there with `picked_value(key)`."""
    _matrix_view(data=board, key=key, on_pick_change=on_pick or (lambda: None))


def picked_value(key: str) -> dict | None:
    """Inside an on_pick callback: the `pick` of the panel just clicked."""
    state = st.session_state.get(key)
    return getattr(state, "pick", None) if state is not None else None
