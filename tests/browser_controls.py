"""Driving the sidebar's controls in a real Chromium, the way a person does."""

from __future__ import annotations


def pick_in_sidebar(page, label: str, option: str) -> None:
    """Open the sidebar's select box `label` and pick `option`. The box is scrolled to the middle of the sidebar
    first: at the window's bottom edge its list has no room to open (the navigation has grown to seven pages)."""
    box = page.locator("[data-testid='stSidebar']").get_by_role("combobox", name=label)
    box.evaluate("element => element.scrollIntoView({block: 'center'})")
    box.click()
    page.get_by_role("option", name=option, exact=True).click()
