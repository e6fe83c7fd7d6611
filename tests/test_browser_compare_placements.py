"""Compare's "All four placements" in a real Chromium: closed on arrival, opened by a click (which puts it in the
URL), it draws three panels with one line per placement, carrying placement_run's numbers, and nothing throws."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest

import explorer
from explorer.analysis.placements import MEASURES, placement_run
from explorer.config import NORMS, ModelConfig
from tests.browser_plots import drawn_traces, plot_titled, plots, wait_plotted

pytestmark = pytest.mark.browser

TOKENS = "the cat sat on the mat"


def test_a_click_opens_three_panels_of_four_lines_with_the_engines_numbers(page, app_url, wait_idle):
    page.goto(f"{app_url}/compare?tokens={TOKENS.replace(' ', '+')}")
    wait_idle(page)
    wait_plotted(page, 1)
    assert len(plots(page)) == 1  # the per-layer lines only: the closed expander computed nothing
    page.locator("[data-testid='stExpander'] summary", has_text="All four placements").click()
    wait_idle(page)
    wait_plotted(page, 2)
    assert parse_qs(urlsplit(page.url).query).get("placements") == ["true"]  # a link keeps it open
    plot = plot_titled(page, "All four norm placements")
    traces = drawn_traces(plot)
    axes = plot.evaluate("gd => gd._fullData.map(t => t.xaxis)")
    assert sorted(set(axes)) == ["x", "x2", "x3"]
    result = placement_run(explorer.build_model(ModelConfig()), TOKENS)
    for axis, measure in zip(("x", "x2", "x3"), MEASURES, strict=True):
        lines = [t for t, a in zip(traces, axes, strict=True) if a == axis]
        assert [t["name"] for t in lines] == [f"{p}-norm" for p in NORMS]
        for placement, line in zip(NORMS, lines, strict=True):
            np.testing.assert_allclose(line["y"], result.values(placement, measure), rtol=1e-9)  # sent as float64
    drawn_paths = plot.evaluate("gd => gd.querySelectorAll('.scatterlayer .trace .js-line').length")
    assert drawn_paths == 12  # three panels of four lines, each drawn as an SVG path
    box = page.locator("[data-testid='stExpander']", has_text="All four placements")
    assert "All four placements run on the same untrained weights" in box.inner_text()
    # On a 1024 px projector, beside the sidebar, the chart is about 530 px: the panels' titles had run into each
    # other and the second and third panels' y-axis titles lay over the panel to their left.
    page.set_viewport_size({"width": 1024, "height": 768})
    page.wait_for_function(
        "gd => gd.getBoundingClientRect().width < 700", arg=plot.element_handle(), timeout=10_000
    )  # Plotly's autosize follows the window
    page.wait_for_timeout(500)  # its relayout after the resize
    drawn = plot.evaluate(
        """gd => {
            const left = gd.getBoundingClientRect().left, layout = gd._fullLayout;
            const titles = [...gd.querySelectorAll('.annotation')].filter(a => a.textContent === '' ? false :
                !a.textContent.includes('not available')).map(a => a.getBoundingClientRect());
            const plotRight = name => left + layout[name]._offset + layout[name]._length;
            const yTitle = name => gd.querySelector(`.g-${name}title text`).getBoundingClientRect().left;
            return {width: gd.getBoundingClientRect().width, titles: titles.map(r => [r.left, r.right]),
                yGaps: [yTitle('y2') - plotRight('xaxis'), yTitle('y3') - plotRight('xaxis2')]};
        }"""
    )
    titles = sorted(drawn["titles"])
    # 8 px: more than a space between words at 14 px, so that two titles do not read as one (they had touched)
    assert len(titles) == 3 and all(a[1] + 8 <= b[0] for a, b in zip(titles, titles[1:], strict=False)), drawn
    assert min(drawn["yGaps"]) >= 0, drawn
    assert not page.errors, page.errors
