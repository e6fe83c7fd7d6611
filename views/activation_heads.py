"""Activations page, per head: entropy, mean distance and sparsity of every head of a stack's self-attention."""

from __future__ import annotations

import numpy as np
import streamlit as st

from explorer.activations_text import head_stats_caption
from explorer.analysis.stats import COVERED_MASS, head_entropy, head_grid, head_mean_distance, head_sparsity
from explorer.analysis.stream_energy import padding_queries_counted
from explorer.trace import StackTrace
from pictures.activation_boards import CIVIDIS, head_grid_panel
from pictures.boards import board
from pictures.style import VIRIDIS
from views.matrix_view import show_board
from views.widgets import ENTROPY_COLUMNS, csv_button


def per_head(stack: StackTrace) -> None:
    maps = stack.self_attention
    if not maps.allowed.any():  # every token [PAD] with a padding mask: no query may attend, nothing to average
        st.info(f"No query of the {stack.name} stack has an allowed key: there is no attention to describe.")
        return
    entropy, distance, sparsity = head_entropy(maps), head_mean_distance(maps), head_sparsity(maps)
    uniform_entropy = float(entropy["max_entropy"].iloc[0])
    uniform_distance = float(distance["uniform_distance"].iloc[0])
    padded = padding_queries_counted(maps)
    st.caption(head_stats_caption(maps.kind, stack.name, uniform_entropy, uniform_distance, padded))
    entropy_note = f"uniform = {uniform_entropy:.2f}" if uniform_entropy > 0 else "one key per query: all 0"
    grids = [
        (entropy, "entropy", "Entropy (nats)", entropy_note, "nats", uniform_entropy, VIRIDIS),
        (
            distance,
            "distance",
            "Mean distance (positions)",
            f"uniform = {uniform_distance:.2f}",
            "positions",
            None,
            VIRIDIS,
        ),
        (sparsity, "sparsity", "Sparsity", f"keys dropped keeping {COVERED_MASS:.0%}", "sparsity", 1.0, CIVIDIS),
    ]
    panels = []
    for frame, name, title, subtitle, unit, top, colours in grids:
        grid = head_grid(frame, name)
        if top is None or not np.isfinite(top):
            top = max(float(np.nanmax(grid)) if np.isfinite(grid).any() else 1.0, uniform_distance)
        panels.append(head_grid_panel(grid, title, subtitle, unit, 0.0, top, colours=colours, name=f"act_{name}"))
    show_board(board(panels), key="act_heads")
    table = entropy.merge(distance, on=["layer", "head"]).merge(sparsity, on=["layer", "head"])
    if st.toggle(
        "Show the per-head table",
        key="act_heads_table",
        bind="query-params",
        help="Every statistic of every head, sortable.",
    ):
        st.dataframe(
            table,
            hide_index=True,
            column_config={
                **ENTROPY_COLUMNS,
                "distance": st.column_config.NumberColumn("mean distance", format="%.3f"),
                "uniform_distance": st.column_config.NumberColumn("uniform distance", format="%.3f"),
                "keys_for_mass": st.column_config.NumberColumn(f"keys for {COVERED_MASS:.0%}", format="%.2f"),
                "allowed_keys": st.column_config.NumberColumn("allowed keys", format="%.2f"),
                "sparsity": st.column_config.NumberColumn("sparsity", format="%.3f"),
            },
        )
    csv_button("Per-head statistics (CSV)", table, f"activations_{stack.name}_heads.csv", "act_csv_heads")
