"""Compare with measure=norms: A's and B's maps and A − B show what each head adds, ‖α·f(x)‖ (norm_attention of
each side's own model), labelled so; the head ranking stays on the weights. Through streamlit.testing and on the
chart builders."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer.analysis.norm_attention import norm_attention
from explorer.compare import default_b, model_for_b, reorder_maps, token_order
from explorer.config import ModelConfig
from pictures.attention_panels import NORM
from pictures.compare_charts import (
    difference_panel,
    difference_verdict,
    norm_difference_figure,
    pair_norm_note,
    pair_norm_top,
    pair_panels,
)
from tests.drawn import app_boards, figure_json, panel_matrix
from tests.test_app_compare import difference_panel as drawn_difference_panel
from tests.test_app_compare import drawn_difference, hover_values, sides

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
TOKENS = "the cat sat on the mat"


def opened(**query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(query)
    at.switch_page("views/compare.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def a_and_b(cfg: ModelConfig, text_b: str = TOKENS) -> tuple[np.ndarray, np.ndarray]:
    """norm_attention [L, H, T, T] of A (the sidebar's model) and of B = default_b(A) on A's weights."""
    model_a = explorer.build_model(cfg)
    model_b = model_for_b(model_a, default_b(cfg))
    return (
        norm_attention(model_a, explorer.run(model_a, TOKENS)),
        norm_attention(model_b, explorer.run(model_b, text_b)),
    )


def test_compare_with_norms_draws_the_norm_difference():
    at = opened(measure="norms", layer="1", head="2")
    norms_a, norms_b = a_and_b(ModelConfig())
    np.testing.assert_allclose(drawn_difference(at), norms_a[1, 2] - norms_b[1, 2], rtol=1e-5, atol=1e-7)
    drawn = sides(at)
    np.testing.assert_allclose(drawn["A"].values, norms_a[1, 2], rtol=1e-6)
    np.testing.assert_allclose(drawn["B"].values, norms_b[1, 2], rtol=1e-6)
    panel = drawn_difference_panel(at)
    assert panel["title"] == f"A − B of {NORM} · layer 1 · head 2"
    assert panel["value_title"] == f"A − B of {NORM}" and "A adds more" in panel["subtitle"]
    np.testing.assert_allclose(hover_values(panel, f"B of {NORM}"), norms_b[1, 2], rtol=1e-6)
    assert [p["value_title"] for p in app_boards(at)["pair_maps"]["panels"]] == [NORM, NORM]
    assert any("ranking below compares the weights" in c.value for c in at.caption)


def test_norms_follow_b_when_its_tokens_are_lined_up_with_as():
    text_b = "mat the on sat cat the"
    at = opened(measure="norms", compare="input", b_tokens=text_b)
    model = explorer.build_model(ModelConfig())
    trace_a, trace_b = explorer.run(model, TOKENS), explorer.run(model, text_b)
    order = token_order(trace_a.tokens, trace_b.tokens)
    maps_b = trace_b.first.self_attention
    lined = reorder_maps(replace(maps_b, weights=norm_attention(model, trace_b)), order, order)
    expected = norm_attention(model, trace_a)[0, 0] - lined.weights[0, 0]
    np.testing.assert_allclose(drawn_difference(at), expected, rtol=1e-5, atol=1e-7)


def test_weights_stay_the_default():
    at = opened()
    assert drawn_difference_panel(at)["title"] == "A − B · layer 0 · head 0"
    assert [p["value_title"] for p in app_boards(at)["pair_maps"]["panels"]] == ["weight", "weight"]


# --- The builders.


@pytest.fixture(scope="module")
def norm_maps():
    """A's and B's self-attention maps carrying ‖α·f(x)‖ as their weights (as the page passes them)."""
    cfg = ModelConfig()
    model_a = explorer.build_model(cfg)
    model_b = model_for_b(model_a, default_b(cfg))
    out = []
    for model in (model_a, model_b):
        trace = explorer.run(model, TOKENS)
        maps = trace.first.self_attention
        out.append(replace(maps, weights=norm_attention(model, trace)))
    return out


def test_pair_panels_name_the_norms_and_use_the_top_given(norm_maps):
    (panel_a, panel_b), _ = pair_panels(*norm_maps, 0, 1, top=5.0, measure="norms")
    assert panel_a["value_title"] == panel_b["value_title"] == NORM
    assert panel_a["legend"] is None and (panel_b["legend"]["low"], panel_b["legend"]["high"]) == (0.0, 5.0)
    np.testing.assert_allclose(panel_matrix(panel_a).values, norm_maps[0].weights[0, 1], rtol=1e-6)


def test_difference_panel_of_norms_and_its_rounding_scale(norm_maps):
    a, b = norm_maps
    panel = difference_panel(a, b, a.weights[0, 0] - b.weights[0, 0], 0, 0, "norms")
    assert panel["title"].startswith(f"A − B of {NORM}")
    # Rounding is judged against the size of the values subtracted: 1e-4 on norms of 50 is float32 noise.
    assert "float32 rounding" in difference_verdict(1e-4, scale=50.0)
    assert "float32 rounding" not in difference_verdict(1e-4)


def test_norm_difference_figure_is_a_minus_b_with_both_on_hover(norm_maps):
    a, b = norm_maps
    figure = figure_json(norm_difference_figure(a, b, 1, 3))
    (heat,) = figure["data"]
    np.testing.assert_allclose(heat["z"], a.weights[1, 3].astype(np.float64) - b.weights[1, 3], rtol=1e-9)
    np.testing.assert_allclose(heat["customdata"][..., 1], b.weights[1, 3], rtol=1e-6)
    assert heat["zmin"] == -heat["zmax"] and NORM in heat["colorbar"]["title"]["text"]


def test_norm_maps_share_the_scale_of_the_head_shown(norm_maps):
    a, b = norm_maps
    top = pair_norm_top(norm_maps, 1, 2)
    assert top == pytest.approx(max(a.weights[1, 2].max(), b.weights[1, 2].max()))
    assert f"darkest blue = {top:.3g}, the largest of the two maps" in pair_norm_note(top, stretch=False)
