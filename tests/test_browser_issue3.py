"""The positional, activations and anatomy pages in a real Chromium: charts draw, controls work, nothing throws."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

PLOT = "[data-testid='stPlotlyChart'] .js-plotly-plot"
TITLE_JS = "el => (el.layout && el.layout.title && el.layout.title.text) || ''"


def assert_clean(page) -> None:
    assert page.locator("[data-testid='stException']").count() == 0
    assert not page.errors, page.errors


def titles(page) -> list[str]:
    return [plot.evaluate(TITLE_JS) for plot in page.locator(PLOT).all()]


def plot_titled(page, words: str):
    found = [plot for plot in page.locator(PLOT).all() if words in plot.evaluate(TITLE_JS)]
    assert len(found) == 1, titles(page)
    return found[0]


def drawn(plot) -> bool:
    """Plotly rendered the figure's traces (an SVG with at least one trace layer)."""
    return plot.locator(".main-svg").count() >= 1 and plot.locator(".trace, .hm, image").count() >= 1


def alerts(page) -> str:
    return " ".join(page.locator("[data-testid='stAlert']").all_inner_texts())


def test_positional_page_draws_and_explains_bad_input(page, app_url, wait_idle):
    page.goto(app_url + "/positional")
    wait_idle(page)
    plots = page.locator(PLOT)
    assert plots.count() >= 7
    for plot in plots.all():
        plot.scroll_into_view_if_needed()
        assert drawn(plot), plot.evaluate(TITLE_JS)
    curves = plot_titled(page, "value against position")
    assert curves.locator(".xtitle").text_content() == "position"
    assert_clean(page)

    dims = page.get_by_role("textbox", name="Dimensions to plot as curves")
    dims.fill("0, 999")
    dims.press("Enter")
    wait_idle(page)
    assert "Dimension 999 does not exist" in alerts(page)
    assert "pos_dims=" in page.url
    assert_clean(page)

    page.goto(app_url + "/positional?pos_max=10000000")
    wait_idle(page)
    assert "Max position 10,000,000 is out of range" in alerts(page)
    assert plot_titled(page, "does reordering the tokens only move the map")
    assert_clean(page)


def test_permutation_demo_without_positions(page, app_url, wait_idle):
    page.goto(app_url + "/positional?positional=none")
    wait_idle(page)
    assert "Reordering only moved the maps" in alerts(page)
    demo = plot_titled(page, "does reordering the tokens only move the map")
    demo.scroll_into_view_if_needed()
    assert demo.locator(".hm, image").count() >= 3  # three heatmaps
    page.get_by_text("shuffled", exact=True).click()
    wait_idle(page)
    assert "pos_order=shuffled" in page.url
    assert "Reordering only moved the maps" in alerts(page)
    assert_clean(page)


def test_activations_page_draws_and_the_histogram_follows_its_controls(page, app_url, wait_idle):
    page.goto(app_url + "/activations?norm=pre&n_layers=4")
    wait_idle(page)
    assert "Pre-norm" in alerts(page) and "Dummy objective" in alerts(page)
    for plot in page.locator(PLOT).all():
        plot.scroll_into_view_if_needed()
        assert drawn(plot), plot.evaluate(TITLE_JS)
    depth = plot_titled(page, "Activation statistics over depth")
    ticks = depth.locator(".xtick text").all_text_contents()
    assert "input" in ticks
    point = page.get_by_role("combobox", name="Point")
    point.click()
    point.press_sequentially("FFN hid")  # the selectbox filters its options as one types
    page.get_by_role("option", name="FFN hidden", exact=True).click()
    wait_idle(page)
    assert "act_point=FFN" in page.url
    assert plot_titled(page, "Distribution of values: FFN hidden, block 0")
    assert_clean(page)


def test_anatomy_page_draws_the_block_and_the_tables(page, app_url, wait_idle):
    page.goto(app_url + "/anatomy?arch=encoder-decoder&norm=pre")
    wait_idle(page)
    page.wait_for_selector("[data-testid='stGraphVizChart'] svg", timeout=30_000)
    diagrams = page.locator("[data-testid='stGraphVizChart'] svg")
    assert diagrams.count() == 2
    assert "cross-attention" in diagrams.nth(1).text_content()
    assert page.locator("[data-testid='stDataFrame']").count() >= 3
    assert "Total parameters" in page.locator("[data-testid='stMetric']").first.inner_text()
    assert_clean(page)
