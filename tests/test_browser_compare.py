"""The Compare page in a real Chromium: the maps and the per-layer lines draw the engine's numbers (read back by
hovering, and by the colours on the canvas), the URL holds A and B, a click on the ranking heatmap shows that
head, the ranking table on request, the swap button and the download work, and nothing throws."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest

import explorer
from explorer.compare import (
    attention_difference,
    default_b,
    head_ranking,
    layer_values,
    model_for_b,
    reorder_maps,
    token_order,
)
from pictures.attention_panels import WEIGHTS
from pictures.compare_charts import RANK, difference_ramp, difference_range
from pictures.style import MASKED_COLOUR
from tests.browser_boards import (
    cell_centre,
    geometry,
    panels,
    pixels,
    read_panel,
    read_tips,
    tip_at,
    tip_placement,
    wait_panels_drawn,
)
from tests.browser_controls import pick_in_sidebar
from tests.browser_layout import PROJECTOR, grid_overflow
from tests.browser_plots import PLOT, drawn_traces, hover_point, plot_titled, plots, wait_plotted
from tests.drawn import rgb

pytestmark = pytest.mark.browser

TOKENS = "the cat sat on the mat"
LABELS = ["the", "cat", "sat", "on", "the·4", "mat"]  # a repeated token is labelled with its position
N_PANELS = 4  # matrix views: A, B, A − B, the head ranking
N_CHARTS = 1  # Plotly: the per-layer lines
GREY = rgb(MASKED_COLOUR)


def drawn(page, wait_idle, title: str | None = None) -> None:
    """Wait for the page to finish its run and draw every panel and chart; with `title`, until the A − B map is
    the one titled so (the panels of the previous run are drawn too, until the new ones replace them)."""
    wait_idle(page)
    if title is not None:
        page.locator(".mv-panel[data-name='difference'] .mv-title", has_text=title).wait_for(timeout=30_000)
    wait_panels_drawn(page, N_PANELS)
    wait_plotted(page, N_CHARTS)


def open_compare(page, url: str, wait_idle) -> None:
    page.goto(url)
    drawn(page, wait_idle)


def panel(page, name: str):
    (found,) = panels(page, name)
    return found


def in_view(locator):
    """Scroll the locator to the middle of the window: at the top edge, Streamlit's header would cover it."""
    locator.evaluate("e => e.scrollIntoView({block: 'center'})")
    return locator


def query(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(page.url).query).items()}


def assert_clean(page) -> None:
    assert page.locator("[data-testid='stException']").count() == 0
    assert not page.errors, page.errors


def engine_maps(a: explorer.ModelConfig, b: explorer.ModelConfig, tokens: str = TOKENS):
    """A's and B's self-attention in this process: the engine is deterministic across processes."""
    model_a = explorer.build_model(a)
    maps_a = explorer.run(model_a, tokens).attention_maps()["self-attention"]
    maps_b = explorer.run(model_for_b(model_a, b), tokens).attention_maps()["self-attention"]
    return maps_a, maps_b


def number(text: str) -> float:
    """A number as the tooltip writes it; NaN for "masked ..."."""
    return np.nan if "masked" in text else float(text.replace("\u2212", "-"))


def numbers(tips: list[list[dict[str, str]]], row: str) -> np.ndarray:
    """One row of every cell's tooltip as numbers, [rows, cols]."""
    return np.array([[number(tip[row]) for tip in line] for line in tips])


def read_difference(page) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every cell of the A − B map as its tooltip says ({"A", "B", "A − B"}: [n, n], NaN where it says masked)
    and the [n, n, 3] colours drawn."""
    tips, colours = read_panel(page, in_view(panel(page, "difference")))
    return {name: numbers(tips, name) for name in ("A", "B", "A − B")}, colours


def test_default_page_draws_post_vs_pre_on_the_same_weights_and_their_per_layer_lines(page, app_url, wait_idle):
    """One load of the default page for both checks: its maps, then its per-layer lines (each had loaded it)."""
    open_compare(page, app_url + "/compare", wait_idle)
    default_maps_are_post_vs_pre_on_the_same_weights(page)
    per_layer_lines_draw_the_engine_statistics_and_hover_gives_them(page)
    assert_clean(page)


def default_maps_are_post_vs_pre_on_the_same_weights(page) -> None:
    assert page.get_by_text("B runs on A's very weights").count() == 1
    assert [p.get_attribute("data-name") for p in panels(page)] == ["A", "B", "difference", "ranking"]
    assert len(plots(page)) == N_CHARTS
    assert page.locator("[data-testid='stDataFrame']").count() == 0  # tables only on request
    a = explorer.ModelConfig()
    maps_a, maps_b = engine_maps(a, default_b(a))
    expected = attention_difference(maps_a, maps_b)[0, 0]  # [6, 6]
    shown, colours = read_difference(page)
    np.testing.assert_allclose(shown["A − B"], expected, atol=5e-5)  # the tooltip gives 4 decimals
    np.testing.assert_allclose(shown["A"], maps_a.weights[0, 0], atol=5e-5)
    np.testing.assert_allclose(shown["B"], maps_b.weights[0, 0], atol=5e-5)
    assert np.abs(expected).max() > 1e-3
    ramp = difference_ramp(difference_range(expected))
    assert np.abs(colours.astype(int) - ramp.rgb(expected).astype(int)).max() <= 2  # blue A, orange B, white 0
    for side, maps in (("A", maps_a), ("B", maps_b)):
        tips, colours = read_panel(page, in_view(panel(page, side)))
        assert [row[0]["query"] for row in tips] == ["the", "cat", "sat", "on", "the·4", "mat"]
        assert [tip["key"] for tip in tips[0]] == ["the", "cat", "sat", "on", "the·4", "mat"]
        np.testing.assert_allclose(numbers(tips, "weight"), maps.weights[0, 0], atol=5e-5)
        assert np.abs(colours.astype(int) - WEIGHTS.rgb(maps.weights[0, 0]).astype(int)).max() <= 2  # one scale
    assert_clean(page)


def per_layer_lines_draw_the_engine_statistics_and_hover_gives_them(page) -> None:
    a = explorer.ModelConfig()
    model_a = explorer.build_model(a)
    values = {
        name: layer_values(explorer.run(model, TOKENS).first)
        for name, model in (("A", model_a), ("B", model_for_b(model_a, default_b(a))))
    }
    plot = in_view(plot_titled(page, "Per-layer statistics of A and B"))
    traces = drawn_traces(plot)
    for name, index in (("A", 0), ("B", 1)):  # the first panel: residual RMS, A then B
        rms = values[name][values[name]["statistic"] == "residual RMS"]
        assert traces[index]["name"] == name and traces[index]["visible"] is True
        assert traces[index]["x"] == rms["layer"].tolist()
        np.testing.assert_allclose(traces[index]["y"], rms["value"], rtol=1e-6)
    last = len(traces[1]["x"]) - 1
    for name, index in (("A", 0), ("B", 1)):  # after the last block, post-norm's A and pre-norm's B part
        expected = values[name].query("statistic == 'residual RMS'")["value"].iloc[-1]
        *words, value = hover_point(page, plot, index, last).split()
        assert words == [name, "after", "block", str(last - 1), "residual", "RMS"]
        assert float(value) == pytest.approx(expected, rel=5e-4)  # 4 significant digits
    assert hover_point(page, plot, 1, 0).split()[:2] == ["B", "input"]  # layer -1: the input to the first block
    assert_clean(page)


def test_url_holds_b_and_changing_b_updates_it(page, app_url, wait_idle):
    open_compare(page, app_url + "/compare?n_layers=3&b_mask=causal", wait_idle)
    assert query(page).get("b_mask") == "causal"
    upper = np.triu(np.ones((6, 6), dtype=bool), 1)
    tips, colours = read_panel(page, in_view(panel(page, "B")))
    masked = np.array([["masked" in tip["weight"] for tip in row] for row in tips])
    np.testing.assert_array_equal(masked, upper)  # B's causal upper triangle ...
    assert (colours[upper] == GREY).all()  # ... drawn grey
    assert not any("masked" in tip["weight"] for row in read_tips(page, in_view(panel(page, "A"))) for tip in row)
    page.get_by_text("Configuration B", exact=False).first.click()
    page.locator("[data-testid='stMain']").get_by_role("combobox", name="Mask").wait_for()
    page.wait_for_timeout(500)  # let the box finish unfolding before a click inside it
    page.locator("[data-testid='stMain']").get_by_role("combobox", name="Mask ≠ A").click()
    page.get_by_role("option", name="none", exact=True).click()
    drawn(page, wait_idle)
    assert "b_mask" not in query(page)  # back to B's default (A's mask): left out of the URL
    page.locator("[data-testid='stMain']").get_by_label("Seed", exact=True).fill("5")
    page.locator("[data-testid='stMain']").get_by_label("Seed", exact=True).press("Enter")
    drawn(page, wait_idle)
    assert query(page).get("b_seed") == "5" and query(page).get("n_layers") == "3"
    assert page.get_by_text("different seeds (0 vs 5)", exact=False).count() == 1
    assert_clean(page)


def test_bs_choices_show_their_whole_values_on_a_1024_px_screen(page, app_url, wait_idle):
    """Five choices a row left each box 90 px: "encoder-decoder" read "encode", "res-post" "res-pos"."""
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(app_url + "/compare?b_arch=encoder-decoder&b_norm=res-post&b_positional=learned")
    wait_idle(page)  # A encoder, B encoder-decoder: no maps side by side to wait for
    page.get_by_text("Configuration B", exact=False).first.click()
    page.locator("[data-testid='stMain']").get_by_role("combobox", name="Architecture ≠ A").wait_for()
    page.wait_for_timeout(500)  # the box unfolding
    boxes = page.locator("[data-testid='stMain'] [data-testid='stSelectbox']")
    shown = boxes.evaluate_all(
        """boxes => boxes.map(box => {
            const field = box.querySelector('input[role="combobox"]');  // shows the value it holds
            return {text: field.value, cut: field.scrollWidth > field.clientWidth + 1};
        })"""
    )
    assert {"encoder-decoder", "res-post", "learned"} <= {box["text"] for box in shown}, shown
    assert not [box for box in shown if box["cut"]], shown
    assert_clean(page)


def test_b_follows_a_and_swap_rewrites_the_sidebar(page, app_url, wait_idle):
    open_compare(page, app_url + "/compare?b_positional=rope", wait_idle)
    pick_in_sidebar(page, "Mask", "causal")
    drawn(page, wait_idle)
    assert query(page).get("mask") == "causal"
    assert "b_mask" not in query(page)  # B followed A: same mask, so nothing to store
    assert page.get_by_text("positional (sinusoidal → rope)", exact=False).count() == 1
    page.get_by_role("button", name="Swap A and B").click()
    drawn(page, wait_idle)
    norm_box = page.locator("[data-testid='stSidebar']").get_by_role("combobox", name="Norm placement")
    assert norm_box.input_value() == "pre"  # the sidebar's own widget shows A's new value
    q = query(page)
    assert (q.get("norm"), q.get("positional"), q.get("mask")) == ("pre", "rope", "causal")
    assert q.get("b_positional") == "sinusoidal" and "b_norm" not in q
    a = explorer.ModelConfig(norm="pre", positional="rope", mask="causal")
    maps_a, maps_b = engine_maps(a, a.replace(norm="post", positional="sinusoidal"))
    shown, colours = read_difference(page)
    allowed = maps_a.allowed | maps_b.allowed
    expected = attention_difference(maps_a, maps_b)[0, 0]
    np.testing.assert_allclose(shown["A − B"][allowed], expected[allowed], atol=5e-5)
    assert np.isnan(shown["A − B"][~allowed]).all()  # hover says "masked in A and B" ...
    assert (colours[~allowed] == GREY).all()  # ... and the cell is grey
    assert_clean(page)


def framed(ranking) -> tuple[int, int]:
    """The one cell of the ranking heatmap with a red frame: (layer, head), read from the drawn pixels."""
    _, plot = geometry(ranking)
    image = pixels(ranking).astype(int)
    red = []
    for r in range(plot["rows"]):
        for c in range(plot["cols"]):
            x = int(plot["left"] + c * plot["cell"] + 1.5)  # the cell's left edge, where a frame is drawn
            y = int(plot["top"] + (r + 0.5) * plot["cell"])
            if np.abs(image[y, x] - [0xD6, 0x27, 0x28]).max() <= 2:
                red.append((r, c))
    assert len(red) == 1, red
    return red[0]


def test_clicking_the_ranking_heatmap_shows_that_head(page, app_url, wait_idle):
    open_compare(page, app_url + "/compare?n_layers=3", wait_idle)
    a = explorer.ModelConfig(n_layers=3)
    maps_a, maps_b = engine_maps(a, default_b(a))
    ranking = head_ranking(maps_a, maps_b)
    row = next(i for i in range(1, 10) if ranking["layer"][i] > 0 and ranking["head"][i] > 0)  # not the default
    layer, head = int(ranking["layer"][row]), int(ranking["head"][row])
    x, y = cell_centre(in_view(panel(page, "ranking")), layer, head)  # rows are layers, columns heads
    tip = tip_at(page, x, y)
    assert (tip["layer"], tip["head"]) == (f"L{layer}", f"H{head}")
    assert number(tip["JS divergence (bits)"]) == pytest.approx(ranking["js_divergence"][row], abs=5e-5)
    assert number(tip["max |A − B|"]) == pytest.approx(ranking["max_abs_difference"][row], abs=5e-5)
    assert tip[RANK] == str(row + 1)  # a whole number: head_ranking lists the most changed head first
    page.mouse.click(x, y)
    page.wait_for_function(f"() => location.search.includes('layer={layer}')", timeout=30_000)
    drawn(page, wait_idle, f"A − B · layer {layer} · head {head}")
    assert (query(page).get("layer"), query(page).get("head")) == (str(layer), str(head))
    assert page.get_by_role("combobox", name="Layer", exact=True).input_value() == str(layer)
    shown, _ = read_difference(page)  # the A − B map now draws that head
    np.testing.assert_allclose(shown["A − B"], attention_difference(maps_a, maps_b)[layer, head], atol=5e-5)
    assert page.get_by_text(f"shown above: layer {layer}, head {head}").count() == 1
    assert framed(panel(page, "ranking")) == (layer, head)  # the shown head is framed in red, and only it
    ranking_panel = in_view(panel(page, "ranking"))
    assert tip_at(page, *cell_centre(ranking_panel, 2, 3))[RANK]  # the bottom row's tip reaches past the board ...
    placed = tip_placement(page, ranking_panel)
    left, top, right, bottom = placed["tip"]
    width, height = placed["window"]
    assert min(left, top) >= 0 and right <= width and bottom <= height, placed
    assert placed["board_overflow"] == 0  # ... and is shown whole: the board neither cuts it off nor scrolls
    page.mouse.click(*cell_centre(in_view(panel(page, "ranking")), 1, 0))  # a click on another head works too
    page.wait_for_function("() => location.search.includes('layer=1') && !location.search.includes('head=')")
    drawn(page, wait_idle, "A − B · layer 1 · head 0")
    page.mouse.click(*cell_centre(in_view(panel(page, "ranking")), layer, head))  # and on the first one again
    page.wait_for_function(f"() => location.search.includes('layer={layer}&head={head}')", timeout=30_000)
    drawn(page, wait_idle, f"A − B · layer {layer} · head {head}")
    assert_clean(page)


def test_ranking_table_on_request_selects_a_head(page, app_url, wait_idle):
    page.set_viewport_size(PROJECTOR)  # the table goes under the map: beside it, its divergences read "0"
    open_compare(page, app_url + "/compare?n_layers=3", wait_idle)
    assert page.locator("[data-testid='stDataFrame']").count() == 0  # not drawn unasked
    page.get_by_text("Show the ranking table", exact=True).click()
    drawn(page, wait_idle)
    a = explorer.ModelConfig(n_layers=3)
    maps_a, maps_b = engine_maps(a, default_b(a))
    ranking = head_ranking(maps_a, maps_b)
    table = page.locator("[data-testid='stDataFrame']")
    table.wait_for()
    table.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    assert [px <= 1 for px in grid_overflow(page)] == [True]  # every column in view
    box = table.bounding_box()
    row = next(i for i in range(1, 10) if ranking["layer"][i] > 0 and ranking["head"][i] > 0)  # not the default
    layer, head = int(ranking["layer"][row]), int(ranking["head"][row])
    page.mouse.click(box["x"] + 16, box["y"] + 35 + 35 * row + 17)  # the row's selection checkbox
    page.wait_for_function(f"() => location.search.includes('layer={layer}')", timeout=30_000)
    drawn(page, wait_idle, f"A − B · layer {layer} · head {head}")
    assert (query(page).get("layer"), query(page).get("head", "0")) == (str(layer), str(head))
    shown, _ = read_difference(page)
    np.testing.assert_allclose(shown["A − B"], attention_difference(maps_a, maps_b)[layer, head], atol=5e-5)
    assert_clean(page)


def test_two_inputs_mode(page, app_url, wait_idle):
    open_compare(page, app_url + "/compare?compare=input&tokens=I%20love%20AI&positional=none", wait_idle)
    assert page.locator("[data-testid='stMain']").get_by_label("Tokens of B", exact=True).input_value() == "AI love I"
    shown, _ = read_difference(page)
    assert np.abs(shown["A − B"]).max() < 1e-4  # lined up, no positions: the same words attend alike
    np.testing.assert_array_equal(shown["A"], shown["B"])
    assert_clean(page)


def test_a_difference_that_rounds_to_zero_reads_0_not_minus_0(page, app_url, wait_idle):
    """Lined up and without positions, A − B is float rounding, some of it negative: it must read 0.0000."""
    cfg = explorer.ModelConfig(positional="none")
    model = explorer.build_model(cfg)
    maps_a = explorer.run(model, TOKENS).attention_maps()["self-attention"]
    maps_b = explorer.run(model, " ".join(TOKENS.split()[::-1])).attention_maps()["self-attention"]
    order = token_order(maps_a.query_tokens, maps_b.query_tokens)
    difference = attention_difference(maps_a, reorder_maps(maps_b, order, order))[0, 0]
    assert ((difference < 0) & (difference > -5e-5)).any()  # what used to read -0.0000
    open_compare(page, app_url + "/compare?compare=input&positional=none", wait_idle)
    tips, _ = read_panel(page, in_view(panel(page, "difference")))
    texts = [tip["A − B"] for row in tips for tip in row]
    assert len(texts) == 36 and set(texts) == {"0.0000"}
    assert_clean(page)


def test_download_json_matches_the_drawn_map(page, app_url, wait_idle):
    open_compare(page, app_url + "/compare?mask=causal&layer=1&head=2", wait_idle)
    shown, _ = read_difference(page)
    with page.expect_download() as info:
        page.get_by_role("button", name="Download JSON").click()
    assert info.value.suggested_filename == "comparison.json"
    data = json.loads(Path(info.value.path()).read_text())
    assert data["a"]["norm"] == "post" and data["b"]["norm"] == "pre" and data["a"]["mask"] == "causal"
    difference = np.array(data["attention"][0]["difference"], dtype=np.float64)[1, 2]
    drawn = shown["A − B"]
    finite = np.isfinite(drawn)
    np.testing.assert_allclose(drawn[finite], difference[finite], atol=5e-5)
    assert (difference[~finite] == 0).all() and (~finite).sum() == 15  # masked in A and B: weight 0 in both
    with page.expect_download() as info:
        page.get_by_role("button", name="Maps CSV").click()
    lines = Path(info.value.path()).read_text().splitlines()
    assert lines[0].startswith("kind,layer,head,query_index") and len(lines) == 1 + 2 * 4 * 36
    page.get_by_text("Share this comparison").click()
    link = page.locator("[data-testid='stCode']")
    link.wait_for()
    assert "b_" not in link.inner_text() and "mask=causal" in link.inner_text()
    assert "layer=1" in link.inner_text() and "head=2" in link.inner_text()  # the view shown, as the address bar
    assert_clean(page)


def test_no_chart_when_a_is_impossible(page, app_url, wait_idle):
    page.goto(app_url + "/compare?d_model=30")
    wait_idle(page)
    assert "divisible" in " ".join(page.locator("[data-testid='stAlert']").all_inner_texts())
    assert page.locator(PLOT).count() == 0 and not panels(page)
    assert_clean(page)


def test_on_a_projector_a_minus_b_goes_under_a_and_b_unshrunk_and_on_a_phone_hover_finds_shrunk_cells(
    page, app_url, wait_idle
):
    """At 1024 px wide, the A − B column beside A and B had been too narrow: its map was drawn smaller, labels and
    all, and B went under A. Now A and B sit side by side and A − B goes under them at the size it was laid out for,
    whatever the text, and beside them where the window has room (1366 px). On a phone, where a panel has less room
    than itself, it is drawn smaller and hover maps the pointer back to its cells."""

    def overflow() -> list[float]:
        return page.evaluate(
            """() => [...document.querySelectorAll("[data-testid^='stBidiComponent']")]
                .flatMap((h) => [...(h.shadowRoot || h).querySelectorAll(".mv-board")])
                .flatMap((board) => [...board.querySelectorAll("canvas")].map(
                    (c) => c.getBoundingClientRect().right - board.getBoundingClientRect().right))"""
        )

    def canvases() -> dict:
        return {name: panel(page, name).locator("canvas") for name in ("A", "B", "difference", "ranking")}

    page.set_viewport_size({"width": 1024, "height": 768})
    open_compare(page, app_url + "/compare", wait_idle)
    assert max(overflow()) <= 1, overflow()
    drawn_maps = canvases()
    boxes = {name: canvas.bounding_box() for name, canvas in drawn_maps.items()}
    assert boxes["B"]["y"] == boxes["A"]["y"] and boxes["B"]["x"] > boxes["A"]["x"] + boxes["A"]["width"]
    assert boxes["difference"]["y"] > boxes["A"]["y"] + boxes["A"]["height"]  # under A and B, not beside them
    assert {name: float(c.get_attribute("data-scale")) for name, c in drawn_maps.items()} == dict.fromkeys(
        drawn_maps, 1.0
    )
    difference = panel(page, "difference")
    for row, col in ((5, 2), (1, 1), (0, 0), (3, 5)):
        tip = tip_at(page, *cell_centre(difference, row, col))
        assert (tip["query"], tip["key"]) == (LABELS[row], LABELS[col])
    tokens = "%20".join(f"w{i}" for i in range(300))
    open_compare(page, f"{app_url}/compare?tokens={tokens}", wait_idle)
    assert max(overflow()) <= 1, overflow()
    assert float(canvases()["difference"].get_attribute("data-scale")) == 1.0
    page.set_viewport_size({"width": 1366, "height": 768})  # a common laptop: room for A − B beside them
    open_compare(page, app_url + "/compare", wait_idle)
    beside = {name: canvas.bounding_box() for name, canvas in canvases().items()}
    assert beside["difference"]["y"] < beside["A"]["y"] + beside["A"]["height"]  # in A's row, not under it
    assert beside["difference"]["x"] > beside["B"]["x"] + beside["B"]["width"]
    assert float(canvases()["difference"].get_attribute("data-scale")) == 1.0
    # Labels of six or seven letters, as a real model's pieces are ("Ġgarden"), widen every panel: A − B had gone
    # under A and B by 6 px at this width.
    open_compare(page, app_url + "/compare?tokens=those+people+walked+across+their+garden", wait_idle)
    beside = {name: canvas.bounding_box() for name, canvas in canvases().items()}
    assert beside["difference"]["y"] < beside["A"]["y"] + beside["A"]["height"]
    page.set_viewport_size({"width": 360, "height": 740})
    open_compare(page, app_url + "/compare", wait_idle)
    assert max(overflow()) <= 1, overflow()
    ranking = panel(page, "ranking")
    assert float(ranking.locator("canvas").get_attribute("data-scale")) < 1  # it did need shrinking
    for layer, head in ((0, 0), (1, 3), (0, 2)):
        tip = tip_at(page, *cell_centre(ranking, layer, head))
        assert (tip["layer"], tip["head"]) == (f"L{layer}", f"H{head}")
    assert_clean(page)


def test_a_long_texts_difference_map_goes_under_a_and_b_at_its_own_size(page, app_url, wait_idle):
    """Beside A and B, the A − B column is 330 px: 240 tokens at one px a cell would be shrunk to it, labels too."""
    words = " ".join(f"w{i % 40}" for i in range(240))
    open_compare(page, f"{app_url}/compare?tokens={words.replace(' ', '+')}", wait_idle)
    canvases = {name: panel(page, name).locator("canvas").first for name in ("A", "B", "difference")}
    scales = {name: float(canvas.get_attribute("data-scale")) for name, canvas in canvases.items()}
    assert scales == {"A": 1.0, "B": 1.0, "difference": 1.0}  # every map at the size it was laid out for
    boxes = {name: canvas.bounding_box() for name, canvas in canvases.items()}
    assert boxes["difference"]["y"] > boxes["A"]["y"] + boxes["A"]["height"]  # under A, not beside it
    assert_clean(page)
