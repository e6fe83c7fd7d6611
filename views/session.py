"""What dashboard.py leaves in st.session_state for the pages, read in one place (not a page itself)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TypeVar

import streamlit as st

from explorer.config import ModelConfig
from explorer.model import Transformer, build_model
from explorer.trace import Trace

Result = TypeVar("Result")


@st.cache_resource(max_entries=8, show_spinner="Building the model…")
def cached_model(cfg: ModelConfig) -> Transformer:
    """One random model per config, shared by every session and page: never mutated (run() only reads it)."""
    return build_model(cfg)


def sidebar_run(missing: str) -> tuple[ModelConfig, Trace] | None:
    """The config and trace dashboard.py left for the page; None, after showing the sentence `missing`, when the
    sidebar's settings are impossible (dashboard.py names the problem above the page)."""
    cfg: ModelConfig | None = st.session_state.get("_config")
    trace: Trace | None = st.session_state.get("_trace")
    if cfg is None or trace is None:
        st.info(missing)
        return None
    return cfg, trace


def model_key() -> str | None:
    """None for the shared random model; otherwise a key unique to this session's trained model, so caches
    keyed on it can never hand one session's trained model, or its numbers, to another."""
    trained = st.session_state.get("_trained")
    return None if trained is None else trained.setdefault("key", uuid.uuid4().hex)


def session_model() -> Transformer:
    """The model behind the shown trace: the shared random model for the sidebar's config, or this session's
    trained model when the Train page sent one."""
    return st.session_state["_model"]


def trained_label() -> str | None:
    trained = st.session_state.get("_trained")
    return None if trained is None else trained["label"]


def weights_note() -> str:
    """Says whose weights the numbers come from."""
    label = trained_label()
    return "untrained weights" if label is None else f"trained weights ({label})"


def from_model(cached: Callable[..., Result], *args: object) -> Result:
    """cached(*args, _model=the session's model). A trained model's results skip the cache: they would be
    stored under a config that a random model of the same shape shares, and belong to this session only."""
    if trained_label() is None:
        return cached(*args, _model=session_model())
    return cached.__wrapped__(*args, _model=session_model())
