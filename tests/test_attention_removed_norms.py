"""The norm-based map of a removed head (Show: norms, with the head in the sidebar's Heads removed): what it adds is
the mean of its output or nothing, so its own weights no longer mix it, and the hover and the cells must say what
does. Found by a review of the numbers: on SmolLM2, "The capital of France is", L29H1 replaced by its mean, the hover
gave ‖f(x)‖ of the keys as 20.1, 15.2, 15.4, 11.7, 18.7 where they are 37.9, 53.8, 55.0, 56.0, 93.7 (‖ᾱ·f(x)‖
divided by the weight α the head still computes, not by ᾱ), 32 % of what it adds sat in grey (masked) cells though
every query receives it, and removed with zero the hover said every key's ‖f(x)‖ was 0."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer.analysis.norm_attention import norm_attention, value_norms
from explorer.compare import default_b, model_for_b, per_layer_comparison
from explorer.config import ModelConfig
from explorer.export import read_attention_json
from explorer.norm_export import norm_attention_json
from pictures.attention_panels import MEAN_NOTE, STRETCH_QUANTILE, attention_map_panel
from pictures.boards import decode_floats
from pictures.norm_figures import norm_maps_figure
from pictures.style import BLUES, MASKED_COLOUR, Ramp
from tests.drawn import app_boards, app_matrices, figure_json, panel_matrix, rgb, sheet_maps
from views.attention import attention_figures
from views.compare_downloads import ShownMaps, compare_figures
from views.compare_runs import ComparedRuns

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
TOKENS = "the cat sat on the mat"
CFG = ModelConfig(arch="decoder", mask="causal", norm="pre")  # causal: a mean reaches keys a query may not see
LAYER, HEAD = 1, 2


def removed_run(mode: str):
    """(maps, norms, ‖f(x)‖ [L, H, T]) of CFG on TOKENS with head (LAYER, HEAD) removed with `mode`."""
    model = explorer.build_model(CFG)
    trace = explorer.run(model, TOKENS, ablate=[(LAYER, HEAD)], ablate_with=mode)
    return trace.first.self_attention, norm_attention(model, trace), value_norms(model, trace)


def hover_of(panel: dict) -> dict[str, np.ndarray]:
    """{title: [Tq, Tk]} the extra hover rows of a matrix panel."""
    shape = (panel["rows"], panel["cols"])
    return {row["title"]: decode_floats(row["values"], shape) for row in panel["extra"]}


def test_a_head_replaced_by_its_mean_hovers_its_true_value_sizes_and_the_weights_that_mix_it():
    maps, norms, sizes = removed_run("mean")
    panel = attention_map_panel(maps, LAYER, HEAD, norms=norms, removed="mean")
    hover = hover_of(panel)
    computed = maps.weights[LAYER, HEAD]  # [T, T]
    mixing = np.broadcast_to(computed.mean(axis=0), computed.shape)  # ᾱ: the same row for every query
    np.testing.assert_allclose(hover["‖f(x)‖ of the key"][0], sizes[LAYER, HEAD], rtol=1e-5)
    np.testing.assert_allclose(hover["ᾱ, mean over the queries"], mixing, rtol=1e-6)
    np.testing.assert_array_equal(hover["weight α, still computed"], computed)
    assert "weight α" not in hover  # the head's own weights do not multiply what it adds
    # every query receives the mean from every key, masked or not: no cell is grey, and the rows add up to all of it
    drawn = panel_matrix(panel)
    assert not drawn.masked.any()
    np.testing.assert_allclose(drawn.values.sum(axis=1), norms[LAYER, HEAD].sum(axis=1), rtol=1e-6)
    assert "every query gets the same row" in panel["subtitle"] and "grey" not in panel["subtitle"]


def test_a_head_removed_with_zero_hovers_no_value_size_read_off_its_zeros():
    maps, norms, sizes = removed_run("zero")
    assert (norms[LAYER, HEAD] == 0).all() and (sizes[LAYER, HEAD] > 0).all()
    hover = hover_of(attention_map_panel(maps, LAYER, HEAD, norms=norms, removed="zero"))
    assert list(hover) == ["weight α, still computed"]  # no "‖f(x)‖ of the key" of 0
    np.testing.assert_array_equal(hover["weight α, still computed"], maps.weights[LAYER, HEAD])


def test_a_kept_head_of_the_same_run_hovers_as_before():
    maps, norms, sizes = removed_run("mean")
    hover = hover_of(attention_map_panel(maps, 0, 1, norms=norms, removed=None))
    assert list(hover) == ["weight α", "‖f(x)‖ of the key"]
    np.testing.assert_allclose(hover["‖f(x)‖ of the key"][0], sizes[0, 1], rtol=1e-5)


def test_the_html_figure_of_a_mean_removed_head_hovers_the_same_rows_on_every_cell():
    maps, norms, sizes = removed_run("mean")
    [heatmap] = figure_json(norm_maps_figure(maps, norms, LAYER, HEAD, removed="mean"))["data"]
    z = np.asarray(heatmap["z"], dtype=float)
    assert not np.isnan(z).any()  # no cell is masked from the mean
    np.testing.assert_allclose(z, norms[LAYER, HEAD], rtol=1e-6)
    custom = np.asarray(heatmap["customdata"], dtype=float)  # [Tq, Tk, 3]: α, ᾱ, ‖f(x)‖
    assert "ᾱ, mean over the queries" in heatmap["hovertemplate"]
    np.testing.assert_allclose(custom[0, :, 2], sizes[LAYER, HEAD], rtol=1e-5)


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_the_page_draws_the_removed_head_by_what_it_adds_and_says_what_that_is(mode):
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(
        {
            "arch": "decoder",
            "mask": "causal",
            "norm": "pre",
            "tokens": TOKENS,
            "measure": "norms",
            "layer": str(LAYER),
            "head": str(HEAD),
            "ablate": f"L{LAYER}H{HEAD}",
            "ablate_with": mode,
        }
    )
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    maps, norms, sizes = removed_run(mode)
    drawn = app_matrices(at)["map"]
    hover = {row["title"]: decode_floats(row["values"], drawn.values.shape) for row in drawn.view["extra"]}
    captions = " ".join(c.value for c in at.caption)
    if mode == "mean":
        assert not drawn.masked.any()
        np.testing.assert_allclose(drawn.values, norms[LAYER, HEAD], rtol=1e-6)
        np.testing.assert_allclose(hover["‖f(x)‖ of the key"][0], sizes[LAYER, HEAD], rtol=1e-5)
        assert "every query gets the same row" in captions and "each key alike" not in captions
    else:
        assert "‖f(x)‖ of the key" not in hover
        assert "zero everywhere" in captions


def test_the_json_of_a_mean_removed_head_says_its_norms_are_not_its_weights_times_the_sizes():
    """Its norm field holds ‖ᾱ·f(x)‖, non-zero where allowed is false: the note must say what alpha is there."""
    maps, norms, sizes = removed_run("mean")
    data = read_attention_json(norm_attention_json(maps, norms, LAYER, HEAD))
    shown = np.asarray(data["norms"])  # [T, T]
    assert (shown[~data["allowed"]] > 0).all()
    expected = maps.weights[LAYER, HEAD].mean(axis=0) * sizes[LAYER, HEAD]  # [T]: ᾱ_j ‖f(x_j)‖, every row alike
    np.testing.assert_allclose(shown, np.broadcast_to(expected, shown.shape), rtol=1e-5)
    assert "removed" in data["norm_note"] and "averaged over every query" in data["norm_note"]


def test_the_notebook_figure_of_a_removed_head_is_drawn_as_the_page_draws_it():
    model = explorer.build_model(CFG)
    trace = explorer.run(model, TOKENS, ablate=[(LAYER, HEAD)], ablate_with="mean")
    [heatmap] = figure_json(explorer.norm_attention_figure(model, trace, LAYER, HEAD))["data"]
    assert "ᾱ, mean over the queries" in heatmap["hovertemplate"]
    assert not np.isnan(np.asarray(heatmap["z"], dtype=float)).any()
    np.testing.assert_allclose(
        np.asarray(heatmap["customdata"], dtype=float)[0, :, 2], value_norms(model, trace)[LAYER, HEAD], rtol=1e-5
    )


def test_compares_download_draws_b_without_the_head_as_the_attention_page_does():
    """Compare's HTML download of "B = A without heads" with norms shown: B's map of the removed head is drawn as
    the Attention page draws it (every cell, the true ‖f(x)‖), A's of the same head as a kept head."""
    model = explorer.build_model(CFG)
    trace_a = explorer.run(model, TOKENS)
    trace_b = explorer.run(model, TOKENS, ablate=[(LAYER, HEAD)], ablate_with="mean")
    runs = ComparedRuns(lambda: trace_a, lambda: trace_b, None, None, model)
    shown = ShownMaps(layer=LAYER, head=HEAD, top=1.0)
    figure_a, figure_b, *_ = compare_figures(runs, shown, per_layer_comparison(None, None), norms=True)
    [heatmap_b] = figure_json(figure_b)["data"]
    assert "ᾱ, mean over the queries" in heatmap_b["hovertemplate"]
    assert not np.isnan(np.asarray(heatmap_b["z"], dtype=float)).any()
    np.testing.assert_allclose(
        np.asarray(heatmap_b["customdata"], dtype=float)[0, :, 2], value_norms(model, trace_b)[LAYER, HEAD], rtol=1e-5
    )
    [heatmap_a] = figure_json(figure_a)["data"]
    assert "ᾱ" not in heatmap_a["hovertemplate"]


def test_compares_page_draws_a_head_replaced_by_its_mean_where_it_reaches():
    """On Compare's page with norms shown, A's head replaced by its mean reaches every query from every key: its map
    and A − B draw the cells above the causal diagonal, which they had greyed as masked (a third of what the head adds
    on this text), while B's kept head leaves them grey; the caption says why."""
    at = AppTest.from_file(APP, default_timeout=120)
    query = {"arch": "decoder", "mask": "causal", "norm": "pre", "measure": "norms", "layer": str(LAYER)}
    at.query_params.update(query | {"head": str(HEAD), "ablate": f"L{LAYER}H{HEAD}", "ablate_with": "mean"})
    at.switch_page("views/compare.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    _, norms_a, _ = removed_run("mean")
    model_b = model_for_b(explorer.build_model(CFG), default_b(CFG))
    norms_b = norm_attention(model_b, explorer.run(model_b, TOKENS))
    above = np.triu_indices(len(TOKENS.split()), 1)  # [2, cells]: what a causal mask hides
    assert (norms_a[LAYER, HEAD][above] > 0).all()
    drawn = {p["name"]: panel_matrix(p) for p in app_boards(at)["pair_maps"]["panels"]}
    np.testing.assert_allclose(drawn["A"].values, norms_a[LAYER, HEAD], rtol=1e-6)
    assert drawn["B"].masked[above].all()
    difference = panel_matrix(app_boards(at)["difference_map"]["panels"][0]).values
    np.testing.assert_allclose(difference, norms_a[LAYER, HEAD] - norms_b[LAYER, HEAD], rtol=1e-5, atol=1e-7)
    assert any(f"A: layer {LAYER}, head {HEAD} {MEAN_NOTE}" in c.value for c in at.caption)


def test_compares_download_stretches_a_minus_b_over_every_cell_a_mean_reaches():
    """The HTML download's A − B, B's head replaced by its mean, colours stretched: the scale ends at the top 1 % of
    |A − B| over every cell, those where the causal mask hides the key from a query but the mean does not included."""
    model = explorer.build_model(CFG)
    trace_a = explorer.run(model, TOKENS)
    trace_b = explorer.run(model, TOKENS, ablate=[(LAYER, HEAD)], ablate_with="mean")
    runs = ComparedRuns(lambda: trace_a, lambda: trace_b, None, None, model)
    shown = ShownMaps(layer=LAYER, head=HEAD, stretch=True, top=1.0)
    *_, difference, _ = compare_figures(runs, shown, per_layer_comparison(None, None), norms=True)
    [heatmap] = figure_json(difference)["data"]
    a_minus_b = norm_attention(model, trace_a)[LAYER, HEAD] - norm_attention(model, trace_b)[LAYER, HEAD]  # [T, T]
    expected = np.quantile(np.abs(a_minus_b), STRETCH_QUANTILE)
    assert heatmap["zmax"] == pytest.approx(expected, rel=1e-5)


def test_the_pages_grid_draws_a_head_replaced_by_its_mean_on_every_cell_as_its_large_map():
    """The grid of every map, Show: norms: the small map of a head replaced by its mean had greyed the cells above the
    causal diagonal (what it adds there, drawn on its large map, is a third of it on this text); a kept head's small
    map greys them still."""
    at = AppTest.from_file(APP, default_timeout=120)
    query = {"arch": "decoder", "mask": "causal", "norm": "pre", "tokens": TOKENS, "measure": "norms"}
    at.query_params.update(query | {"ablate": f"L{LAYER}H{HEAD}", "ablate_with": "mean"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    _, norms, _ = removed_run("mean")
    [sheet] = [p for p in app_boards(at)["maps"]["panels"] if p["name"] == "grid"]
    small = sheet_maps(sheet)
    above = np.triu_indices(len(TOKENS.split()), 1)  # [2, cells]: what a causal mask hides
    grey = np.array(rgb(MASKED_COLOUR))
    removed = small[f"L{LAYER} H{HEAD} · off"]  # [T, T, 3]
    expected = Ramp(BLUES, 0.0, float(norms.max())).rgb(norms[LAYER, HEAD])  # unstretched: up to the largest of all
    np.testing.assert_array_equal(removed, expected)
    assert not (removed[above] == grey).all(axis=-1).any()
    assert (small["L0 H0"][above] == grey).all()


@pytest.mark.parametrize("stretch", [False, True])
def test_the_html_downloads_grid_draws_what_the_pages_grid_shows(stretch):
    """ "Download this view" with Show: norms had put the weights' grid on a 0-to-1 scale under the page's grid of what
    each head adds; it draws the norms now, on the page's one scale for all maps, the mean's head on every cell."""
    model = explorer.build_model(CFG)
    trace = explorer.run(model, TOKENS, ablate=[(LAYER, HEAD)], ablate_with="mean")
    norms = norm_attention(model, trace)  # [L, H, T, T]
    *_, grid = attention_figures(lambda: trace, "self-attention", LAYER, HEAD, lambda: norms, stretch)
    data = figure_json(grid)
    allowed = trace.first.self_attention.allowed
    top = np.quantile(norms[:, :, allowed], STRETCH_QUANTILE) if stretch else norms.max()
    n_heads = norms.shape[1]
    for i, heatmap in enumerate(data["data"]):
        layer, head = divmod(i, n_heads)
        z = np.asarray(heatmap["z"], dtype=float)  # [T, T], NaN where masked
        cells = np.ones_like(allowed) if (layer, head) == (LAYER, HEAD) else allowed
        np.testing.assert_array_equal(np.isnan(z), ~cells)
        np.testing.assert_allclose(z[cells], norms[layer, head][cells], rtol=1e-6)
        assert heatmap["zmax"] == pytest.approx(top, rel=1e-5) and "‖α·f(x)‖" in heatmap["hovertemplate"]
    labels = [step["label"] for step in data["layout"]["sliders"][0]["steps"]]
    assert labels[LAYER * n_heads + HEAD] == f"L{LAYER} H{HEAD} · removed" and labels[0] == "L0 H0"
