"""Read matrix views (views/matrix_view.js) in a real browser as a person does: hover a cell, read its tooltip, and
look at the colour drawn there."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
from PIL import Image

PANEL = ".mv-panel"  # Playwright's CSS selectors reach into the component's (open) shadow root
BOARDS_DRAWN = """n => {
    const hosts = [...document.querySelectorAll("[data-testid^='stBidiComponent']")];
    const canvases = hosts.flatMap((h) => [...(h.shadowRoot || h).querySelectorAll(".mv-panel canvas")]);
    return canvases.length >= n && canvases.every((c) => c.dataset.drawn === "true");
}"""


def pixels(panel) -> np.ndarray:
    """[H, W, 3] uint8: what a panel's canvas shows, in CSS pixels (the page is drawn at device scale 1)."""
    uri = panel.locator("canvas").first.evaluate("c => c.toDataURL('image/png')")
    rgba = np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).convert("RGBA"))
    white = np.full(rgba.shape[:2] + (3,), 255, dtype=np.float64)
    alpha = rgba[..., 3:4] / 255.0
    return np.rint(rgba[..., :3] * alpha + white * (1 - alpha)).astype(np.uint8)  # on the page's white


def panels(page, name: str | None = None) -> list:
    """Every matrix panel on the page, top to bottom (only those named `name`, when given)."""
    selector = PANEL if name is None else f"{PANEL}[data-name='{name}']"
    return page.locator(selector).all()


def wait_panels_drawn(page, count: int, timeout_ms: int = 30_000) -> None:
    """Wait until at least `count` panels exist and every panel on the page has painted its canvas."""
    page.wait_for_function(BOARDS_DRAWN, arg=count, timeout=timeout_ms, polling=100)


def tip_at(page, x: float, y: float) -> dict[str, str]:
    """The tooltip's rows ({"query": "the", ...}) with the pointer at page pixel (x, y); {} when none shows.
    A small map's tooltip on a sheet, one line without a name, comes back as {"": text}."""
    page.mouse.move(x, y)
    rows = page.evaluate(
        """() => [...document.querySelectorAll("[data-testid^='stBidiComponent']")]
            .flatMap((h) => [...(h.shadowRoot || h).querySelectorAll(".mv-tip")])
            .filter((tip) => tip.style.display === "block")
            .flatMap((tip) => [...tip.querySelectorAll(".mv-row")].map((r) => {
                const key = r.querySelector(".mv-key"), value = r.querySelector(".mv-value");
                return key ? [key.textContent, value.textContent] : ["", r.textContent];
            }))"""
    )
    return {key.strip(): value.strip() for key, value in rows}


def tip_placement(page, panel) -> dict:
    """Where the panel's tooltip shows, against the window ("tip": left, top, right, bottom; "window": width,
    height), and whether it made its board scroll ("board_overflow": scrollHeight - clientHeight, in px)."""
    return panel.evaluate(
        """(p) => {
            const tip = p.querySelector(".mv-tip").getBoundingClientRect(), board = p.closest(".mv-board");
            return {tip: [tip.left, tip.top, tip.right, tip.bottom], window: [innerWidth, innerHeight],
                    board_overflow: board.scrollHeight - board.clientHeight};
        }"""
    )


def geometry(panel) -> tuple[dict, dict]:
    """Where the panel's cells are: the canvas's page box, and its plot (left, top, cell width and cell_h height,
    rows, cols; a sheet's small maps at `maps`, map_w by map_h) in page pixels, so scaled as the canvas is when its
    board had less room than it (a 1024 px window shows the grid of MiniLM's 72 heads at about 0.64)."""
    canvas = panel.locator("canvas")
    canvas.evaluate("c => c.scrollIntoView({block: 'center'})")  # at the top edge, the page's header would cover it
    plot = json.loads(canvas.get_attribute("data-plot"))
    scale = float(canvas.get_attribute("data-scale") or 1)
    scaled = {k: v * scale if k in ("left", "top", "cell", "cell_h", "map_w", "map_h") else v for k, v in plot.items()}
    if "maps" in plot:
        scaled["maps"] = [[x * scale, y * scale] for x, y in plot["maps"]]
    return canvas.bounding_box(), scaled


def cell_centre(panel, row: int, col: int) -> tuple[float, float]:
    box, plot = geometry(panel)
    x = box["x"] + plot["left"] + (col + 0.5) * plot["cell"]
    return x, box["y"] + plot["top"] + (row + 0.5) * plot["cell_h"]


def read_tips(page, panel) -> list[list[dict[str, str]]]:
    """The tooltip of every cell, row by row, hovering each cell's centre."""
    box, plot = geometry(panel)
    x0, y0, cell, cell_h = box["x"] + plot["left"], box["y"] + plot["top"], plot["cell"], plot["cell_h"]
    return [
        [tip_at(page, x0 + (c + 0.5) * cell, y0 + (r + 0.5) * cell_h) for c in range(plot["cols"])]
        for r in range(plot["rows"])
    ]


def canvas_plot(panel) -> dict:
    """The panel's plot in its canvas's own pixels, as pixels() reads them: before the browser scales the canvas to
    its board (geometry gives page pixels)."""
    return json.loads(panel.locator("canvas").get_attribute("data-plot"))


def cell_colours(panel) -> np.ndarray:
    """[rows, cols, 3] colour drawn in each cell, a little left of and above its centre (clear of its number)."""
    plot, image = canvas_plot(panel), pixels(panel)

    def offset(cell: float) -> float:  # inside the cell, clear of its lines and number
        return 0.5 * cell if cell < 4 else max(1.5, 0.2 * cell)

    cell, cell_h = plot["cell"], plot["cell_h"]
    xs = np.floor(plot["left"] + np.arange(plot["cols"]) * cell + offset(cell)).astype(int)
    ys = np.floor(plot["top"] + np.arange(plot["rows"]) * cell_h + offset(cell_h)).astype(int)
    return image[np.ix_(ys, xs)]


def read_panel(page, panel) -> tuple[list[list[dict[str, str]]], np.ndarray]:
    """Every cell's tooltip and the colour drawn at it."""
    return read_tips(page, panel), cell_colours(panel)


def sheet_centres(sheet) -> dict[str, tuple[float, float]]:
    """The page pixel at the middle of each small map of a sheet panel, by the map's title."""
    box, plot = geometry(sheet)
    return {
        title: (box["x"] + x + plot["map_w"] / 2, box["y"] + y + plot["map_h"] / 2)
        for title, (x, y) in zip(plot["titles"], plot["maps"], strict=True)
    }


def sheet_frames(sheet) -> dict[str, tuple[int, int, int]]:
    """The colour of the line drawn round each small map of a sheet (read left of the map, halfway down), by title."""
    plot, image = canvas_plot(sheet), pixels(sheet)
    return {
        title: tuple(int(v) for v in image[int(y + plot["map_h"] / 2), int(x) - 1])
        for title, (x, y) in zip(plot["titles"], plot["maps"], strict=True)
    }
