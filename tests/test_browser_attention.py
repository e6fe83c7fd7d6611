"""The dashboard in a real Chromium: heatmaps draw, hover shows the weights, controls change them, junk URLs warn,
nothing throws."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import explorer
from explorer.config import ModelConfig
from pictures.attention_panels import WEIGHTS
from pictures.style import MASKED_COLOUR
from tests.browser_boards import (
    cell_centre,
    panels,
    pixels,
    read_panel,
    sheet_centres,
    sheet_frames,
    tip_at,
    wait_panels_drawn,
)
from tests.browser_controls import pick_in_sidebar
from tests.drawn import rgb

pytestmark = pytest.mark.browser

TOKENS = ["the", "cat", "sat", "on", "the·4", "mat"]
GREY = rgb(MASKED_COLOUR)
RED = tuple(rgb("#d62728"))  # the frame round the picked map of the grid
GRID_LINE = tuple(rgb("#cccccc"))  # the line round every other small map


def open_page(page, url: str, wait_idle, n_panels: int = 3) -> None:
    page.goto(url)
    wait_idle(page)
    wait_panels_drawn(page, n_panels)


def main_map(page):
    """The big heatmap: the panel named "map"."""
    return panels(page, "map")[0]


def read_map(page, n: int) -> tuple[list[list[dict[str, str]]], np.ndarray]:
    """Every cell's tooltip and the colour drawn at it, for the big map, which is n x n."""
    cells, colours = read_panel(page, main_map(page))
    assert (len(cells), len(cells[0])) == (n, n)
    return cells, colours


def changed_control(page, wait_idle, label: str, option: str) -> None:
    """Pick `option` in the sidebar's select box `label` and wait for the page to redraw."""
    pick_in_sidebar(page, label, option)
    wait_idle(page)
    wait_panels_drawn(page, 3)


def assert_clean(page) -> None:
    assert page.locator("[data-testid='stException']").count() == 0
    assert not page.errors, page.errors


def shown(page, label: str) -> str:
    """The value a selector of the page (not the sidebar) shows."""
    return page.locator("[data-testid='stMain']").get_by_role("combobox", name=label).input_value()


def alerts(page) -> str:
    """Every alert's text on the page, as one string."""
    return " ".join(page.locator("[data-testid='stAlert']").all_inner_texts())


def test_default_view_draws_hover_and_colours_the_engine_weights_and_a_click_on_the_grid_picks_a_map(
    page, app_url, wait_idle
):
    """One load of the default page: its map and grid, then a click on the grid (which had loaded the page again),
    then a mask changed (on the map the click picked)."""
    open_page(page, app_url + "/", wait_idle)
    assert [p.get_attribute("data-name") for p in panels(page)] == ["map", "entropy", "grid"]
    grid = panels(page, "grid")[0]
    titles = [f"L{layer} H{head}" for layer in range(2) for head in range(4)]
    assert {title: tip_at(page, *centre) for title, centre in sheet_centres(grid).items()} == {
        title: {"": f"{title}: click to show it large above"} for title in titles
    }  # the grid's 2 layers x 4 heads, each named by hover
    cells, colours = read_map(page, 6)
    expected = explorer.run(ModelConfig(), " ".join(t.split("·")[0] for t in TOKENS)).attention[0, 0]  # [6, 6]
    assert [row[0]["query"] for row in cells] == TOKENS and [c["key"] for c in cells[0]] == TOKENS
    shown = np.array([[float(c["weight"]) for c in row] for row in cells])
    np.testing.assert_allclose(shown, expected, atol=5e-5)  # the tooltip gives 4 decimals
    assert np.abs(colours.astype(int) - WEIGHTS.rgb(expected).astype(int)).max() <= 1  # the colour of each weight
    assert_clean(page)

    clicking_the_grid_picks_a_map(page, wait_idle)
    grid_picture = pixels(panels(page, "grid")[0])
    before = pixels(main_map(page))
    changed_control(page, wait_idle, "Mask", "causal")
    assert "mask=causal" in page.url
    cells, colours = read_map(page, 6)
    upper = np.triu(np.ones((6, 6), dtype=bool), 1)
    masked = np.array([["masked" in c["weight"] for c in row] for row in cells])
    np.testing.assert_array_equal(masked, upper)  # hover says masked exactly on the upper triangle ...
    assert (colours[upper] == GREY).all() and not (colours[~upper] == GREY).all(axis=-1).any()  # ... drawn grey
    assert not np.array_equal(before, pixels(main_map(page)))
    assert not np.array_equal(grid_picture, pixels(panels(page, "grid")[0]))  # the small maps are redrawn too
    assert_clean(page)


def test_long_tokens_are_cut_short_on_the_axes_and_whole_in_the_hover(page, app_url, wait_idle):
    long_word = "supercalifragilisticexpialidocious"  # 34 characters
    open_page(page, f"{app_url}/?tokens={long_word}%20is%20long", wait_idle)
    panel = main_map(page)
    left = json.loads(panel.locator("canvas").get_attribute("data-plot"))["left"]
    width = page.evaluate(
        """texts => { const g = document.createElement("canvas").getContext("2d");
            g.font = '14px "Source Sans", "Source Sans Pro", sans-serif';
            return texts.map((t) => g.measureText(t).width); }""",
        [long_word, long_word[:13] + "…"],
    )
    assert left < 34 + width[0]  # the query axis does not make room for the whole word (34 px: title and gaps)
    assert left == pytest.approx(34 + width[1], abs=1)  # only for its first 13 characters and "…"
    assert tip_at(page, *cell_centre(panel, 0, 0))["query"] == long_word
    assert_clean(page)


def test_a_cut_label_keeps_the_position_that_tells_a_repeated_token_apart(page, app_url, wait_idle):
    long_word = "supercalifragilisticexpialidocious"  # 34 characters; the map cuts labels to 14
    open_page(page, f"{app_url}/?tokens={long_word}%20and%20{long_word}", wait_idle)
    plot = json.loads(main_map(page).locator("canvas").get_attribute("data-plot"))
    assert plot["y_labels"] == [long_word[:13] + "…", "and", long_word[:11] + "…·2"]  # 14 characters each at most
    assert plot["x_labels"] == plot["y_labels"]
    assert_clean(page)


def test_a_long_texts_labels_are_spaced_so_that_none_runs_into_the_next(page, app_url, wait_idle):
    """42 tokens on a 1024 px screen: 14 px cells, every slanted label written, each over its neighbours."""
    page.set_viewport_size({"width": 1024, "height": 768})
    open_page(page, f"{app_url}/?tokens={'+'.join(['the', 'cat', 'sat', 'on', 'the', 'mat'] * 7)}", wait_idle)
    plot = json.loads(main_map(page).locator("canvas").get_attribute("data-plot"))
    assert plot["cell"] < 21  # small enough that labelling every cell would crowd them
    plot.setdefault("x_ticks", list(range(plot["cols"])))  # the view labelled every cell before it said which
    plot.setdefault("y_ticks", list(range(plot["rows"])))
    # 45° labels stand apart by 0.71 of their cells' distance, which must hold a 14 px line; rows 12 px apart
    assert (plot["x_ticks"][1] - plot["x_ticks"][0]) * plot["cell"] >= 21, plot["x_ticks"]
    assert (plot["y_ticks"][1] - plot["y_ticks"][0]) * plot["cell_h"] >= 12, plot["y_ticks"]
    assert len(plot["x_labels"]) == len(plot["x_ticks"]) >= 10  # still a label every few cells
    assert_clean(page)


def test_a_one_token_map_has_room_for_its_axis_title(page, app_url, wait_idle):
    open_page(page, f"{app_url}/?arch=encoder-decoder&tokens=alone&target=x", wait_idle)
    image = pixels(main_map(page))  # cross-attention: 1 x 1 cells, shorter than "query (target)" is long
    ink = np.nonzero((image[:, 4:24] < 120).all(axis=-1).any(axis=1))[0]  # rows with the y title's dark text
    assert ink.max() - ink.min() > 60  # the whole title, down the left side ...
    assert ink.min() > 0 and ink.max() < image.shape[0] - 1  # ... cut off at neither end of the canvas
    assert_clean(page)


def test_url_sets_controls(page, app_url, wait_idle):
    open_page(page, app_url + "/?n_heads=2&n_layers=3&mask=causal%2Bpadding&tokens=%5BPAD%5D%20a%20b", wait_idle)
    titles = {tip_at(page, *centre)[""] for centre in sheet_centres(panels(page, "grid")[0]).values()}
    assert {t.split(":")[0] for t in titles} == {f"L{layer} H{head}" for layer in range(3) for head in range(2)}
    assert page.get_by_text("no key to attend to").count() == 1
    assert_clean(page)
    changed_control(page, wait_idle, "Mask", "none")
    assert "mask=" not in page.url  # back to the default, which Streamlit leaves out of the URL
    cells, colours = read_map(page, 3)
    assert not any("masked" in c["weight"] for row in cells for c in row)
    assert not (colours == GREY).all(axis=-1).any()
    assert_clean(page)


def test_hand_typed_plus_in_url_means_causal_padding(page, app_url, wait_idle):
    open_page(page, app_url + "/?mask=causal+padding&tokens=a+b+%5BPAD%5D", wait_idle)  # "+" is a space
    assert page.locator("[data-testid='stAlert']").count() == 0
    cells, _ = read_map(page, 3)
    assert sum("masked" in c["weight"] for row in cells for c in row) == 3 + 1  # causal triangle, plus [PAD]
    changed_control(page, wait_idle, "Mask", "causal")
    cells, _ = read_map(page, 3)
    assert sum("masked" in c["weight"] for row in cells for c in row) == 3
    assert_clean(page)


def test_junk_url_param_warns(page, app_url, wait_idle):
    open_page(page, app_url + "/?n_heads=abc&norm=sideways", wait_idle)
    assert "n_heads=abc" in alerts(page) and "norm=sideways" in alerts(page)
    assert_clean(page)


def test_impossible_config_shows_error(page, app_url, wait_idle):
    page.goto(app_url + "/?d_model=30")
    wait_idle(page)
    assert "divisible" in alerts(page)
    assert not panels(page)
    assert_clean(page)


def clicking_the_grid_picks_a_map(page, wait_idle) -> None:
    """On the default page: L0 H0 framed red, a click on L1 H1 shows its weights large and frames it instead."""
    grid = panels(page, "grid")[0]
    frames = sheet_frames(grid)
    assert frames.pop("L0 H0") == RED and set(frames.values()) == {GRID_LINE}  # the map shown large is framed red
    centre = sheet_centres(grid)["L1 H1"]
    assert tip_at(page, *centre) == {"": "L1 H1: click to show it large above"}
    page.mouse.click(*centre)
    page.wait_for_function("() => location.search.includes('layer=1')", timeout=30_000)
    wait_idle(page)
    wait_panels_drawn(page, 3)
    assert "head=1" in page.url
    assert page.get_by_role("combobox", name="Layer", exact=True).input_value() == "1"
    cells, _ = read_map(page, 6)  # the big map now draws L1 H1's weights
    expected = explorer.run(ModelConfig(), "the cat sat on the mat").attention[1, 1]  # [6, 6]
    np.testing.assert_allclose([[float(c["weight"]) for c in row] for row in cells], expected, atol=5e-5)
    frames = sheet_frames(panels(page, "grid")[0])
    assert frames.pop("L1 H1") == RED and set(frames.values()) == {GRID_LINE}  # only the map picked is framed red
    assert_clean(page)


def test_downloads_hold_the_shown_weights(page, app_url, wait_idle):
    open_page(page, app_url + "/?mask=causal&layer=1&head=2", wait_idle)
    cells, _ = read_map(page, 6)
    with page.expect_download() as info:
        page.get_by_role("button", name="Download JSON").click()
    assert info.value.suggested_filename == "attention_self-attention_L1_H2.json"
    data = json.loads(Path(info.value.path()).read_text())
    assert (data["layer"], data["head"], data["config"]["mask"]) == (1, 2, "causal")
    for row_shown, row_json, row_allowed in zip(cells, data["weights"], data["allowed"], strict=True):
        for shown, weight, ok in zip(row_shown, row_json, row_allowed, strict=True):
            assert (
                ("masked" in shown["weight"]) if not ok else float(shown["weight"]) == pytest.approx(weight, abs=5e-5)
            )
    with page.expect_download() as info:
        page.get_by_role("button", name="Download CSV").click()
    lines = Path(info.value.path()).read_text().splitlines()
    assert lines[0] == "kind,layer,head,query_index,query_token,key_index,key_token,weight,allowed"
    assert len(lines) == 1 + 36
    assert_clean(page)


def test_the_layer_and_head_picked_go_along_to_compare_and_back(page, app_url, wait_idle):
    """A teacher discussing layer 1, head 2 opens Compare from the sidebar: the same head is there, in the address
    bar too; a head picked on Compare comes back to Attention."""

    def go_to(title: str) -> None:
        page.locator("[data-testid='stSidebarNav']").get_by_text(title, exact=True).click()
        page.wait_for_url(lambda url: ("compare" in url) == (title == "Compare"))
        wait_idle(page)
        wait_panels_drawn(page, 4 if title == "Compare" else 3)

    open_page(page, app_url + "/?layer=1&head=2", wait_idle)
    go_to("Compare")
    assert (shown(page, "Layer"), shown(page, "Head")) == ("1", "2")
    assert "layer=1" in page.url and "head=2" in page.url
    assert panels(page, "difference")[0].locator(".mv-title").inner_text() == "A − B · layer 1 · head 2"
    page.locator("[data-testid='stMain']").get_by_role("combobox", name="Head").click()
    page.get_by_role("option", name="3", exact=True).click()
    wait_idle(page)
    go_to("Attention")
    assert (shown(page, "Layer"), shown(page, "Head")) == ("1", "3")
    assert main_map(page).locator(".mv-title").inner_text() == "self-attention · layer 1 · head 3"
    assert_clean(page)


def test_taking_layers_away_and_back_keeps_screen_and_address_bar_agreeing(page, app_url, wait_idle):
    """A teacher on layer 2 lowers Layers to 2, then raises it again, then shares the address bar: the link must show
    what the screen shows (Streamlit alone jumped to layer 0 and left layer=2 in the URL)."""

    def set_layers(n: int) -> None:
        field = page.locator("[data-testid='stSidebar']").get_by_role("spinbutton", name="Layers")
        field.fill(str(n))
        field.press("Enter")
        wait_idle(page)
        wait_panels_drawn(page, 3)

    def shared_title() -> str:
        other = page.context.new_page()
        open_page(other, page.url, wait_idle)
        title = main_map(other).locator(".mv-title").inner_text()
        other.close()
        return title

    open_page(page, app_url + "/?n_layers=3&layer=2&head=3", wait_idle)
    set_layers(2)
    assert (shown(page, "Layer"), shown(page, "Head")) == ("1", "3")  # the nearest layer, not the first
    assert "There is no layer 2 here (2 layers): showing the last, 1." in alerts(page)
    assert "layer=1" in page.url
    set_layers(3)
    assert shown(page, "Layer") == "1" and "layer=1" in page.url and "head=3" in page.url
    assert shared_title() == main_map(page).locator(".mv-title").inner_text() == "self-attention · layer 1 · head 3"
    set_layers(1)
    assert "There is no layer 1 here (1 layer): showing the last, 0." in alerts(page)
    page.locator("[data-testid='stMain']").get_by_role("combobox", name="Head").click()
    page.get_by_role("option", name="2", exact=True).click()  # a rerun of the maps' fragment alone
    wait_idle(page)
    assert "There is no layer" not in alerts(page)  # said once, next to the selectors, and gone with the next pick
    assert_clean(page)


def test_a_link_to_a_layer_and_head_the_model_lacks_puts_the_ones_shown_in_the_address_bar(page, app_url, wait_idle):
    """Opened from a link, Streamlit dropped layer=99 from the address bar and wrote nothing: the page showed the last
    layer and head, and a copy of its address the first ones."""
    open_page(page, app_url + "/?layer=99&head=99", wait_idle)
    assert "There is no layer 99 here (2 layers): showing the last, 1." in alerts(page)
    assert (shown(page, "Layer"), shown(page, "Head")) == ("1", "3")
    page.wait_for_function("() => location.search.includes('layer=1') && location.search.includes('head=3')")
    other = page.context.new_page()
    open_page(other, page.url, wait_idle)
    assert main_map(other).locator(".mv-title").inner_text() == "self-attention · layer 1 · head 3"
    assert "There is no" not in alerts(other)
    other.close()
    assert_clean(page)


def test_the_grids_titles_stay_readable_when_a_narrow_window_shrinks_the_grid(page, app_url, wait_idle):
    """At 1024 px (a classroom projector) the 880 px grid of 8 heads is shown at about 0.65, and its 12 px titles
    had read as 7.8 px; they are drawn larger by as much, up to what their band and their map's width hold."""
    page.set_viewport_size({"width": 1024, "height": 768})
    open_page(page, app_url + "/?n_heads=8", wait_idle)
    canvas = panels(page, "grid")[0].locator("canvas")
    page.wait_for_function("c => c.dataset.drawn === 'true'", arg=canvas.element_handle(), timeout=30_000)
    scale = float(canvas.get_attribute("data-scale"))
    font_px = float(canvas.get_attribute("data-title-font").split("px")[0])
    assert scale < 0.8  # the grid is shrunk here: the case this test is about
    assert font_px * scale >= 11  # as shown on the screen, where 12 px had become 7.8
    # Each small map is where a test points for it: sheet_centres had placed the maps at their unscaled offsets,
    # which at this width fall on other maps or beside them
    grid = panels(page, "grid")[0]
    assert {title: tip_at(page, *centre)[""].split(":")[0] for title, centre in sheet_centres(grid).items()} == {
        f"L{layer} H{head}": f"L{layer} H{head}" for layer in range(2) for head in range(8)
    }
    assert_clean(page)


def test_a_short_colour_bar_writes_values_at_an_even_pace(page, app_url, wait_idle):
    """Two tokens draw a short legend bar, too short for all of 0.2, 0.4, 0.6 and 0.8: with the two next to the ends
    dropped it read "1, 0.6, 0.4, 0", steps of 0.2 between ends 0.4 away. Whatever it writes between 1 and 0, no end
    is two of its steps or more from the nearest value written."""
    open_page(page, app_url + "/?tokens=a+b", wait_idle)
    written = main_map(page).locator("canvas").first.get_attribute("data-legend-ticks")
    values = [1.0, *(float(v) for v in written.split(",") if v), 0.0]  # the ends, 1 and 0, and between them
    assert len(values) > 2  # the bar has room for one value at least
    gaps = -np.diff(values)  # [len - 1] from the top down
    pace = gaps[1:-1].min() if len(gaps) > 2 else np.inf  # two values written set a pace; one sets none
    assert gaps[0] < 2 * pace and gaps[-1] < 2 * pace, values
