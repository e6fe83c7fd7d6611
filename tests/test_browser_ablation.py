"""Removed heads in a real Chromium: a link with ablate=… opens the view without them, the Attention page's button
removes the head shown and the address bar gains it, and one click puts them all back."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from tests.browser_boards import panels, sheet_centres, tip_at, wait_panels_drawn

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
    assert page.locator(".st-key-ablate").is_hidden()  # the bound text: the multiselect shows the heads instead
    sidebar = page.locator("[data-testid='stSidebar']")
    assert sidebar.get_by_text("L1H3", exact=True).count() == 1  # the multiselect's chip
    titles = {tip_at(page, *centre)[""] for centre in sheet_centres(panels(page, "grid")[0]).values()}
    assert "L1 H3, removed: click to show it large above" in titles and "L0 H2: click to show it large above" in titles

    main.get_by_role("button", name="Remove this head").click()
    settled(page, wait_idle)
    assert removed_in_url(page.url) == ["L0H2", "L1H3"]  # in layer order, as a teacher's link writes them
    assert main.get_by_text("Heads L0H2, L1H3 (output set to zero) removed").count() == 1
    assert main.get_by_role("button", name="Put it back").count() == 1

    main.get_by_role("button", name="Put them all back").click()
    settled(page, wait_idle)
    assert removed_in_url(page.url) == [] and main.get_by_role("button", name="Remove this head").count() == 1
    assert page.locator("[data-testid='stException']").count() == 0 and not page.errors, page.errors
