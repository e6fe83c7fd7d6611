"""A student opens the teacher's link on a phone: 390 x 844 CSS px, touch, no hover, the sidebar collapsed. One page
load per page: the Attention page on MiniLM and a 40-word text, the Positional page on the configured model."""

from __future__ import annotations

from urllib.parse import quote

import pytest

import explorer
from tests.browser_boards import cell_centre, panels, sheet_centres, wait_panels_drawn

pytestmark = pytest.mark.browser

PHONE = {"viewport": {"width": 390, "height": 844}, "has_touch": True, "is_mobile": True, "device_scale_factor": 2}
FORTY_WORDS = (
    "The teacher asked every student in the quiet classroom to read the short story aloud, and then to explain why the "
    "old fisherman finally decided to sail home before the storm reached the small harbour that night as wind rose"
)
SIDEWAYS = """() => {
    const main = document.querySelector("[data-testid='stMain']");
    return [document.documentElement.scrollWidth - innerWidth, main.scrollWidth - main.clientWidth];
}"""
SHOWN_TIPS = """() => [...document.querySelectorAll("[data-testid^='stBidiComponent']")]
    .flatMap((h) => [...(h.shadowRoot || h).querySelectorAll(".mv-tip")])
    .filter((tip) => tip.style.display === "block")
    .map((tip) => [...tip.querySelectorAll(".mv-row")].map((row) => [...row.children].map((e) => e.textContent)))"""
SCROLL_MAIN = "px => { document.querySelector(\"[data-testid='stMain']\").scrollTop += px; }"


@pytest.fixture
def phone(browser):
    """A fresh phone page (a new Streamlit session) that records page errors and console errors in phone.errors."""
    context = browser.new_context(**PHONE)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    yield page
    context.close()


def test_on_a_phone_the_attention_page_fits_a_tap_reads_a_cell_and_a_scroll_takes_its_tip_away(
    phone, app_url, wait_idle, minilm_model
):
    phone.goto(f"{app_url}/?model=minilm-l6&tokens=" + quote(FORTY_WORDS))
    wait_idle(phone)
    wait_panels_drawn(phone, 3)
    assert phone.evaluate(SIDEWAYS) == [0, 0]  # nothing scrolls sideways: the maps are drawn smaller instead
    opener = phone.get_by_test_id("stExpandSidebarButton").bounding_box()  # the collapsed sidebar's way in
    assert opener["x"] >= 0 and opener["x"] + opener["width"] <= 390 and opener["width"] >= 24

    big_map = panels(phone, "map")[0]
    assert big_map.locator(".mv-title").inner_text().endswith("layer 0 · head 0")
    trace = explorer.run(minilm_model, FORTY_WORDS)
    weights = trace.attention[0, 0]  # [T, T]
    row, col = 5, 2
    phone.touchscreen.tap(*cell_centre(big_map, row, col))
    tips = phone.evaluate(SHOWN_TIPS)
    assert len(tips) == 1 and tips[0][:2] == [["query", trace.tokens[row]], ["key", trace.tokens[col]]], tips
    assert float(tips[0][2][1]) == pytest.approx(weights[row, col], abs=5e-5)  # a tap reads the cell, 4 decimals
    phone.evaluate(SCROLL_MAIN, 200)  # a finger's scroll: no wheel, no mouse leaving the canvas
    phone.evaluate("() => new Promise((done) => requestAnimationFrame(done))")
    assert phone.evaluate(SHOWN_TIPS) == []  # the tip, fixed in the window, no longer floats over other maps

    grid = panels(phone, "grid")[0]
    centres = sheet_centres(grid)
    assert len(centres) == 6 * 12
    phone.touchscreen.tap(*centres["L3 H7"])  # a small map about 22 px wide, at this width
    wait_idle(phone)
    wait_panels_drawn(phone, 3)
    assert panels(phone, "map")[0].locator(".mv-title").inner_text().endswith("layer 3 · head 7")
    assert phone.errors == []


PLOT_BOXES = """(words) => {
    const gd = [...document.querySelectorAll("[data-testid='stPlotlyChart'] .js-plotly-plot")]
        .find((g) => g.querySelector(".gtitle").textContent.includes(words));
    const box = (e) => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
    return {chart: box(gd), plot: box(gd.querySelector(".nsewdrag")), legend: box(gd.querySelector(".legend"))};
}"""


def test_on_a_phone_the_positional_curves_keep_the_width_of_the_chart(phone, app_url, wait_idle):
    phone.goto(f"{app_url}/positional")
    wait_idle(phone)
    assert phone.evaluate(SIDEWAYS) == [0, 0]
    boxes = phone.evaluate(PLOT_BOXES, "value against position")
    chart_w, plot_w = boxes["chart"][2] - boxes["chart"][0], boxes["plot"][2] - boxes["plot"][0]
    # The y axis's title and numbers take about 90 px of the chart's 358 (75 % left); the legend beside the plot took
    # 164 px more and left it 116 px (32 %), too narrow to tell eight curves apart.
    assert plot_w >= 0.6 * chart_w, boxes
    assert boxes["legend"][1] >= boxes["plot"][3]  # the legend is under the plot, covering none of it
    assert boxes["legend"][3] <= boxes["chart"][3] + 1  # and whole inside the chart
    assert phone.errors == []
