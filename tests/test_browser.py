"""The dashboard in a real Chromium: heatmaps draw, controls change them, junk URLs warn, nothing throws."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

HEATMAP = "[data-testid='stPlotlyChart'] .js-plotly-plot"
TITLE_JS = "el => (el.layout && el.layout.title && el.layout.title.text) || ''"


def main_heatmap(page):
    """The big heatmap: the Plotly chart whose title names a layer."""
    plots = page.locator(HEATMAP)
    for i in range(plots.count()):
        if "layer" in plots.nth(i).evaluate(TITLE_JS):
            return plots.nth(i)
    raise AssertionError("no heatmap titled with a layer")


def grid_chart(page):
    """The all-layers x heads mosaic."""
    found = [p for p in page.locator(HEATMAP).all() if p.evaluate("el => !!(el.layout.meta && el.layout.meta.grid)")]
    assert len(found) == 1
    return found[0]


def masked_cells(plot) -> int:
    """Masked cells in the drawn figure (NaN in the weights trace), read from the live Plotly object."""
    return plot.evaluate(
        """el => {
            let n = 0;
            for (const row of el._fullData[0].z) for (const v of row) if (v === null || Number.isNaN(v)) n++;
            return n;
        }"""
    )


def assert_clean(page) -> None:
    assert page.locator("[data-testid='stException']").count() == 0
    assert not page.errors, page.errors


def test_default_view_draws_and_controls_change_it(page, app_url, wait_idle):
    page.goto(app_url + "/")
    wait_idle(page)
    assert page.locator(HEATMAP).count() >= 3  # big map, grid, entropy
    heat = main_heatmap(page)
    assert heat.locator(".hm, image").count() >= 1  # Plotly drew the heatmap layer
    assert masked_cells(heat) == 0
    ticks = heat.locator(".xtick text").all_text_contents()
    assert ticks[:2] == ["the", "cat"] and "the·4" in ticks
    assert_clean(page)

    page.locator("[data-testid='stSidebar']").get_by_role("combobox", name="Mask").click()
    page.get_by_role("option", name="causal", exact=True).click()
    wait_idle(page)
    assert "mask=causal" in page.url
    heat = main_heatmap(page)
    assert masked_cells(heat) == 15  # the upper triangle of 6 x 6
    assert "grey = masked" in heat.evaluate(TITLE_JS)
    assert_clean(page)


def test_url_sets_controls(page, app_url, wait_idle):
    page.goto(app_url + "/?n_heads=2&n_layers=3&mask=causal%2Bpadding&tokens=%5BPAD%5D%20a%20b")
    wait_idle(page)
    grid = grid_chart(page)
    titles = grid.evaluate("el => el.layout.annotations.map(a => a.text)")
    assert titles == [f"L{layer} H{head}" for layer in range(3) for head in range(2)]
    assert page.get_by_text("no key to attend to").count() == 1
    assert_clean(page)
    page.locator("[data-testid='stSidebar']").get_by_role("combobox", name="Mask").click()
    page.get_by_role("option", name="none", exact=True).click()
    wait_idle(page)
    assert "mask=" not in page.url  # back to the default, which Streamlit leaves out of the URL
    assert masked_cells(main_heatmap(page)) == 0
    assert_clean(page)


def test_hand_typed_plus_in_url_means_causal_padding(page, app_url, wait_idle):
    page.goto(app_url + "/?mask=causal+padding&tokens=a+b+%5BPAD%5D")  # "+" in a query string decodes to a space
    wait_idle(page)
    assert page.locator("[data-testid='stAlert']").count() == 0
    heat = main_heatmap(page)
    assert masked_cells(heat) == 3 + 1  # the causal upper triangle of 3 x 3, plus [PAD] as its own key
    page.locator("[data-testid='stSidebar']").get_by_role("combobox", name="Mask").click()
    page.get_by_role("option", name="causal", exact=True).click()
    wait_idle(page)
    assert masked_cells(main_heatmap(page)) == 3
    assert_clean(page)


def test_junk_url_param_warns(page, app_url, wait_idle):
    page.goto(app_url + "/?n_heads=abc&norm=sideways")
    wait_idle(page)
    alerts = " ".join(page.locator("[data-testid='stAlert']").all_inner_texts())
    assert "n_heads=abc" in alerts and "norm=sideways" in alerts
    assert main_heatmap(page)
    assert_clean(page)


def test_impossible_config_shows_error(page, app_url, wait_idle):
    page.goto(app_url + "/?d_model=30")
    wait_idle(page)
    alerts = " ".join(page.locator("[data-testid='stAlert']").all_inner_texts())
    assert "divisible" in alerts
    assert page.locator(HEATMAP).count() == 0
    assert_clean(page)


def test_clicking_the_grid_picks_a_map(page, app_url, wait_idle):
    page.goto(app_url + "/")
    wait_idle(page)
    grid = grid_chart(page)
    grid.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    x, y = grid.evaluate(  # the pixel of cell (1, 1) of map L1 H1
        """el => {
            const g = el.layout.meta.grid, box = el.querySelector('.nsewdrag').getBoundingClientRect();
            const x = g.col_pitch + 1, y = g.row_pitch + (g.row_pitch - g.tq) + 1;
            return [box.left + el._fullLayout.xaxis.l2p(x), box.top + el._fullLayout.yaxis.l2p(y)];
        }"""
    )
    for step in range(3):  # Plotly picks the point under the pointer on hover; the click then selects it
        page.mouse.move(x + step, y + step)
        page.wait_for_timeout(100)
    page.mouse.down()
    page.mouse.up()
    page.wait_for_function("() => location.search.includes('layer=1')", timeout=30_000)
    wait_idle(page)
    assert "layer 1 · head 1" in main_heatmap(page).evaluate(TITLE_JS)
    assert_clean(page)


def test_downloads_hold_the_shown_weights(page, app_url, wait_idle):
    page.goto(app_url + "/?mask=causal&layer=1&head=2")
    wait_idle(page)
    shown = main_heatmap(page).evaluate("el => el._fullData[0].z.map(row => Array.from(row))")  # NaN = masked
    with page.expect_download() as info:
        page.get_by_role("button", name="Download JSON").click()
    assert info.value.suggested_filename == "attention_self-attention_L1_H2.json"
    data = json.loads(Path(info.value.path()).read_text())
    assert (data["layer"], data["head"], data["config"]["mask"]) == (1, 2, "causal")
    for row_shown, row_json, row_allowed in zip(shown, data["weights"], data["allowed"], strict=True):
        for s, w, ok in zip(row_shown, row_json, row_allowed, strict=True):
            assert math.isnan(s) if not ok else s == pytest.approx(w, abs=1e-7)
    with page.expect_download() as info:
        page.get_by_role("button", name="Download CSV").click()
    lines = Path(info.value.path()).read_text().splitlines()
    assert lines[0] == "kind,layer,head,query_index,query_token,key_index,key_token,weight,allowed"
    assert len(lines) == 1 + 36
    assert_clean(page)
