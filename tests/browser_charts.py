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
