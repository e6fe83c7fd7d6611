"""Read Vega-Lite charts in a real browser as a person does: by hovering (the tooltip) and by their pixels."""

from __future__ import annotations

import base64
import io

import numpy as np
from PIL import Image

CHART = "[data-testid='stVegaLiteChart']"
TOOLTIP = "#vg-tooltip-element.visible"


def charts(page) -> list:
    """Every Vega-Lite chart on the page, top to bottom."""
    return page.locator(CHART).all()


def wait_drawn(page, count: int, timeout_ms: int = 30_000) -> None:
    """Wait until at least `count` Vega-Lite charts have painted their canvas."""
    page.wait_for_function(
        """n => {
            const painted = [...document.querySelectorAll("[data-testid='stVegaLiteChart'] canvas")].filter(c =>
                c.width > 0 && c.getContext("2d").getImageData(0, 0, c.width, c.height).data.some(
                    (v, i) => i % 4 === 3 && v > 0));
            return painted.length >= n;
        }""",
        arg=count,
        timeout=timeout_ms,
        polling=100,
    )


def pixels(chart) -> np.ndarray:
    """[H, W, 3] uint8: what the chart's canvas shows, in CSS pixels (the page is drawn at device scale 1)."""
    uri = chart.locator("canvas").first.evaluate("c => c.toDataURL('image/png')")
    image = Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).convert("RGBA")
    rgba = np.asarray(image)
    white = np.full(rgba.shape[:2] + (3,), 255, dtype=np.float64)
    alpha = rgba[..., 3:4] / 255.0
    return np.rint(rgba[..., :3] * alpha + white * (1 - alpha)).astype(np.uint8)  # on the page's white


def hover(page, x: float, y: float) -> dict[str, str]:
    """The tooltip's rows ({"query": "the", ...}) with the pointer at page pixel (x, y); {} when there is none."""
    page.mouse.move(x, y)
    rows = page.evaluate(
        """sel => {
            const tip = document.querySelector(sel);
            if (!tip) return [];
            return [...tip.querySelectorAll("tr")].map(tr => [...tr.querySelectorAll("td")].map(td => td.innerText));
        }""",
        TOOLTIP,
    )
    return {row[0].strip(): row[1].strip() for row in rows if len(row) == 2}


def _centres(page, points: list[tuple[float, float]], axis: int, field: str, n: int, what: str) -> np.ndarray:
    """Hover along `points`; the sorted mean coordinate (0: x, 1: y) at which the tooltip names each `field`."""
    by_label: dict[str, list[float]] = {}
    for point in points:
        tip = hover(page, *point)
        if field in tip:
            by_label.setdefault(tip[field], []).append(point[axis])
    assert len(by_label) == n, f"found {len(by_label)} of {n} {what} by hovering"
    return np.array(sorted(np.mean(v) for v in by_label.values()))


def cell_grid(page, chart, field_x: str, field_y: str, n_x: int, n_y: int) -> tuple[np.ndarray, np.ndarray]:
    """Page coordinates of the centres of a matrix chart's cells, found by hovering: ([n_x] xs, [n_y] ys).

    Scans across the canvas at mid-height and down it at the middle of the cells found, recording where the
    tooltip names each key (field_x) and each query (field_y).
    """
    chart.scroll_into_view_if_needed()
    box = chart.locator("canvas").first.bounding_box()
    mid_y = box["y"] + box["height"] / 2
    across = [(box["x"] + dx, mid_y) for dx in np.arange(0, box["width"], 2.0)]
    xs = _centres(page, across, 0, field_x, n_x, "columns")
    down = [(float(xs.mean()), box["y"] + dy) for dy in np.arange(0, box["height"], 2.0)]
    return xs, _centres(page, down, 1, field_y, n_y, "rows")


def read_cells(page, chart, xs: np.ndarray, ys: np.ndarray) -> list[list[dict[str, str]]]:
    """The tooltip of every cell, row by row."""
    return [[hover(page, float(x), float(y)) for x in xs] for y in ys]


def colours_at(page, chart, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """[n_y, n_x, 3] colour drawn at each cell centre (a pixel beside the centre, away from the cell's text)."""
    page.mouse.move(0, 0)  # no tooltip over the chart
    box = chart.locator("canvas").first.bounding_box()
    image = pixels(chart)
    step_x = (xs[1] - xs[0]) if len(xs) > 1 else 20.0
    step_y = (ys[1] - ys[0]) if len(ys) > 1 else 20.0
    cols = np.rint(xs - box["x"] - 0.3 * step_x).astype(int)  # left of the centre, clear of the number
    rows = np.rint(ys - box["y"] - 0.3 * step_y).astype(int)
    return image[np.ix_(rows, cols)]
