"""The Train page through streamlit.testing: what it draws matches the engine trained with the same settings,
Stop keeps what was learned, files load or are refused with a reason, and sessions keep their own models."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from pathlib import Path
from unittest.mock import MagicMock

import numpy as np
import pandas as pd
import pytest
import torch
from streamlit.components.v2.component_manager import BidiComponentManager
from streamlit.proto.WidgetStates_pb2 import WidgetStates
from streamlit.runtime import Runtime
from streamlit.runtime.caching.storage.dummy_cache_storage import MemoryCacheStorageManager
from streamlit.runtime.dataframe_source_manager import DataframeSourceManager
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.runtime.scriptrunner import RerunData
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1 import app_test as app_test_module
from streamlit.testing.v1.local_script_runner import LocalScriptRunner
from streamlit.testing.v1.util import patch_config_options

import explorer
from explorer import checkpoints
from explorer.analysis.stats import head_entropy
from explorer.analysis.task_patterns import pattern_history, task_pattern
from explorer.numbers import percent
from explorer.tasks import blind_accuracy, make_task
from explorer.training import common_start, evaluate, single_thread, train
from tests.drawn import app_matrices, figure_titled, table_as_read
from views.state import STATE_KEY

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
PAGE = "views/train.py"


@pytest.fixture
def at() -> AppTest:
    return AppTest.from_file(APP, default_timeout=120)


def open_train_page(at: AppTest) -> AppTest:
    at.run()
    at.switch_page(PAGE).run()
    assert_ok(at)
    return at


def assert_ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def drawn_map(at: AppTest, name: str) -> np.ndarray:
    """The weights an attention heatmap (a matrix view) draws, by the name the page gave it."""
    found = app_matrices(at)
    assert name in found, list(found)
    return found[name].values


def drawn_curves(at: AppTest) -> pd.DataFrame:
    """What the learning curves draw: placement (the line's name), step, loss (its line in the loss panel) and
    accuracy (its line in the accuracy panel)."""
    figure = figure_titled(at, "loss and accuracy per step")
    panels = {("x", "y"): "loss", ("x2", "y2"): "accuracy"}
    lines: dict[str, dict[str, np.ndarray]] = {}
    for trace in figure["data"]:
        column = panels[(trace.get("xaxis", "x"), trace.get("yaxis", "y"))]
        line = lines.setdefault(trace["name"], {"step": trace["x"]})
        np.testing.assert_array_equal(line["step"], trace["x"])  # loss and accuracy at the same steps
        line[column] = trace["y"]
    return pd.concat([pd.DataFrame({"placement": name, **line}) for name, line in lines.items()], ignore_index=True)


def train_on_page(at: AppTest, task: str = "reverse", length: int = 8, steps: int = 40, norms: str = "the sidebar's"):
    at.selectbox(key="train_task").set_value(task)
    at.number_input(key="train_length").set_value(length)
    at.number_input(key="train_steps").set_value(steps)
    at.radio(key="train_norms").set_value(norms)
    at.run()
    at.button(key="train_start").click().run()
    assert_ok(at)
    return at


def engine_run(task_name="reverse", length=8, steps=40, norm="post", initial=None):
    """What the page should have computed: the same call, on one thread as the page trains."""
    task = make_task(task_name, length)
    with single_thread():
        return train(
            explorer.ModelConfig(norm=norm),
            task,
            steps=steps,
            lr=3e-3,
            warmup=20,
            batch_size=64,
            seed=0,
            snapshot_every=max(1, steps // 30),
            initial=initial,
        )


def test_page_opens_ready_to_train(at):
    open_train_page(at)
    assert at.title[0].value == "Train"
    assert not at.button(key="train_start").disabled and at.button(key="train_stop").disabled
    assert not at.metric and not at.error
    assert at.selectbox(key="train_task").value == "reverse"
    assert any("2 layers × 4 heads" in c.value for c in at.caption)


def test_a_link_carries_the_training_settings(at):
    at.query_params.update(
        {"train_task": "copy", "train_length": "12", "train_steps": "150", "train_lr": "0.001", "train_warmup": "0",
         "train_batch": "16", "train_norms": "all four"}
    )  # fmt: skip
    open_train_page(at)
    assert at.selectbox(key="train_task").value == "copy"
    assert [at.number_input(key=k).value for k in ("train_length", "train_steps", "train_warmup")] == [12, 150, 0]
    assert at.select_slider(key="train_lr").value == 1e-3 and at.select_slider(key="train_batch").value == 16
    assert at.radio(key="train_norms").value == "all four"
    four = "post-norm, pre-norm, res-post-norm and peri-norm, one after the other from the same initial weights"
    assert any("**copy**" in c.value and four in c.value for c in at.caption)  # what it trains
    assert not at.warning


def test_an_old_link_to_train_post_and_pre_together_still_does(at):
    at.query_params.update({"train_both": "true"})  # the checkbox links made before there were four placements
    open_train_page(at)
    assert at.radio(key="train_norms").value == "post and pre"
    assert any("post-norm and pre-norm, one after" in c.value for c in at.caption)
    assert "train_both" not in at.query_params and not at.warning
    assert at.query_params["train_norms"] == "post and pre"  # the address bar carries it the new way


def test_an_old_link_with_a_junk_train_both_says_so_until_the_placements_change(at):
    at.query_params.update({"train_both": "maybe"})
    open_train_page(at)
    assert any("`train_both=maybe` was ignored" in w.value for w in at.warning)
    assert at.radio(key="train_norms").value == "the sidebar's" and "train_both" not in at.query_params
    at.run()
    assert any("`train_both=maybe` was ignored" in w.value for w in at.warning)  # kept while nothing changed
    at.radio(key="train_norms").set_value("all four").run()
    assert not at.warning  # the control that took train_both's place has changed: the note goes


def test_a_link_with_an_unknown_placement_choice_says_it_was_ignored(at):
    at.query_params.update({"train_norms": "all five"})
    open_train_page(at)
    assert at.radio(key="train_norms").value == "the sidebar's"
    assert any("`train_norms=all five` was ignored" in w.value for w in at.warning), [w.value for w in at.warning]


def test_a_link_with_impossible_training_settings_says_which_were_ignored(at):
    at.query_params.update({"train_task": "juggle", "train_steps": "7", "train_lr": "0.5", "train_batch": "64"})
    open_train_page(at)
    assert at.selectbox(key="train_task").value == "reverse" and at.number_input(key="train_steps").value == 300
    assert at.select_slider(key="train_lr").value == 3e-3
    warned = " ".join(w.value for w in at.warning)
    for bad in ("train_task=juggle", "train_steps=7", "train_lr=0.5"):
        assert f"`{bad}` was ignored" in warned
    assert "train_batch" not in warned  # 64 is a batch size the slider has
    assert not {"train_task", "train_steps", "train_lr"} & set(at.query_params)  # Streamlit stripped them
    at.run()
    assert " ".join(w.value for w in at.warning) == warned  # the notes stay while the settings are untouched
    at.number_input(key="train_steps").set_value(200).run()  # changing the setting retires its note only
    warned = " ".join(w.value for w in at.warning)
    assert "train_steps" not in warned and "train_task=juggle" in warned


def test_short_training_run_shows_the_engine_numbers(at):
    open_train_page(at)
    train_on_page(at, steps=40)
    expected = engine_run(steps=40)
    curves = drawn_curves(at)
    post = curves[curves["placement"] == "post-norm"]
    np.testing.assert_array_equal(post["step"], np.arange(0, 41))  # step 0: the initial model
    np.testing.assert_array_equal(post["loss"], expected.history["loss"].to_numpy())
    np.testing.assert_array_equal(post["accuracy"], expected.history["accuracy"].to_numpy())
    fresh = evaluate(expected.model, expected.task)
    assert [m.value for m in at.metric] == [percent(fresh)]
    # the caption's loss is the returned model's (the curves' last point), not the one before its last update
    last_loss = f"loss {expected.history['loss'].iloc[-1]:.4f} at step 40"
    assert any(c.value.startswith(f"40 steps · {last_loss}") for c in at.caption), [c.value for c in at.caption]
    model = at.session_state["_train"].results["post"].model
    for a, b in zip(model.parameters(), expected.model.parameters(), strict=True):
        assert torch.equal(a, b)
    # the slider over snapshots, at the last one: the heatmap holds the final weights of the head shown
    slider = next(s for s in at.select_slider if s.key.startswith("train_snapshot"))
    assert slider.options == [str(s.step) for s in expected.snapshots] and slider.value == 40
    layer = at.selectbox(key=next(s.key for s in at.selectbox if s.key.startswith("train_layer"))).value
    head = at.selectbox(key=next(s.key for s in at.selectbox if s.key.startswith("train_head"))).value
    shown = drawn_map(at, "snapshot")
    np.testing.assert_array_equal(shown, expected.snapshots[-1].attention[layer, head])
    slider.set_value(expected.snapshots[1].step).run()
    assert_ok(at)
    shown = drawn_map(at, "snapshot")
    np.testing.assert_array_equal(shown, expected.snapshots[1].attention[layer, head])


def test_reverse_forms_an_anti_diagonal_head(at):
    open_train_page(at)
    train_on_page(at, steps=150)
    assert float(at.metric[0].value.rstrip("%")) >= 99.0
    layer = at.selectbox(key=next(s.key for s in at.selectbox if s.key.startswith("train_layer"))).value
    head = at.selectbox(key=next(s.key for s in at.selectbox if s.key.startswith("train_head"))).value
    shown = drawn_map(at, "snapshot")  # the head picked first, at the end
    assert np.fliplr(shown).diagonal().mean() > 0.8
    assert any(f"L{layer} H{head} is shown first" in c.value for c in at.caption)
    pattern = figure_titled(at, "weight on the anti-diagonal")  # the heads' weight on it over training
    snapshots = at.session_state["_train"].results["post"].snapshots
    history = pattern_history(snapshots, task_pattern(make_task("reverse", 8)))
    first = pattern["data"][0]  # the head that ends closest to the anti-diagonal: the one shown first
    assert first["name"] == f"L{layer} H{head}"
    rows = history[history["head_label"] == first["name"]]
    np.testing.assert_array_equal(first["x"], rows["step"])
    np.testing.assert_array_equal(first["y"], rows["mass"])
    assert first["y"][-1] > 0.8


def test_post_and_pre_norm_train_together_from_the_same_start(at):
    open_train_page(at)
    train_on_page(at, task="sort", length=6, steps=30, norms="post and pre")
    start = common_start(explorer.ModelConfig(), make_task("sort", 6))
    post = engine_run("sort", 6, 30, "post", initial=start)
    pre = engine_run("sort", 6, 30, "pre", initial=start)
    curves = drawn_curves(at)
    for name, expected in (("post-norm", post), ("pre-norm", pre)):
        np.testing.assert_array_equal(curves[curves["placement"] == name]["loss"], expected.history["loss"].to_numpy())
        np.testing.assert_array_equal(
            curves[curves["placement"] == name]["accuracy"], expected.history["accuracy"].to_numpy()
        )
    assert [m.label for m in at.metric] == ["post-norm: accuracy on unseen data", "pre-norm: accuracy on unseen data"]
    assert at.radio(key=next(r.key for r in at.radio if r.key.startswith("train_model"))).options == [
        "post-norm",
        "pre-norm",
    ]
    # sort needs no single key: the head shown first is the most concentrated one, not L0 H0 by default
    result = at.session_state["_train"].results["post"]
    entropy = head_entropy(explorer.run(result.model, result.probe).attention_maps()["self-attention"])
    best = entropy.loc[entropy["entropy"].idxmin()]
    layer = at.selectbox(key=next(s.key for s in at.selectbox if s.key.startswith("train_layer"))).value
    head = at.selectbox(key=next(s.key for s in at.selectbox if s.key.startswith("train_head"))).value
    assert (layer, head) == (best["layer"], best["head"])
    assert any(f"L{layer} H{head} is shown first" in c.value and "most concentrated" in c.value for c in at.caption)


def test_all_four_placements_train_from_one_start_and_draw_four_curves(at):
    open_train_page(at)
    train_on_page(at, task="reverse", length=4, steps=20, norms="all four")
    start = common_start(explorer.ModelConfig(), make_task("reverse", 4))
    curves = drawn_curves(at)
    names = ["post-norm", "pre-norm", "res-post-norm", "peri-norm"]
    assert list(curves["placement"].unique()) == names  # one line each, in NORMS' order
    training = at.session_state["_train"]
    for norm, name in zip(("post", "pre", "res-post", "peri"), names, strict=True):
        expected = engine_run("reverse", 4, 20, norm, initial=start)
        line = curves[curves["placement"] == name]
        np.testing.assert_array_equal(line["loss"], expected.history["loss"].to_numpy())
        np.testing.assert_array_equal(line["accuracy"], expected.history["accuracy"].to_numpy())
        assert training.results[norm].model.config.norm == norm
    assert [m.label for m in at.metric] == [f"{name}: accuracy on unseen data" for name in names]
    look = at.radio(key=next(r.key for r in at.radio if r.key.startswith("train_model")))
    assert look.options == names
    look.set_value("peri").run()  # the peri-norm model goes to the other pages, where explorer.run runs it
    assert_ok(at)
    at.button(key="train_use").click().run()
    at.switch_page("views/attention.py").run()
    assert_ok(at)
    model = training.results["peri"].model
    probe = " ".join(training.results["peri"].probe)
    assert at.session_state[STATE_KEY].model is model
    np.testing.assert_array_equal(drawn_map(at, "map"), explorer.run(model, probe).attention[0, 0])


class StopClicker(LocalScriptRunner):
    """AppTest's script runner plus a user who clicks Stop once training passes step 20: as a browser does, it
    sends a rerun request (every widget's state, with Stop's trigger) while the script is still running."""

    def run(self, widget_state=None, query_params=None, timeout=3, page_hash="", context_info=None):
        threading.Thread(target=self._click_stop, args=(widget_state, page_hash), daemon=True).start()
        return super().run(widget_state, query_params, timeout, page_hash, context_info)

    def _click_stop(self, widget_state, page_hash) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            messages = list(self.forward_msgs())
            elements = [m.delta.new_element for m in messages if m.HasField("delta")]
            stop = [e.button.id for e in elements if e.WhichOneof("type") == "button" and e.button.label == "Stop"]
            steps = [int(e.progress.text.split("step ")[1].split(" ")[0]) for e in elements if e.HasField("progress")]
            if stop and steps and steps[-1] >= 20:
                states = WidgetStates()
                states.CopyFrom(widget_state)
                for state in states.widgets:
                    if state.HasField("trigger_value"):
                        state.trigger_value = False
                click = states.widgets.add()
                click.id, click.trigger_value = stop[-1], True
                self.request_rerun(RerunData(widget_states=states, page_script_hash=page_hash))
                return
            time.sleep(0.01)


def test_stop_ends_training_and_keeps_what_was_learned(at, monkeypatch):
    open_train_page(at)
    at.number_input(key="train_steps").set_value(3000)
    at.radio(key="train_norms").set_value("all four")
    at.run()
    monkeypatch.setattr(app_test_module, "LocalScriptRunner", StopClicker)
    at.button(key="train_start").click().run()
    assert_ok(at)
    training = at.session_state["_train"]
    result = training.results["post"]
    stopped_at = result.steps
    assert 20 <= stopped_at < 3000 and result.stopped_early
    assert list(training.results) == ["post"]  # the other three never started
    assert list(result.history["step"]) == list(range(stopped_at + 1))
    assert result.snapshots[-1].step == stopped_at
    warning = " ".join(w.value for w in at.warning)
    assert f"stopped at step {stopped_at} of 3000" in warning
    assert "pre-norm, res-post-norm and peri-norm were not trained" in warning
    assert at.metric[0].value == percent(evaluate(result.model, training.task))  # the model as learned so far
    assert app_matrices(at)["snapshot"].values.shape == (8, 8)  # heatmaps of the stopped model
    assert at.button(key="train_stop").disabled


def test_a_click_while_training_stops_it_the_way_the_server_does(sessions_at_once, monkeypatch):
    """Streamlit's server (runner.fastReruns, the default) handles a click during a run by stopping that run and
    starting a new one at once, in another thread, with the same session_state; the old run is still training
    and from then on may not touch session_state. Emulated here: two AppTest runs of one session at once."""
    at = AppTest.from_file(APP, default_timeout=240)
    open_train_page(at)
    at.number_input(key="train_steps").set_value(3000).run()
    runners: list[LocalScriptRunner] = []

    class Recorded(LocalScriptRunner):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            runners.append(self)

    monkeypatch.setattr(app_test_module, "LocalScriptRunner", Recorded)
    at.button(key="train_start").click()
    old = threading.Thread(target=at.run)
    old.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        live = at.session_state.get("_train_live")
        if live is not None and len(live.rows["post"]) >= 20:
            break
        time.sleep(0.01)
    else:
        pytest.fail("training did not start")
    runners[0].request_stop()  # what the server does to the running script on a click ...
    at.button(key="train_start").set_value(False)
    at.run()  # ... and the new run it starts at once
    old.join(60)
    assert not old.is_alive()
    assert "_train_live" not in at.session_state
    training = at.session_state["_train"]  # kept by the new run: the old one could no longer write it
    result = training.results["post"]
    # 20 rows seen are steps 0 to 19; the stop may land in the callback of step 19, right after its row was written
    assert 19 <= result.steps < 3000 and result.stopped_early
    assert result.snapshots[-1].step == result.steps == result.history["step"].iloc[-1]
    at.run()
    assert_ok(at)
    assert any(f"stopped at step {result.steps} of 3000" in w.value for w in at.warning)
    assert at.metric[0].value == percent(evaluate(result.model, training.task))


def test_typed_tokens_run_the_trained_model_and_bad_ones_are_explained(at):
    open_train_page(at)
    train_on_page(at, steps=20)
    model = at.session_state["_train"].results["post"].model
    box = next(t for t in at.text_input if t.key.startswith("train_tokens"))
    box.input("C A B J").run()
    assert_ok(at)
    layer = at.selectbox(key=next(s.key for s in at.selectbox if s.key.startswith("train_layer"))).value
    head = at.selectbox(key=next(s.key for s in at.selectbox if s.key.startswith("train_head"))).value
    shown = drawn_map(at, "typed")
    np.testing.assert_array_equal(shown, explorer.run(model, "C A B J").attention[layer, head])
    assert any("trained on sequences of 8 tokens" in i.value for i in at.info)
    answers = table_as_read(at, "answer")
    assert list(answers["input"]) == list("CABJ") and list(answers["answer"]) == list("JBAC")
    assert set(answers["right?"]) <= {"✓", "✗"}
    for bad, message in (("A b C", "'b' is not in this model's vocabulary"), ("", "empty")):
        box = next(t for t in at.text_input if t.key.startswith("train_tokens"))
        box.input(bad).run()
        assert_ok(at)
        assert any(message in e.value for e in at.error), [e.value for e in at.error]


def test_the_sidebar_tokens_do_not_matter_to_training_but_an_impossible_setting_does(at):
    at.run()
    at.text_input(key="tokens").input("").run()
    assert any("is empty" in e.value for e in at.error)  # the Attention page reads the typed tokens
    at.switch_page(PAGE).run()
    assert_ok(at)
    assert not at.error, [e.value for e in at.error]  # Train has its own input: no error about the sidebar's
    assert not at.button(key="train_start").disabled
    at.number_input(key="n_heads").set_value(3).run()
    assert any("not divisible by 3 heads" in e.value for e in at.error)
    assert at.button(key="train_start").disabled


def summary_caption(at: AppTest) -> str:
    return next(c.value for c in at.caption if " steps · loss " in c.value)


def test_sort_is_measured_against_the_best_blind_guess_on_held_out_sequences(at):
    open_train_page(at)
    train_on_page(at, task="sort", length=4, steps=20)
    task = make_task("sort", 4)
    fresh = evaluate(at.session_state["_train"].results["post"].model, task)
    blind = blind_accuracy(task)
    assert blind > 1 / 10 + 0.1  # what a sort model gets by position alone, well above one in ten
    [metric] = at.metric
    assert metric.delta == f"{100 * (fresh - blind):+.1f} points vs. guessing ({blind:.0%})"
    assert "512 held-out sequences" in metric.help and "likeliest token" in metric.help
    accuracy_panel = figure_titled(at, "loss and accuracy per step")["layout"]["annotations"]
    assert any(a["text"] == f"best blind guess {blind:.0%}" and a["y"] == blind for a in accuracy_panel)


def test_a_task_with_few_sequences_says_its_test_set_is_all_the_held_out_ones(at):
    open_train_page(at)
    train_on_page(at, task="reverse", length=2, steps=10)
    n = len(make_task("reverse", 2).test_batch().inputs)
    assert n < 20 and f"all {n} held-out sequences" in at.metric[0].help and "only 100 different" in at.metric[0].help


def test_induction_says_which_positions_it_scores(at):
    open_train_page(at)
    train_on_page(at, task="induction", length=8, steps=10)
    assert "of its scored tokens right" in summary_caption(at)
    scoring = next(c.value for c in at.caption if c.value.startswith("Induction:"))
    assert "Scored: positions 4 to 6" in scoring and "position 3 (the repeat's first token" in scoring
    assert "position 7 (no next token)" in scoring
    table = table_as_read(at, "right?")
    assert list(table["right?"] != "not scored") == [False] * 4 + [True] * 3 + [False]


def test_an_impossible_task_or_a_huge_model_cannot_train(at):
    open_train_page(at)
    at.selectbox(key="train_task").set_value("induction")
    at.number_input(key="train_length").set_value(7).run()
    assert any("induction, which repeats its first half" in e.value and "even length of 4" in e.value for e in at.error)
    assert not any("64" in e.value for e in at.error)  # the page allows 32 at most: no other range is named
    assert at.button(key="train_start").disabled
    assert not any("Press **Train**" in i.value for i in at.info)  # no invitation to press a disabled button
    at.number_input(key="train_length").set_value(8).run()
    assert not at.error and not at.button(key="train_start").disabled
    assert any("Press **Train**" in i.value for i in at.info)
    at.number_input(key="d_model").set_value(1024)
    at.number_input(key="d_ff").set_value(4096).run()
    assert any("parameters; training live is limited" in e.value for e in at.error)
    assert at.button(key="train_start").disabled


def without_length(meta: str) -> str:
    """The JSON of a model saved with only its task's name (as checkpoints.save(model, "copy") writes it)."""
    info = json.loads(meta)
    del info["length"]
    return json.dumps(info)


def uploaded(weights: bytes, meta: str, name: str = "model"):
    return [
        (f"{name}.safetensors", weights, "application/octet-stream"),
        (f"{name}.json", meta.encode(), "application/json"),
    ]


def test_upload_loads_a_saved_model(at):
    task = make_task("reverse", 6)
    with single_thread():
        model = train(explorer.ModelConfig(norm="pre"), task, steps=30).model
    weights, meta = checkpoints.save(model, task)
    open_train_page(at)
    at.file_uploader(key="train_upload").set_value(uploaded(weights, meta))
    at.button(key="train_load").click().run()
    assert_ok(at)
    assert not at.error
    assert [m.label for m in at.metric] == ["pre-norm: accuracy on unseen data"]
    assert at.metric[0].value == percent(evaluate(model, task))
    assert "loaded from files" in at.metric[0].help and "trained elsewhere may have" in at.metric[0].help
    assert any("Loaded from model.safetensors" in c.value for c in at.caption)
    box = next(t for t in at.text_input if t.key.startswith("train_tokens"))
    box.input("A B C D E F").run()
    layer = at.selectbox(key=next(s.key for s in at.selectbox if s.key.startswith("train_layer"))).value
    head = at.selectbox(key=next(s.key for s in at.selectbox if s.key.startswith("train_head"))).value
    shown = drawn_map(at, "typed")
    np.testing.assert_array_equal(shown, explorer.run(model, "A B C D E F").attention[layer, head])


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (lambda w, m: uploaded(w[:200], m), "not a readable safetensors file"),
        (lambda w, m: uploaded(w, "{oops"), "not valid JSON"),
        (lambda w, m: uploaded(w, m.replace('"d_model": 64', '"d_model": 32')), "do not match the JSON's config"),
        (lambda w, m: uploaded(w, without_length(m)), "does not say which task (and sequence length)"),
        (lambda w, m: uploaded(w, m.replace('"copy"', '"induction"')), "induction task trains a causal decoder"),
        (lambda w, m: uploaded(w, m)[:1], "Choose exactly two files"),
    ],
)
def test_a_bad_upload_is_refused_with_a_reason(at, files, message):
    task = make_task("copy", 4)
    weights, meta = checkpoints.save(train(explorer.ModelConfig(), task, steps=1).model, task)
    open_train_page(at)
    at.file_uploader(key="train_upload").set_value(files(weights, meta))
    at.button(key="train_load").click().run()
    assert_ok(at)
    assert any(message in e.value for e in at.error), [e.value for e in at.error]
    assert "_train" not in at.session_state


def test_send_to_the_other_pages_and_back(at):
    open_train_page(at)
    train_on_page(at, steps=20)
    result = at.session_state["_train"].results["post"]
    at.button(key="train_use").click().run()
    assert_ok(at)
    assert at.button(key="train_use").disabled
    assert any("The other pages show this model" in s.value for s in at.success)
    probe = " ".join(result.probe)
    assert at.text_input(key="tokens").value == probe
    at.switch_page("views/attention.py").run()
    assert_ok(at)
    assert any("Trained model in use" in m.value for m in at.sidebar.markdown)
    expected = explorer.run(result.model, probe).attention
    np.testing.assert_array_equal(drawn_map(at, "map"), expected[0, 0])
    state = at.session_state[STATE_KEY]
    assert state.config == result.model.config and state.model is result.model
    at.text_input(key="tokens").input("the cat").run()  # words the trained model does not know
    assert any("'cat', 'the' are not in this model's vocabulary" in e.value for e in at.error)
    at.text_input(key="tokens").input(probe).run()
    at.button(key="back_to_random").click().run()
    assert_ok(at)
    assert not any("Trained model in use" in m.value for m in at.sidebar.markdown)
    state = at.session_state[STATE_KEY]
    assert state.model is not result.model and state.config == explorer.ModelConfig()
    random = explorer.run(explorer.ModelConfig(), probe).attention
    np.testing.assert_array_equal(drawn_map(at, "map"), random[0, 0])


@pytest.fixture
def sessions_at_once(monkeypatch):
    """Lets AppTest run two sessions in two threads at the same time.

    AppTest installs a mock Runtime and patches the global.appTest option for each run, then resets both when
    the run ends, which would pull them from under the other session's run still going. Here one shared mock
    Runtime stays installed (AppTest's own assignments land on a subclass) and the option is held for the test.
    """

    class RunScopedRuntime(Runtime):
        pass

    shared = MagicMock(spec=Runtime)
    shared.media_file_mgr = MediaFileManager(MemoryMediaFileStorage("/mock/media"))
    shared.dataframe_source_mgr = DataframeSourceManager()
    shared.cache_storage_manager = MemoryCacheStorageManager()
    shared.bidi_component_registry = BidiComponentManager()  # where st.components.v2 components register
    monkeypatch.setattr(app_test_module, "Runtime", RunScopedRuntime)
    monkeypatch.setattr(Runtime, "_instance", shared)
    monkeypatch.setattr(app_test_module, "patch_config_options", lambda overrides: contextlib.nullcontext())
    with patch_config_options({"global.appTest": True}):
        yield


# Enough steps that both sessions are still training while the other starts; what is checked is that each keeps its
# own model, not how well it learns.
CONCURRENT_STEPS = 60


def test_two_sessions_training_at_once_keep_separate_models(sessions_at_once):
    sessions = {
        "reverse": AppTest.from_file(APP, default_timeout=240),
        "copy": AppTest.from_file(APP, default_timeout=240),
    }
    for task, at in sessions.items():
        open_train_page(at)
        at.selectbox(key="train_task").set_value(task)
        at.number_input(key="train_length").set_value(6 if task == "reverse" else 5)
        at.number_input(key="train_steps").set_value(CONCURRENT_STEPS)
        at.run()
    errors: list[BaseException] = []
    started = threading.Barrier(2)

    def click_train(at: AppTest) -> None:
        try:
            started.wait(30)
            at.button(key="train_start").click().run()
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=click_train, args=(at,)) for at in sessions.values()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not errors, errors
    models = {}
    for task, at in sessions.items():
        assert_ok(at)
        training = at.session_state["_train"]
        assert training.task.name == task and training.task.length == (6 if task == "reverse" else 5)
        assert training.results["post"].steps == CONCURRENT_STEPS
        models[task] = training.results["post"].model
    assert models["reverse"] is not models["copy"]
    # each session's model is the one the engine trains for its own task, untouched by the other session
    for task, length in (("reverse", 6), ("copy", 5)):
        expected = engine_run(task, length, CONCURRENT_STEPS)
        for a, b in zip(models[task].parameters(), expected.model.parameters(), strict=True):
            assert torch.equal(a, b)
    # sending one session's model to its pages leaves the other session on the random model
    reverse, copy = sessions["reverse"], sessions["copy"]
    reverse.button(key="train_use").click().run()
    for at in (reverse, copy):
        at.switch_page("views/attention.py").run()
        assert_ok(at)
    assert reverse.session_state[STATE_KEY].trained.model is models["reverse"]
    assert copy.session_state[STATE_KEY].trained is None
    probe = " ".join(reverse.session_state["_train"].results["post"].probe)
    np.testing.assert_array_equal(drawn_map(reverse, "map"), explorer.run(models["reverse"], probe).attention[0, 0])
    np.testing.assert_array_equal(
        drawn_map(copy, "map"),
        explorer.run(explorer.ModelConfig(), "the cat sat on the mat").attention[0, 0],
    )
