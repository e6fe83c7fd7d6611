"""The Train page in a real Chromium: a short run draws live curves and an anti-diagonal, Stop keeps the model,
the files download and load back, and the model can be sent to the Attention page and taken back."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.browser_boards import panels, read_tips, wait_panels_drawn
from tests.browser_boards import pixels as panel_pixels
from tests.browser_charts import charts, pixels, wait_drawn

pytestmark = pytest.mark.browser

POST_NORM_BLUE = (0x1F, 0x5F, 0xA8)  # the post-norm curve's colour


def assert_clean(page) -> None:
    assert page.locator("[data-testid='stException']").count() == 0
    assert not page.errors, page.errors


def open_train(page, app_url, wait_idle, steps: int) -> None:
    page.goto(app_url + "/train")
    wait_idle(page)
    field = page.get_by_role("spinbutton", name="Steps", exact=True)
    field.fill(str(steps))
    field.press("Enter")
    wait_idle(page)


def stop_button(page):
    """The page's Stop (Streamlit's header has a "Stop" of its own while a script runs)."""
    return page.get_by_test_id("stMainBlockContainer").get_by_role("button", name="Stop", exact=True)


def snapshot_weights(page) -> np.ndarray:
    """[8, 8] weights of the snapshot heatmap, read by hovering each cell."""
    weights = np.array([[float(c["weight"]) for c in row] for row in read_tips(page, panels(page, "snapshot")[0])])
    assert weights.shape == (8, 8)
    return weights


def metric_values(page) -> list[str]:
    return page.locator("[data-testid='stMetricValue']").all_inner_texts()


def test_the_address_bar_carries_the_training_settings(page, app_url, wait_idle):
    page.goto(app_url + "/train?train_task=copy&train_steps=60&train_lr=0.001")
    wait_idle(page)
    assert page.get_by_role("spinbutton", name="Steps", exact=True).input_value() == "60"
    assert page.get_by_role("combobox", name="Task", exact=True).input_value() == "copy"
    field = page.get_by_role("spinbutton", name="Sequence length", exact=True)
    field.fill("10")
    field.press("Enter")
    wait_idle(page)
    assert re.search(r"[?&]train_length=10(&|$)", page.url) and "train_steps=60" in page.url  # a link to share
    assert_clean(page)


def test_short_run_draws_live_curves_then_an_anti_diagonal(page, app_url, wait_idle):
    open_train(page, app_url, wait_idle, 150)
    page.get_by_role("button", name="Train", exact=True).click()
    # the live curves are drawn while the progress bar still counts steps (it is gone once training ends)
    page.wait_for_function(
        "() => /step \\d+ of 150/.test(document.querySelector(\"[data-testid='stProgress']\")?.innerText || '')"
        " && document.querySelector(\"[data-testid='stVegaLiteChart'] canvas\") !== null",
        timeout=60_000,
    )
    wait_idle(page, 180_000)
    assert_clean(page)
    assert page.locator("[data-testid='stProgress']").count() == 0
    accuracy = float(metric_values(page)[0].rstrip("%"))
    assert accuracy >= 99.0  # reverse, length 8, on fresh data
    wait_drawn(page, 2)  # curves and pattern (Vega-Lite)
    wait_panels_drawn(page, 2)  # snapshot map and grid
    curves = pixels(charts(page)[0])
    assert (np.abs(curves.astype(int) - POST_NORM_BLUE).max(axis=-1) <= 2).sum() > 200  # the post-norm curves
    weights = snapshot_weights(page)  # the head picked first, at the last snapshot
    assert np.fliplr(weights).diagonal().mean() > 0.8
    # the slider's first snapshot: random weights, far from the anti-diagonal
    slider = page.get_by_role("slider", name="Training step")
    slider.focus()
    slider.press("Home")
    wait_idle(page)
    wait_drawn(page, 2)
    wait_panels_drawn(page, 2)
    early = snapshot_weights(page)
    assert np.fliplr(early).diagonal().mean() < 0.5
    assert_clean(page)


def test_stop_keeps_what_was_learned(page, app_url, wait_idle):
    open_train(page, app_url, wait_idle, 3000)
    page.get_by_role("button", name="Train", exact=True).click()
    page.wait_for_function(
        """() => {
            const m = /step (\\d+) of 3000/.exec(document.querySelector("[data-testid='stProgress']")?.innerText || '');
            return m && Number(m[1]) >= 20;
        }""",
        timeout=60_000,
    )
    stop_button(page).click()
    wait_idle(page, 60_000)
    alerts = " ".join(page.locator("[data-testid='stAlert']").all_inner_texts())
    stopped = int(re.search(r"stopped at step (\d+) of 3000", alerts).group(1))
    assert 20 <= stopped < 3000
    assert "keeps what it learned" in alerts
    wait_drawn(page, 1)  # the curves
    wait_panels_drawn(page, 2)  # the stopped model's maps
    assert len(metric_values(page)) == 1 and len(panels(page, "snapshot")) == 1
    assert stop_button(page).is_disabled()
    assert_clean(page)


def test_download_load_back_and_send_to_attention(page, app_url, wait_idle, tmp_path):
    open_train(page, app_url, wait_idle, 30)
    page.get_by_role("button", name="Train", exact=True).click()
    wait_idle(page, 120_000)
    trained_accuracy = metric_values(page)[0]
    paths = []
    for name in ("Download weights (.safetensors)", "Download settings (.json)"):
        with page.expect_download() as info:
            page.get_by_role("button", name=name).click()
        path = tmp_path / info.value.suggested_filename
        info.value.save_as(path)
        paths.append(path)
    assert [p.name for p in paths] == ["reverse8_post-norm.safetensors", "reverse8_post-norm.json"]

    # a fresh session (no trained model) loads the two files and shows the same model
    page.goto(app_url + "/train")
    wait_idle(page)
    assert metric_values(page) == []
    page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files([str(p) for p in paths])
    page.wait_for_function(
        "() => document.querySelectorAll(\"[data-testid='stFileChipName']\").length === 2", timeout=30_000
    )
    wait_idle(page)
    page.get_by_role("button", name="Load model").click()
    wait_idle(page)
    assert metric_values(page) == [trained_accuracy]
    assert page.get_by_text("Loaded from reverse8_post-norm.safetensors").count() == 1
    assert_clean(page)

    page.get_by_role("button", name="Use this model on the other pages").click()
    wait_idle(page)
    page.get_by_role("link", name="Open the Attention page").click()
    wait_idle(page)
    sidebar = page.locator("[data-testid='stSidebar']")
    assert "Trained model in use" in sidebar.inner_text()
    tokens = sidebar.get_by_role("textbox", name="Tokens").input_value()
    assert set(tokens.split()) <= set("ABCDEFGHIJ") and len(tokens.split()) == 8
    wait_panels_drawn(page, 3)  # the Attention page's map, grid and entropy
    trained = panel_pixels(panels(page, "map")[0])
    sidebar.get_by_role("button", name="Back to the random model").click()
    wait_idle(page)
    assert "Trained model in use" not in page.locator("[data-testid='stSidebar']").inner_text()
    wait_panels_drawn(page, 3)
    assert not np.array_equal(trained, panel_pixels(panels(page, "map")[0]))  # the random model's map is another
    assert_clean(page)
