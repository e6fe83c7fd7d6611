"""What a page cuts off in a real Chromium: labels ended with an ellipsis, and formulas wider than their box."""

from __future__ import annotations

PROJECTOR = {"width": 1024, "height": 768}  # a classroom projector's window: the sidebar leaves the page 564 px
TABLET = {"width": 800, "height": 1024}  # the sidebar leaves the page 468 px

# A label is cut when its text overflows a box that ends it with an ellipsis: by whole pixels (scrollWidth), or by less
# than two, which whole pixels round away ("Log count axis" 83.2 px in an 81.8 px box drew "Log count a…"): its text's
# exact width against its content box's, with half a pixel for the box's own rounding. A formula is cut when what KaTeX
# drew is wider than the column holding it (its own box, sized to it, is a pixel or two over from rounding and is not
# compared); a static table (st.table), when a cell's text is wider than the cell (a word too long for it scrolls
# inside the cell: st.table wraps at spaces only), or when its columns are wider than its box, which then scrolls
# sideways. A Plotly chart's words (title, subtitle, axis titles, legend, annotations) are cut where they reach past
# the chart's own box, which clips them: Plotly never wraps a title (Activations' GELU note lost its ")" by 2 px).
CUT_OFF = """() => {
  const textWidth = (e) => {
    const range = document.createRange();
    range.selectNodeContents(e);
    return range.getBoundingClientRect().width;
  };
  const boxWidth = (e) => {
    const s = getComputedStyle(e);
    const sides = ["paddingLeft", "paddingRight", "borderLeftWidth", "borderRightWidth"];
    return e.getBoundingClientRect().width - sides.reduce((sum, side) => sum + parseFloat(s[side]), 0);
  };
  return [
    ...[...document.querySelectorAll("[data-testid='stMain'] *")].filter((e) =>
        getComputedStyle(e).textOverflow === "ellipsis" && e.clientWidth > 0
        && (e.scrollWidth > e.clientWidth + 1 || textWidth(e) > boxWidth(e) + 0.5)),
    ...[...document.querySelectorAll("[data-testid='stMain'] .katex-display")].filter((e) =>
        e.querySelector(".katex-html").getBoundingClientRect().width > e.parentElement.clientWidth + 1),
    ...[...document.querySelectorAll("[data-testid='stMain'] [data-testid='stTable']")].filter((e) =>
        e.querySelector("table").getBoundingClientRect().width > e.getBoundingClientRect().width + 1),
    ...[...document.querySelectorAll("[data-testid='stMain'] [data-testid='stTable'] :is(td, th) *")].filter((e) =>
        e.scrollWidth > e.clientWidth + 1),
    ...[...document.querySelectorAll("[data-testid='stMain'] .js-plotly-plot")].flatMap((plot) => {
      const chart = plot.getBoundingClientRect();
      return [...plot.querySelectorAll(".infolayer text, .annotation-text")].filter((e) => {
        const drawn = e.getBoundingClientRect();
        return drawn.width > 0 && (drawn.right > chart.right + 0.5 || drawn.left < chart.left - 0.5);
      });
    }),
  ].map((e) => e.textContent.trim().slice(0, 60));
}"""


def cut_off(page) -> list[str]:
    """The start of each text in the page's main column that does not fit its box: a label that ends with "…" (a
    button or a metric in too narrow a column), a display formula or a table that would need scrolling sideways, or a
    chart's words reaching past the chart."""
    return page.evaluate(CUT_OFF)


def cut_off_at(page, viewport: dict[str, int]) -> list[str]:
    """cut_off once the window is resized to `viewport` and the page has laid itself out again (two frames later)."""
    page.set_viewport_size(viewport)
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    return cut_off(page)


# px of each data grid's (st.dataframe's) columns beyond its box, which it then scrolls sideways
GRID_OVERFLOW = """() => [...document.querySelectorAll("[data-testid='stMain'] [data-testid='stDataFrame']")]
    .map((grid) => grid.querySelector(".dvn-scroller")).map((e) => e.scrollWidth - e.clientWidth)"""


def grid_overflow(page) -> list[int]:
    """For each data grid of the page's main column, how many px of its columns it scrolls out of sight: a wide
    table may, but one of a few columns whose numbers sit out of sight reads wrong on a projector."""
    return page.evaluate(GRID_OVERFLOW)


TABLE_CELLS = "(rows) => rows.map((row) => [...row.querySelectorAll('td')].map((cell) => cell.innerText.trim()))"


def table_rows(table) -> list[list[str]]:
    """A static table's (st.table's locator) body as the reader sees it: each row's cells, their drawn text."""
    return table.locator("tbody tr").evaluate_all(TABLE_CELLS)
