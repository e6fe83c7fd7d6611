"""A session keeps no trace of its own once its page is drawn: the shared cache (views/shared_cache.py) is the only
holder of traces and norm maps, so its byte budget bounds them, however many sessions stay open.

A session that kept its trace (in its AppState, in a fragment's arguments, or in a download button's callable)
would hold it after the cache let it go: thirty students with thirty long texts would hold thirty traces, whatever
the budget. Here each page runs in a session that stays open, the caches are emptied, and every array of every
trace and shared result the run made must be gone.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import numpy as np
import pytest
import streamlit as st
from streamlit.delta_generator import DeltaGenerator
from streamlit.testing.v1 import AppTest

from explorer.config import ModelConfig
from explorer.tasks import make_task
from explorer.trace import Trace
from explorer.training import train
from tests.drawn import app_boards
from views.shared_cache import SHARED, arrays_in
from views.state import STATE_KEY, AppState, TrainedModel

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
TOKENS = "the cat sat on the mat"
ACTIVATION_SECTIONS = ("norms", "tokens", "histogram", "zeros", "heads", "gradients")
POSITIONAL_SECTIONS = ("table", "wavelengths", "similarity", "offset", "order")
PAGES = {  # page: the link opened on it, with every section that draws from the trace open
    "attention": {"measure": "norms"},
    "heads": {},
    "mixing": {},
    "activations": {f"act_open_{name}": "true" for name in ACTIVATION_SECTIONS},
    "positional": {"positional": "learned", **{f"pos_open_{name}": "true" for name in POSITIONAL_SECTIONS}},
    "anatomy": {},
    "compare": {"placements": "true", "measure": "norms"},
}
REMOVED = {"ablate": "L0H1", "n_layers": "3"}  # a head removed: the pages also read the run with every head
CASES = [
    *((page, query) for page, query in PAGES.items()),
    *((page, {**query, **REMOVED}) for page, query in PAGES.items() if page in ("attention", "heads", "compare")),
    ("compare", {"compare": "input", "b_tokens": "the mat sat on the cat", "measure": "norms"}),
    ("compare", {"compare": "input", "b_tokens": "the mat sat on the cat"}),  # and the weights, lined up
    ("attention", {"model": "minilm-l6", "measure": "norms"}),  # head roles and norms of a real checkpoint
    ("heads", {"model": "minilm-l6"}),
]


@pytest.fixture
def downloads(monkeypatch) -> list:
    """Every callable the pages hand a download button, kept here as Streamlit's media manager keeps them until the
    session ends (AppTest's own manager may let them go sooner)."""
    kept: list = []
    original = DeltaGenerator.download_button

    def recorded(self, label, data, *args, **kwargs):
        if callable(data):
            kept.append(data)
        return original(self, label, data, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "download_button", recorded)
    return kept


def made_arrays() -> list[weakref.ref]:
    """Weak references to every array of every live trace and every shared result."""
    gc.collect()
    held = [o for o in gc.get_objects() if type(o) is Trace] + SHARED.values()
    return [weakref.ref(array) for array in arrays_in(held)]


def still_alive(arrays: list[weakref.ref]) -> list[tuple[int, ...]]:
    """The shapes of the arrays still alive once the caches let everything go."""
    SHARED.clear()
    st.cache_data.clear()
    gc.collect()
    return [array.shape for ref in arrays if isinstance(array := ref(), np.ndarray)]


def opened(page: str, query: dict[str, str], state: AppState | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    if state is not None:
        at.session_state[STATE_KEY] = state
    at.query_params.update({"tokens": TOKENS, **query})
    at.run()
    if page != "attention":
        at.switch_page(f"views/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize(("page", "query"), CASES, ids=[f"{page}-{'-'.join(query)}" for page, query in CASES])
def test_an_open_session_holds_no_trace_once_the_cache_lets_it_go(page, query, downloads, minilm_model):
    at = opened(page, query)
    arrays = made_arrays()
    assert arrays, "the page made no trace: nothing was checked"
    assert still_alive(arrays) == [], f"{page} keeps arrays of its trace after the cache dropped them"
    assert at.session_state is not None  # the session is still open: it is what must not hold them
    files = [make() for make in downloads]  # on the click, outside the script run, with every cache empty
    assert files and all(len(file) > 0 for file in files)


@pytest.fixture(scope="module")
def trained() -> TrainedModel:
    task = make_task("reverse", 8)
    return TrainedModel(train(ModelConfig(positional="learned"), task, steps=5).model, task, "reverse, 5 steps")


@pytest.mark.parametrize("page", ["attention", "compare"])
def test_a_trained_models_session_holds_no_trace_and_its_downloads_make_them_again(page, trained, downloads):
    """A trained model's traces are this session's own, and its downloads find the model by its key, without the
    session (views.state.trained_model)."""
    query = {"tokens": "A B C D E F G H", "measure": "norms"}
    if page == "compare":  # B: the trained model itself on another input
        query |= {"compare": "input", "b_tokens": "H G F E D C B A"}
    at = opened(page, query, AppState(trained=trained))
    assert still_alive(made_arrays()) == []
    files = [make() for make in downloads]  # Compare: B's trace is made again, by the model found from its key
    assert files and all(len(file) > 0 for file in files)
    assert at.session_state[STATE_KEY].trained is trained


def test_a_fragment_makes_the_trace_again_after_the_cache_let_it_go(downloads):
    at = opened("attention", {"measure": "norms"})
    SHARED.clear()
    at.selectbox(key="head").set_value(1).run()  # the map viewer reruns alone: it reads the trace again
    assert not at.exception, [e.value for e in at.exception]
    big = app_boards(at)["maps"]["panels"][0]
    assert big["title"] == "self-attention · layer 0 · head 1 · what it adds"
    held = SHARED.keys()
    assert "cached_run" in [key[0] for key in held], "the fragment drew from a trace it kept"
