"""'Download this view (HTML)': the file opens in Chromium with no server and no network, and its figures hold the
numbers the page shows (explorer.run's)."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest

import explorer
from explorer.analysis.gradients import gradient_norms, layer_gradient_totals
from explorer.analysis.norm_attention import norm_attention
from explorer.analysis.stream_energy import token_energy
from explorer.compare import DEFAULT_TARGET, default_b, model_for_b
from explorer.config import ModelConfig

pytestmark = pytest.mark.browser

TOKENS = "the cat sat on the mat"


def downloaded_view(page, url: str, wait_idle) -> str:
    page.goto(url)
    wait_idle(page)
    with page.expect_download() as info:
        page.get_by_role("button", name="Download this view (HTML)").click()
    return Path(info.value.path()).read_text(encoding="utf-8")


def numbers(value) -> np.ndarray:
    """A figure's array as plotly.js holds it: a list, or a typed array {dtype, bdata (base64), shape}."""
    if isinstance(value, dict):
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = [int(n) for n in str(value.get("shape", len(flat))).split(",")]
        return flat.reshape(shape).astype(np.float64)
    return np.array(value, dtype=np.float64)


def figures_in(browser, html: str) -> list[dict]:
    """The Plotly figures the file draws, read from the page it makes in a browser that may fetch nothing."""
    context = browser.new_context()
    fetched: list[str] = []
    context.route("**/*", lambda route: (fetched.append(route.request.url), route.abort()))
    try:
        page = context.new_page()
        page.set_content(html, wait_until="load")
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length > 0")
        figures = page.evaluate(
            "() => [...document.querySelectorAll('.js-plotly-plot')].map(g => "
            "({data: g.data.map(t => ({z: t.z, y: t.y, name: t.name, zmax: t.zmax})), title: g.layout.title.text, "
            "subtitle: g.layout.title.subtitle?.text, "
            "y_types: Object.keys(g.layout).filter(k => k.startsWith('yaxis')).map(k => g.layout[k].type)}))"
        )
    finally:
        context.close()
    assert not fetched, f"the file asked the network for {fetched[:3]}"
    return figures


def test_the_attention_view_opens_offline_with_the_pages_numbers(page, app_url, wait_idle, browser):
    html = downloaded_view(page, f"{app_url}/?mask=causal&layer=1&head=2&stretch=true", wait_idle)
    assert "Link to this view:" in html and "layer=1" in html
    shown, grid = figures_in(browser, html)
    expected = explorer.run(ModelConfig(mask="causal"), TOKENS).attention  # [L, H, T, T]
    z = numbers(shown["data"][0]["z"])
    allowed = ~np.isnan(z)
    np.testing.assert_allclose(z[allowed], expected[1, 2][allowed], rtol=1e-6)
    assert allowed.sum() == 21  # 6 tokens, causal: 1 + 2 + ... + 6 cells
    top = float(np.quantile(expected[1, 2][allowed], 0.99))  # the page's stretched scale, as Stretch colours draws
    assert shown["data"][0]["zmax"] == pytest.approx(top, rel=1e-6) and "colours stretched" in shown["subtitle"]
    assert shown["title"] == "self-attention · layer 1 · head 2"
    assert len(grid["data"]) == 2 * 4  # every layer x head of the default model, behind the slider


def test_the_positional_view_opens_offline_with_the_models_table(page, app_url, wait_idle, browser):
    html = downloaded_view(page, f"{app_url}/positional?positional=learned", wait_idle)
    curves, similarity = figures_in(browser, html)
    table = explorer.build_model(ModelConfig(positional="learned")).positional.table.detach().numpy()  # [P, D]
    first = curves["data"][0]
    assert first["name"] == "dim 0"
    np.testing.assert_allclose(numbers(first["y"]), table[:64, 0], rtol=1e-6)
    assert numbers(similarity["data"][0]["z"]).shape == (64, 64)


def test_the_activations_anatomy_and_compare_views_open_offline_with_their_numbers(page, app_url, wait_idle, browser):
    cfg = ModelConfig()
    model = explorer.build_model(cfg)
    activations = downloaded_view(page, f"{app_url}/activations?act_energy=max", wait_idle)
    depth, peaks, shares, gradients = figures_in(browser, activations)
    assert "Activation statistics over depth" in depth["title"]
    trace = explorer.run(model, TOKENS)
    np.testing.assert_allclose(numbers(peaks["data"][0]["z"]), token_energy(trace.first, "max"), rtol=1e-6)
    assert "How much the heads look at" in shares["title"] and len(shares["data"]) == 2
    totals = layer_gradient_totals(gradient_norms(model, TOKENS))["norm"]  # block by block
    np.testing.assert_allclose(numbers(gradients["data"][0]["y"]), totals, rtol=1e-5)

    (parameters,) = figures_in(browser, downloaded_view(page, f"{app_url}/anatomy", wait_idle))
    total = sum(p.numel() for p in model.parameters())
    assert numbers(parameters["data"][0]["y"]).sum() == total and f"{total:,} parameters" in parameters["title"]

    a_map, b_map, difference, lines = figures_in(browser, downloaded_view(page, f"{app_url}/compare", wait_idle))
    a = explorer.run(cfg, TOKENS).attention[0, 0]  # [T, T]: layer 0, head 0, the view the page opens on
    b = explorer.run(model_for_b(model, default_b(cfg)), TOKENS).attention[0, 0]
    np.testing.assert_allclose(numbers(a_map["data"][0]["z"]), a, rtol=1e-6)
    np.testing.assert_allclose(numbers(b_map["data"][0]["z"]), b, rtol=1e-6)
    np.testing.assert_allclose(numbers(difference["data"][0]["z"]), a - b, atol=1e-6)
    assert "Per-layer statistics of A and B" in lines["title"]


def test_the_compare_view_downloads_the_head_and_colours_picked_in_its_maps_section(page, app_url, wait_idle, browser):
    """The maps section reruns alone when a head or Stretch colours is picked: the download must follow it, and
    the per-layer lines keep the page's axes (log here)."""
    page.goto(f"{app_url}/compare?axes=log")
    wait_idle(page)
    main = page.locator("[data-testid='stMain']")
    main.get_by_role("combobox", name="Head").click()
    page.get_by_role("option", name="2", exact=True).click()
    wait_idle(page)
    main.get_by_text("Stretch colours", exact=True).click()
    wait_idle(page)
    assert "head=2" in page.url and "stretch=true" in page.url
    with page.expect_download() as info:
        page.get_by_role("button", name="Download this view (HTML)").click()
    html = Path(info.value.path()).read_text(encoding="utf-8")
    a_map, b_map, difference, lines = figures_in(browser, html)
    assert set(lines["y_types"]) == {"log"}  # every panel's values are > 0, so each is drawn on a log axis
    cfg = ModelConfig()
    a = explorer.run(cfg, TOKENS).first.self_attention
    b = explorer.run(model_for_b(explorer.build_model(cfg), default_b(cfg)), TOKENS).first.self_attention
    np.testing.assert_allclose(numbers(a_map["data"][0]["z"]), a.weights[0, 2], rtol=1e-6)
    assert "head 2" in a_map["title"] and "head 2" in difference["title"] and "head=2" in html
    both = np.concatenate([a.weights[0, 2][a.allowed], b.weights[0, 2][b.allowed]])
    top = float(np.quantile(both, 0.99))  # one stretched scale for A and B, as on the page
    assert [m["data"][0]["zmax"] for m in (a_map, b_map)] == pytest.approx([top, top])
    assert "colours stretched" in a_map["subtitle"] and "stretch=true" in html
    either = a.allowed | b.allowed
    half = float(np.quantile(np.abs(a.weights[0, 2] - b.weights[0, 2])[either], 0.99))  # A − B stretched too
    assert (
        difference["data"][0]["zmax"] == pytest.approx(half, rel=1e-5) and "colours stretched" in difference["subtitle"]
    )


def test_the_compare_view_downloads_the_kind_of_attention_it_shows(page, app_url, wait_idle, browser):
    """An encoder-decoder's Compare opens on cross-attention: the file must hold that, not the encoder's maps."""
    html = downloaded_view(page, f"{app_url}/compare?arch=encoder-decoder", wait_idle)
    assert page.get_by_role("radio", name="cross-attention").is_checked()
    a_map, b_map, difference, _ = figures_in(browser, html)
    assert a_map["title"].startswith("A · cross-attention") and b_map["title"].startswith("B · cross-attention")
    cfg = ModelConfig(arch="encoder-decoder")
    a = explorer.run(cfg, TOKENS, DEFAULT_TARGET).maps("cross-attention").weights[0, 0]  # [T, S]
    np.testing.assert_allclose(numbers(a_map["data"][0]["z"]), a, rtol=1e-6)


def test_the_compare_view_with_norms_downloads_what_the_heads_add(page, app_url, wait_idle, browser):
    cfg = ModelConfig()
    model_a = explorer.build_model(cfg)
    model_b = model_for_b(model_a, default_b(cfg))
    norms_a = norm_attention(model_a, explorer.run(model_a, TOKENS))[0, 0]  # [T, T]
    norms_b = norm_attention(model_b, explorer.run(model_b, TOKENS))[0, 0]
    html = downloaded_view(page, f"{app_url}/compare?measure=norms", wait_idle)
    a_map, b_map, difference, _ = figures_in(browser, html)
    np.testing.assert_allclose(numbers(a_map["data"][0]["z"]), norms_a, rtol=1e-6)
    np.testing.assert_allclose(numbers(b_map["data"][0]["z"]), norms_b, rtol=1e-6)
    np.testing.assert_allclose(numbers(difference["data"][0]["z"]), norms_a - norms_b, atol=1e-6)
    assert "‖α·f(x)‖" in difference["title"] and "A · " in a_map["title"]
