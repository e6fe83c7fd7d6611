"""bench.serve.wait_ready: a bench waits for a page to be drawn, and gives up at once with the page's own exception
when the page raised, instead of waiting out its timeout (a first load's is ten minutes)."""

from __future__ import annotations

import pytest

from bench.serve import wait_ready

pytestmark = pytest.mark.browser

APP = """import streamlit as st

st.title("A page to time")
if st.query_params.get("fail"):
    raise ValueError("broken on purpose")
"""
TITLE_SHOWN = "() => !!document.querySelector('h1')"


def test_a_drawn_page_is_waited_for_and_a_page_that_raised_is_refused_with_its_exception(page, served_page):
    with served_page(APP) as base:
        page.goto(base)
        wait_ready(page, TITLE_SHOWN, timeout_ms=60_000)
        assert page.get_by_role("heading", name="A page to time").is_visible()
        page.goto(f"{base}/?fail=1")
        # "() => false" never holds: only the exception the page shows can end this wait before its timeout, and a
        # timeout would raise Playwright's TimeoutError, not this RuntimeError
        with pytest.raises(RuntimeError, match="broken on purpose"):
            wait_ready(page, "() => false", timeout_ms=60_000)
