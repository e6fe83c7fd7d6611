"""Where every page gets its model, tokens and trace: the model source the sidebar chose, read in one place.

A source is configured (random weights from the sidebar's controls), pretrained (a shipped checkpoint, loaded once
per server and shared by every session), or trained (this session's model from the Train page). For the first two
the config alone decides the model, so caches keyed on it are shared; a trained model is this session's own.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import streamlit as st
from streamlit.logger import get_logger

from explorer.compare import model_for_b
from explorer.config import CheckpointConfig, ModelConfig
from explorer.model import Transformer, build_model
from explorer.pretrained import INSTALLED, load_pretrained, pretrained_title
from explorer.trace import Trace

Result = TypeVar("Result")
LOG = get_logger(__name__)  # "building model" lines: bench/bench_load.py counts them
CONFIGURED = "configured"  # the sidebar's model choice for random weights from its controls


@dataclass(frozen=True)
class ModelSource:
    """Where the model the pages show comes from."""

    kind: str  # "configured", "pretrained" or "trained"
    name: str = ""  # the checkpoint's name (pretrained) or the Train page's label (trained)
    key: str | None = None  # None when the config alone decides the model; else unique to this session's model

    @property
    def shared(self) -> bool:
        """True when results may be cached for every session: the config names the model."""
        return self.key is None

    @property
    def weights(self) -> str:
        """Whose weights the numbers come from, for a caption."""
        if self.kind == "trained":
            return f"trained weights ({self.name})"
        if self.kind == "pretrained":
            return f"the pretrained weights of {pretrained_title(self.name)}"
        return "untrained weights"


def current_source() -> ModelSource:
    """The source of the model behind this run's trace."""
    trained = st.session_state.get("_trained")
    if trained is not None:
        return ModelSource("trained", trained["label"], trained.setdefault("key", uuid.uuid4().hex))
    cfg = st.session_state.get("_config")
    if isinstance(cfg, CheckpointConfig):
        return ModelSource("pretrained", cfg.checkpoint)
    return ModelSource(CONFIGURED)


_CHECKPOINTS: dict[str, Transformer] = {}  # every shipped checkpoint this server has loaded: read, never mutated
_CHECKPOINT_LOCK = threading.Lock()  # thirty students opening one link load a checkpoint once, not thirty times


def pretrained_model(name: str) -> Transformer:
    """A shipped checkpoint, loaded on first use in this server (with a progress bar) and shared by every session."""
    if name in _CHECKPOINTS:
        return _CHECKPOINTS[name]
    title = INSTALLED[name].title if name in INSTALLED else name
    bar = st.progress(0.0, text=f"Loading {title}: the first visitor of this server waits a few seconds…")
    try:
        with _CHECKPOINT_LOCK:  # a second session waits here while the first loads it
            if name not in _CHECKPOINTS:
                LOG.info("building model %s", name)
                _CHECKPOINTS[name] = load_pretrained(
                    name, progress=lambda done, what: bar.progress(min(1.0, done), text=f"Loading {title}: {what}")
                )
    finally:
        bar.empty()
    return _CHECKPOINTS[name]


@st.cache_resource(max_entries=8, show_spinner="Building the model…")
def _built_model(cfg: ModelConfig) -> Transformer:
    LOG.info("building model %s", cfg)
    if isinstance(cfg, CheckpointConfig):  # a checkpoint changed on purpose (norm flipped): a copy on its weights
        return model_for_b(pretrained_model(cfg.checkpoint), cfg)
    return build_model(cfg)


def cached_model(cfg: ModelConfig) -> Transformer:
    """The one model a config names, shared by every session and page (never mutated: run() only reads it): random
    weights for a configured model, the checkpoint itself for its own config, a copy on its weights otherwise."""
    if isinstance(cfg, CheckpointConfig):
        model = pretrained_model(cfg.checkpoint)
        if model.config == cfg:
            return model
    return _built_model(cfg)


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
    """None when the config names the model (configured or pretrained); otherwise a key unique to this session's
    trained model, so caches keyed on it can never hand one session's trained model, or its numbers, to another."""
    return current_source().key


def session_model() -> Transformer:
    """The model behind the shown trace: the shared model for the sidebar's config or checkpoint, or this session's
    trained model when the Train page sent one."""
    return st.session_state["_model"]


def trained_label() -> str | None:
    source = current_source()
    return source.name if source.kind == "trained" else None


def weights_note() -> str:
    """Says whose weights the numbers come from."""
    return current_source().weights


def from_model(cached: Callable[..., Result], *args: object) -> Result:
    """cached(*args, _model=the session's model). A trained model's results skip the cache: they would be
    stored under a config that a random model of the same shape shares, and belong to this session only."""
    if current_source().shared:
        return cached(*args, _model=session_model())
    return cached.__wrapped__(*args, _model=session_model())
