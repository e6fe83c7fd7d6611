"""Activations page, gradients: each parameter's gradient norm for the model's objective, by block."""

from __future__ import annotations

import streamlit as st

from explorer.ablation import heads_text
from explorer.analysis.gradients import layer_gradient_totals, objective_text
from explorer.config import CheckpointConfig, ConfigError, ModelConfig
from explorer.trace import StackTrace, Trace
from pictures.activation_boards import gradient_heatmap
from pictures.activation_charts import gradient_totals_figure
from views.activation_depth import NUMBER
from views.caches import cached_gradients, from_model
from views.matrix_view import show_board
from views.state import session_model, trained_label
from views.widgets import csv_button, plotly_chart


def gradients(cfg: ModelConfig, trace: Trace, stack: StackTrace) -> None:
    st.info(objective_text(session_model()), icon=":material/function:")
    if trace.ablated:  # the backward pass runs the model whole (cached_gradients takes no removal)
        st.caption(
            f"These gradients are the whole model's: the {'encoder ' if cfg.reads_target else ''}heads "
            f"removed elsewhere on this page ({heads_text(trace.ablated)}) take part in this backward pass."
        )
    target = trace.target_tokens
    try:
        norms = from_model(cached_gradients, cfg, tuple(trace.tokens), target)
    except ConfigError as e:
        st.warning(str(e), icon=":material/warning:")
        return
    totals = layer_gradient_totals(norms)
    plotly_chart(gradient_totals_figure(totals, cfg.norm), "act_grad_totals")
    trend = "; ".join(
        f"{name} blocks: {part['norm'].iloc[0]:.3g} (block 0) → {part['norm'].iloc[-1]:.3g} (block "
        f"{int(part['layer'].iloc[-1])})"
        for name, part in totals.groupby("stack", sort=False)
    )
    if isinstance(cfg, CheckpointConfig):
        st.caption(
            f"Here, {cfg.norm}-norm: {trend}. These are real pretrained weights, so Xiong et al.'s (2020) finding "
            "about post- and pre-norm at initialisation does not apply to them. To see a real post-norm and a real "
            "pre-norm stream side by side, open Compare with B = the other checkpoint."
        )
    elif trained_label() is None:
        st.caption(
            f"Here, {cfg.norm}-norm: {trend}. Xiong et al. (2020) found that at initialisation, with "
            "Xavier-initialised weights, a post-norm transformer's gradients grow towards the output layers (one "
            "reason it needs a learning-rate warm-up) while pre-norm keeps them level or shrinking. This model uses "
            "PyTorch's default initialisation and a toy objective, so it need not reproduce their figure: switch the "
            "norm setting in the sidebar to compare the placements on the same weights and tokens (Compare draws all "
            "four at once)."
        )
    else:
        st.caption(
            f"Here, {cfg.norm}-norm: {trend}. These are trained weights, not an initialisation, so Xiong et al.'s "
            "(2020) finding about post-norm and pre-norm at initialisation does not apply to them; the sidebar's norm "
            "setting does not change this model. Train the placements together on the Train page to compare them."
        )
    show_board(gradient_heatmap(norms, stack.name), key="act_grad_heatmap")
    outside = norms[norms["layer"].isna()]
    if len(outside):
        names = ", ".join(f"{p} ({n:.3g})" for p, n in zip(outside["parameter"], outside["norm"], strict=True))
        st.caption(f"Outside the blocks: {names}.")
    if st.toggle("Show the gradient table (every parameter tensor)", key="act_grads_table", bind="query-params"):
        st.dataframe(norms, hide_index=True, column_config={"norm": NUMBER})
    with st.container(horizontal=True):  # each button as wide as its label, which columns cut on a projector
        csv_button("Every parameter (CSV)", norms, "gradients_parameters.csv", "act_csv_grads")
        csv_button("Block totals (CSV)", totals, "gradients_blocks.csv", "act_csv_grad_totals")
