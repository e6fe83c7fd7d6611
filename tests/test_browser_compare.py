"""The Compare page in a real Chromium: the maps draw the engine's numbers (read back by hovering, and by the
colours on the canvas), the URL holds A and B, a click on the ranking heatmap shows that head, the ranking table
on request, the swap button and the download work, and nothing throws."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest

import explorer
from explorer.compare import attention_difference, default_b, head_ranking, model_for_b
from explorer.compare_figures import difference_ramp, difference_range
from tests.browser_charts import CHART, cell_grid, charts, colours_at, hover, read_cells, wait_drawn

pytestmark = pytest.mark.browser

TOKENS = "the cat sat on the mat"
N_CHARTS = 4  # A | B maps, A − B map, ranking heatmap, per-layer lines
PAIR, DIFFERENCE, RANKING, LINES = range(N_CHARTS)


def open_compare(page, url: str, wait_idle, n_charts: int = N_CHARTS) -> list:
    page.goto(url)
    wait_idle(page)
    wait_drawn(page, n_charts)
    return charts(page)


def redrawn(page, wait_idle, n_charts: int = N_CHARTS) -> list:
    wait_idle(page)
    wait_drawn(page, n_charts)
    return charts(page)


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
    """A number as the tooltip writes it (d3-format writes minus as U+2212); NaN for "masked ..."."""
    return np.nan if "masked" in text else float(text.replace("\u2212", "-"))


def read_difference(page, chart, n: int = 6) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every cell of the A − B map as its tooltip says ({"A", "B", "A − B"}: [n, n], NaN where it says masked)
    and the [n, n, 3] colours drawn."""
    xs, ys = cell_grid(page, chart, "key", "query", n, n)
    cells = read_cells(page, chart, xs, ys)
    shown = {name: np.array([[number(c[name]) for c in row] for row in cells]) for name in ("A", "B", "A − B")}
    return shown, colours_at(page, chart, xs, ys)


def read_sides(page, chart, n: int = 6) -> dict[str, list[list[dict[str, str]]]]:
    """The tooltips of each side ("A", "B") of the A | B chart, row by row: hover across the middle row once, then
    down each side's middle column, telling the sides apart by the tooltip's "model"."""
    chart.scroll_into_view_if_needed()
    box = chart.locator("canvas").first.bounding_box()
    xs: dict[str, dict[str, list[float]]] = {"A": {}, "B": {}}
    for x in np.arange(box["x"], box["x"] + box["width"], 2.0):
        tip = hover(page, float(x), box["y"] + box["height"] / 2)
        if tip.get("model") in xs:
            xs[tip["model"]].setdefault(tip["key"], []).append(float(x))
    out = {}
    for side, by_key in xs.items():
        assert len(by_key) == n, f"found {len(by_key)} of {n} columns of {side}"
        columns = sorted(float(np.mean(v)) for v in by_key.values())
        ys: dict[str, list[float]] = {}
        for y in np.arange(box["y"], box["y"] + box["height"], 2.0):
            tip = hover(page, float(np.mean(columns)), float(y))
            if tip.get("model") == side:
                ys.setdefault(tip["query"], []).append(float(y))
        assert len(ys) == n, f"found {len(ys)} of {n} rows of {side}"
        rows = sorted(float(np.mean(v)) for v in ys.values())
        out[side] = read_cells(page, chart, np.array(columns), np.array(rows))
    return out


def test_default_page_draws_post_vs_pre_on_the_same_weights(page, app_url, wait_idle):
    found = open_compare(page, app_url + "/compare", wait_idle)
    assert page.get_by_text("B runs on A's very weights").count() == 1
    assert len(found) == N_CHARTS
    assert page.locator("[data-testid='stPlotlyChart'], [data-testid='stDataFrame']").count() == 0
    a = explorer.ModelConfig()
    maps_a, maps_b = engine_maps(a, default_b(a))
    expected = attention_difference(maps_a, maps_b)[0, 0]  # [6, 6]
    shown, colours = read_difference(page, found[DIFFERENCE])
    np.testing.assert_allclose(shown["A − B"], expected, atol=5e-5)  # the tooltip gives 4 decimals
    np.testing.assert_allclose(shown["A"], maps_a.weights[0, 0], atol=5e-5)
    np.testing.assert_allclose(shown["B"], maps_b.weights[0, 0], atol=5e-5)
    assert np.abs(expected).max() > 1e-3
    ramp = difference_ramp(difference_range(expected))
    assert np.abs(colours.astype(int) - ramp.rgb(expected).astype(int)).max() <= 2  # blue A, orange B, white 0
    sides = read_sides(page, found[PAIR])
    for side, maps in (("A", maps_a), ("B", maps_b)):
        cells = sides[side]
        assert [row[0]["query"] for row in cells] == ["the", "cat", "sat", "on", "the·4", "mat"]
        drawn = np.array([[number(c["weight"]) for c in row] for row in cells])
        np.testing.assert_allclose(drawn, maps.weights[0, 0], atol=5e-5)
    assert_clean(page)


def test_url_holds_b_and_changing_b_updates_it(page, app_url, wait_idle):
    found = open_compare(page, app_url + "/compare?n_layers=3&b_mask=causal", wait_idle)
    assert query(page).get("b_mask") == "causal"
    sides = read_sides(page, found[PAIR])
    masked = np.array([["masked" in c["weight"] for c in row] for row in sides["B"]])
    np.testing.assert_array_equal(masked, np.triu(np.ones((6, 6), dtype=bool), 1))  # B's causal upper triangle
    assert not any("masked" in c["weight"] for row in sides["A"] for c in row)
    page.get_by_text("Configuration B", exact=False).first.click()
    page.locator("[data-testid='stMain']").get_by_role("combobox", name="Mask").wait_for()
    page.wait_for_timeout(500)  # let the box finish unfolding before a click inside it
    page.locator("[data-testid='stMain']").get_by_role("combobox", name="Mask ≠ A").click()
    page.get_by_role("option", name="none", exact=True).click()
    redrawn(page, wait_idle)
    assert "b_mask" not in query(page)  # back to B's default (A's mask): left out of the URL
    page.locator("[data-testid='stMain']").get_by_label("Seed", exact=True).fill("5")
    page.locator("[data-testid='stMain']").get_by_label("Seed", exact=True).press("Enter")
    redrawn(page, wait_idle)
    assert query(page).get("b_seed") == "5" and query(page).get("n_layers") == "3"
    assert page.get_by_text("different seeds (0 vs 5)", exact=False).count() == 1
    assert_clean(page)


def test_b_follows_a_and_swap_rewrites_the_sidebar(page, app_url, wait_idle):
    open_compare(page, app_url + "/compare?b_positional=rope", wait_idle)
    page.locator("[data-testid='stSidebar']").get_by_role("combobox", name="Mask").click()
    page.get_by_role("option", name="causal", exact=True).click()
    redrawn(page, wait_idle)
    assert query(page).get("mask") == "causal"
    assert "b_mask" not in query(page)  # B followed A: same mask, so nothing to store
    assert page.get_by_text("positional (sinusoidal → rope)", exact=False).count() == 1
    page.get_by_role("button", name="Swap A and B").click()
    found = redrawn(page, wait_idle)
    norm_box = page.locator("[data-testid='stSidebar']").get_by_role("combobox", name="LayerNorm placement")
    assert norm_box.input_value() == "pre"  # the sidebar's own widget shows A's new value
    q = query(page)
    assert (q.get("norm"), q.get("positional"), q.get("mask")) == ("pre", "rope", "causal")
    assert q.get("b_positional") == "sinusoidal" and "b_norm" not in q
    a = explorer.ModelConfig(norm="pre", positional="rope", mask="causal")
    maps_a, maps_b = engine_maps(a, a.replace(norm="post", positional="sinusoidal"))
    shown, colours = read_difference(page, found[DIFFERENCE])
    allowed = maps_a.allowed | maps_b.allowed
    expected = attention_difference(maps_a, maps_b)[0, 0]
    np.testing.assert_allclose(shown["A − B"][allowed], expected[allowed], atol=5e-5)
    assert np.isnan(shown["A − B"][~allowed]).all()  # hover says "masked in A and B" ...
    assert (colours[~allowed] == [0x9A, 0x9A, 0x9A]).all()  # ... and the cell is grey
    assert_clean(page)


def test_clicking_the_ranking_heatmap_shows_that_head(page, app_url, wait_idle):
    found = open_compare(page, app_url + "/compare?n_layers=3", wait_idle)
    a = explorer.ModelConfig(n_layers=3)
    maps_a, maps_b = engine_maps(a, default_b(a))
    ranking = head_ranking(maps_a, maps_b)
    row = next(i for i in range(1, 10) if ranking["layer"][i] > 0 and ranking["head"][i] > 0)  # not the default
    layer, head = int(ranking["layer"][row]), int(ranking["head"][row])
    xs, ys = cell_grid(page, found[RANKING], "head", "layer", 4, 3)
    tip = hover(page, float(xs[head]), float(ys[layer]))
    assert (tip["layer"], tip["head"], tip["rank (of 12)"]) == (f"L{layer}", f"H{head}", str(row + 1))
    assert number(tip["JS divergence (bits)"]) == pytest.approx(ranking["js_divergence"][row], abs=5e-5)
    page.mouse.click(float(xs[head]), float(ys[layer]))
    page.wait_for_function(f"() => location.search.includes('layer={layer}')", timeout=30_000)
    found = redrawn(page, wait_idle)
    assert (query(page).get("layer"), query(page).get("head")) == (str(layer), str(head))
    assert page.get_by_role("combobox", name="Layer", exact=True).input_value() == str(layer)
    shown, _ = read_difference(page, found[DIFFERENCE])  # the A − B map now draws that head
    np.testing.assert_allclose(shown["A − B"], attention_difference(maps_a, maps_b)[layer, head], atol=5e-5)
    xs, ys = cell_grid(page, found[RANKING], "head", "layer", 4, 3)  # a click on another head works too
    page.mouse.click(float(xs[0]), float(ys[1]))
    page.wait_for_function("() => location.search.includes('layer=1') && !location.search.includes('head=')")
    redrawn(page, wait_idle)
    assert_clean(page)


def test_ranking_table_on_request_selects_a_head(page, app_url, wait_idle):
    open_compare(page, app_url + "/compare?n_layers=3", wait_idle)
    assert page.locator("[data-testid='stDataFrame']").count() == 0  # not drawn unasked
    page.get_by_text("Show the ranking table", exact=True).click()
    redrawn(page, wait_idle)
    a = explorer.ModelConfig(n_layers=3)
    maps_a, maps_b = engine_maps(a, default_b(a))
    ranking = head_ranking(maps_a, maps_b)
    table = page.locator("[data-testid='stDataFrame']")
    table.wait_for()
    table.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    box = table.bounding_box()
    row = next(i for i in range(1, 10) if ranking["layer"][i] > 0 and ranking["head"][i] > 0)  # not the default
    layer, head = int(ranking["layer"][row]), int(ranking["head"][row])
    page.mouse.click(box["x"] + 16, box["y"] + 35 + 35 * row + 17)  # the row's selection checkbox
    page.wait_for_function(f"() => location.search.includes('layer={layer}')", timeout=30_000)
    found = redrawn(page, wait_idle)
    assert (query(page).get("layer"), query(page).get("head", "0")) == (str(layer), str(head))
    shown, _ = read_difference(page, found[DIFFERENCE])
    np.testing.assert_allclose(shown["A − B"], attention_difference(maps_a, maps_b)[layer, head], atol=5e-5)
    assert_clean(page)


def test_two_inputs_mode(page, app_url, wait_idle):
    found = open_compare(page, app_url + "/compare?compare=input&tokens=I%20love%20AI&positional=none", wait_idle)
    assert page.locator("[data-testid='stMain']").get_by_label("Tokens of B", exact=True).input_value() == "AI love I"
    shown, _ = read_difference(page, found[DIFFERENCE], 3)
    assert np.abs(shown["A − B"]).max() < 1e-4  # lined up, no positions: the same words attend alike
    np.testing.assert_array_equal(shown["A"], shown["B"])
    assert_clean(page)


def test_download_json_matches_the_drawn_map(page, app_url, wait_idle):
    found = open_compare(page, app_url + "/compare?mask=causal&layer=1&head=2", wait_idle)
    shown, _ = read_difference(page, found[DIFFERENCE])
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
    assert_clean(page)


def test_no_chart_when_a_is_impossible(page, app_url, wait_idle):
    page.goto(app_url + "/compare?d_model=30")
    wait_idle(page)
    assert "divisible" in " ".join(page.locator("[data-testid='stAlert']").all_inner_texts())
    assert page.locator(CHART).count() == 0
    assert_clean(page)
