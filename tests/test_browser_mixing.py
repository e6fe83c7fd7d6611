"""The Mixing page in a real Chromium: on MiniLM the rollout hovered is explorer's, a click on a cell shows that
position's flow below and puts it in the address bar, the block slider writes the URL, and nothing throws; its
"Download this view (HTML)" holds the same rollout and flow, in the page's colours."""

from __future__ import annotations

from urllib.parse import quote

import numpy as np
import pytest

import explorer
from explorer.analysis.mixing import attention_flow, attention_flow_rows, attention_rollout
from explorer.analysis.stats import head_average
from explorer.config import ModelConfig
from pictures.mixing_boards import MIX
from tests.browser_boards import cell_centre, panels, read_panel, wait_panels_drawn
from tests.browser_layout import PROJECTOR
from tests.browser_plots import drawn_traces, plot_titled, plots, wait_plotted
from tests.test_browser_view_html import downloaded_view, figures_in, numbers

pytestmark = pytest.mark.browser

SENTENCE = "the cat sat on the mat because it was tired."
FIRST_LOAD_MS = 180_000  # a fresh server loads the checkpoint first
PANELS = 5  # raw, rollout and flow after the last block; raw and rollout of the block picked


def assert_clean(page) -> None:
    assert page.locator("[data-testid='stException']").count() == 0
    assert not page.errors, page.errors


def test_minilm_mixing_page_draws_rollout_and_flow_and_a_click_picks_the_row(page, app_url, wait_idle, minilm_model):
    page.goto(f"{app_url}/mixing?model=minilm-l6&tokens={quote(SENTENCE)}")
    wait_idle(page, FIRST_LOAD_MS)
    wait_panels_drawn(page, PANELS)
    wait_plotted(page, 1)
    assert_clean(page)
    trace = explorer.run(minilm_model, SENTENCE)
    rollout = attention_rollout(trace)[-1]  # [T, T]
    cells, colours = read_panel(page, panels(page, "mix_rollout")[0])
    assert [row[0]["position"].split("·")[0] for row in cells] == trace.tokens
    shown = np.array([[float(c["rollout"]) for c in row] for row in cells])  # the hover's 4 decimals
    np.testing.assert_allclose(shown, rollout, atol=5e-5)
    assert np.abs(colours.astype(int) - MIX.rgb(rollout).astype(int)).max() <= 1

    x, y = cell_centre(panels(page, "mix_flow")[0], 3, 1)  # position 3's row
    page.mouse.click(x, y)
    page.wait_for_function("() => location.search.includes('mix_query=3')", timeout=30_000)
    wait_idle(page)
    wait_plotted(page, 1)
    (figure,) = plots(page)
    bars = {t["name"]: t["y"] for t in drawn_traces(figure)}
    np.testing.assert_allclose(bars["flow after the last block"], attention_flow(trace, 3), atol=1e-9)

    block = page.locator("[data-testid='stSlider']").filter(has_text="Block").get_by_role("slider")
    block.focus()
    page.keyboard.press("ArrowLeft")  # block 5 -> 4
    wait_idle(page)
    assert "mix_layer=4" in page.url
    rolled = page.locator(".mv-panel[data-name='mix_layer_rollout']")
    rolled.locator(".mv-title", has_text="after block 4").wait_for()  # the board redrawn for block 4
    wait_panels_drawn(page, PANELS)
    cells, _ = read_panel(page, rolled)
    shown = np.array([[float(c["rollout"]) for c in row] for row in cells])
    np.testing.assert_allclose(shown, attention_rollout(trace)[4], atol=5e-5)
    assert_clean(page)


def test_the_mixing_view_downloads_with_the_pages_rollout_and_flow(page, app_url, wait_idle, browser):
    html = downloaded_view(page, f"{app_url}/mixing?n_layers=3&mix_layer=0&mix_query=2&stretch=true", wait_idle)
    assert "Link to this view:" in html and "mix_layer=0" in html and "Residual share 0.5." in html
    last, flows, row, first = figures_in(browser, html)
    trace = explorer.run(ModelConfig(n_layers=3), "the cat sat on the mat")
    rollout = attention_rollout(trace)  # [L, T, T]
    both = np.concatenate([head_average(trace.first.self_attention, 2).ravel(), rollout[-1].ravel()])
    top = float(np.quantile(both, 0.99))  # no mask: every cell of both maps is shown
    assert [m["zmax"] for m in last["data"]] == pytest.approx([top, top]) and "colours stretched" in last["subtitle"]
    np.testing.assert_allclose(numbers(last["data"][1]["z"]), rollout[-1], atol=1e-6)
    np.testing.assert_allclose(numbers(first["data"][1]["z"]), rollout[0], atol=1e-6)  # the block picked
    np.testing.assert_allclose(numbers(flows["data"][1]["z"]), attention_flow_rows(trace), atol=1e-6)
    bars = {t["name"]: numbers(t["y"]) for t in row["data"]}
    np.testing.assert_allclose(bars["flow after the last block"], attention_flow(trace, 2), atol=1e-9)
    assert "reach position 2" in row["title"]


def test_on_a_projector_the_reach_bars_name_tokens_far_enough_apart_to_read(page, app_url, wait_idle):
    """The labels under the bars are slanted 45°: two of them overlap unless their ticks stand at least 20 px apart
    (0.71 of that distance must hold a 14 px line). A 300-token text named every 7th token 11 px apart."""
    page.set_viewport_size(PROJECTOR)
    page.goto(f"{app_url}/mixing?tokens={quote(' '.join(f'w{i}' for i in range(300)))}")
    wait_idle(page)
    wait_plotted(page, 1)
    bars = plot_titled(page, "Which input tokens reach position 0")
    ends = bars.evaluate("(plot) => [...plot.querySelectorAll('.xaxislayer-above text')].map((t) => [t.textContent, "
                         "t.getBoundingClientRect().right])")  # fmt: skip
    names, right = zip(*ends, strict=True)
    assert len(names) >= 10 and names[0] == "w0"  # a slanted label ends at its tick
    assert np.diff(right).min() >= 20
    assert_clean(page)
