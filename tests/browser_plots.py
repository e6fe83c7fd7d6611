"""Read Plotly charts in a real browser as a person does: what plotly.js drew, and the label it shows on hover."""

from __future__ import annotations

PLOT = "[data-testid='stPlotlyChart'] .js-plotly-plot"


def plots(page) -> list:
    """Every Plotly chart on the page, top to bottom."""
    return page.locator(PLOT).all()


def wait_plotted(page, count: int, timeout_ms: int = 30_000) -> None:
    """Wait until at least `count` Plotly charts have drawn their traces."""
    page.wait_for_function(
        """([sel, n]) => [...document.querySelectorAll(sel)].filter(
            gd => gd._fullLayout && gd.querySelector(".main-svg .trace")).length >= n""",
        arg=[PLOT, count],
        timeout=timeout_ms,
        polling=100,
    )


def plot_titled(page, words: str):
    """The one Plotly chart whose title (or subtitle) as drawn contains `words`."""
    found = [p for p in plots(page) if words in title_drawn(p)]
    assert len(found) == 1, f"{len(found)} charts titled {words!r}: {[title_drawn(p) for p in plots(page)]}"
    return found[0]


def title_drawn(plot) -> str:
    """The title and subtitle as the browser shows them (the SVG text, lines joined by spaces)."""
    return plot.evaluate(
        """gd => [...gd.querySelectorAll(".g-gtitle text")].map(t => [...t.childNodes].map(
            n => n.textContent).join(" ")).join(" ")"""
    )


def margins_grown(plot) -> dict[str, float]:
    """Each margin plotly.js drew with minus the one the figure asked for: one grown (by automargin, for labels or a
    legend that did not fit) made plotly.js draw the whole figure a second time."""
    return plot.evaluate(
        "gd => Object.fromEntries(['l', 'r', 't', 'b'].map(k => [k, gd._fullLayout._size[k] - gd.layout.margin[k]]))"
    )


def colour_bar_label_overlap(plot) -> float:
    """The most px by which two neighbouring tick labels of the plot's colour bar overlap as drawn (0: none)."""
    return plot.evaluate(
        """gd => {
            const boxes = [...gd.querySelectorAll('.colorbar .cbaxis text')].map(t => t.getBoundingClientRect())
                .sort((a, b) => a.top - b.top);
            return Math.max(0, ...boxes.slice(1).map((box, i) => boxes[i].bottom - box.top));
        }"""
    )


def drawn_traces(plot) -> list[dict]:
    """Each trace as plotly.js holds it after drawing (its full data): name, type, visible, x, y, z."""
    return plot.evaluate(
        """gd => gd._fullData.map(t => ({
            name: t.name, type: t.type, visible: t.visible,
            x: t.x ? Array.from(t.x) : null, y: t.y ? Array.from(t.y) : null,
            z: t.z ? Array.from(t.z, row => Array.from(row)) : null,
        }))"""
    )


def hover_point(page, plot, trace: int, index: int) -> str:
    """Move the pointer onto point `index` of trace `trace` and return the hover label's text ("" if none shows)."""
    x, y = plot.evaluate(
        """(gd, [t, i]) => {
            const trace = gd._fullData[t], layout = gd._fullLayout;
            const xa = layout[trace.xaxis.replace("x", "xaxis")], ya = layout[trace.yaxis.replace("y", "yaxis")];
            const box = gd.getBoundingClientRect();
            const xValue = trace.x[i], yValue = trace.y[i];
            // a bar hovers anywhere inside it: aim halfway between its top and its base, well inside even when it
            // is short; on a log axis its base (0) is the bottom of the plot, below the axis's range
            const top = ya.d2p(yValue), base = ya.type === "log" ? ya._length : ya.d2p(0);
            const xPixel = xa.d2p(xValue), yPixel = trace.type === "bar" ? (top + base) / 2 : top;
            return [box.left + xa._offset + xPixel, box.top + ya._offset + yPixel];
        }""",
        [trace, index],
    )
    page.mouse.move(x - 3, y - 3)
    page.mouse.move(x, y)
    page.wait_for_timeout(150)
    return plot.evaluate(
        """gd => [...gd.querySelectorAll(".hoverlayer .hovertext")].map(g => [...g.querySelectorAll("text")]
            .map(t => [...t.childNodes].map(n => n.textContent).join(" ")).join(" ")).join(" | ")"""
    )
