"""A shared link on a real checkpoint, in a real Chromium: the weights drawn and hovered are explorer.run's on that
checkpoint, a head clicked on the head-roles board opens its map, and nothing is fetched from beyond this machine."""

from __future__ import annotations

import numpy as np
import pytest

import explorer
from pictures.attention_panels import WEIGHTS
from tests.browser_boards import cell_centre, panels, read_panel, tip_at, wait_panels_drawn
from tests.browser_layout import PROJECTOR, cut_off

pytestmark = pytest.mark.browser

SENTENCE = "the cat sat on the mat because it was tired."
FIRST_LOAD_MS = 180_000  # a server loads the checkpoint first: SmolLM2 dequantizes ~5 s without the weights cache


@pytest.fixture(scope="module")
def minilm(minilm_model) -> explorer.Transformer:
    return minilm_model


def test_a_shared_minilm_link_draws_the_checkpoints_own_weights(page, app_url, wait_idle, minilm):
    page.goto(f"{app_url}/?model=minilm-l6&tokens={SENTENCE.replace(' ', '%20')}&layer=1&head=8")
    wait_idle(page, FIRST_LOAD_MS)
    wait_panels_drawn(page, 4)  # head roles, then the map, the entropy and the grid
    expected = explorer.run(minilm, SENTENCE)  # the pieces: [CLS] the cat ... . [SEP]
    n = len(expected.tokens)
    cells, colours = read_panel(page, panels(page, "map")[0])
    assert [row[0]["query"].split("·")[0] for row in cells] == expected.tokens  # a repeat is labelled "the·5"
    shown = np.array([[float(c["weight"]) for c in row] for row in cells])  # [T, T] the hover's 4 decimals
    np.testing.assert_allclose(shown, expected.attention[1, 8], atol=5e-5)
    assert np.abs(colours.astype(int) - WEIGHTS.rgb(expected.attention[1, 8]).astype(int)).max() <= 1
    assert shown.shape == (n, n)
    # its GELU's note of exact zeros, the longest subtitle line, whole in its chart on a projector (2 px over at 100
    # characters a line)
    page.set_viewport_size(PROJECTOR)
    page.goto(f"{app_url}/activations?model=minilm-l6&tokens={SENTENCE.replace(' ', '%20')}&act_open_zeros=true")
    wait_idle(page, FIRST_LOAD_MS)
    assert page.get_by_text("GELU is exactly 0 at 0", exact=False).count() == 1
    assert cut_off(page) == []
    assert page.locator("[data-testid='stException']").count() == 0 and not page.errors, page.errors


def test_clicking_a_head_on_the_roles_board_opens_its_map(page, app_url, wait_idle, minilm):
    page.goto(f"{app_url}/?model=minilm-l6&tokens={SENTENCE.replace(' ', '%20')}&role=previous")
    wait_idle(page, FIRST_LOAD_MS)
    wait_panels_drawn(page, 4)
    roles = panels(page, "roles")[0]
    x, y = cell_centre(roles, 4, 9)  # layer 4, head 9
    assert tip_at(page, x, y)["layer"] == "L4" and tip_at(page, x, y)["head"] == "H9"
    page.mouse.click(x, y)
    wait_idle(page)
    wait_panels_drawn(page, 4)
    assert "layer=4" in page.url and "head=9" in page.url
    cells, _ = read_panel(page, panels(page, "map")[0])
    shown = np.array([[float(c["weight"]) for c in row] for row in cells])
    np.testing.assert_allclose(shown, explorer.run(minilm, SENTENCE).attention[4, 9], atol=5e-5)


def test_smollm_link_shows_its_next_token_and_every_page_opens(page, app_url, wait_idle):
    page.goto(f"{app_url}/?model=smollm2-135m&tokens=The%20capital%20of%20France%20is")
    wait_idle(page, FIRST_LOAD_MS)
    assert page.get_by_text("What comes next").count() == 1  # its table's rows are checked in test_app_pretrained
    wait_panels_drawn(page, 3)
    tip = tip_at(page, *cell_centre(panels(page, "map")[0], 1, 0))  # the map labels a piece as it reads ...
    assert tip["query"] == "␣capital (piece Ġcapital)" and tip["key"] == "The"  # ... and hover adds its spelling
    page.set_viewport_size(PROJECTOR)
    opened = {"activations": "&act_open_gradients=true"}  # a lazy section with a row of downloads
    for path in ("compare", "positional", "activations", "anatomy"):
        page.goto(f"{app_url}/{path}?model=smollm2-135m&tokens=The%20capital%20of%20France%20is{opened.get(path, '')}")
        wait_idle(page, FIRST_LOAD_MS)
        assert page.locator("[data-testid='stException']").count() == 0, path
        assert cut_off(page) == [], path  # on a projector: Compare's buttons, Positional's rope formula, ...
    assert not page.errors, page.errors
