"""The Show switch in a real Chromium, on MiniLM: a link with measure=norms draws the head-roles board, the map and the
grid with what each head adds, the map's hover gives both numbers, the switch is kept in the address bar, the view's
HTML download holds the norm-based map, and nothing throws."""

from __future__ import annotations

import numpy as np
import pytest

import explorer
from explorer.analysis.norm_attention import norm_attention
from explorer.config import ModelConfig
from tests.browser_boards import panels, read_panel, wait_panels_drawn
from tests.test_browser_view_html import downloaded_view, figures_in, numbers

pytestmark = pytest.mark.browser

SENTENCE = "The cat sat on the mat because it was tired."
FIRST_LOAD_MS = 180_000  # a fresh server loads the checkpoint first


def assert_clean(page) -> None:
    assert page.locator("[data-testid='stException']").count() == 0
    assert not page.errors, page.errors


def test_a_minilm_link_with_measure_norms_draws_the_board_and_both_numbers(page, app_url, wait_idle, minilm_model):
    page.goto(f"{app_url}/?model=minilm-l6&measure=norms&layer=0&head=3&tokens={SENTENCE.replace(' ', '%20')}")
    wait_idle(page, FIRST_LOAD_MS)
    wait_panels_drawn(page, 4)  # head roles, then the map, the entropy and the grid
    assert [p.get_attribute("data-name") for p in panels(page)] == ["roles", "map", "entropy", "grid"]
    assert page.get_by_text("Measured by what the heads add").count() == 1  # the sentence under the board
    trace = explorer.run(minilm_model, SENTENCE)
    cells, _ = read_panel(page, panels(page, "map")[0])
    norms = np.array([[float(c["‖α·f(x)‖"]) for c in row] for row in cells])  # the hover's 4 decimals
    weights = np.array([[float(c["weight α"]) for c in row] for row in cells])
    np.testing.assert_allclose(norms, norm_attention(minilm_model, trace)[0, 3], atol=5e-5)
    np.testing.assert_allclose(weights, trace.attention[0, 3], atol=5e-5)
    assert "‖f(x)‖ of the key" in cells[0][0]
    assert_clean(page)

    show = page.get_by_role("radiogroup", name="Show")
    show.get_by_text("weights", exact=True).click()  # back to the weights: the URL drops its default
    wait_idle(page)
    wait_panels_drawn(page, 4)
    assert "measure=" not in page.url
    assert page.get_by_text("Measured by what the heads add").count() == 0
    show.get_by_text("norms", exact=True).click()
    wait_idle(page)
    wait_panels_drawn(page, 4)
    assert "measure=norms" in page.url  # a shared link opens the same view
    assert_clean(page)


def test_the_view_download_holds_the_norm_based_map(page, app_url, wait_idle, browser):
    html = downloaded_view(page, f"{app_url}/?measure=norms&layer=1&head=2&tokens=the%20cat%20sat", wait_idle)
    assert "measure=norms" in html and "‖α·f(x)‖" in html
    figures = figures_in(browser, html)
    [norm_map] = [f for f in figures if "head 2 · what it adds" in f["title"]]
    model = explorer.build_model(ModelConfig())
    norms = norm_attention(model, explorer.run(model, "the cat sat"))  # [L, H, T, T]
    np.testing.assert_allclose(numbers(norm_map["data"][0]["z"]), norms[1, 2], rtol=1e-6)
    assert any(f["title"].endswith("layer 1 · head 2") for f in figures)  # the weights' map is still there
    [grid] = [f for f in figures if len(f["data"]) > 1]  # every map behind a slider: what each head adds, as the page
    np.testing.assert_allclose(numbers(grid["data"][-1]["z"]), norms[-1, -1], rtol=1e-6)
