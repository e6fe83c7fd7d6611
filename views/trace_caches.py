"""The caches of what the pages compute from a shown trace (views/caches.py's rules hold here too): norm-based maps,
rollout and flow, row entropy, the entropy table, head roles and the grid of every map. Each is keyed on the trace's
config and tokens (trace_key), never on the trace itself.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import streamlit as st

from explorer.analysis.head_roles import HeadRoles, head_roles, norm_head_roles, text_queries
from explorer.analysis.mixing import attention_flow_rows, attention_rollout
from explorer.analysis.norm_attention import norm_attention, removed_heads
from explorer.analysis.stats import head_entropy, row_entropy
from explorer.config import ModelConfig
from explorer.trace import Trace
from pictures.attention_panels import grid_panel
from views.shared_cache import shared
from views.state import model_key, session_model, trace_maker

# --- What a head adds and how tokens mix (explorer.analysis): from a shown trace, keyed on its config and tokens.
# A trace is decided by its config and the tokens of each stack, so that pair keys these caches instead of the trace.
# Norm-based maps are as large as the weights (283 MB for SmolLM2 at 512 pieces): in the shared budget of bytes.


def trace_key(trace: Trace) -> tuple:
    """What, besides the config, decides a trace: the tokens of each of its stacks, and the heads removed (with
    what their output became)."""
    return (*(tuple(stack.tokens) for stack in trace.stacks), trace.ablated, trace.ablate_with)


def _as_large_as_the_maps(cfg, tokens: tuple, kind: str, who, _model, _trace: Trace) -> int:
    """What a measure of the maps takes: as many float32 numbers as the maps (283 MB for SmolLM2 at 512 pieces)."""
    return _trace.maps(kind).weights.nbytes


@shared("Measuring what each head adds…", room=_as_large_as_the_maps)
def _norm_attention(cfg: ModelConfig | None, tokens: tuple, kind: str, who: str | None, _model, _trace) -> np.ndarray:
    return norm_attention(_model, _trace, kind)


def norm_attention_of(trace: Trace, kind: str) -> np.ndarray:
    """[L, H, Tq, Tk] read-only: norm_attention of the session's shown model on `trace` (the shown trace) for the
    attention `kind`; a trained model's are keyed on its own model_key(), so no other session gets them."""
    return norm_attention_with(trace, kind, model_key(), session_model())


def norm_attention_with(trace: Trace, kind: str, who: str | None, model) -> np.ndarray:
    """norm_attention_of with the session's model_key() and model given (`who`, `model`): it reads nothing from the
    session, so it runs outside the script run too (a download's callable)."""
    return _norm_attention(trace.config, trace_key(trace), kind, who, _model=model, _trace=trace)


def norm_attention_later(kind: str) -> Callable[[], np.ndarray]:
    """What makes norm_attention_of the shown trace when called, even outside the script run (a download's
    callable): the trace's maker and the model, never the trace or the maps themselves (views/state.py)."""
    run, who, model = trace_maker(), model_key(), session_model()
    return lambda: norm_attention_with(run(), kind, who, model)


@shared()
def _rollout(cfg: ModelConfig | None, tokens: tuple, residual: float, who: str | None, _trace: Trace) -> np.ndarray:
    return attention_rollout(_trace, residual)


def rollout_of(trace: Trace, residual: float) -> np.ndarray:
    """[L, T, T] attention_rollout of the shown trace."""
    return rollout_with(trace, residual, model_key())


def rollout_with(trace: Trace, residual: float, who: str | None) -> np.ndarray:
    """rollout_of with the session's model_key() given (`who`): it runs outside the script run too."""
    return _rollout(trace.config, trace_key(trace), residual, who, _trace=trace)


def rollout_later(residual: float) -> Callable[[], np.ndarray]:
    """What makes rollout_of the shown trace when called, even outside the script run (as norm_attention_later)."""
    run, who = trace_maker(), model_key()
    return lambda: rollout_with(run(), residual, who)


@st.cache_data(max_entries=32, show_spinner="Solving attention flow (a max-flow problem per token)…")
def _flow(
    cfg: ModelConfig | None, tokens: tuple, residual: float, queries: tuple[int, ...], who: str | None, _trace: Trace
) -> np.ndarray:
    return attention_flow_rows(_trace, queries, residual)


@shared()
def _row_entropy(cfg: ModelConfig | None, tokens: tuple, kind: str, who: str | None, _trace: Trace) -> np.ndarray:
    return row_entropy(_trace.maps(kind).weights)


def row_entropy_of(trace: Trace, kind: str) -> np.ndarray:
    """[L, H, Tq] row_entropy of the shown trace's `kind` of attention: the entropy table and the head roles' breadth
    both read it (0.3 s for SmolLM2 at 512 pieces, made once)."""
    return _row_entropy(trace.config, trace_key(trace), kind, model_key(), _trace=trace)


@st.cache_data(max_entries=16, show_spinner=False)
def _entropy(cfg: ModelConfig | None, tokens: tuple, kind: str, who: str | None, _trace: Trace) -> pd.DataFrame:
    return head_entropy(_trace.maps(kind), entropy=row_entropy_of(_trace, kind))


def entropy_of(trace: Trace, kind: str) -> pd.DataFrame:
    """head_entropy of the shown trace's `kind` of attention, from its row_entropy_of (made once per trace)."""
    return _entropy(trace.config, trace_key(trace), kind, model_key(), _trace=trace)


@st.cache_data(max_entries=16, show_spinner=False)
def _roles(
    cfg: ModelConfig | None, tokens: tuple, kind: str, norms: bool, who: str | None, _trace, _norms
) -> HeadRoles:
    maps = _trace.maps(kind)
    allowed = text_queries(maps)  # [T, T]: [PAD] queries left out
    if _norms is None:
        entropy = row_entropy_of(_trace, kind)
        return head_roles(maps.weights, list(maps.key_tokens), allowed, separators=("[SEP]",), entropy=entropy)
    return norm_head_roles(_norms, list(maps.key_tokens), allowed, separators=("[SEP]",))


def roles_of(trace: Trace, kind: str, norms: np.ndarray | None) -> HeadRoles:
    """head_roles of the shown trace's `kind` of attention, measured on `norms` ([L, H, T, T] norm_attention_of the
    same trace and kind) when given: once per trace (0.2 s for SmolLM2 at 512 pieces on the weights, whose breadth is
    read from row_entropy_of)."""
    return _roles(trace.config, trace_key(trace), kind, norms is not None, model_key(), _trace=trace, _norms=norms)


@st.cache_data(max_entries=16, show_spinner=False)
def _grid(
    cfg: ModelConfig | None, tokens: tuple, kind: str, stretch: bool, norms: bool, who: str | None, _trace, _norms
):
    maps = _trace.maps(kind)
    mean_removed = removed_heads(_trace, maps) if _trace.ablate_with == "mean" else ()  # drawn on every cell
    return grid_panel(maps, stretch=stretch, norms=_norms, mean_removed=mean_removed)


def grid_of(trace: Trace, kind: str, stretch: bool, norms: np.ndarray | None, picked: tuple[int, int] | None) -> dict:
    """grid_panel of the shown trace's `kind` of attention (with `norms`: of norm_attention_of it), with the map
    `picked` (layer, head) framed: the sheet is made once per trace (0.4-0.7 s for SmolLM2 at 512 pieces), the frame
    per pick."""
    sheet = _grid(
        trace.config, trace_key(trace), kind, stretch, norms is not None, model_key(), _trace=trace, _norms=norms
    )
    n_heads = trace.maps(kind).n_heads
    return {**sheet, "picked": None if picked is None else picked[0] * n_heads + picked[1]}


def flow_of(trace: Trace, residual: float, queries: tuple[int, ...]) -> np.ndarray:
    """[len(queries), T] attention_flow_rows of the shown trace for those query positions."""
    return _flow(trace.config, trace_key(trace), residual, tuple(queries), model_key(), _trace=trace)
