"""A page opened by its link connects at once through app.py (views/page_base_url.py), at the server's root and under
a base path, and still works through `streamlit run dashboard.py`, which probes the page's own path first."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from bench.serve import APP, serving

pytestmark = pytest.mark.browser

QUERY = "?n_heads=2&tokens=the%20cat%20sat&x=1&x=2"  # x twice: a repeated key is kept whole


def open_recording(page, url: str, wait_idle) -> list[str]:
    """Open `url`, wait until the page is drawn; the paths of the server's routes (_stcore/...) the page asked for."""
    asked: list[str] = []
    page.on("request", lambda r: asked.append(urlsplit(r.url).path) if "/_stcore/" in r.url else None)
    page.on("websocket", lambda ws: asked.append(urlsplit(ws.url).path))
    page.goto(url)
    wait_idle(page)
    return asked


def test_a_page_link_connects_at_the_root_without_probing_its_own_path(page, app_url, wait_idle):
    asked = open_recording(page, f"{app_url}/positional{QUERY}", wait_idle)
    assert "/_stcore/health" in asked and "/_stcore/stream" in asked
    assert not [path for path in asked if path.startswith("/positional/")]
    assert page.get_by_role("heading", name="Positional encodings").is_visible()
    assert not page.errors
    page.get_by_role("link", name="Activations").click()  # the sidebar's navigation still names pages correctly
    page.wait_for_url(lambda url: urlsplit(url).path == "/activations", timeout=30_000)
    wait_idle(page)
    assert page.get_by_role("heading", name="Activations", exact=True).is_visible()
    assert not [path for path in asked if path.startswith(("/positional/", "/activations/"))]


def opens_the_first_page_at_the_root(page, base: str, wait_idle, link: str = "attention") -> None:
    """Every page but Attention lives at its name; a teacher who types /attention gets the page at the root, the query
    kept, not Streamlit's "Page not found" dialog over it (dashboard.py's FIRST_PAGE_BY_NAME)."""
    page.goto(f"{base}/{link}{QUERY}")
    wait_idle(page)
    assert urlsplit(page.url).path == urlsplit(f"{base}/").path
    assert parse_qs(urlsplit(page.url).query) == parse_qs(QUERY[1:])
    # The switch to the root reruns the script: wait_idle can see the first run end before the rerun starts, and on
    # a busy machine (three workers on two cores) the heading was not drawn yet when read at once
    page.get_by_role("heading", name="Attention", exact=True).wait_for(state="visible", timeout=30_000)
    wait_idle(page)
    assert page.locator("[data-testid='stDialog']").count() == 0
    assert page.locator("[data-testid='stSidebarNavLink'][aria-current='page']").inner_text() == "Attention"
    assert page.get_by_role("spinbutton", name="Heads", exact=True).input_value() == "2"


def test_a_link_to_the_first_page_by_its_name_opens_it_at_the_root(page, app_url, wait_idle):
    opens_the_first_page_at_the_root(page, app_url, wait_idle)
    assert not page.errors


def test_under_a_base_path_pages_connect_under_it(page, wait_idle):
    with serving(APP, base_path="explorer") as base:
        assert urlsplit(base).path == "/explorer"
        asked = open_recording(page, f"{base}/positional{QUERY}", wait_idle)
        assert page.get_by_role("heading", name="Positional encodings").is_visible()
        assert "/explorer/_stcore/stream" in asked
        assert not [path for path in asked if path.startswith(("/positional/", "/explorer/positional/", "/_stcore"))]
        page.goto(f"{base}/{QUERY}")  # the first page: Streamlit's own guess, left alone
        wait_idle(page)
        assert page.get_by_role("heading", name="Attention", exact=True).is_visible()
        opens_the_first_page_at_the_root(page, base, wait_idle, link="attention/")  # under the base path, a slash on
        assert not page.errors  # inside: once the server stops, the open page logs that it cannot reach it


def test_streamlits_own_server_serves_the_pages_too(page, wait_idle):
    """`streamlit run dashboard.py`, as a learner starts it: the same page, after the probe app.py spares."""
    with serving("dashboard.py") as base:
        asked = open_recording(page, f"{base}/positional{QUERY}", wait_idle)
        assert page.get_by_role("heading", name="Positional encodings").is_visible()
        assert not page.errors  # inside: once the server stops, the open page logs that it cannot reach it
        opens_the_first_page_at_the_root(page, base, wait_idle)
        assert not page.errors
    assert "/positional/_stcore/health" in asked  # Streamlit issue #7074: why app.py exists
    assert "/_stcore/stream" in asked
