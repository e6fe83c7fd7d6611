"""A teacher's view, set up by clicking in a real Chromium, is what a student opening the address bar gets."""

from __future__ import annotations

import json

import pytest

from tests.browser_boards import panels, pixels

pytestmark = pytest.mark.browser

SENTENCE = "The+teacher+explains+why+the+cat+sat+down."


def framed_cells(panel) -> list[tuple[int, int]]:
    """The cells of a matrix panel with the red frame (#d62728) drawn round them: read on each cell's left edge,
    halfway down, where the frame's 3 px line is drawn."""
    plot = json.loads(panel.locator("canvas").get_attribute("data-plot"))
    image = pixels(panel).astype(int)  # [H, W, 3]
    cells = []
    for row in range(plot["rows"]):
        for col in range(plot["cols"]):
            r, g, b = image[int(plot["top"] + (row + 0.5) * plot["cell_h"]), int(plot["left"] + col * plot["cell"] + 1)]
            if r > 180 and g < 90 and b < 90:
                cells.append((row, col))
    return cells


def test_the_head_roles_board_frames_the_head_picked_beside_the_maps(page, app_url, wait_idle):
    # The layer and head selectors rerun the maps' fragment alone: the board above kept its frame on the head shown
    # before (L2 H4 while the maps showed L2 H7), and a student opening the address bar got the frame on L2 H7.
    page.goto(f"{app_url}/?model=minilm-l6&tokens={SENTENCE}&layer=2&head=4")
    wait_idle(page)
    [roles] = panels(page, "roles")
    assert framed_cells(roles) == [(2, 4)]
    box = page.locator("[data-testid='stMain']").get_by_role("combobox", name="Head")
    box.click()
    box.fill("7")  # a long list: typed, as its options are not all drawn
    box.press("Enter")
    wait_idle(page)
    assert "head=7" in page.url
    [roles] = panels(page, "roles")
    assert framed_cells(roles) == [(2, 7)]
