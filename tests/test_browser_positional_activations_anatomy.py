"""The positional, activations and anatomy pages in a real Chromium: the Plotly charts and matrix views draw the
engine's numbers (read back from plotly.js, by hovering, and by the colours on the canvas), controls work, user text
stays text, nothing throws."""

from __future__ import annotations

import re
from urllib.parse import quote

import numpy as np
import pytest

import explorer
from explorer.analysis.activations import layer_statistics, value_histogram
from explorer.analysis.gradients import gradient_norms, layer_gradient_totals
from explorer.analysis.norm_attention import norm_attention
from explorer.analysis.position_analysis import permutation_demo, reorder, wavelengths
from explorer.analysis.stats import head_entropy, head_grid
from explorer.analysis.stream_energy import focus_token, token_shares
from explorer.anatomy import forward_steps
from explorer.config import ModelConfig
from explorer.positional import sinusoidal
from pictures.positional_charts import TYPED_COLOUR
from pictures.style import RDBU, Ramp
from tests.browser_boards import cell_centre, geometry, panels, read_panel, read_tips, tip_at, wait_panels_drawn
from tests.browser_boards import pixels as board_pixels
from tests.browser_layout import PROJECTOR, cut_off, cut_off_at, grid_overflow, table_rows
from tests.browser_plots import (
    drawn_traces,
    hover_point,
    margins_grown,
    plot_titled,
    plots,
    title_drawn,
    wait_plotted,
)
from tests.drawn import rgb

pytestmark = pytest.mark.browser

TOKENS = "the cat sat on the mat"
POSITIONAL_CHARTS = 4  # Plotly, every section open: curves, wavelengths, similarity profile, offset scores
ACTIVATION_CHARTS = (
    6  # Plotly, every section open: depth, norms, shares on the largest token, histogram, zeros, gradients
)
ACTIVATION_PANELS = 5  # matrix views: token norms, the 3 per-head grids, the gradient map
# The URL parameters that open every section below a page's first screen (views/lazy_sections.py)
OPEN_POSITIONAL = "&".join(f"pos_open_{s}=true" for s in ("table", "wavelengths", "similarity", "offset", "order"))
OPEN_ACTIVATIONS = "&".join(
    f"act_open_{s}=true" for s in ("norms", "tokens", "histogram", "zeros", "heads", "gradients")
)
CURVE, TYPED_MARKS = 0, 1  # traces of the encoding chart with one dimension: its curve, then the red marks


def assert_clean(page) -> None:
    assert page.locator("[data-testid='stException']").count() == 0
    assert not page.errors, page.errors


def alerts(page) -> str:
    return " ".join(page.locator("[data-testid='stAlert']").all_inner_texts())


def number(text: str) -> float:
    """A number as a tooltip writes it (d3-format writes minus as U+2212, thousands with commas)."""
    return float(text.replace("\u2212", "-").replace(",", ""))


def open_positional(page, url: str, wait_idle, n_plots: int) -> list:
    """Open the positional page and wait until its first n_plots Plotly charts have drawn."""
    page.goto(url)
    wait_idle(page)
    wait_plotted(page, n_plots)
    return plots(page)


def hovered_number(label: str, field: str) -> float:
    """The number after "field: " in a hover label."""
    found = re.search(re.escape(field) + r": (\S+)", label)
    assert found, (field, label)
    return number(found.group(1))


def test_positional_curves_and_table_hover_the_engine_values(page, app_url, wait_idle):
    typed = ["<b>x</b>", "cat", "sat", "on", "the", "mat"]
    url = f"{app_url}/positional?{OPEN_POSITIONAL}&d_model=16&n_heads=2&pos_max=8&pos_dims=0&tokens=" + quote(
        " ".join(typed)
    )
    found = open_positional(page, url, wait_idle, POSITIONAL_CHARTS)
    assert len(found) == POSITIONAL_CHARTS
    table = sinusoidal(8, 16).numpy()  # [P, D]
    curves = plot_titled(page, "value against position")
    assert "red: the 6 typed tokens' positions 0–5" in title_drawn(curves)
    line, marks = drawn_traces(curves)  # what plotly.js holds: the curve, then the typed tokens' red points
    assert (line["name"], marks["name"]) == ("dim 0 (sin of pair 0)", "typed tokens")
    assert line["x"] == list(range(8)) and marks["x"] == list(range(6))
    np.testing.assert_allclose(line["y"], table[:, 0], rtol=1e-6)
    np.testing.assert_allclose(marks["y"], table[:6, 0], rtol=1e-6)
    curves.scroll_into_view_if_needed()
    label = hover_point(page, curves, CURVE, 6)  # a curve point past the typed tokens
    assert "dim 0 (sin of pair 0)" in label and "position: 6" in label and "token" not in label
    assert hovered_number(label, "value") == pytest.approx(table[6, 0], abs=5e-5)  # sin(6), 4 decimals
    for position, token in enumerate(typed):  # each red mark names its token, as typed
        label = hover_point(page, curves, TYPED_MARKS, position)
        assert f"position: {position}" in label and f"token: {token} " in label, label
        assert hovered_number(label, "value") == pytest.approx(table[position, 0], abs=5e-5)
        if position == 0:  # "<b>x</b>" is shown as those characters, not as a bold x
            assert curves.locator(".hoverlayer tspan[style*='bold']").count() == 0

    waves = plot_titled(page, "Wavelength of each pair (d_model = 16)")
    pairs, rule = drawn_traces(waves)
    np.testing.assert_allclose(pairs["y"], wavelengths(16), rtol=1e-9)
    assert rule["y"] == [8, 8]  # the number of positions shown, for scale
    waves.scroll_into_view_if_needed()
    label = hover_point(page, waves, 0, 2)
    assert "pair 2" in label and "dimensions: 4, 5" in label
    assert hovered_number(label, "wavelength (positions)") == pytest.approx(wavelengths(16)[2], abs=0.05)

    wait_panels_drawn(page, 1)
    heat = panels(page, "pos_table")[0]  # the whole table: a matrix view
    cells, colours = read_panel(page, heat)
    assert [row[0]["position"] for row in cells] == [str(p) for p in range(8)]
    shown = np.array([[number(c["value"]) for c in row] for row in cells])
    np.testing.assert_allclose(shown, table, atol=5e-5)
    expected = Ramp(RDBU, -1.0, 1.0).rgb(table)
    assert np.abs(colours.astype(int) - expected.astype(int)).max() <= 2  # the colour of each value
    _, plot = geometry(heat)
    image = board_pixels(heat)
    red = np.array(rgb(TYPED_COLOUR))

    def red_at_left_edge(row: int) -> bool:
        colour = image[int(plot["top"] + (row + 0.5) * plot["cell_h"]), int(plot["left"] + 1)]
        return bool((np.abs(colour.astype(int) - red) <= 2).all())

    assert red_at_left_edge(3) and not red_at_left_edge(7)  # the frame round the six typed positions ends there
    assert_clean(page)


def test_positional_table_hovers_every_cell_at_any_size(page, app_url, wait_idle):
    open_positional(
        page, f"{app_url}/positional?{OPEN_POSITIONAL}&d_model=256&pos_max=128", wait_idle, POSITIONAL_CHARTS
    )
    wait_panels_drawn(page, 1)
    heat = panels(page, "pos_table")[0]  # 128 x 256 cells, every one of which hovers
    table = sinusoidal(128, 256).numpy()  # [P, D]
    for row, col in ((0, 0), (100, 201), (127, 255)):
        tip = tip_at(page, *cell_centre(heat, row, col))
        assert (tip["position"], tip["dimension"]) == (str(row), str(col))
        assert number(tip["value"]) == pytest.approx(table[row, col], abs=5e-5)
    alike = panels(page, "pos_similarity")[0]  # 128 x 128 cosine similarities: 16,384 cells and beyond hover too
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    tip = tip_at(page, *cell_centre(alike, 90, 17))
    assert (tip["row position"], tip["column position"]) == ("90", "17")
    assert number(tip["cosine"]) == pytest.approx(unit[90] @ unit[17], abs=5e-5)
    profile = plot_titled(page, "Cosine similarity of position 5")  # the row of position 5, all 128 drawn
    np.testing.assert_allclose(drawn_traces(profile)[0]["y"], unit @ unit[5], atol=1e-6)
    assert_clean(page)


def test_positional_page_opens_a_section_into_the_url_and_explains_bad_input(page, app_url, wait_idle):
    open_positional(page, app_url + "/positional?positional=learned", wait_idle, 1)
    assert len(plots(page)) == 1 and not panels(page)  # the curves only: the closed sections computed nothing
    page.locator("[data-testid='stExpander'] summary", has_text="The whole table").click()
    wait_idle(page)
    wait_panels_drawn(page, 1)
    assert "pos_open_table=true" in page.url  # the link now opens it too
    assert "try Stretch colours" not in panels(page, "pos_table")[0].inner_text()  # random N(0, ½): no outlier
    page.get_by_text("Stretch colours", exact=True).click()
    wait_idle(page)
    wait_panels_drawn(page, 1)
    assert "stretch=true" in page.url
    assert "colours stretched: darkest" in panels(page, "pos_table")[0].inner_text()
    assert_clean(page)

    page.set_viewport_size(PROJECTOR)
    open_positional(page, app_url + "/positional", wait_idle, 1)
    assert cut_off(page) == []  # the formula and the download buttons fit a projector's page
    dims = page.get_by_role("textbox", name="Dimensions to plot as curves")
    dims.fill("0, 999")
    dims.press("Enter")
    wait_idle(page)
    assert "Dimension 999 does not exist" in alerts(page)
    assert "pos_dims=" in page.url
    assert_clean(page)

    found = open_positional(
        page, app_url + "/positional?pos_max=10000000&pos_open_offset=true&pos_open_order=true", wait_idle, 1
    )
    assert "Max position 10,000,000 is out of range" in alerts(page)
    wait_panels_drawn(page, 4)
    assert len(found) == 1 and len(panels(page)) == 4  # the offset and reordering demonstrations still draw
    offsets = drawn_traces(found[0])  # the score against the offset: 48 positions, offsets -47 to 47
    assert [t["name"] for t in offsets] == ["lowest", "range over the diagonal", "mean score at this offset"]
    assert offsets[2]["x"] == list(range(-47, 48))
    assert cut_off(page) == []  # the reordering's "Largest |② − ③|, all heads" too
    assert_clean(page)


def test_permutation_demo_without_positions_keeps_user_text_as_text(page, app_url, wait_idle):
    open_positional(page, app_url + "/positional?positional=none&tokens=%3Cb%3Ebold%3C%2Fb%3E%20x%20y", wait_idle, 0)
    wait_panels_drawn(page, 3)  # with no encoding, the reordering demonstration is open from the start
    assert "Reordering only moved the maps" in alerts(page)
    shown = {
        name: np.array([[number(c["weight"]) for c in row] for row in read_tips(page, panels(page, name)[0])])
        for name in ("perm_typed", "perm_moved", "perm_rerun")
    }  # [3, 3] each, read by hovering every cell
    demo = permutation_demo(ModelConfig(positional="none"), "<b>bold</b> x y", reorder(3, "reversed"))
    np.testing.assert_allclose(shown["perm_typed"], demo.attention[0, 0], atol=5e-5)
    np.testing.assert_allclose(shown["perm_rerun"], demo.shuffled_attention[0, 0], atol=5e-5)
    np.testing.assert_allclose(shown["perm_moved"], shown["perm_rerun"], atol=1e-4)  # reordering only moved the map
    rerun = panels(page, "perm_rerun")[0]
    tip = tip_at(page, *cell_centre(rerun, 0, demo.shuffled.index("<b>bold</b>")))
    assert tip["key"] == "<b>bold</b>"  # the token as typed, shown as text ...
    assert rerun.locator(".mv-tip b").count() == 0  # ... never as HTML
    page.get_by_text("shuffled", exact=True).click()
    wait_idle(page)
    wait_panels_drawn(page, 3)
    assert "pos_order=shuffled" in page.url
    assert "Reordering only moved the maps" in alerts(page)
    assert_clean(page)


def label_number(label: str, after: str) -> float:
    """The number a Plotly hover label writes after `after` (d3-format: minus as U+2212, thousands with commas)."""
    found = re.search(re.escape(after) + r"\s*([−\-\d.,e+]+)", label)
    assert found, f"no {after!r} in the hover label {label!r}"
    return number(found.group(1))


def open_activations(page, url: str, wait_idle) -> None:
    page.goto(url)
    wait_idle(page)
    wait_plotted(page, ACTIVATION_CHARTS)


def test_activations_page_hovers_the_engine_numbers_and_the_histogram_follows_its_controls(page, app_url, wait_idle):
    open_activations(page, f"{app_url}/activations?{OPEN_ACTIVATIONS}&norm=pre&n_layers=4", wait_idle)
    assert len(plots(page)) == ACTIVATION_CHARTS
    assert "Pre-norm" in alerts(page) and "Dummy objective" in alerts(page)
    cfg = ModelConfig(norm="pre", n_layers=4)
    trace = explorer.run(cfg, TOKENS).first
    stats = layer_statistics(trace)

    depth = plot_titled(page, "Activation statistics over depth (encoder stack)")
    depth.scroll_into_view_if_needed()
    # legend_below leaves room for the legend (one row here, two in the norms' chart): Plotly need not grow the margin
    # and draw again (80-100 ms for these 2 x 2 panels)
    assert margins_grown(depth)["b"] <= 0
    assert margins_grown(plot_titled(page, "What each LayerNorm receives and returns"))["b"] <= 0
    drawn = drawn_traces(depth)
    residual = [i for i, line in enumerate(drawn) if line["name"] == "residual"]  # one per panel: mean, std, rms, max
    expected = stats[stats["point"] == "residual"]
    for i, statistic in zip(residual, ("mean", "std", "rms", "max_abs"), strict=True):
        assert drawn[i]["x"] == [-1, 0, 1, 2, 3]
        np.testing.assert_allclose(drawn[i]["y"], expected[statistic], rtol=1e-12)
    label = hover_point(page, depth, residual[2], 0)  # the input's RMS
    assert "residual" in label and "block input" in label
    assert label_number(label, "RMS") == pytest.approx(expected["rms"].iloc[0], rel=5e-4)  # 4 significant digits
    [hidden_max] = [i for i, line in enumerate(drawn) if line["name"] == "FFN hidden"][3:]
    label = hover_point(page, depth, hidden_max, 2)
    ffn_hidden = stats[stats["point"] == "FFN hidden"]
    assert "FFN hidden" in label and "block 2" in label
    assert label_number(label, "max |x|") == pytest.approx(ffn_hidden["max_abs"].iloc[2], rel=5e-4)

    grad = plot_titled(page, "Gradient norm of each block's parameters (pre-norm)")
    grad.scroll_into_view_if_needed()
    totals = layer_gradient_totals(gradient_norms(explorer.build_model(cfg), TOKENS))
    [line] = drawn_traces(grad)
    np.testing.assert_allclose(line["y"], totals["norm"], rtol=1e-5)
    label = hover_point(page, grad, 0, 3)
    assert "block 3" in label
    assert label_number(label, "gradient norm") == pytest.approx(totals["norm"].iloc[3], rel=1e-3)

    model = explorer.build_model(cfg)
    run = explorer.run(model, TOKENS)
    position, _ = focus_token(run.first)  # no massive activation in a random 4-block model: the largest |x|
    shares = plot_titled(page, "How much the heads look at")
    shares.scroll_into_view_if_needed()
    expected_shares = token_shares(run.first.self_attention, position, norm_attention(model, run))
    weights, added = drawn_traces(shares)
    np.testing.assert_allclose(weights["y"], expected_shares["weights"], rtol=1e-12)
    np.testing.assert_allclose(added["y"], expected_shares["norms"], rtol=1e-12)

    wait_panels_drawn(page, ACTIVATION_PANELS)
    cells = read_tips(page, panels(page, "act_token_norms")[0])
    assert [row[0]["layer"] for row in cells] == ["input"] + [f"after block {i}" for i in range(4)]
    shown = np.array([[number(c["‖x‖₂"]) for c in row] for row in cells])
    np.testing.assert_allclose(shown, np.linalg.norm(trace.residual, axis=-1), atol=5e-5)  # 4 decimals

    cells = read_tips(page, panels(page, "act_entropy")[0])
    shown = np.array([[number(c["nats"]) for c in row] for row in cells])
    np.testing.assert_allclose(shown, head_grid(head_entropy(trace.self_attention), "entropy"), atol=5e-5)

    grads = {(c["parameter"], int(c["block"])): c for row in read_tips(page, panels(page, "act_grad")[0]) for c in row}
    expected = gradient_norms(explorer.build_model(cfg), TOKENS).dropna()
    for parameter, layer, norm in expected[["parameter", "layer", "norm"]].itertuples(index=False):
        tip = grads[(parameter, int(layer))]  # every parameter of every block hovers
        assert number(tip["gradient norm"]) == pytest.approx(norm, rel=1e-3)  # 4 significant digits
        assert number(tip["log₁₀ norm"]) == pytest.approx(np.log10(norm), abs=5e-3)

    point = page.get_by_role("combobox", name="Point")
    point.click()
    point.press_sequentially("FFN hid")  # the selectbox filters its options as one types
    page.get_by_role("option", name="FFN hidden", exact=True).click()
    wait_idle(page)
    wait_plotted(page, ACTIVATION_CHARTS)
    assert "act_point=FFN" in page.url
    page.get_by_text("Log count axis").click()  # on a log axis a bin of 1 value is as easy to hover as the rest
    wait_idle(page)
    wait_plotted(page, ACTIVATION_CHARTS)
    assert "act_log=true" in page.url
    histogram = plot_titled(page, "Distribution of values: FFN hidden, block 0 (encoder stack)")
    histogram.scroll_into_view_if_needed()
    bars, zero_line = drawn_traces(histogram)
    values = trace.activations["blocks.0.ffn.hidden"]
    bins = value_histogram(values)
    filled = bins[bins["count"] > 0]  # the log axis leaves the empty bins out
    assert bars["y"] == filled["count"].tolist() and sum(bars["y"]) == 6 * 256
    np.testing.assert_allclose(bars["x"], (filled["left"] + filled["right"]) / 2)
    rarest, commonest = int(np.argmin(bars["y"])), 1 + int(np.argmax(bars["y"][1:]))  # not the bin at 0: its own line
    for index in (rarest, commonest):
        label = hover_point(page, histogram, 0, index)
        assert label_number(label, "values:") == filled["count"].iloc[index]
        assert label_number(label, "from") == pytest.approx(filled["left"].iloc[index], rel=5e-4, abs=1e-9)
        assert label_number(label, "to") == pytest.approx(filled["right"].iloc[index], rel=5e-4)
    assert bars["y"][rarest] == 1  # a single value is a bar one can hover
    zeros = int((values == 0).sum())
    assert zeros > 0 and set(zero_line["x"]) == {0}
    top = len(zero_line["y"]) - 1  # the line's last point lies on the plot's top edge, just outside what hovers
    for index in (0, top // 2, top - 1):  # along the red line at 0
        assert label_number(hover_point(page, histogram, 1, index), "values exactly 0:") == zeros
    assert cut_off_at(page, PROJECTOR) == []  # "Log count axis" beside its two selectors
    assert_clean(page)


def test_anatomy_page_draws_the_block_and_the_tables(page, app_url, wait_idle):
    page.set_viewport_size(PROJECTOR)
    page.goto(app_url + "/anatomy?arch=encoder-decoder&norm=pre&target=x%20y%20z")
    wait_idle(page)
    assert cut_off(page) == []  # "In one encoder block", "Multiply-adds, one forward pass", every table's columns
    steps = page.locator("[data-testid='stTable']").filter(has_text="size for this input")
    expected = forward_steps(ModelConfig(arch="encoder-decoder", norm="pre"), 6, 3)
    assert table_rows(steps) == expected.to_numpy().tolist()  # as written: "+ sinusoidal positions", "d_model", "K^T"
    page.wait_for_selector("[data-testid='stGraphVizChart'] svg", timeout=30_000)
    diagrams = page.locator("[data-testid='stGraphVizChart'] svg")
    assert diagrams.count() == 2
    assert "cross-attention" in diagrams.nth(1).text_content()
    assert page.locator("[data-testid='stTable']").count() == 3  # parameters by kind, steps, multiply-adds
    assert "Total parameters" in page.locator("[data-testid='stMetric']").first.inner_text()
    assert plots(page) == []  # no charts on this page, so no plotly.js to fetch
    assert_clean(page)


def test_anatomy_lists_every_modules_count_in_view_on_a_projector(page, app_url, wait_idle):
    """The per-module table (module names up to 36 characters here) is as wide as the page: in the right half of a
    projector's page the names took it all and its counts were scrolled out of sight."""
    page.set_viewport_size(PROJECTOR)
    page.goto(app_url + "/anatomy?n_layers=12")  # "encoder.layers.11.self_attn.out_proj", one of 72 modules
    wait_idle(page)
    page.locator("[data-testid='stMain']").get_by_text("Parameters of each of the 72 modules").click()
    page.wait_for_selector("[data-testid='stMain'] [data-testid='stDataFrame'] .dvn-scroller", timeout=30_000)
    page.wait_for_timeout(500)
    hidden = grid_overflow(page)
    assert len(hidden) == 1 and hidden[0] <= 1, hidden
    assert_clean(page)
