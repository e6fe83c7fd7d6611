"""The numbers a matrix view writes in its cells (views/matrix_view.js), read off the canvas in Chromium: white or
black, whichever has the higher WCAG contrast on the cell. Its old rule (a 0.299/0.587/0.114 mean below 140: white)
wrote white on mid greens and blues where black stands out more than twice as well."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.serve import wait_ready
from tests.browser_boards import BOARDS_DRAWN, geometry, panels, pixels
from tests.test_colour_review import contrast

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
# Cell colours, one panel each: VIRIDIS's green at 0.78 and BLUES's mid blue (white had 2.5:1 and 3.0:1 on them,
# black 8.4:1 and 7.0:1), a dark blue (white 12.6:1) and a pale one (black 18.7:1).
CELLS = {"green": "#3bb976", "mid-blue": "#529dcc", "dark": "#08306b", "pale": "#deebf7"}
APP = f"""import sys

sys.path.insert(0, {str(ROOT)!r})
import numpy as np

from pictures.boards import board, matrix_panel
from pictures.style import Ramp
from views.matrix_view import show_board

panels = [
    matrix_panel(np.full((2, 2), 0.5, np.float32), None, Ramp((colour, colour), 0.0, 1.0), name=name,
                 x_labels=["a", "b"], y_labels=["a", "b"], x_title="key", y_title="query", value_title="v",
                 title=name, text_digits=2, max_px=112)
    for name, colour in {CELLS!r}.items()
]
show_board(board(panels), key="cells")
"""


def _text_colour(panel, fill: str) -> np.ndarray:
    """The colour of the number written in the panel's first cell: of its pixels that differ most from the fill."""
    box, plot = geometry(panel)
    canvas = pixels(panel).astype(np.int32)  # [H, W, 3] in CSS pixels
    scale = canvas.shape[1] / box["width"]
    top, left, size = (int(round(plot[k] * scale)) for k in ("top", "left", "cell"))
    cell = canvas[top + 2 : top + size - 2, left + 2 : left + size - 2].reshape(-1, 3)  # inside the grid lines
    away = np.abs(cell - [int(fill[i : i + 2], 16) for i in (1, 3, 5)]).sum(axis=1)  # [pixels]
    return cell[away >= np.quantile(away, 0.98)].mean(axis=0)  # the glyphs' cores


def test_a_cells_number_is_written_in_whichever_of_white_and_black_stands_out_more(page, served_page):
    with served_page(APP) as base:
        page.goto(base)
        wait_ready(page, f"() => ({BOARDS_DRAWN})(4)", timeout_ms=60_000)
        for name, fill in CELLS.items():
            (panel,) = panels(page, name)
            text = _text_colour(panel, fill)
            written = "#ffffff" if text.mean() > 127 else "#000000"
            best = max(("#ffffff", "#000000"), key=lambda colour: contrast(colour, fill))
            assert written == best, f"{name}: {written} at {contrast(written, fill):.1f}:1, {best} gives more"
            assert contrast(written, fill) >= 4.5
