"""The caches of the "What heads do" page, keyed as views/caches.py keys its own: a trace by its config, the tokens
of its stacks (trace_key), the heads its run removed and how, and model_key(); never by a model or a trace, which
are passed underscored (not hashed). A trained model is this session's own: its results skip the cache (cached),
so nothing of it is stored where another session could be handed it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TypeVar

import numpy as np
import pandas as pd
import streamlit as st

from explorer.ablation import Head
from explorer.analysis.attribution import LogitAttribution, logit_attribution, replaced_direct_change
from explorer.analysis.logit_lens import logit_lens
from explorer.config import ModelConfig
from explorer.model import Transformer
from explorer.prediction import top_read_out
from explorer.trace import Trace
from views.caches import trace_room
from views.shared_cache import taking_turns
from views.state import current_source, session_model
from views.trace_caches import trace_key

Result = TypeVar("Result")
LENS_K = 5  # pieces the lens keeps per layer and position: the grid draws the first, hover and the CSV give all five


def cached(function: Callable[..., Result], *args: object, **kwargs: object) -> Result:
    """function(*args, **kwargs) through its cache while the config names the model; a trained model's results
    skip it (they would be stored under a config a random model of its shape shares, and belong to this session)."""
    if current_source().shared:
        return function(*args, **kwargs)
    return function.__wrapped__(*args, **kwargs)


def run_key(trace: Trace) -> tuple:
    """What decides a trace besides its model: its config and trace_key (the tokens of each stack, the heads removed
    and how)."""
    return trace.config, trace_key(trace)


@contextlib.contextmanager
def share_bar(what: str) -> Iterator[Callable[..., None]]:
    """A progress bar saying `what`, then "`what`: 40%" as the work tells it the share done (its first argument; any
    others are ignored); gone when the work ends. Made inside a cached function, so that a cache hit replays it
    empty."""
    bar = st.progress(0.0, text=f"{what}…")

    def progress(share: float, *said: object) -> None:
        bar.progress(min(1.0, float(share)), text=f"{what}: {share:.0%}")

    try:
        yield progress
    finally:
        bar.empty()


@st.cache_data(max_entries=16, show_spinner=False)
def _lens(key: tuple, positions: tuple[int, ...] | None, _model: Transformer, _trace: Trace) -> pd.DataFrame:
    with share_bar("Reading every layer's guess (the logit lens)") as progress:
        return logit_lens(_model, _trace, k=LENS_K, positions=positions, progress=progress)


def lens_of(trace: Trace, positions: tuple[int, ...] | None = None) -> pd.DataFrame:
    """logit_lens of the session's model on `trace` (a trace of that model), top LENS_K per layer at each position
    (or those in `positions`)."""
    return cached(_lens, run_key(trace), positions, _model=session_model(), _trace=trace)


@st.cache_data(max_entries=32, show_spinner="Sharing the logit out over the heads…")
def _attribution(key: tuple, piece: str | None, _model: Transformer, _trace: Trace) -> LogitAttribution:
    return logit_attribution(_model, _trace, piece)


def attribution_of(trace: Trace, piece: str | None) -> LogitAttribution:
    """logit_attribution of `piece` (its vocabulary spelling; None: the top piece) on `trace`."""
    return cached(_attribution, run_key(trace), piece, _model=session_model(), _trace=trace)


@st.cache_data(max_entries=32, show_spinner=False)
def _direct_change(
    key: tuple, heads: tuple[Head, ...], mode: str, piece: str | None, _model: Transformer, _trace: Trace
) -> float:
    return replaced_direct_change(_model, _trace, heads, mode, piece)


def direct_change_of(trace: Trace, heads: tuple[Head, ...], mode: str, piece: str | None) -> float:
    """replaced_direct_change of `heads` replaced as `mode` says, on `trace` (the run with every head): what the
    logit of `piece` would move by had nothing after them changed."""
    return cached(_direct_change, run_key(trace), heads, mode, piece, _model=session_model(), _trace=trace)


@st.cache_data(max_entries=32, show_spinner=False)
def _top_pieces(key: tuple, k: int, _model: Transformer, _trace: Trace) -> pd.DataFrame:
    return top_read_out(_model, _trace, k)


def top_pieces_of(trace: Trace, k: int = 10) -> pd.DataFrame:
    """top_read_out of the session's model at the last position of `trace`."""
    return cached(_top_pieces, run_key(trace), k, _model=session_model(), _trace=trace)


@st.cache_data(max_entries=8, show_spinner=False)
def _effects(
    cfg: ModelConfig, text: str, target: str | None, mode: str, _model: Transformer, _base: Trace
) -> np.ndarray:
    from explorer import head_ablation_effects

    n_heads = _model.config.n_layers * _model.config.n_heads if _model.config is not None else None
    what = f"{n_heads} heads" if n_heads else "every head"
    room = trace_room(cfg, text, target)  # the heads of a layer are removed in batches of up to 256 MB
    with share_bar(f"Removing each of the {what} in turn") as progress, taking_turns(room):
        return head_ablation_effects(_model, text, target, mode, progress, base=_base)


def ablation_effects_of(cfg: ModelConfig, text: str, target: str | None, mode: str, before: Trace) -> np.ndarray:
    """[L, H] head_ablation_effects of the session's model on the typed text, whose run with every head is
    `before` (lent to it): 1 − cosine of the sentence embedding with each head removed alone, a progress bar while it
    runs."""
    return cached(_effects, cfg, text, target, mode, _model=session_model(), _base=before)
