"""The What heads do page in a real Chromium: a click on a head of the board removes it (the address bar gains
ablate=L1H2, the board crosses it, the page says what changed), and a second click on it puts it back."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from explorer.analysis.ablation_effects import head_ablation_effects
from explorer.config import ModelConfig
from pictures.output_charts import BOARD_TEXT_PX, HEAD_CELL_MAX_PX, board_width
from tests.browser_plots import colour_bar_label_overlap, drawn_traces, plot_titled, wait_plotted

pytestmark = pytest.mark.browser

BOARD = "What each head does to the sentence embedding"


def cell_point(plot, layer: int, head: int) -> tuple[float, float]:
    """Page pixels of the centre of the board's cell (layer, head): its categories "H2" across, "L1" down."""
    return plot.evaluate(
        """(gd, [x, y]) => {
            const layout = gd._fullLayout, box = gd.getBoundingClientRect();
            const xa = layout.xaxis, ya = layout.yaxis;
            return [box.left + xa._offset + xa.d2p(x), box.top + ya._offset + ya.d2p(y)];
        }""",
        [f"H{head}", f"L{layer}"],
    )


def click_cell(page, layer: int, head: int) -> str:
    """Hover the cell (returning its label), then click it."""
    plot = plot_titled(page, BOARD)
    plot.scroll_into_view_if_needed()
    x, y = cell_point(plot, layer, head)
    page.mouse.move(x - 2, y - 2)
    page.mouse.move(x, y)
    page.wait_for_timeout(150)
    label = plot.evaluate("gd => [...gd.querySelectorAll('.hoverlayer .hovertext text')].map(t => t.textContent)")
    page.mouse.click(x, y)
    return " ".join(label)


def ablate_param(page) -> str:
    return parse_qs(urlsplit(page.url).query).get("ablate", [""])[0]


def test_a_click_on_a_head_removes_it_and_a_second_click_puts_it_back(page, app_url, wait_idle):
    page.goto(f"{app_url}/heads")
    wait_idle(page)
    wait_plotted(page, 1)
    effects = head_ablation_effects(ModelConfig(), "the cat sat on the mat")  # [L, H]
    # the default model's board is 2 layers (three rows' height): its colour bar has room for few labels
    board = plot_titled(page, BOARD)
    assert colour_bar_label_overlap(board) <= 0
    # Four heads do not stretch across the page's column as four bars, and the narrower board still shows its title
    # and subtitle uncut: each line of them ends inside the chart.
    drawn = board.evaluate(
        """gd => ({width: gd.getBoundingClientRect().width, right: gd.getBoundingClientRect().right,
            column: gd.closest("[data-testid='stMainBlockContainer']").getBoundingClientRect().width,
            text: Math.max(...[...gd.querySelectorAll(".g-gtitle text")].map(t => t.getBoundingClientRect().right))})"""
    )
    assert drawn["width"] <= board_width(4) + 1 < drawn["column"], drawn
    assert drawn["text"] <= drawn["right"], drawn
    # A head of layer 0, so layer 1's attention changes and the page adds its chart of that change to the board.
    label = click_cell(page, 0, 2)
    assert "L0H2" in label and f"{effects[0, 2]:.4g}" in label  # the hover names the head and its effect
    page.wait_for_function("() => location.search.includes('ablate=L0H2')", timeout=20_000)
    wait_idle(page)
    wait_plotted(page, 2)
    assert page.get_by_role("heading", name="What changed").count() == 1
    crossed = [t for t in drawn_traces(plot_titled(page, BOARD)) if t["name"] == "removed head"]
    assert crossed and crossed[0]["x"] == ["H2"] and crossed[0]["y"] == ["L0"]
    click_cell(page, 0, 2)
    page.wait_for_function("() => !location.search.includes('L0H2')", timeout=20_000)
    wait_idle(page)
    assert ablate_param(page) == ""
    assert page.get_by_role("heading", name="What changed").count() == 0
    assert page.locator("[data-testid='stException']").count() == 0
    assert not page.errors, page.errors


def test_a_one_head_board_keeps_its_cell_narrow_and_its_colour_bar_beside_it(page, app_url, wait_idle):
    """A board is at least its subtitle wide; a 1-head model's one cell had filled all of that, a bar 350 px wide
    with its colour bar far off at the right edge, labelled only "0"."""
    page.goto(f"{app_url}/heads?n_heads=1&n_layers=2")
    wait_idle(page)
    wait_plotted(page, 1)
    drawn = plot_titled(page, BOARD).evaluate(
        """gd => {
            const xa = gd._fullLayout.xaxis, box = gd.getBoundingClientRect();
            const bar = gd.querySelector('.colorbar').getBoundingClientRect();
            const labels = [...gd.querySelectorAll('.colorbar .cbaxis text')];
            const title = gd.querySelector('.colorbar .cbtitle text').getBoundingClientRect();
            return {cell: xa._length, gap: bar.left - (box.left + xa._offset + xa._length), figure: box.width,
                labels: labels.map(t => t.textContent),
                clearance: Math.min(...labels.map(t => t.getBoundingClientRect().top)) - title.bottom};
        }"""
    )
    # Room for two labels: Plotly's round ones had been "0" alone; the bar now names its top, the largest effect
    largest = head_ablation_effects(ModelConfig(n_heads=1, n_layers=2), "the cat sat on the mat").max()
    assert drawn["labels"] == ["0", f"{largest:.3g}"], drawn
    assert drawn["cell"] <= HEAD_CELL_MAX_PX + 1, drawn  # +1: Plotly rounds the plot's px
    # Plotly's own gap between a plot and its colour bar is 2 % of the plot: 10-20 px, nowhere near the 350 px before
    assert 0 <= drawn["gap"] <= 30, drawn
    # The top label had been centred on the bar's end, half of it over the bar's title: it now hangs below its tick
    assert drawn["clearance"] >= 0, drawn
    assert drawn["figure"] >= BOARD_TEXT_PX - 1, drawn  # still as wide as its subtitle, which it shows uncut
    assert not page.errors, page.errors
