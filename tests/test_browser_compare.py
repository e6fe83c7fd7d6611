"""The Compare page in a real Chromium: the maps draw the engine's numbers, the URL holds A and B, the ranking
table, the swap button and the download work, and nothing throws."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest

import explorer
from explorer.compare import attention_difference, default_b, head_ranking, model_for_b

pytestmark = pytest.mark.browser

CHART = "[data-testid='stPlotlyChart'] .js-plotly-plot"
TOKENS = "the cat sat on the mat"
LIVE_Z = "el => el._fullData[0].z.map(row => Array.from(row, v => (v === null ? NaN : v)))"


def difference_chart(page):
    """The A − B map: the Plotly chart whose first trace is named "A − B"."""
    for chart in page.locator(CHART).all():
        if chart.evaluate("el => el.data[0].name") == "A − B":
            return chart
    raise AssertionError("no A − B map on the page")


def pair_chart(page):
    found = [c for c in page.locator(CHART).all() if c.evaluate("el => !!el.layout.coloraxis")]
    assert len(found) == 1
    return found[0]


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


def open_b(page) -> None:
    """Unfold the box with B's controls."""
    page.get_by_text("Configuration B", exact=False).first.click()
    page.locator("[data-testid='stMain']").get_by_role("combobox", name="Mask").wait_for()
    page.wait_for_timeout(500)  # let the box finish unfolding before a click inside it


def choose(page, label: str, option: str, where: str = "main") -> None:
    scope = page.locator("[data-testid='stSidebar']" if where == "sidebar" else "[data-testid='stMain']")
    scope.get_by_role("combobox", name=label).click()
    page.get_by_role("option", name=option, exact=True).click()


def test_default_page_draws_post_vs_pre_on_the_same_weights(page, app_url, wait_idle):
    page.goto(app_url + "/compare")
    wait_idle(page)
    assert page.get_by_text("B runs on A's very weights").count() == 1
    assert page.locator(CHART).count() >= 4  # A | B, A − B, ranking, per-layer lines
    a = explorer.ModelConfig()
    maps_a, maps_b = engine_maps(a, default_b(a))
    drawn = np.array(difference_chart(page).evaluate(LIVE_Z), dtype=np.float64)
    np.testing.assert_array_equal(drawn.astype(np.float32), attention_difference(maps_a, maps_b)[0, 0])
    assert np.abs(drawn).max() > 1e-3
    assert difference_chart(page).locator(".hm, image").count() >= 1  # Plotly drew it
    titles = pair_chart(page).evaluate("el => el.layout.annotations.map(a => a.text)")
    assert titles == ["A · layer 0 · head 0", "B · layer 0 · head 0"]
    assert_clean(page)


def test_url_holds_b_and_changing_b_updates_it(page, app_url, wait_idle):
    page.goto(app_url + "/compare?n_layers=3&b_mask=causal")
    wait_idle(page)
    assert query(page).get("b_mask") == "causal"
    masked = pair_chart(page).evaluate(
        "el => el._fullData.filter(t => t.name === 'B' && t.type === 'heatmap')[0].z.map(r => Array.from(r)).flat()"
        ".filter(v => v === null || Number.isNaN(v)).length"
    )
    assert masked == 15  # B's causal upper triangle of 6 x 6
    open_b(page)
    choose(page, "Mask ≠ A", "none")
    wait_idle(page)
    assert "b_mask" not in query(page)  # back to B's default (A's mask): left out of the URL
    page.locator("[data-testid='stMain']").get_by_label("Seed", exact=True).fill("5")
    page.locator("[data-testid='stMain']").get_by_label("Seed", exact=True).press("Enter")
    wait_idle(page)
    assert query(page).get("b_seed") == "5" and query(page).get("n_layers") == "3"
    assert page.get_by_text("different seeds (0 vs 5)", exact=False).count() == 1
    assert_clean(page)


def test_b_follows_a_and_swap_rewrites_the_sidebar(page, app_url, wait_idle):
    page.goto(app_url + "/compare?b_positional=rope")
    wait_idle(page)
    choose(page, "Mask", "causal", where="sidebar")
    wait_idle(page)
    assert query(page).get("mask") == "causal"
    assert "b_mask" not in query(page)  # B followed A: same mask, so nothing to store
    assert page.get_by_text("positional (sinusoidal → rope)", exact=False).count() == 1
    page.get_by_role("button", name="Swap A and B").click()
    wait_idle(page)
    norm_box = page.locator("[data-testid='stSidebar']").get_by_role("combobox", name="LayerNorm placement")
    assert norm_box.input_value() == "pre"  # the sidebar's own widget shows A's new value
    q = query(page)
    assert (q.get("norm"), q.get("positional"), q.get("mask")) == ("pre", "rope", "causal")
    assert q.get("b_positional") == "sinusoidal" and "b_norm" not in q
    a = explorer.ModelConfig(norm="pre", positional="rope", mask="causal")
    b = a.replace(norm="post", positional="sinusoidal")
    maps_a, maps_b = engine_maps(a, b)
    drawn = np.array(difference_chart(page).evaluate(LIVE_Z), dtype=np.float64)
    allowed = maps_a.allowed | maps_b.allowed
    np.testing.assert_array_equal(
        drawn[allowed].astype(np.float32), attention_difference(maps_a, maps_b)[0, 0][allowed]
    )
    assert_clean(page)


def test_selecting_a_ranking_row_shows_that_head(page, app_url, wait_idle):
    page.goto(app_url + "/compare?n_layers=3")
    wait_idle(page)
    a = explorer.ModelConfig(n_layers=3)
    ranking = head_ranking(*engine_maps(a, default_b(a)))
    table = page.locator("[data-testid='stDataFrame']")
    table.scroll_into_view_if_needed()
    box = table.bounding_box()
    row = next(i for i in range(1, 10) if ranking["layer"][i] > 0 and ranking["head"][i] > 0)  # not the default
    layer, head = int(ranking["layer"][row]), int(ranking["head"][row])
    page.mouse.click(box["x"] + 16, box["y"] + 35 + 35 * row + 17)  # the row's selection checkbox
    page.wait_for_function(f"() => location.search.includes('layer={layer}')", timeout=30_000)
    wait_idle(page)
    assert (query(page).get("layer"), query(page).get("head", "0")) == (str(layer), str(head))
    title = difference_chart(page).evaluate("el => el.layout.title.text")
    assert f"layer {layer} · head {head}" in title
    assert_clean(page)


def test_two_inputs_mode(page, app_url, wait_idle):
    page.goto(app_url + "/compare?compare=input&tokens=I%20love%20AI&positional=none")
    wait_idle(page)
    assert page.locator("[data-testid='stMain']").get_by_label("Tokens of B", exact=True).input_value() == "AI love I"
    drawn = np.array(difference_chart(page).evaluate(LIVE_Z), dtype=np.float64)
    assert np.abs(drawn).max() < 1e-6  # lined up, no positions: the same words attend alike
    assert_clean(page)


def test_download_json_matches_the_drawn_map(page, app_url, wait_idle):
    page.goto(app_url + "/compare?mask=causal&layer=1&head=2")
    wait_idle(page)
    drawn = difference_chart(page).evaluate(LIVE_Z)
    with page.expect_download() as info:
        page.get_by_role("button", name="Download JSON").click()
    assert info.value.suggested_filename == "comparison.json"
    data = json.loads(Path(info.value.path()).read_text())
    assert data["a"]["norm"] == "post" and data["b"]["norm"] == "pre" and data["a"]["mask"] == "causal"
    difference = np.array(data["attention"][0]["difference"], dtype=np.float64)[1, 2]
    shown = np.array(drawn, dtype=np.float64)
    finite = np.isfinite(shown)
    np.testing.assert_array_equal(shown[finite], difference[finite])
    assert (difference[~finite] == 0).all()  # masked in A and B: weight 0 in both
    with page.expect_download() as info:
        page.get_by_role("button", name="Maps CSV").click()
    lines = Path(info.value.path()).read_text().splitlines()
    assert lines[0].startswith("kind,layer,head,query_index") and len(lines) == 1 + 2 * 4 * 36
    assert_clean(page)
