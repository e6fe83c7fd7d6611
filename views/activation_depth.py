"""Activations page, first screen: the statistics of the residual stream and each sub-layer over depth, their
table, and what each norm receives and returns."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from explorer.analysis.activations import depth_story, layer_statistics
from explorer.anatomy import norm_name
from explorer.config import PAD_TOKEN, ModelConfig
from explorer.positional import input_text
from explorer.trace import StackTrace
from pictures.activation_charts import NORM_POINT, depth_figure, norm_figure
from views.lazy_sections import lazy_section
from views.widgets import csv_button, plotly_chart

NUMBER = st.column_config.NumberColumn(format="%.5g")  # the statistics and gradient tables: 5 significant digits


def named_norms(stats: pd.DataFrame, name: str) -> pd.DataFrame:
    """layer_statistics with each norm's points named for the model's norm ("attn RMSNorm in" for a Llama)."""
    return stats.assign(point=stats["point"].str.replace(NORM_POINT, name, regex=False))


def depth(cfg: ModelConfig, stack: StackTrace) -> None:
    st.subheader("Over depth: the residual stream and each sub-layer")
    stats = layer_statistics(stack)
    st.info(depth_story(stats, cfg.norm, norm_name(cfg)), icon=":material/insights:")
    family = getattr(cfg, "family", None)  # a BERT checkpoint's input row is normalised (input_text)
    padded = PAD_TOKEN in stack.tokens  # their rows are in the statistics, and the subtitle says so
    plotly_chart(depth_figure(stats, stack.name, cfg.positional, family, padded), "act_depth")
    named = named_norms(stats, norm_name(cfg))
    if st.toggle(
        f"Show the statistics table (layer -1 is the input: {input_text(cfg.positional, family)})",
        key="act_stats_table",
        bind="query-params",
    ):
        st.dataframe(
            named,
            hide_index=True,
            column_config={c: NUMBER for c in ("mean", "std", "rms", "max_abs")},
            height=min(420, 38 + 35 * len(named)),
        )
    csv_button("Statistics (CSV)", named, f"activations_{stack.name}_statistics.csv", "act_csv_stats")
    name = stack.name  # not the stack: a fragment's arguments must not hold the trace (views/state.py)
    lazy_section(
        "**What each norm receives and returns**, block by block",  # one label for every model (lazy_sections)
        "act_open_norms",
        lambda: plotly_chart(norm_figure(stats, name, cfg.norm, norm_name(cfg)), "act_norms"),
    )
