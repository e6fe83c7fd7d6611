"""Removed heads in a real Chromium: a link with ablate=… opens the view without them, the Attention page's button
removes the head shown and the address bar gains it, and one click puts them all back."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from tests.browser_boards import panels, sheet_centres, tip_at, wait_panels_drawn
from tests.browser_layout import PROJECTOR, cut_off, cut_off_at

pytestmark = pytest.mark.browser


def removed_in_url(url: str) -> list[str]:
    """The heads the address bar's ablate parameter lists (none when it has none)."""
    values = parse_qs(urlsplit(url).query).get("ablate", [])
    return [head for value in values for head in value.split(",") if head]


def settled(page, wait_idle) -> None:
    wait_idle(page)
    wait_panels_drawn(page, 3)


def test_a_link_removes_heads_and_the_attention_page_removes_one_more(page, app_url, wait_idle):
    page.goto(f"{app_url}/?ablate=L1H3&layer=0&head=2")
    settled(page, wait_idle)
    main = page.locator("[data-testid='stMain']")
    assert main.get_by_text("Head L1H3 (output set to zero) removed").count() == 1
    sidebar = page.locator("[data-testid='stSidebar']")
    assert sidebar.get_by_role("textbox", name="Heads removed").input_value() == "L1H3"  # the URL's text, as typed
    titles = {tip_at(page, *centre)[""] for centre in sheet_centres(panels(page, "grid")[0]).values()}
    assert "L1 H3, removed: click to show it large above" in titles and "L0 H2: click to show it large above" in titles
    assert cut_off_at(page, PROJECTOR) == []  # "Put it back" whole beside the sentence

    main.get_by_role("button", name="Remove this head").click()
    settled(page, wait_idle)
    assert removed_in_url(page.url) == ["L0H2", "L1H3"]  # in layer order, as a teacher's link writes them
    assert main.get_by_text("Heads L0H2, L1H3 (output set to zero) removed").count() == 1
    assert main.get_by_role("button", name="Put it back").count() == 1
    assert cut_off(page) == []  # "Put them all back" too

    main.get_by_role("button", name="Put them all back").click()
    settled(page, wait_idle)
    assert removed_in_url(page.url) == [] and main.get_by_role("button", name="Remove this head").count() == 1
    assert page.locator("[data-testid='stException']").count() == 0 and not page.errors, page.errors


def test_the_list_in_the_sidebars_popover_removes_a_head_and_shows_the_typed_ones(page, app_url, wait_idle):
    page.goto(f"{app_url}/?ablate=L1H3")
    settled(page, wait_idle)
    sidebar = page.locator("[data-testid='stSidebar']")
    assert sidebar.locator("[data-testid='stMultiSelect']").count() == 0  # sent only when the popover opens
    sidebar.get_by_role("button", name="Pick heads from a list").click()
    picker = page.locator("[data-testid='stPopoverBody'] [data-testid='stMultiSelect']")
    picker.wait_for(timeout=30_000)
    assert picker.get_by_text("L1H3", exact=True).count() == 1  # the typed head, as a chip
    picker.locator("input").fill("L0H2")
    page.keyboard.press("Enter")
    page.wait_for_function("() => new URL(location.href).searchParams.get('ablate') === 'L0H2,L1H3'", timeout=30_000)
    page.keyboard.press("Escape")
    settled(page, wait_idle)
    assert sidebar.get_by_role("textbox", name="Heads removed").input_value() == "L0H2,L1H3"
    main = page.locator("[data-testid='stMain']")
    assert main.get_by_text("Heads L0H2, L1H3 (output set to zero) removed").count() == 1
    assert page.locator("[data-testid='stException']").count() == 0 and not page.errors, page.errors
