"""The notebook builders of the Activations page's energy section: the per-token heatmap by norm or max |x|, and the
shares on the massive (or largest) token, drawing what the engine computes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import explorer
from explorer.analysis.norm_attention import norm_attention
from explorer.analysis.stream_energy import token_energy, token_shares
from pictures.activation_charts import massive_share_figure, token_norm_figure, token_share_figure
from tests.drawn import figure_json, figure_title, figure_trace

TOKENS = "the cat sat on the mat"


@pytest.fixture(scope="module")
def run():
    model = explorer.build_model(explorer.ModelConfig(norm="pre", n_layers=3))
    return model, explorer.run(model, TOKENS)


@pytest.mark.parametrize("measure", ["norm", "max"])
def test_token_norm_figure_is_the_engines_table(run, measure):
    _, trace = run
    figure = figure_json(token_norm_figure(trace, measure))
    (heat,) = figure["data"]
    np.testing.assert_allclose(heat["z"], token_energy(trace.first, measure), rtol=1e-6)
    assert heat["customdata"][0][4][0] == "the·4" and heat["customdata"][2][0][1] == "after block 1"
    assert ("Largest |x|" if measure == "max" else "Norm of each token") in figure_title(figure)


def test_token_norm_figure_stretches_its_colours_as_the_page_does(run):
    _, trace = run
    table = token_energy(trace.first, "norm")  # [L + 1, T]
    full, stretched = ((figure_json(token_norm_figure(trace, "norm", stretch=on))) for on in (False, True))
    assert (full["data"][0]["zmin"], full["data"][0]["zmax"]) == pytest.approx((table.min(), table.max()))
    top = float(np.quantile(table, 0.99))
    assert stretched["data"][0]["zmax"] == pytest.approx(top) and top < table.max()
    assert "colours stretched" in figure_title(stretched) and "colours stretched" not in figure_title(full)


def test_massive_share_figure_draws_both_shares_of_the_largest_token(run):
    model, trace = run
    figure = figure_json(massive_share_figure(model, trace))
    position = int(np.argmax(token_energy(trace.first, "max")[1:].max(axis=0)))  # no massive activation here
    expected = token_shares(trace.first.self_attention, position, norm_attention(model, trace))
    np.testing.assert_allclose(figure_trace(figure, "share of attention weight (α)")["y"], expected["weights"])
    np.testing.assert_allclose(figure_trace(figure, "share of what heads add (‖α·f(x)‖)")["y"], expected["norms"])
    assert "no massive activation" in figure_title(figure)
    assert not figure["layout"].get("shapes")  # nothing to shade


def test_the_layers_that_read_a_massive_token_are_shaded():
    shares = pd.DataFrame({"layer": range(6), "weights": np.linspace(0.2, 0.8, 6), "norms": np.linspace(0.1, 0.3, 6)})
    figure = figure_json(token_share_figure(shares, 0, "<s>", 2, "decoder"))
    (shade,) = figure["layout"]["shapes"]
    assert shade["x0"] == 2.5  # layer 3 is the first to read the stream after block 2
    assert "after block 2" in figure_title(figure)
    late = figure_json(token_share_figure(shares, 0, "<s>", 5, "decoder"))  # massive only after the last block
    assert not late["layout"].get("shapes") and "massive only after the last block (5): no layer reads it" in (
        figure_title(late)
    )
