"""The Plotly figures a notebook user makes from explorer: their numbers are explorer.run's, they save offline, and
the engine still imports without plotly."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import explorer
from explorer.analysis.activations import layer_statistics
from explorer.build import build_model
from explorer.tasks import blind_accuracy, make_task
from pictures.training_charts import curves_figure, training_title
from tests.drawn import figure_json, figure_title
from tests.tiny_checkpoints import tiny

ROOT = Path(__file__).resolve().parents[1]
TOKENS = "the cat sat on the mat"


@pytest.fixture(scope="module")
def causal() -> explorer.Trace:
    return explorer.run(explorer.ModelConfig(mask="causal", n_heads=4), TOKENS)


def test_one_head_is_drawn_with_its_weights_and_masked_cells_left_empty(causal):
    [heatmap] = explorer.attention_figure(causal, layer=1, head=2).data
    weights = causal.attention[1, 2].astype(np.float64)  # [T, T]
    upper = np.triu(np.ones((6, 6), dtype=bool), 1)  # what a causal query may not see
    z = np.array(heatmap.z, dtype=np.float64)
    assert np.isnan(z[upper]).all()
    np.testing.assert_allclose(z[~upper], weights[~upper], rtol=1e-6)
    assert list(heatmap.y)[:2] == ["the", "cat"] and list(heatmap.x)[4] == "the·4"  # the page's labels


def test_the_head_average_is_the_mean_of_the_heads(causal):
    [heatmap] = explorer.attention_figure(causal, layer=0, head=None).data
    z = np.array(heatmap.z, dtype=np.float64)
    mean = causal.attention[0].astype(np.float64).mean(axis=0)  # [T, T]
    allowed = ~np.isnan(z)
    np.testing.assert_allclose(z[allowed], mean[allowed], rtol=1e-5)


def test_a_long_texts_map_is_pale_until_stretched_to_its_top_one_percent():
    long = explorer.run(explorer.ModelConfig(mask="causal"), " ".join(f"w{i % 40}" for i in range(160)))
    plain, stretched = (figure_json(explorer.attention_figure(long, 1, 0, stretch=on)) for on in (False, True))
    weights = long.attention[1, 0]  # [T, T]
    top = float(np.quantile(weights[long.first.self_attention.allowed], 0.99))  # of the cells a query may see
    assert plain["data"][0]["zmax"] == 1.0 and "turn on Stretch colours" in figure_title(plain)
    assert stretched["data"][0]["zmax"] == pytest.approx(top, rel=1e-6) and top < 0.5
    assert "colours stretched" in figure_title(stretched)
    same = np.asarray(stretched["data"][0]["z"], dtype=float), np.asarray(plain["data"][0]["z"], dtype=float)
    np.testing.assert_array_equal(*same)  # the weights drawn are the same; only the colours move
    short = figure_json(explorer.attention_figure(explorer.run(explorer.ModelConfig(), TOKENS)))
    assert "Stretch" not in figure_title(short)  # six tokens: dark enough on 0 to 1, no hint


def test_a_token_that_looks_like_html_is_drawn_as_typed_on_every_map():
    """Found by a notebook review: "<b>bold</b>" was drawn bold and "x<br>y" on two lines (Plotly reads HTML)."""
    cfg = explorer.ModelConfig(n_heads=2)
    trace = explorer.run(cfg, "a <b>bold</b> x<br>y c")
    escaped = ["a", "&lt;b&gt;bold&lt;/b&gt;", "x&lt;br&gt;y", "c"]
    figures = [
        explorer.attention_figure(trace, 0, 0),
        explorer.attention_grid_figure(trace),
        explorer.difference_figure(trace, trace, 0, 1),
        explorer.norm_attention_figure(explorer.build_model(cfg), trace, 0, 0),
    ]
    for figure in figures:
        assert list(figure.data[0].x) == escaped and list(figure.data[0].y) == escaped


@pytest.mark.parametrize(
    ("layer", "head", "words"),
    [
        (99, 0, "layer is a whole number from 0 to 1; got 99"),
        (-1, 0, "got -1"),
        ("1", 0, "got '1'"),
        (0, 4, "head is a whole number from 0 to 3; got 4"),
        (0, True, "got True"),
    ],
)
def test_a_layer_or_head_the_model_lacks_is_named_not_an_index_error(causal, layer, head, words):
    """layer=-1 had drawn the last layer titled "layer -1"; 99 had raised numpy's IndexError."""
    with pytest.raises(explorer.ConfigError, match=words):
        explorer.attention_figure(causal, layer, head)
    with pytest.raises(explorer.ConfigError, match=words):
        explorer.difference_figure(causal, causal, layer, head)
    model = explorer.build_model(explorer.ModelConfig(mask="causal", n_heads=4))
    with pytest.raises(explorer.ConfigError, match=words):  # -1 had raised IndexError, 99 too
        explorer.norm_attention_figure(model, causal, layer, head)


@pytest.mark.parametrize("stack", [1, -1, 1.0, "decoder"])
def test_a_stack_the_trace_lacks_is_named(stack):
    """Found by a notebook review: stack=1 of an encoder's trace raised "tuple index out of range", 1.0 a TypeError."""
    cfg = explorer.ModelConfig(n_heads=2)
    trace = explorer.run(cfg, "a b c")
    for figure in (
        lambda: explorer.depth_figure(trace, stack=stack),
        lambda: explorer.token_norm_figure(trace, stack=stack),
        lambda: explorer.massive_share_figure(explorer.build_model(cfg), trace, stack=stack),
    ):
        with pytest.raises(explorer.ConfigError, match=rf"stack is one of 0 \(encoder\); got {stack!r}"):
            figure()
    pair = explorer.run(explorer.ModelConfig(arch="encoder-decoder"), "a b", "c d")
    assert "decoder" in explorer.depth_figure(pair, stack=1).layout.title.text


def test_the_grid_holds_every_layer_and_head_behind_a_slider(causal):
    figure = explorer.attention_grid_figure(causal)
    assert len(figure.data) == 2 * 4 and [t.visible for t in figure.data].count(True) == 1
    steps = figure.layout.sliders[0].steps
    assert [s.label for s in steps][:5] == ["L0 H0", "L0 H1", "L0 H2", "L0 H3", "L1 H0"]
    z = np.array(figure.data[5].z, dtype=np.float64)  # layer 1, head 1
    np.testing.assert_allclose(np.nan_to_num(z), causal.attention[1, 1], rtol=1e-6)
    assert steps[5].args[0]["visible"][5] and sum(steps[5].args[0]["visible"]) == 1


def test_a_minus_b_is_the_difference_of_the_two_runs():
    a = explorer.run(explorer.ModelConfig(norm="post"), TOKENS)
    b = explorer.run(explorer.ModelConfig(norm="pre"), TOKENS)
    [heatmap] = explorer.difference_figure(a, b, layer=1, head=3).data
    expected = a.attention[1, 3].astype(np.float64) - b.attention[1, 3]
    np.testing.assert_allclose(np.array(heatmap.z), expected, atol=1e-7)
    assert heatmap.zmin == -heatmap.zmax == pytest.approx(-np.abs(expected).max())  # 0 sits at the scale's middle


def test_positional_curves_and_similarity_are_the_models_table():
    model = explorer.build_model(explorer.ModelConfig(positional="learned"))
    table = model.positional.table.detach().numpy()  # [P_max, D]
    figure = explorer.positional_figure(model, n_positions=20, dims=[0, 5])
    assert [t.name for t in figure.data] == ["dim 0", "dim 5"]
    np.testing.assert_allclose(np.array(figure.data[1].y), table[:20, 5])
    [heatmap] = explorer.position_similarity_figure(model, n_positions=10).data
    unit = table[:10] / np.linalg.norm(table[:10], axis=1, keepdims=True)
    np.testing.assert_allclose(np.array(heatmap.z), unit @ unit.T, atol=1e-5)
    with pytest.raises(ValueError, match="rotary"):
        explorer.positional_figure(explorer.build_model(explorer.ModelConfig(positional="rope")))


def test_depth_statistics_gradients_and_training_curves(causal):
    figure = explorer.depth_figure(causal)
    stats = layer_statistics(causal.first)
    residual = stats[stats["point"] == "residual"]
    [rms] = [t for t in figure.data if t.name == "residual" and t.yaxis == "y3"]  # the third panel: rms
    np.testing.assert_allclose(np.array(rms.y), residual["rms"])
    model = explorer.build_model(explorer.ModelConfig())
    [bars] = explorer.gradient_figure(model, TOKENS).data
    assert list(bars.x) == [0, 1] and all(v > 0 for v in bars.y)
    result = explorer.train(explorer.ModelConfig(), make_task("copy", 6), steps=3)
    loss, accuracy = explorer.training_figure(result).data
    assert list(loss.y) == list(result.history["loss"]) and list(accuracy.x) == [0, 1, 2, 3]


@pytest.mark.parametrize(("config", "kind"), [(tiny(), torch.nn.RMSNorm), (explorer.ModelConfig(), torch.nn.LayerNorm)])
def test_the_parameters_figure_names_the_norms_the_model_has(config, kind):
    model = build_model(config)
    [bars] = explorer.parameters_figure(model).data
    drawn = dict(zip(bars.x, bars.y, strict=True))
    in_model = sum(p.numel() for m in model.modules() if isinstance(m, kind) for p in m.parameters())
    assert drawn[kind.__name__] == in_model > 0
    assert not ({"LayerNorm", "RMSNorm"} - {kind.__name__}) & set(drawn)  # a Llama's norms are not called LayerNorm


def test_training_curves_are_the_train_pages_own():
    task = make_task("copy", 6)
    result = explorer.train(explorer.ModelConfig(norm="pre"), task, steps=4)
    figure = explorer.training_figure(result)
    page = curves_figure({"pre": result.history}, len(task.vocabulary), 4, training_title(task), blind_accuracy(task))
    assert figure.to_json() == page.to_json()  # what the Train page draws for this run (tested there)
    loss, accuracy = figure_json(figure)["data"]
    assert (loss["name"], accuracy["name"]) == ("pre-norm", "pre-norm")
    np.testing.assert_array_equal(accuracy["y"], result.history["accuracy"])


def test_a_saved_figure_carries_plotly_js_and_fetches_nothing(causal, tmp_path):
    path = tmp_path / "map.html"
    explorer.attention_figure(causal).write_html(path, include_plotlyjs=True)
    html = path.read_text()
    assert "Plotly.newPlot" in html and len(html) > 1_000_000  # plotly.js is inside the file
    assert not re.search(r"<script[^>]*\bsrc=", html)  # no script fetched (plotly.js only names its CDN for geo maps)
    cdn = explorer.attention_figure(causal).to_html(include_plotlyjs="cdn")  # what a fetched plotly.js looks like:
    assert re.search(r"<script[^>]*\bsrc=", cdn) and "<script src=" not in cdn  # the old check could not see it


def test_the_engine_imports_without_plotly():
    code = (
        "import sys; sys.modules['plotly'] = None\n"  # as if plotly were not installed
        "import explorer\n"
        "explorer.run(explorer.ModelConfig(), 'a b c')\n"
        "try:\n    explorer.attention_figure\nexcept ImportError:\n    print('figures need plotly')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "figures need plotly"


def test_the_readme_names_every_figure_explorer_offers():
    """The README's table of figures is how a notebook user finds them: each one explorer offers is in it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert [name for name in explorer.FIGURES if f"`{name}(" not in readme] == []
    assert set(explorer.FIGURES) <= set(dir(explorer))  # a notebook's tab completion offers them (it reads dir)


def test_the_readmes_figure_calls_name_real_arguments_in_their_order():
    """Found by a docs review: the table wrote rope_angle_figure(n, ...), whose first argument is n_positions, so
    n=64 was a TypeError, and attention_figure(trace, layer, head, stretch=False), where a fourth positional argument
    is `kind`. The arguments the table writes bare must be the function's first ones, in order; the ones it writes
    name=value must be arguments the function has."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    wrong = []
    for name, written in re.findall(r"`(\w+_figure)\(([^`]*)\)`", readme):
        if name not in explorer.FIGURES:
            continue
        parameters = list(inspect.signature(getattr(explorer, name)).parameters)
        arguments = [a.strip() for a in written.split(",") if a.strip() and "(" not in a]
        bare = [a for a in arguments if "=" not in a]
        named = [a.split("=")[0] for a in arguments if "=" in a]
        if parameters[: len(bare)] != bare or not set(named) <= set(parameters[len(bare) :]):
            wrong.append(f"{name}({written}) against {parameters}")
    assert wrong == []
