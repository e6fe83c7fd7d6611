"""A teacher's view, set up by clicking in a real Chromium, is what a student opening the address bar gets."""

from __future__ import annotations

import json
import re
from pathlib import Path

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


def test_the_view_file_links_to_the_switches_of_a_section_used_after_the_page_was_drawn(page, app_url, wait_idle):
    # Positional's table is a section in a fragment: its Stretch colours put stretch=true in the address bar without
    # redrawing the page's "Download this view", whose file linked to the page without it, where a student's file,
    # from the address bar, had it.
    page.goto(f"{app_url}/positional?pos_open_table=true")
    wait_idle(page)
    page.locator("[data-testid='stMain']").get_by_text("Stretch colours", exact=True).click()
    wait_idle(page)
    assert "stretch=true" in page.url
    with page.expect_download() as info:
        page.get_by_role("button", name="Download this view (HTML)").click()
    text = Path(info.value.path()).read_text()
    [link] = re.findall(r"Link to this view: (\S+?)</p>", text)
    assert "stretch=true" in link and "pos_open_table=true" in link
