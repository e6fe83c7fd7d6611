"""A notebook user's wrong argument to a figure gets a sentence naming what the argument takes, never a figure of
something else, a torch traceback or an AttributeError from deep inside (found by a notebook review)."""

from __future__ import annotations

import re

import pytest

import explorer
from explorer.config import ConfigError
from explorer.tasks import make_task
from tests.drawn import figure_title

TOKENS = "the cat sat on the mat"


@pytest.fixture(scope="module")
def model() -> explorer.Transformer:
    return explorer.build_model(explorer.ModelConfig(mask="causal", n_heads=4), tuple("ABCDEFGHIJ"))


@pytest.fixture(scope="module")
def trace(model) -> explorer.Trace:
    return explorer.run(model, "B A D C")


@pytest.mark.parametrize("n_positions", [0, -5, 5000, 2.5, "64"])
def test_a_position_count_outside_one_to_4096_is_named(n_positions):
    """positional_figure(model, n_positions=-5) had drawn the sinusoid table's every row but its last five (507
    positions), 0 had drawn nothing, and position_similarity_figure(model, 0) raised numpy's "zero-size array"."""
    model = explorer.build_model(explorer.ModelConfig())
    words = rf"n_positions is a whole number from 1 to 4096; got {re.escape(repr(n_positions))}"
    with pytest.raises(explorer.ConfigError, match=words):
        explorer.positional_figure(model, n_positions=n_positions)
    with pytest.raises(explorer.ConfigError, match=words):
        explorer.position_similarity_figure(model, n_positions=n_positions)
    assert len(explorer.positional_figure(model, n_positions=7).data[0].x) == 7


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"n_positions": -3}, "n_positions is a whole number from 1 to 4096; got -3"),  # torch's "upper bound"
        ({"n_positions": 0}, "n_positions is a whole number from 1 to 4096; got 0"),  # an empty figure
        ({"d_head": 63}, "d_head is even"),  # 31 pairs, and dimension 62 in none
        ({"d_head": 0}, "d_head is a whole number of at least 2; got 0"),  # a figure of no pairs
        ({"base": 0}, "base is a positive number"),  # every pair but the first NaN
        ({"base": float("nan")}, "base is a positive number"),
        ({"layout": "Half"}, "layout is 'interleaved' .* or 'half'"),  # drawn as interleaved
    ],
)
def test_rotary_settings_no_model_has_are_named(arguments, words):
    settings = {"n_positions": 16, "d_head": 64, "base": 10_000.0, "layout": "interleaved"} | arguments
    with pytest.raises(explorer.ConfigError, match=words):
        explorer.rope_angle_figure(**settings)


def test_rotary_angles_of_a_llama_layout_still_draw():
    figure = explorer.rope_angle_figure(8, 64, 100_000, "half")
    assert figure.data[0].z.shape == (8, 32) and "i + d_head/2" in figure.layout.xaxis.title.text


def test_a_stack_the_model_lacks_is_named_before_the_placements_run(monkeypatch):
    """stack="decoder" of an encoder, or a typo, had drawn three panels saying "not available"."""
    model = explorer.build_model(explorer.ModelConfig(n_heads=2))
    monkeypatch.setattr("pictures.notebook_figures.placement_run", lambda *a: pytest.fail("ran before the check"))
    with pytest.raises(explorer.ConfigError, match="stack is 'encoder' for this model, or None for the first; got"):
        explorer.placements_figure(model, TOKENS, stack="decoder")


@pytest.mark.parametrize("k", [21, 49_152])
def test_the_lens_figure_lists_at_most_twenty_pieces_in_a_hover(model, trace, k):
    """k=49,152 on SmolLM2 (its whole vocabulary) had run for minutes towards a 240 MB figure of hovers 49,152 lines
    tall; explorer.logit_lens gives any k as a table."""
    with pytest.raises(explorer.ConfigError, match=f"k is a whole number from 1 to 20; got {k}"):
        explorer.logit_lens_figure(model, trace, k=k)
    hover = explorer.logit_lens_figure(model, trace, k=3).data[0].customdata[0][0]
    assert hover.count("<br>") == 2  # three pieces


def test_a_model_where_a_trace_goes_or_the_other_way_round_is_named(model, trace):
    """norm_attention_figure takes (model, trace), attention_figure (trace): swapped, they had raised
    "'Transformer' object has no attribute 'maps'" from inside torch's Module.__getattr__."""
    takes_a_trace = "takes a Trace \\(what explorer.run returns\\); got a Transformer"
    takes_a_model = "takes a model \\(explorer.load_pretrained, explorer.build_model\\) first; got a Trace"
    for draw, words in [
        (lambda: explorer.attention_figure(model, 0, 0), "attention_figure " + takes_a_trace),
        (lambda: explorer.attention_grid_figure(model), "attention_grid_figure " + takes_a_trace),
        (lambda: explorer.difference_figure(trace, model), "difference_figure " + takes_a_trace),
        (lambda: explorer.depth_figure(model), "depth_figure " + takes_a_trace),
        (lambda: explorer.parameters_figure(trace), "parameters_figure " + takes_a_model),
        (lambda: explorer.positional_figure(trace), "positional_figure " + takes_a_model),
        (lambda: explorer.logit_lens_figure(trace, model), "logit_lens_figure " + takes_a_model),
        (lambda: explorer.attribution_figure(trace, model), "attribution_figure " + takes_a_model),
        (lambda: explorer.ablation_figure(trace, TOKENS), "ablation_figure " + takes_a_model),
        (lambda: explorer.gradient_figure(trace, TOKENS), "gradient_figure " + takes_a_model),
        (lambda: explorer.training_figure(trace), "training_figure takes what explorer.train returns; got a Trace"),
    ]:
        with pytest.raises(TypeError, match=words):
            draw()


def test_the_gradient_figure_names_its_loss_instead_of_pointing_above_it():
    """Its subtitle said "for the objective stated above": the page states it in a box above the chart, but a
    notebook (and the Activations page's HTML download, which draws this figure) has nothing above it."""
    model = explorer.build_model(explorer.ModelConfig())
    figure = explorer.gradient_figure(model, TOKENS)
    words = figure_title(figure.to_plotly_json())
    assert "above" not in words and "next-token loss" in words and "objective_text(model)" in words
    assert figure.layout.title.text == "Gradient norm of each block's parameters (post-norm)"
    task = make_task("copy", 6)
    result = explorer.train(explorer.ModelConfig(), task, steps=1)
    trained = explorer.gradient_figure(result.model, list(task.vocabulary[:3]))
    assert "above" not in figure_title(trained.to_plotly_json())


def test_another_models_trace_is_named_not_a_matrix_shape_error(smollm_model, minilm_model):
    """next_token(SmolLM2, a MiniLM trace) had raised torch's "mat1 and mat2 shapes cannot be multiplied"."""
    with pytest.raises(ConfigError, match="not made by this model"):
        explorer.next_token(smollm_model, explorer.run(minilm_model, "the cat"))


def test_a_grid_larger_than_max_cells_is_refused_with_its_size_and_drawn_when_asked():
    """Every map travels in the figure: MiniLM on 254 pieces had made 58 MB of it without a word."""
    trace = explorer.run(explorer.ModelConfig(n_layers=2, n_heads=2), "a b c d e")  # 2 x 2 x 5 x 5 = 100 cells
    with pytest.raises(ConfigError, match=r"100 cells(.|\n)*max_cells=100 "):
        explorer.attention_grid_figure(trace, max_cells=99)
    assert len(explorer.attention_grid_figure(trace, max_cells=100).data) == 4
    assert len(explorer.attention_grid_figure(trace).data) == 4  # the default draws what a page would
