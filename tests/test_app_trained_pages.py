"""A model the Train page sent reaches the other pages: their numbers are the trained model's, not a random one's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

import explorer
from explorer.analysis.gradients import gradient_norms, layer_gradient_totals, objective
from explorer.anatomy import parameter_counts
from explorer.compare import default_b, model_for_b
from explorer.tasks import make_task
from explorer.training import train
from tests.drawn import app_boards, figure_titled, figure_trace, panel_matrix
from views.state import STATE_KEY, AppState, TrainedModel

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
PROBE = "A B C D E F G H"


@pytest.fixture(scope="module")
def trained():
    task = make_task("reverse", 8)
    result = train(explorer.ModelConfig(positional="learned"), task, steps=30)
    return TrainedModel(result.model, task, "reverse, 30 steps")


def open_with(trained, page: str, **params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state[STATE_KEY] = AppState(trained=trained)
    at.query_params.update({"tokens": PROBE, **params})
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_activations_page_shows_the_trained_models_gradients(trained):
    at = open_with(trained, "views/activations.py", act_open_gradients="true")
    assert any("trained weights (reverse, 30 steps)" in c.value for c in [*at.caption, *at.markdown])
    expected = layer_gradient_totals(gradient_norms(trained.model, PROBE))["norm"]
    random = layer_gradient_totals(gradient_norms(explorer.build_model(trained.model.config), PROBE))["norm"]
    drawn = figure_trace(figure_titled(at, "parameters (post-norm)"), "encoder blocks")["y"]  # block by block
    np.testing.assert_allclose(drawn, expected, rtol=1e-5)
    assert not np.allclose(drawn, random, rtol=1e-3)
    # the objective reads out through the trained model's own head, and the page says so
    info = " ".join(i.value for i in at.info)
    assert "trained model's own read-out" in info and "weights are untrained" not in info
    assert not any("switch the norm setting in the sidebar" in c.value for c in at.caption)
    assert not any("PyTorch's default initialisation" in c.value for c in at.caption)  # it is trained, not initialised


def test_a_trained_models_gradient_objective_is_its_own_read_out(trained):
    model, tokens = trained.model, PROBE.split()
    with torch.no_grad():
        x = model.positional(model.embedding(torch.tensor([model.vocabulary.index(t) for t in tokens])))  # [T, D]
        output = model(x[None], None)[-1][0][0]  # [T, D]: an encoder with no mask, as the task trained it
        logits = model.head(output[:-1])  # [T - 1, V]
    labels = torch.tensor([model.vocabulary.index(t) for t in tokens[1:]])
    expected = -torch.log_softmax(logits.double(), -1)[torch.arange(len(labels)), labels].mean()
    assert float(objective(model, PROBE).detach()) == pytest.approx(float(expected), rel=1e-5)
    norms = gradient_norms(model, PROBE).set_index("parameter")["norm"]
    assert norms["head.weight"] > 0 and norms["embedding.weight"] > 0  # the read-out now learns from it too


def test_positional_page_shows_the_trained_position_table(trained):
    at = open_with(trained, "views/positional.py")
    assert any("reverse, 30 steps" in i.value for i in at.info)
    assert not any(w.value.startswith("**Untrained.**") for w in at.warning)


def test_anatomy_counts_the_trained_models_embedding_and_read_out(trained):
    at = open_with(trained, "views/anatomy.py")
    total = sum(p.numel() for p in trained.model.parameters())
    assert total == parameter_counts(trained.model)["parameters"].sum()
    shown = " ".join(str(m.value) for m in [*at.markdown, *at.caption]) + " ".join(
        str(metric.value) for metric in at.metric
    )
    assert f"{total:,}" in shown
    note = " ".join(c.value for c in at.caption)
    assert "token embedding and its read-out to token logits are learned" in note
    assert "learned position table is counted" in note and "fixed hashed" not in note
    macs = int(next(m.value for m in at.metric if m.label == "Multiply-adds, one forward pass").replace(",", ""))
    model, T = trained.model, len(PROBE.split())
    D, F, L, V = model.config.d_model, model.config.d_ff, model.config.n_layers, len(model.vocabulary)
    assert macs == L * (4 * T * D * D + 2 * T * T * D + 2 * T * D * F) + T * D * V  # the read-out counted too


def test_compare_page_runs_b_on_the_trained_weights(trained):
    at = open_with(trained, "views/compare.py")
    model = trained.model
    b = default_b(model.config)
    maps_a = explorer.run(model, PROBE).attention_maps()["self-attention"]
    maps_b = explorer.run(model_for_b(model, b), PROBE).attention_maps()["self-attention"]
    pair = {p["name"]: panel_matrix(p) for p in app_boards(at)["pair_maps"]["panels"]}
    np.testing.assert_array_equal(pair["A"].values, maps_a.weights[0, 0])  # A, left
    np.testing.assert_array_equal(pair["B"].values, maps_b.weights[0, 0])  # B, right
    random_b = explorer.run(model_for_b(explorer.build_model(model.config), b), PROBE).attention
    assert not np.allclose(pair["B"].values, random_b[0, 0])
    assert any("very weights" in s.value for s in at.success)
    said = " ".join(m.value for m in at.markdown)  # the gradient objective, in its expander
    assert "trained model's own read-out" in said and "The weights are untrained" not in said


def test_compare_says_a_b_of_another_seed_reads_out_through_a_fresh_head(trained):
    """Beside the trained model, B with another seed cannot share its weights: B is built fresh, its read-out drawn
    from B's seed (not the trained one), and the gradient objective says so for B while A keeps its own; B on the
    trained weights (the norm flip) reads out through the trained head, and one objective is said for both."""
    model = trained.model
    b = model.config.replace(seed=1)
    fresh = model_for_b(model, b)
    assert not torch.equal(fresh.head.weight, model.head.weight)
    assert torch.equal(fresh.head.weight, explorer.build_model(b, model.vocabulary).head.weight)
    at = open_with(trained, "views/compare.py", b_seed="1")
    (said,) = [m.value for m in at.markdown if "Dummy objective" in m.value]
    a_line, b_line = said.split("\n\n")
    assert a_line.startswith("A: Dummy objective") and "trained model's own read-out" in a_line
    assert b_line.startswith("B: Dummy objective") and "drawn from B's seed, its read-out too" in b_line
    assert "trained model's own read-out" not in b_line
    assert torch.equal(model_for_b(model, default_b(model.config)).head.weight, model.head.weight)
    flipped = open_with(trained, "views/compare.py")
    (said,) = [m.value for m in flipped.markdown if "Dummy objective" in m.value]
    assert said.startswith("A and B: Dummy objective") and "trained model's own read-out" in said
