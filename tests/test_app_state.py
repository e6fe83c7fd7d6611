"""What the pages share (views/state.py) and the caches that hold it (views/caches.py): one typed state a run of
dashboard.py leaves, and a trained model whose numbers never reach another session through a cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer.config import CheckpointConfig, ModelConfig
from explorer.tasks import make_task
from explorer.training import train
from views.state import CONFIGURED, STATE_KEY, AppState, TrainedModel

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
CONFIG = ModelConfig(positional="learned")  # the trained model's shape: a random model of it is another model


@pytest.fixture(scope="module")
def trained() -> TrainedModel:
    task = make_task("reverse", 8)
    return TrainedModel(train(CONFIG, task, steps=10).model, task, "reverse, 10 steps")


def state_after(at: AppTest) -> AppState:
    assert not at.exception, [e.value for e in at.exception]
    state = at.session_state[STATE_KEY]
    assert isinstance(state, AppState)
    return state


def test_the_source_says_whose_weights_and_whether_results_are_shared(trained):
    configured = AppState(config=ModelConfig())
    assert (configured.source.kind, configured.source.shared) == (CONFIGURED, True)
    assert configured.source.weights == "untrained weights"
    minilm = CheckpointConfig(checkpoint="minilm-l6", n_kv_heads=4, vocab_size=8)
    assert (AppState(config=minilm).source.kind, AppState(config=minilm).source.shared) == ("pretrained", True)
    with_trained = AppState(config=ModelConfig(), trained=trained)  # whatever the config, the trained model wins
    assert (with_trained.source.kind, with_trained.source.name) == ("trained", "reverse, 10 steps")
    assert with_trained.source.key == trained.key and not with_trained.source.shared
    assert with_trained.source.weights == "trained weights (reverse, 10 steps)"
    again = TrainedModel(trained.model, trained.task, trained.label)
    assert again.key != trained.key  # each model sent from the Train page keys its own cache entries


def test_a_run_leaves_the_config_model_and_trace_of_the_sidebar():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"tokens": "a b c", "n_layers": "3"})
    at.run()
    state = state_after(at)
    assert state.config == state.sidebar_config == ModelConfig(n_layers=3)
    assert state.trained is None and state.model is not None
    assert state.trace.tokens == ["a", "b", "c"]
    np.testing.assert_array_equal(state.trace.attention, explorer.run(state.model, "a b c").attention)
    at.number_input(key="d_model").set_value(30).run()  # 4 heads cannot share 30: nothing for the pages
    state = state_after(at)
    assert (state.config, state.sidebar_config, state.model, state.trace) == (None, None, None, None)


def test_a_checkpoint_is_the_config_but_not_the_sidebars():
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update({"model": "minilm-l6", "tokens": "the cat sat"})
    at.run()
    state = state_after(at)
    assert isinstance(state.config, CheckpointConfig) and state.config.checkpoint == "minilm-l6"
    assert state.sidebar_config is None  # Train refuses a checkpoint: it trains the sidebar's configured model
    assert state.model.config == state.config and state.source.kind == "pretrained"


def test_a_trained_model_stays_across_runs_and_pages_until_sent_back(trained):
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state[STATE_KEY] = AppState(trained=trained)
    at.query_params["tokens"] = "A B C"
    at.run()
    state = state_after(at)
    assert state.trained is trained and state.model is trained.model and state.config == trained.model.config
    assert state.sidebar_config == ModelConfig()  # the sidebar's own, which Train would train
    at.number_input(key="n_layers").set_value(3).run()
    at.switch_page("views/anatomy.py").run()
    state = state_after(at)
    assert state.trained is trained and state.model is trained.model
    assert state.sidebar_config == ModelConfig(n_layers=3)
    at.button(key="back_to_random").click().run()
    state = state_after(at)
    assert state.trained is None and state.config == ModelConfig(n_layers=3)
    assert state.model is not trained.model


def parameter_total() -> None:
    """A script: the session's parameter count through the cache, as the Anatomy page gets it."""
    import streamlit as st

    from views.caches import cached_parameter_counts, from_model

    st.text(str(int(from_model(cached_parameter_counts, st.session_state["cfg"])["parameters"].sum())))


def counted(state: AppState) -> int:
    at = AppTest.from_function(parameter_total, default_timeout=60)
    at.session_state[STATE_KEY] = state
    at.session_state["cfg"] = CONFIG
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return int(at.text[0].value)


def test_a_trained_models_results_never_reach_the_shared_cache(trained):
    """cached_parameter_counts is keyed on the config alone: a trained model of that config has more parameters
    (its embedding and read-out), so a count that crossed over between the two would show."""
    random_model = explorer.build_model(CONFIG)
    random_total = sum(p.numel() for p in random_model.parameters())
    trained_total = sum(p.numel() for p in trained.model.parameters())
    assert trained.model.config == CONFIG and trained_total != random_total
    random_state = AppState(config=CONFIG, model=random_model)
    trained_state = AppState(config=CONFIG, model=trained.model, trained=trained)
    assert counted(trained_state) == trained_total  # first: had it been cached, the random model would get it
    assert counted(random_state) == random_total  # now cached for every session
    assert counted(trained_state) == trained_total  # the cached count is not handed to the trained model


def test_a_link_made_with_a_trained_model_says_so_in_a_fresh_session(trained):
    """Trained weights cannot travel in a link: a fresh session opened the random model of the same settings and
    nothing on its page said the link had shown another (only the sender's sidebar did)."""
    sender = AppTest.from_file(APP, default_timeout=120)
    sender.session_state[STATE_KEY] = AppState(trained=trained)
    sender.query_params["tokens"] = "A B C"
    sender.run()
    link = dict(sender.query_params)
    assert link["trained"] == trained.label, link
    student = AppTest.from_file(APP, default_timeout=120)
    student.query_params.update(link)
    student.run()
    assert state_after(student).trained is None
    (warning,) = [w.value for w in student.warning if "Trained weights do not travel" in w.value]
    assert trained.label in warning
    student.button(key="drop_trained_note").click().run()
    assert "trained" not in student.query_params
    assert not any("Trained weights do not travel" in w.value for w in student.warning)
    sender.button(key="back_to_random").click().run()
    assert "trained" not in sender.query_params  # the sender's next link is of the random model
