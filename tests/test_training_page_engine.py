"""Engine additions for the Train page: one-thread training, checkpoints that keep their task, the task patterns
and the trained model's answers (explorer.analysis.task_patterns, explorer.training), and the figures of
pictures.training_charts."""

from __future__ import annotations

import json
import math
import threading

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

import explorer
from explorer import checkpoints
from explorer.analysis.task_patterns import (
    head_shown_first,
    pattern_history,
    pattern_mass,
    task_allowed,
    task_pattern,
    uniform_mass,
)
from explorer.config import NORMS
from explorer.numbers import percent
from explorer.tasks import TASKS, expected_output, make_task
from explorer.trace import AttentionMaps
from explorer.training import (
    MAX_TRAIN_PARAMETERS,
    Snapshot,
    blind_to_order,
    initial_model,
    loaded_result,
    logits,
    parameter_count,
    predictions,
    single_thread,
    snapshot_maps,
    steps_to_accuracy,
    too_big_to_train,
    train,
)
from pictures.training_charts import NORM_COLOURS, NORM_DASHES, NORM_NAMES, curves_figure, pattern_figure
from tests.drawn import figure_json, figure_title

TINY = explorer.ModelConfig(n_layers=1, d_model=16, n_heads=2, d_ff=32)  # a few ms a step


def test_single_thread_pins_torch_to_one_thread_and_restores_after_the_last_caller():
    before = torch.get_num_threads()
    inside, release = threading.Event(), threading.Event()
    seen: list[int] = []

    def other_caller() -> None:
        with single_thread():
            torch.ones(256, 256) @ torch.ones(256, 256)  # torch work: this thread now keeps its own count
            inside.set()
            release.wait(10)
            seen.append(torch.get_num_threads())

    with single_thread():
        assert torch.get_num_threads() == 1
        worker = threading.Thread(target=other_caller)
        worker.start()
        assert inside.wait(10)
    assert torch.get_num_threads() == before  # this thread is back, while the other caller still trains ...
    release.set()
    worker.join(10)
    assert seen == [1]  # ... on one thread
    assert torch.get_num_threads() == before


def in_new_thread(work):
    """work() in a new OS thread: torch's count there starts at the one every new thread gets."""
    out = []
    worker = threading.Thread(target=lambda: out.append(work()))
    worker.start()
    worker.join(30)
    return out[0]


@pytest.fixture
def two_threads():
    """A process whose threads start with 2 torch threads (the suite may run with OMP_NUM_THREADS=1)."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_single_thread_leaves_every_other_thread_its_count(two_threads):
    """A Streamlit session's script runs in a new thread: one that starts while another session trains keeps the
    process's 2 threads, and so does a thread that was already running."""
    inside, release = threading.Event(), threading.Event()

    def trainer() -> None:
        with single_thread():
            inside.set()
            release.wait(10)

    worker = threading.Thread(target=trainer)
    worker.start()
    assert inside.wait(10)
    assert in_new_thread(torch.get_num_threads) == 2
    assert in_new_thread(lambda: (torch.ones(64, 64) @ torch.ones(64, 64), torch.get_num_threads())[1]) == 2
    assert torch.get_num_threads() == 2
    release.set()
    worker.join(10)
    assert in_new_thread(torch.get_num_threads) == 2


def test_training_in_single_thread_is_the_one_thread_run_bit_for_bit(two_threads):
    """Inside single_thread, in a thread of a process whose threads get 2, training computes exactly what a
    process on one thread does (run on 2 threads, these 3 steps end with weights up to 1e-6 away: measured on
    the 2-core machine; bench/bench_train.py --threads 2,1 compares whole runs)."""
    task = make_task("reverse", 4)
    kwargs = dict(steps=3, batch_size=16, snapshot_every=100)

    def trained() -> torch.Tensor:
        with single_thread():
            return torch.cat([p.detach().flatten() for p in train(TINY, task, **kwargs).model.parameters()])

    pinned = in_new_thread(trained)
    torch.set_num_threads(1)
    alone = torch.cat([p.detach().flatten() for p in train(TINY, task, **kwargs).model.parameters()])
    assert torch.equal(pinned, alone)


def test_single_thread_restores_after_an_exception():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError), single_thread():
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before


def test_a_saved_task_comes_back_with_its_length_and_identical_outputs():
    task = make_task("induction", 6)
    model = train(explorer.ModelConfig(n_layers=1), task, steps=3).model
    weights, meta = checkpoints.save(model, task)
    assert json.loads(meta)["task"] == "induction" and json.loads(meta)["length"] == 6
    loaded, loaded_task = checkpoints.load_trained(weights, meta.encode())
    assert loaded_task == task
    ids = task.sample(3, torch.Generator().manual_seed(4)).inputs
    with torch.inference_mode():
        assert torch.equal(logits(model, ids), logits(loaded, ids))
    assert checkpoints.load(weights, meta)[1] == "induction"  # load() still reads it


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m.pop("length"), "does not say which task"),
        (lambda m: m.update(task=None), "does not say which task"),
        (lambda m: m.update(length="8"), "does not say which task"),
        (lambda m: m.update(task="juggle"), "'juggle' is not one of"),
        (lambda m: m.update(length=7, task="induction"), "use an even length of 4 or more"),
        (lambda m: m.update(vocabulary=list("ABCDEFGHIK")), "is not the reverse task's"),
        (lambda m: m.update(task="induction"), "induction task trains a causal decoder; the JSON describes an encoder"),
    ],
)
def test_load_trained_rejects_a_task_that_does_not_fit_the_model(change, message):
    task = make_task("reverse", 4)
    weights, meta = checkpoints.save(train(explorer.ModelConfig(n_layers=1), task, steps=1).model, task)
    info = json.loads(meta)
    change(info)
    with pytest.raises(explorer.ConfigError, match=message):
        checkpoints.load_trained(weights, json.dumps(info))


def test_a_json_describing_a_huge_model_is_refused_without_building_it(monkeypatch):
    task = make_task("reverse", 4)
    weights, meta = checkpoints.save(train(explorer.ModelConfig(n_layers=1), task, steps=1).model, task)
    info = json.loads(meta)
    info["config"].update(n_layers=24, d_model=2048, d_ff=8192)  # 1.2 billion parameters, about 5 GB
    built = []
    monkeypatch.setattr(checkpoints, "build_model", lambda *args: built.append(args))
    with pytest.raises(explorer.ConfigError, match="do not belong to the model the JSON describes|do not match"):
        checkpoints.load_trained(weights, json.dumps(info))
    assert built == []  # refused on the shapes alone


def test_a_model_without_vocabulary_is_not_a_trained_model():
    weights, meta = checkpoints.save(explorer.build_model(explorer.ModelConfig()), "reverse")
    info = json.loads(meta)
    info["length"] = 8
    with pytest.raises(explorer.ConfigError, match="vocabulary \\(none\\) is not the reverse task's"):
        checkpoints.load_trained(weights, json.dumps(info))


def panel_traces(figure: dict, n: str = "") -> list[dict]:
    """The traces drawn on the panel of axes x{n} / y{n} ("" for the first)."""
    return [t for t in figure["data"] if (t.get("xaxis", "x"), t.get("yaxis", "y")) == (f"x{n}", f"y{n}")]


def reference_lines(figure: dict) -> list[tuple[str, float, str]]:
    """Each dotted horizontal line: the y axis it is on, its height, and the note written on it (on the same axis,
    at the same height: a log axis places a note by the log of its value)."""
    layout = figure["layout"]
    found = []
    for shape in layout.get("shapes", []):
        if shape["line"].get("dash") != "dot":
            continue
        y_axis = layout["yaxis" + shape["yref"][1:]]
        height = np.log10(shape["y0"]) if y_axis.get("type") == "log" else shape["y0"]
        (note,) = [a["text"] for a in layout["annotations"]
                   if a.get("yref", "y") == shape["yref"] and a["y"] == pytest.approx(height)]  # fmt: skip
        found.append((shape["yref"], shape["y0"], note))
    return found


def test_curves_put_post_and_pre_on_the_same_axes():
    histories = {
        "post": pd.DataFrame({"step": [1, 2, 3], "loss": [2.3, 1.0, 0.5], "accuracy": [0.1, 0.5, 0.9]}),
        "pre": pd.DataFrame({"step": [1, 2], "loss": [2.2, 0.004], "accuracy": [0.12, 0.3]}),
    }
    figure = figure_json(curves_figure(histories, vocabulary_size=10, total_steps=300, title="Training on reverse"))
    assert figure_title(figure).startswith("Training on reverse")
    layout = figure["layout"]
    for n, column in (("", "loss"), ("2", "accuracy")):
        post, pre = panel_traces(figure, n)  # both on the same axes
        assert (post["name"], pre["name"]) == ("post-norm", "pre-norm")
        np.testing.assert_array_equal(post["x"], [1, 2, 3])
        np.testing.assert_array_equal(post["y"], histories["post"][column])
        np.testing.assert_array_equal(pre["y"], histories["pre"][column])
        assert (post["line"]["color"], post["line"]["dash"]) == (NORM_COLOURS["post"], "solid")  # solid blue
        assert (pre["line"]["color"], pre["line"]["dash"]) == (NORM_COLOURS["pre"], "dash")  # dashed orange
        assert f"{column} %{{y:" in post["hovertemplate"] and "step %{x}" in post["hovertemplate"]
        assert layout[f"xaxis{n}"]["range"] == [0, 300]  # the whole run's steps, from the start
        assert layout[f"xaxis{n}"]["title"]["text"] == "step"
    loss_axis, accuracy_axis = layout["yaxis"], layout["yaxis2"]
    assert loss_axis["type"] == "log" and loss_axis["range"] == [-3, 1]  # whole decades: 0.004 to ln 10 * 1.5
    assert loss_axis["dtick"] == 1 and loss_axis["exponentformat"] == "power"  # a tick a decade: 10⁻³ to 10
    assert accuracy_axis["range"] == [0, 1.02] and accuracy_axis["tickformat"] == ".0%"  # 0 to 100 %
    assert reference_lines(figure) == [
        ("y", pytest.approx(np.log(10)), "uniform guess ln 10 = 2.30"),
        ("y2", pytest.approx(0.1), "chance 1/10 = 10%"),
    ]
    # At the left end both curves start on their line and ran through its note; by the right end they have left it.
    notes = [n for n in layout["annotations"] if n["text"].startswith(("uniform", "chance"))]
    assert [(n["x"], n["xanchor"], n["yanchor"]) for n in notes] == [(1.0, "right", "bottom")] * 2
    assert [t["showlegend"] for t in figure["data"]].count(True) == 2  # one legend entry per placement


def grey_level(colour: str) -> int:
    """A colour's grey level, 0 to 255, as a greyscale print or PIL's "L" mode renders it."""
    return Image.new("RGB", (1, 1), colour).convert("L").getpixel((0, 0))


def test_four_placements_get_four_lines_told_apart_in_greyscale():
    histories = {
        norm: pd.DataFrame({"step": [1, 2], "loss": [2.3 - i / 10, 1.0], "accuracy": [0.1, 0.2 + i / 10]})
        for i, norm in enumerate(NORMS)
    }
    figure = figure_json(curves_figure(histories, vocabulary_size=10, total_steps=2))
    for n, column in (("", "loss"), ("2", "accuracy")):
        lines = panel_traces(figure, n)
        assert [line["name"] for line in lines] == ["post-norm", "pre-norm", "res-post-norm", "peri-norm"]
        for line, norm in zip(lines, NORMS, strict=True):
            np.testing.assert_array_equal(line["y"], histories[norm][column])
            assert (line["line"]["color"], line["line"]["dash"]) == (NORM_COLOURS[norm], NORM_DASHES[norm])
    assert set(NORM_NAMES) == set(NORM_COLOURS) == set(NORM_DASHES) == set(NORMS)
    assert (NORM_COLOURS["post"], NORM_DASHES["post"]) == ("#1f5fa8", "solid")  # as before: blue solid ...
    assert (NORM_COLOURS["pre"], NORM_DASHES["pre"]) == ("#e0701a", "dash")  # ... and orange dashed
    assert len(set(NORM_DASHES.values())) == 4  # a greyscale print tells the lines apart by their dashes ...
    levels = sorted(grey_level(colour) for colour in NORM_COLOURS.values())
    # ... and by their lightness: 30 grey levels (of 255) between neighbours is a step a printed line shows, and
    # the lightest stays below 200, dark enough to see on the white page
    assert min(np.diff(levels)) >= 30 and levels[-1] < 200, levels
    assert [t["showlegend"] for t in figure["data"]].count(True) == 4  # one legend entry per placement


def test_task_patterns_name_the_key_each_query_needs():
    reverse = task_pattern(make_task("reverse", 4))
    assert [list(row).index(True) for row in reverse] == [3, 2, 1, 0]
    induction = task_pattern(make_task("induction", 8))
    assert [tuple(np.nonzero(row)[0]) for row in induction] == [(), (), (), (), (1,), (2,), (3,), ()]
    assert task_pattern(make_task("copy", 4)) is None and task_pattern(make_task("sort", 4)) is None


def test_the_uniform_baseline_counts_only_the_keys_a_causal_query_sees():
    # induction trains a causal decoder: scored queries 4, 5, 6 of 8 see 5, 6 and 7 keys
    induction = make_task("induction", 8)
    assert uniform_mass(task_pattern(induction), task_allowed(induction)) == pytest.approx((1 / 5 + 1 / 6 + 1 / 7) / 3)
    reverse = make_task("reverse", 8)  # an encoder: every query sees all 8 keys
    assert uniform_mass(task_pattern(reverse), task_allowed(reverse)) == pytest.approx(1 / 8)
    history = pd.DataFrame({"step": [0, 10], "layer": 0, "head": 0, "head_label": "L0 H0", "mass": [0.2, 0.9]})
    figure = figure_json(pattern_figure(history, induction))
    assert reference_lines(figure) == [("y", pytest.approx((1 / 5 + 1 / 6 + 1 / 7) / 3), "uniform attention 0.17")]


def test_pattern_mass_of_a_perfect_and_a_uniform_head():
    pattern = task_pattern(make_task("reverse", 4))
    attention = np.stack([pattern.astype(np.float32), np.full((4, 4), 0.25, np.float32)])[None]  # [1, 2, 4, 4]
    np.testing.assert_allclose(pattern_mass(pattern, attention), [[1.0, 0.25]])
    induction = task_pattern(make_task("induction", 4))  # only query 2 needs a key (key 1)
    attention = np.zeros((1, 1, 4, 4), np.float32)
    attention[0, 0, :, 0] = 1.0  # every query on key 0 ...
    attention[0, 0, 2] = [0.0, 0.6, 0.4, 0.0]  # ... except query 2
    np.testing.assert_allclose(pattern_mass(induction, attention), [[0.6]])


def test_pattern_history_and_figure():
    pattern = task_pattern(make_task("reverse", 4))
    uniform = np.full((2, 3, 4, 4), 0.25, np.float32)
    learned = uniform.copy()
    learned[1, 2] = pattern
    history = pattern_history([Snapshot(0, uniform), Snapshot(10, learned)], pattern)
    assert len(history) == 2 * 2 * 3
    last = history[history["step"] == 10].set_index("head_label")["mass"]
    assert last["L1 H2"] == pytest.approx(1.0) and last["L0 H0"] == pytest.approx(0.25)
    figure = figure_json(pattern_figure(history, make_task("reverse", 4), marked_step=10))
    lines = figure["data"]
    assert lines[0]["name"] == "L1 H2"  # the head that ends closest to the pattern comes first
    assert {line["name"] for line in lines} == set(history["head_label"])  # 6 heads, all drawn
    for line in lines:
        rows = history[history["head_label"] == line["name"]]
        np.testing.assert_array_equal(line["x"], rows["step"])
        np.testing.assert_array_equal(line["y"], rows["mass"])
    assert "anti-diagonal" in figure_title(figure)
    assert reference_lines(figure) == [("y", 0.25, "uniform attention 0.25")]  # uniform attention 1/4
    (marked,) = [s for s in figure["layout"]["shapes"] if s["xref"] == "x"]
    assert marked["x0"] == marked["x1"] == 10  # the step the slider shows
    assert figure["layout"]["yaxis"]["range"] == [0, 1.02]


def test_pattern_figure_draws_the_heads_that_end_highest():
    pattern = task_pattern(make_task("reverse", 4))
    attention = np.full((3, 4, 4, 4), 0.25, np.float32)  # [L, H, T, T]: 12 heads
    masses = np.linspace(0.3, 0.9, 12).reshape(3, 4)  # [L, H]
    for (layer, head), mass in np.ndenumerate(masses):
        attention[layer, head] = pattern * mass + (1 - mass) / 4
    history = pattern_history([Snapshot(0, np.full_like(attention, 0.25)), Snapshot(5, attention)], pattern)
    figure = figure_json(pattern_figure(history, make_task("reverse", 4)))
    assert [line["name"] for line in figure["data"]] == ["L2 H3", "L2 H2", "L2 H1", "L2 H0", "L1 H3", "L1 H2",
                                                         "L1 H1", "L1 H0"]  # fmt: skip
    assert "(the 8 highest of 12)" in figure_title(figure)


def encoder_maps(weights: np.ndarray) -> AttentionMaps:
    """Maps of an encoder (every query sees every key) with the given weights [L, H, T, T]."""
    T = weights.shape[-1]
    tokens = [f"t{i}" for i in range(T)]
    scores = np.zeros_like(weights)
    return AttentionMaps("self-attention", weights, scores, np.ones((T, T), dtype=bool), tokens, tokens)


def test_the_head_shown_first_is_the_one_on_the_key_the_task_needs():
    pattern = task_pattern(make_task("reverse", 4))  # [4, 4] anti-diagonal
    weights = np.full((2, 2, 4, 4), 0.25, np.float32)  # [L, H, T, T], all uniform ...
    weights[1, 0] = 0.8 * pattern + 0.2 * 0.25  # ... but L1 H0: 0.8 + 0.05 on the needed key
    weights[0, 1] = 0.5 * pattern + 0.5 * 0.25  # and L0 H1: 0.5 + 0.125
    layer, head, why = head_shown_first(encoder_maps(weights), pattern)
    assert (layer, head) == (1, 0)
    assert why.startswith("L1 H0 is shown first") and "is 0.85 " in why and "would give 0.25)" in why


def test_without_a_pattern_the_most_concentrated_head_is_shown_first():
    weights = np.full((2, 3, 4, 4), 0.25, np.float32)  # [L, H, T, T]: uniform, entropy ln 4
    weights[1, 2] = [0.97, 0.01, 0.01, 0.01]  # every query nearly all on key 0
    weights[0, 1] = [0.7, 0.1, 0.1, 0.1]
    peaked = -(0.97 * math.log(0.97) + 3 * 0.01 * math.log(0.01))
    for pattern in (None, task_pattern(make_task("reverse", 6))):  # none, or one of another length
        layer, head, why = head_shown_first(encoder_maps(weights), pattern)
        assert (layer, head) == (1, 2)
        assert "most concentrated" in why and f"entropy of {peaked:.2f} nats" in why
        assert f"spread evenly: {math.log(4):.2f}" in why


def test_a_loaded_model_gets_the_probe_it_was_trained_on_and_no_curve():
    task = make_task("reverse", 8)
    probes = {}
    for seed in (0, 3):
        cfg = explorer.ModelConfig(n_layers=1, seed=seed)
        trained = train(cfg, task, steps=2, seed=seed)  # as the Train page trains: with the sidebar's seed
        loaded = loaded_result(trained.model, task)
        assert loaded.probe == trained.probe and len(loaded.probe) == 8 and set(loaded.probe) <= set(task.vocabulary)
        assert loaded.model is trained.model and loaded.task == task
        assert len(loaded.history) == 0 and list(loaded.history.columns) == ["step", "loss", "accuracy", "lr"]
        assert loaded.snapshots == [] and not loaded.stopped_early
        probes[seed] = loaded.probe
    assert probes[0] != probes[3]  # the probe follows the model's own seed


def test_a_model_over_the_live_training_limit_is_refused_with_its_size():
    task = make_task("reverse", 8)
    assert too_big_to_train(explorer.ModelConfig(), task) is None
    big = explorer.ModelConfig(d_model=256, n_heads=4, d_ff=1024, n_layers=3)
    n_params = sum(p.numel() for p in initial_model(big, task).parameters())
    assert n_params > MAX_TRAIN_PARAMETERS
    assert too_big_to_train(big, task) == (
        f"This model has {n_params:,} parameters; training live is limited to 2,000,000. "
        "Use fewer layers or a smaller d_model or d_ff in the sidebar."
    )
    smaller = big.replace(n_layers=2)
    assert sum(p.numel() for p in initial_model(smaller, task).parameters()) <= MAX_TRAIN_PARAMETERS
    assert too_big_to_train(smaller, task) is None


def test_snapshot_maps_keep_the_trace_tokens_and_mask():
    result = train(explorer.ModelConfig(n_layers=1), make_task("induction", 4), steps=2, snapshot_every=1)
    like = explorer.run(result.model, result.probe).attention_maps()["self-attention"]
    maps = snapshot_maps(result.snapshots[0], like)
    assert maps.query_tokens == result.probe and np.array_equal(maps.allowed, like.allowed)
    np.testing.assert_array_equal(maps.weights, result.snapshots[0].attention)
    assert not maps.allowed[0, 1]  # causal
    np.testing.assert_array_equal(snapshot_maps(result.snapshots[-1], like).weights, like.weights)


@pytest.mark.parametrize("name", TASKS)
def test_expected_output_agrees_with_the_task_data(name):
    task = make_task(name, 8)
    batch = task.sample(20, torch.Generator().manual_seed(3))
    for inputs, targets, scored in zip(batch.inputs, batch.targets, batch.scored, strict=True):
        expected = expected_output(task, task.tokens(inputs))
        wanted = [t if s else None for t, s in zip(task.tokens(targets), scored.tolist(), strict=True)]
        assert expected == wanted


def test_predictions_of_a_trained_reverse_model():
    task = make_task("reverse", 8)
    with single_thread():  # as the Train page trains: several times faster on a busy machine
        result = train(explorer.ModelConfig(), task, steps=300, seed=0, stop_at_accuracy=0.99)
    table = predictions(result.model, task, "A B C D E F G H".split())
    assert list(table["expected"]) == list("HGFEDCBA")
    assert table["correct"].mean() >= 7 / 8
    assert list(table["output"][table["correct"]]) == list(table["expected"][table["correct"]])
    with pytest.raises(explorer.ConfigError, match="'Z' is not in this model's vocabulary"):
        predictions(result.model, task, ["A", "Z"])


@pytest.mark.parametrize(
    ("cfg", "task"),
    [
        (explorer.ModelConfig(), "reverse"),
        (explorer.ModelConfig(norm="pre", positional="learned", n_heads=2, d_ff=96), "sort"),
        (explorer.ModelConfig(arch="encoder-decoder", positional="rope", n_layers=3), "induction"),
    ],
)
def test_parameter_count_matches_the_model_train_builds(cfg, task):
    task = make_task(task, 6)
    assert parameter_count(cfg, task) == sum(p.numel() for p in initial_model(cfg, task).parameters())


def test_parameter_count_of_a_huge_config_allocates_nothing():
    cfg = explorer.ModelConfig(d_model=2048, n_heads=16, n_layers=24, d_ff=8192)
    assert parameter_count(cfg, make_task("copy", 8)) > 1_000_000_000


def test_steps_to_accuracy():
    history = pd.DataFrame({"step": [1, 2, 3, 4], "loss": [1.0] * 4, "accuracy": [0.2, 0.995, 0.5, 1.0]})
    assert steps_to_accuracy(history, 0.99) == 2
    assert steps_to_accuracy(history, 1.0) == 4
    assert steps_to_accuracy(history.iloc[:1], 0.99) is None


def test_percent_never_rounds_up_to_a_perfect_score():
    assert percent(1.0) == "100.0%" and percent(0.5) == "50.0%" and percent(0.9987) == "99.9%"
    assert percent(4095 / 4096) == "99.98%"
    assert percent(1 - 1e-5) == "99.999%"
    assert percent(0.0) == "0.0%" and percent(0.00026) == "0.03%"  # a nonzero share never reads as none
    assert percent(1e-9) == "<0.000001%"


def test_an_encoder_without_positions_is_said_to_be_blind_to_order_and_is():
    none = explorer.ModelConfig(positional="none")
    reverse = make_task("reverse", 6)
    assert "cannot be learned" in blind_to_order(none, reverse)
    assert blind_to_order(none, make_task("copy", 6)) is None  # the residual stream carries each token along
    assert blind_to_order(none, make_task("induction", 6)) is None  # a causal decoder knows order from its mask
    assert blind_to_order(explorer.ModelConfig(), reverse) is None
    # why: the same token gives the same logits wherever it sits, but reversing "A A B C D E" needs E at position 0
    # and D at position 1, both of which hold A
    model = initial_model(none, reverse)
    ids = torch.tensor([[reverse.vocabulary.index(t) for t in "A A B C D E".split()]])
    with torch.inference_mode():
        out = logits(model, ids)[0]  # [T, V]
    torch.testing.assert_close(out[0], out[1])
