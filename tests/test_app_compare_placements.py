"""Compare's "All four placements" through streamlit.testing: closed, it computes nothing; opened (?placements=true),
it draws placement_run's numbers for A's model, configured (encoder, decoder, encoder-decoder), trained or a real
checkpoint, with sentences that name every placement."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer.analysis.placements import MEASURES, RMS, placement_run
from explorer.config import NORMS, ModelConfig
from explorer.tasks import make_task
from explorer.training import train
from pictures.placement_charts import PANEL_TITLES
from tests.drawn import app_figures, figure_title, figure_titled
from views import caches
from views.state import STATE_KEY, AppState, TrainedModel

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
PAGE = "views/compare.py"
TITLE = "All four norm placements"
TEXT = "the cat sat on the mat"


def opened(query: dict[str, str], at: AppTest | None = None, timeout: float = 300) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=timeout) if at is None else at
    at.query_params.update(query)
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def drawn_lines(at: AppTest) -> dict[tuple[str, str], np.ndarray]:
    """(measure, placement) -> the y values the figure draws, the measure read from its panel's x axis."""
    figure = figure_titled(at, TITLE)
    axes = sorted({trace["xaxis"] for trace in figure["data"]})
    measure_of = dict(zip(axes, MEASURES, strict=True))  # x, x2, x3: panels left to right
    titles = [a["text"] for a in figure["layout"]["annotations"]][:3]
    assert titles == [PANEL_TITLES[m] for m in MEASURES]
    return {(measure_of[t["xaxis"]], t["name"].removesuffix("-norm")): np.asarray(t["y"]) for t in figure["data"]}


def assert_draws(at: AppTest, model: explorer.Transformer, text: str, target: str | None = None, stack=None) -> None:
    result = placement_run(model, text, target)
    lines = drawn_lines(at)
    assert len(lines) == 3 * len(NORMS)
    for (measure, placement), drawn in lines.items():
        # The figure is sent as float64: the page's numbers are placement_run's, computed afresh here
        np.testing.assert_allclose(drawn, result.values(placement, measure, stack), rtol=1e-9)
    words = " ".join(m.value for m in at.markdown)
    for placement in NORMS:
        assert f"{placement}-norm" in words
    assert "start at identity" in words or "own norms are at identity" in words


def test_closed_it_computes_and_draws_nothing():
    at = opened({"tokens": TEXT})
    assert not any(TITLE in figure_title(f) for f in app_figures(at))
    assert [e for e in at.expander if "All four placements" in e.label]
    assert len(at.get("download_button")) == 4  # only the comparison's own


def test_opened_it_draws_the_engines_numbers_for_the_default_model():
    at = opened({"tokens": TEXT, "placements": "true"})
    assert_draws(at, explorer.build_model(ModelConfig()), TEXT)
    assert len(at.get("download_button")) == 5  # and the four placements' CSV
    assert any("untrained weights, made for post-norm" in m.value for m in at.markdown)


def test_a_decoder_made_for_res_post_norm():
    at = opened({"tokens": TEXT, "placements": "true", "arch": "decoder", "norm": "res-post"})
    assert_draws(at, explorer.build_model(ModelConfig(arch="decoder", norm="res-post")), TEXT)


def test_an_encoder_decoder_shows_either_stack():
    cfg = ModelConfig(arch="encoder-decoder", norm="peri")
    at = opened({"tokens": TEXT, "placements": "true", "arch": "encoder-decoder", "norm": "peri"})
    target = at.text_input(key="target").value
    model = explorer.build_model(cfg)
    assert_draws(at, model, TEXT, target, "encoder")
    at.radio(key="placements_stack").set_value("decoder").run()
    assert not at.exception
    assert_draws(at, model, TEXT, target, "decoder")
    assert "decoder" in figure_title(figure_titled(at, TITLE))


def test_a_trained_model_gets_its_own_numbers():
    cfg = ModelConfig(positional="learned")
    trained = TrainedModel(train(cfg, make_task("reverse", 8), steps=20).model, None, "20 steps")
    probe = "A B C D E F G H"
    at = AppTest.from_file(APP, default_timeout=300)
    at.session_state[STATE_KEY] = AppState(trained=trained)
    opened({"tokens": probe, "placements": "true"}, at)
    assert_draws(at, trained.model, probe)
    assert any("trained weights (20 steps)" in m.value for m in at.markdown)


@pytest.mark.slow
def test_minilm_flips_to_every_placement(minilm_model, monkeypatch):
    monkeypatch.setitem(caches._CHECKPOINTS, "minilm-l6", minilm_model)  # the session's copy, not a second load
    text = "The cat sat on the mat because it was tired."
    at = opened({"model": "minilm-l6", "tokens": text, "placements": "true"})
    assert_draws(at, minilm_model, text)
    assert any("pretrained weights of" in m.value and "made for post-norm" in m.value for m in at.markdown)


@pytest.mark.slow
def test_smollm2_flips_to_every_placement(smollm_model, monkeypatch):
    monkeypatch.setitem(caches._CHECKPOINTS, "smollm2-135m", smollm_model)
    text = "The capital of France is"
    at = opened({"model": "smollm2-135m", "tokens": text, "placements": "true"})
    lines = drawn_lines(at)  # three more flipped copies of 135 M parameters would double this test: its own
    # placement is checked against a plain run of the checkpoint, the others for their shape
    rms = np.sqrt((explorer.run(smollm_model, text).residual.astype(np.float64) ** 2).mean(axis=(1, 2)))  # [31]
    np.testing.assert_allclose(lines[(RMS, "pre")], rms, rtol=1e-9)
    for (measure, _), drawn in lines.items():
        assert drawn.shape == (31 if measure == RMS else 30,) and np.isfinite(drawn).all()
    assert any("made for pre-norm" in m.value for m in at.markdown)
    assert any("start at identity (RMSNorms with weight 1)" in m.value for m in at.markdown)  # no bias to be 0
    # B is SmolLM2 run post-norm: the final norm only A has is its trained RMSNorm, not a new one at identity
    (weights,) = [s.value for s in at.success if "B runs on A's very weights" in s.value]
    assert "A also has decoder.norm" in weights and "(trained RMSNorm, weights from the checkpoint)" in weights
    assert "weight 1" not in weights and "LayerNorm" not in weights
    # B's gradient norms are hundreds of times A's, A's residual RMS hundreds of times B's: those panels are log
    lines = figure_titled(at, "Per-layer statistics of A and B")
    log = [k for k, v in lines["layout"].items() if k.startswith("yaxis") and v.get("type") == "log"]
    assert sorted(log) == ["yaxis", "yaxis2", "yaxis3"]  # residual RMS, residual std, gradient norm; not entropy
    assert any(c.value.startswith("Log scale on Residual stream RMS (×") for c in at.caption)


def test_a_junk_placements_value_is_named_and_the_expander_stays_closed():
    at = opened({"placements": "maybe"})
    assert any("`placements=maybe` was ignored" in w.value for w in at.warning)
    assert not any(TITLE in figure_title(f) for f in app_figures(at))


def test_heads_the_sidebar_removes_are_said_not_to_be_removed_here():
    """Every placement runs with every head (A's run with every head is lent): the section said nothing, so A's own
    placement read as A without the sidebar's heads, which the rest of the page draws."""
    cfg = ModelConfig(arch="decoder", norm="pre")
    at = opened({"tokens": TEXT, "placements": "true", "arch": "decoder", "norm": "pre", "ablate": "L0H1,L1H2"})
    assert_draws(at, explorer.build_model(cfg), TEXT)  # with every head
    (said,) = [c.value for c in at.caption if c.value.startswith("Every placement here runs with every head")]
    assert "heads L0H1, L1H2" in said and "pre-norm, A's own placement, is A with every head" in said
    at = opened({"tokens": TEXT, "placements": "true", "arch": "decoder", "norm": "pre"})
    assert not [c for c in at.caption if c.value.startswith("Every placement here runs with every head")]
