"""What the pages share, typed and under one session_state key: dashboard.py writes it each run, pages read it.

The model behind the pages has a source: configured (random weights from the sidebar's controls), pretrained (a
shipped checkpoint, loaded once per server and shared by every session), or trained (this session's model from the
Train page). For the first two the config alone decides the model, so caches keyed on it are shared; a trained
model is this session's own (views/caches.py keeps its results out of the shared caches).
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import streamlit as st

from explorer.ablation import Head
from explorer.config import CheckpointConfig, ModelConfig
from explorer.model import Transformer
from explorer.pretrained import pretrained_title
from explorer.tasks import Task
from explorer.trace import Trace

STATE_KEY = "_app"  # the AppState of this session
CONFIGURED = "configured"  # the sidebar's model choice for random weights from its controls


@dataclass(frozen=True)
class TrainedModel:
    """A model the Train page sent to the other pages: this session's own, shown until "Back to the random model"."""

    model: Transformer  # never mutated once sent: the pages only run it
    task: Task | None  # what it was trained on (None when unknown)
    label: str  # what it is, for captions: "reverse (length 8) · post-norm · 300 steps"
    key: str = field(default_factory=lambda: uuid.uuid4().hex)  # unique to this model: keys this session's caches

    def __post_init__(self) -> None:
        _TRAINED[self.key] = self.model


# Every trained model a session holds, by its key (model_key()): while the session keeps it, code that runs outside
# the script run (a download's callable) finds it by the key it was given, as it cannot read the session.
_TRAINED: weakref.WeakValueDictionary[str, Transformer] = weakref.WeakValueDictionary()


def trained_model(who: str) -> Transformer:
    """The trained model whose model_key() is `who` (KeyError once no session holds it)."""
    return _TRAINED[who]


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


@dataclass
class AppState:
    """What dashboard.py leaves for the page it runs. While `trained` is set, config, model and trace are that
    model's, run on the typed tokens for this session only.

    The trace is kept as the way to make it (`run`: a cached run and its keys), and held only while the script runs:
    once the page is drawn (let_go), the shared cache is its only holder, so its byte budget bounds what open
    sessions hold. A fragment's rerun, or a later read, gets it from the cache again (or makes it again)."""

    config: ModelConfig | None = None  # the config behind `trace`; None when the settings are impossible
    sidebar_config: ModelConfig | None = None  # the sidebar's own config (or None): what the Train page trains
    model: Transformer | None = None  # the model behind `trace` (never mutate it): not rebuilt from `config`, which
    # would give random weights instead of a trained model's
    trained: TrainedModel | None = None  # kept from run to run, unlike the fields above
    ablated: tuple[Head, ...] = ()  # (layer, head) of the first stack removed in `trace`, sorted; () when none
    ablate_with: str = "zero"  # what their output became: "zero" or "mean" (explorer.ablation)
    run: Callable[[], Trace] | None = field(default=None, repr=False)  # makes `trace`: keys, never a trace
    base_run: Callable[[], Trace] | None = field(default=None, repr=False)  # makes base_trace when heads are removed
    holding: bool = field(default=True, repr=False)  # True while the script runs: traces made are kept till let_go
    _held: dict[Callable[[], Trace], Trace] = field(default_factory=dict, repr=False)  # made while holding, by run

    def show(self, run: Callable[[], Trace], base_run: Callable[[], Trace] | None = None) -> None:
        """Run `run` now (its ConfigError leaves the state without a trace) and show its trace; `base_run` makes the
        same model and text with every head, when heads are removed."""
        self._held[run] = run()
        self.run, self.base_run = run, base_run

    def let_go(self) -> None:
        """The page is drawn: hold no trace from now on (views/state.py's docstring)."""
        self.holding = False
        self._held.clear()

    def _made(self, run: Callable[[], Trace]) -> Trace:
        """run()'s trace: the one held while the script runs, else made (or read from its cache) now."""
        if run in self._held:
            return self._held[run]
        trace = run()
        if self.holding:
            self._held[run] = trace
        return trace

    @property
    def trace(self) -> Trace | None:
        """explorer.Trace of the typed tokens, or None when there is an error; with `ablated` heads removed, the trace
        of the model without them (every page shows that model)."""
        return None if self.run is None else self._made(self.run)

    @property
    def base_trace(self) -> Trace | None:
        """The same model and text with every head: `trace` itself when none is removed. Run (or read from its cache)
        only when a page asks, so a page that shows only the model without the heads never holds both traces."""
        return self.trace if self.base_run is None else self._made(self.base_run)

    @property
    def source(self) -> ModelSource:
        """The source of the model behind this run's trace."""
        if self.trained is not None:
            return ModelSource("trained", self.trained.label, self.trained.key)
        if isinstance(self.config, CheckpointConfig):
            return ModelSource("pretrained", self.config.checkpoint)
        return ModelSource(CONFIGURED)


def app_state() -> AppState:
    """This session's state (an empty one before dashboard.py has run)."""
    return st.session_state.setdefault(STATE_KEY, AppState())


def new_run() -> AppState:
    """A fresh state for this script run, keeping the trained model sent before: dashboard.py fills it in."""
    state = AppState(trained=app_state().trained)
    st.session_state[STATE_KEY] = state
    return state


def use_trained(trained: TrainedModel | None) -> None:
    """Show `trained` on every page from the next run on; None: back to the sidebar's model."""
    app_state().trained = trained


def sidebar_run(missing: str) -> tuple[ModelConfig, Trace] | None:
    """The config and trace dashboard.py left for the page; None, after showing the sentence `missing`, when the
    sidebar's settings are impossible (dashboard.py names the problem above the page)."""
    state = app_state()
    if state.config is None or state.trace is None:
        st.info(missing)
        return None
    return state.config, state.trace


def shown_run() -> tuple[ModelConfig, Trace]:
    """The config and trace of the page drawn, for a fragment (which reruns without dashboard.py): read from the
    shared cache, or made again, once the page has let go of it (AppState.let_go). Never keep what it returns in a
    fragment's arguments or a download's callable: they would hold the trace (trace_maker instead)."""
    state = app_state()
    trace = state.trace
    assert state.config is not None and trace is not None, "a fragment runs only on a page that has a trace"
    return state.config, trace


def trace_maker() -> Callable[[], Trace]:
    """What makes the shown trace again, for a download's callable (which runs outside the script run, after the page
    is drawn): a cached run and its keys, never the trace itself."""
    run = app_state().run
    assert run is not None, "a download is offered only on a page that has a trace"
    return run


def base_trace_maker() -> Callable[[], Trace]:
    """trace_maker of AppState.base_trace: the same model and text with every head."""
    state = app_state()
    return state.base_run or trace_maker()


def current_source() -> ModelSource:
    """The source of the model behind this run's trace."""
    return app_state().source


def model_key() -> str | None:
    """None when the config names the model (configured or pretrained); otherwise a key unique to this session's
    trained model, so caches keyed on it can never hand one session's trained model, or its numbers, to another."""
    return current_source().key


def session_model() -> Transformer:
    """The model behind the shown trace: the shared model for the sidebar's config or checkpoint, or this session's
    trained model when the Train page sent one."""
    model = app_state().model
    assert model is not None, "no model: the page runs only when dashboard.py has left a trace"
    return model


def trained_label() -> str | None:
    """The trained model's label while the Train page's model is in use, else None."""
    source = current_source()
    return source.name if source.kind == "trained" else None


def trained_weights(cfg: ModelConfig) -> bool:
    """Whether the model's weights were trained (a pretrained checkpoint, or the Train page's model), not random."""
    return trained_label() is not None or isinstance(cfg, CheckpointConfig)


def weights_note() -> str:
    """Says whose weights the numbers come from."""
    return current_source().weights
