"""The Attention page's Show switch, weights | norms, through streamlit.testing: with norms the big map, the grid and
the hover show what each head adds, ‖α·f(x)‖, as explorer.analysis.norm_attention computes it, for every kind of
configured model and a trained one; the URL holds the switch, and a junk value gets a sentence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer.analysis.norm_attention import norm_attention, value_norms
from explorer.config import ModelConfig
from explorer.tasks import make_task
from explorer.training import train
from pictures.boards import decode_floats
from pictures.style import BLUES, Ramp
from tests.drawn import DrawnMatrix, app_boards, app_matrices, sheet_maps
from views.state import STATE_KEY, AppState, TrainedModel

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
TOKENS = "the cat sat on the mat"
PROBE = "A B C D E F G H"
TARGET = "le chat est assis"


def opened(query: dict[str, str], state: AppState | None = None) -> AppTest:
    """A fresh session opening a link, run once, without an exception."""
    at = AppTest.from_file(APP, default_timeout=120)
    if state is not None:
        at.session_state[STATE_KEY] = state
    at.query_params.update(query)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def norms_of(
    cfg: ModelConfig, tokens: str, kind: str, target: str | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weights, norm_attention, value_norms) of the configured model `cfg` on `tokens`, computed here."""
    model = explorer.build_model(cfg)
    trace = explorer.run(model, tokens, target)
    weights = trace.attention_maps()[kind].weights  # [L, H, Tq, Tk]
    return weights, norm_attention(model, trace, kind), value_norms(model, trace, kind)


def grid_sheet(at: AppTest) -> dict:
    [sheet] = [p for p in app_boards(at)["maps"]["panels"] if p["kind"] == "sheet"]
    return sheet


def test_the_switch_redraws_the_map_and_the_grid_with_what_each_head_adds():
    at = opened({"tokens": TOKENS})
    assert at.radio(key="measure").value == "weights" and "measure" not in at.query_params
    weights, norms, sizes = norms_of(ModelConfig(), TOKENS, "self-attention")
    at.selectbox(key="layer").select(1)
    at.selectbox(key="head").select(2)
    at.radio(key="measure").set_value("norms").run()
    assert not at.exception and not at.warning
    radio = at.radio(key="measure")
    assert radio.proto.query_param_key == "measure" and list(radio.proto.options) == ["weights", "norms"]  # the URL
    drawn = app_matrices(at)["map"]
    np.testing.assert_allclose(drawn.values, norms[1, 2], rtol=1e-6, atol=0)  # float32 sent as computed
    hover = {row["title"]: row for row in drawn.view["extra"]}
    np.testing.assert_array_equal(hover_values(hover["weight α"], drawn), weights[1, 2])  # both numbers on hover
    # ‖f(x_j)‖ read off as ‖α·f(x)‖ / α: float32 rounding of one division and one product, far below 1e-5
    np.testing.assert_allclose(hover_values(hover["‖f(x)‖ of the key"], drawn)[0], sizes[1, 2], rtol=1e-5)
    top = float(norms.max())  # every query may see every key here: the largest of any layer and head
    assert f"darkest blue = {top:.3g}" in drawn.title
    thumbnails = sheet_maps(grid_sheet(at))
    for layer, head in [(0, 0), (1, 2)]:  # one scale for every small map: a head that adds little is pale
        np.testing.assert_array_equal(thumbnails[f"L{layer} H{head}"], Ramp(BLUES, 0.0, top).rgb(norms[layer, head]))
    entropy = app_matrices(at)["entropy"]
    assert "Of the weights α" in entropy.title  # the entropy stays on the weights, and says so
    at.radio(key="measure").set_value("weights").run()
    np.testing.assert_array_equal(app_matrices(at)["map"].values, weights[1, 2])
    assert app_matrices(at)["map"].view["extra"] == []


def hover_values(row: dict, drawn: DrawnMatrix) -> np.ndarray:
    """One extra hover row of a drawn matrix, as the component decodes it."""
    return decode_floats(row["values"], drawn.values.shape)


def test_a_link_with_measure_norms_opens_on_the_norms_and_the_average_says_mean():
    at = opened({"tokens": TOKENS, "measure": "norms", "head": "average of heads"})
    assert at.radio(key="measure").value == "norms"
    _, norms, _ = norms_of(ModelConfig(), TOKENS, "self-attention")
    drawn = app_matrices(at)["map"]
    np.testing.assert_allclose(drawn.values, norms[0].mean(axis=0), rtol=1e-6)
    assert [row["title"] for row in drawn.view["extra"]] == ["mean weight α"]  # ‖f(x)‖ is one head's, not a mean's


@pytest.mark.parametrize("norm", ["post", "pre", "res-post", "peri"])
def test_the_caption_says_where_the_sizes_are_taken_when_an_output_norm_rescales_them(norm):
    """Found by a review of the numbers: in res-post and peri the norm on the attention's output rescales each query's
    sum of heads (x3.3 in layer 0, x1.4 in layer 1 of the default res-post model), after ‖α·f(x)‖ is measured."""
    at = opened({"tokens": TOKENS, "norm": norm, "measure": "norms"})
    caption = next(c.value for c in at.caption if c.value.startswith("Colours show what each head adds"))
    assert ("these sizes are before that norm" in caption) == (norm in ("res-post", "peri"))


def test_a_junk_measure_in_a_link_gets_a_sentence_not_a_traceback():
    at = opened({"tokens": TOKENS, "measure": "xyz"})
    assert any("measure=xyz" in w.value and "weights, norms" in w.value for w in at.warning)
    assert at.radio(key="measure").value == "weights"
    weights, _, _ = norms_of(ModelConfig(), TOKENS, "self-attention")
    np.testing.assert_array_equal(app_matrices(at)["map"].values, weights[0, 0])


@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
def test_every_kind_of_attention_of_a_configured_model_draws_its_own_norms(arch):
    cfg = ModelConfig(arch=arch)
    target = TARGET if arch == "encoder-decoder" else None
    at = opened({"tokens": TOKENS, "arch": arch, "measure": "norms", **({"target": target} if target else {})})
    kinds = list(explorer.run(explorer.build_model(cfg), TOKENS, target).attention_maps())
    for kind in kinds:
        if len(kinds) > 1:
            at.radio(key="kind").set_value(kind).run()
            assert not at.exception
        _, norms, _ = norms_of(cfg, TOKENS, kind, target)
        drawn = app_matrices(at)["map"]
        assert drawn.title.startswith(kind)
        allowed = ~drawn.masked
        np.testing.assert_allclose(drawn.values[allowed], norms[0, 0][allowed], rtol=1e-6)
    assert "cross-attention" in kinds or arch == "decoder"


def test_a_trained_model_shows_its_own_norms():
    task = make_task("reverse", 8)
    result = train(ModelConfig(positional="learned"), task, steps=5)
    at = opened({"tokens": PROBE, "measure": "norms"}, AppState(trained=TrainedModel(result.model, task, "reverse")))
    trace = explorer.run(result.model, PROBE)
    expected = norm_attention(result.model, trace)[0, 0]
    np.testing.assert_allclose(app_matrices(at)["map"].values, expected, rtol=1e-6)
    fresh = explorer.build_model(result.model.config)
    random = norm_attention(fresh, explorer.run(fresh, PROBE))
    assert not np.allclose(app_matrices(at)["map"].values, random[0, 0], rtol=1e-3)  # trained, not a fresh model
