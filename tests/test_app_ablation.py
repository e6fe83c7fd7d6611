"""Heads removed from every page's model (URL ablate=L1H3,L2H5): a link opens the same view on every page, the trace
changes exactly from the first removed head's layer on, junk gets a sentence, a click removes a head and puts it
back, and Compare's B can be A's very model without heads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import explorer
import views.caches as caches
from explorer.config import ModelConfig
from explorer.prediction import next_token
from explorer.tasks import make_task
from explorer.training import train
from views.ablation_controls import read_heads
from views.state import STATE_KEY, AppState, TrainedModel

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
PAGES = ["views/attention.py", "views/mixing.py", "views/heads.py", "views/compare.py", "views/positional.py",
         "views/activations.py", "views/anatomy.py", "views/train.py"]  # fmt: skip


def opened(query: dict[str, str], page: str | None = None) -> AppTest:
    """A fresh session opening a link (on `page`), run once."""
    at = AppTest.from_file(APP, default_timeout=120)
    if page is not None:
        at.switch_page(page)
    at.query_params.update(query)
    return at.run()


def state_of(at: AppTest) -> AppState:
    assert not at.exception, [e.value[:500] for e in at.exception]
    return at.session_state[STATE_KEY]


def texts(elements) -> str:
    return " ".join(e.value for e in elements)


def test_a_link_opens_the_same_ablated_view_on_every_page():
    at = opened({"ablate": "L1H3,L0H1", "ablate_with": "mean"})
    for page in PAGES:
        at.switch_page(page).run()
        state = state_of(at)
        assert (state.ablated, state.ablate_with) == (((0, 1), (1, 3)), "mean"), page  # sorted, as run() takes them
        assert state.trace.ablated == ((0, 1), (1, 3)) and state.base_trace.ablated == (), page
        assert at.title, page
        if page != "views/train.py":  # Train trains the sidebar's model with every head: no sentence there
            assert "Heads L0H1, L1H3 (output set to its mean over the positions) removed" in texts(at.info), page
    assert at.multiselect(key="_ablate_pick").value == ["L0H1", "L1H3"]


def test_the_trace_differs_from_the_full_model_exactly_from_the_first_removed_layer_on():
    at = opened({"n_layers": "4", "ablate": "L2H1"})
    state = state_of(at)
    model, before, after = state.model, state.base_trace, state.trace
    tokens = before.tokens
    np.testing.assert_array_equal(before.attention, explorer.run(model, tokens).attention)
    np.testing.assert_array_equal(after.attention, explorer.run(model, tokens, ablate=[(2, 1)]).attention)
    # Layers 0 to 2 compute the same weights (layer 2's head still looks where it did); layer 3 reads another stream.
    np.testing.assert_array_equal(after.attention[:3], before.attention[:3])
    assert not np.allclose(after.attention[3], before.attention[3])
    # residual[l] enters block l: the same up to block 2's input, different from its output on.
    np.testing.assert_array_equal(after.first.residual[:3], before.first.residual[:3])
    assert all(not np.allclose(after.first.residual[i], before.first.residual[i]) for i in (3, 4))
    at.button(key="put_heads_back").click().run()
    state = state_of(at)
    assert state.ablated == () and state.trace is state.base_trace  # nothing removed: one run, not two


def test_junk_out_of_range_and_repeated_heads_in_a_link_get_a_sentence():
    at = opened({"ablate": "L0H1,foo,L7H0,L0H1,L1H9", "ablate_with": "sideways"})
    state = state_of(at)
    assert state.ablated == ((0, 1),) and state.ablate_with == "zero"
    notes = texts(at.warning)
    for named in ("`foo` (not a head", "`L7H0` (the model has layers 0 to 1", "`L0H1` (listed twice)", "`L1H9`"):
        assert named in notes, named
    assert "`ablate_with=sideways` was ignored" in notes
    assert read_heads(" l1h2 , L0H0,,", 2, 4) == (((0, 0), (1, 2)), ())  # any case, spaces, empty parts


def test_a_head_is_removed_and_put_back_from_the_attention_page_and_the_sidebar():
    at = opened({"layer": "1", "head": "2"})
    assert at.button(key="toggle_head").label == "Remove this head"
    at.button(key="toggle_head").click().run()  # inside the maps' fragment: the whole app reruns
    state = state_of(at)
    assert state.ablated == ((1, 2),) and state.trace.ablated == ((1, 2),)
    assert at.text_input(key="ablate").value == "L1H2" and at.multiselect(key="_ablate_pick").value == ["L1H2"]
    assert at.button(key="toggle_head").label == "Put it back"
    assert "L1H2 is removed" in texts(at.caption)
    at.multiselect(key="_ablate_pick").select("L0H3").run()
    assert state_of(at).ablated == ((0, 3), (1, 2)) and at.text_input(key="ablate").value == "L0H3,L1H2"
    at.button(key="toggle_head").click().run()
    assert state_of(at).ablated == ((0, 3),) and at.button(key="toggle_head").label == "Remove this head"


def test_compares_b_is_as_very_model_without_the_heads_of_its_list():
    at = opened({"compare": "heads", "b_ablate": "L0H2"}, "views/compare.py")
    state = state_of(at)
    assert state.ablated == ()  # the sidebar removes nothing: only B does
    assert "B is A's very weights (the same model, not a copy) with head L0H2 (output set to zero)" in texts(at.success)
    assert "attend identically" not in texts(at.info)  # layer 1 reads another stream: its heads changed
    at.text_input(key="b_ablate").set_value("").run()
    assert "B removes no head of its own yet" in texts(at.info) and "attend identically" in texts(at.info)


def test_a_trained_model_runs_without_heads_too():
    config = ModelConfig(positional="learned", n_layers=3)  # a layer more than the sidebar: L2H1 is the trained one's
    task = make_task("reverse", 8)
    trained = TrainedModel(train(config, task, steps=2).model, task, "reverse, 2 steps")
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state[STATE_KEY] = AppState(trained=trained)
    at.query_params.update({"tokens": "A B C", "ablate": "L2H1"})
    state = state_of(at.run())
    assert state.model is trained.model and state.ablated == ((2, 1),)
    expected = explorer.run(trained.model, "A B C", ablate=[(2, 1)])
    np.testing.assert_array_equal(state.trace.first.residual, expected.first.residual)
    np.testing.assert_array_equal(state.base_trace.first.residual, explorer.run(trained.model, "A B C").first.residual)
    assert not np.allclose(state.trace.first.residual[3], state.base_trace.first.residual[3])  # after block 2


@pytest.mark.slow
def test_smollm2_without_heads_predicts_from_the_ablated_run(smollm_model, monkeypatch):
    monkeypatch.setitem(caches._CHECKPOINTS, "smollm2-135m", smollm_model)  # the session's copy, not a second load
    text = "The capital of France is"
    at = opened({"model": "smollm2-135m", "tokens": text, "ablate": "L0H1,L3H2"})
    state = state_of(at)
    assert state.ablated == ((0, 1), (3, 2)) and state.model is smollm_model
    before, after = next_token(smollm_model, state.base_trace, k=1), next_token(smollm_model, state.trace, k=1)
    assert before["probability"].iloc[0] != pytest.approx(after["probability"].iloc[0], abs=1e-4)
    expected = next_token(smollm_model, explorer.run(smollm_model, text, ablate="L0H1,L3H2"), k=1)
    assert after["probability"].iloc[0] == pytest.approx(expected["probability"].iloc[0], abs=1e-6)
