"""views.widgets.static_table in Chromium: a cell shows its text as written, where st.table reads it as Markdown (a
vocabulary piece "-" is an empty list, "#" a heading, "---" a rule)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.serve import wait_ready
from tests.browser_layout import table_rows

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
# Pieces of a real vocabulary (SmolLM2 holds "-", "#", "*", "+", "---", "***", ">", "==", "**", "$", "`", "\\"), and
# text that Markdown would style or drop its marks from.
PIECES = ["-", "#", "*", "+", "---", "***", ">", "1.", "==", "**b**", "_a_", "a_b_c", "$x$", "`x`", "[x](y)", "<b>"]
PIECES += ["\\", "\\n", "#1", "- x"]
APP = f"""import sys

sys.path.insert(0, {str(ROOT)!r})
import pandas as pd
import streamlit as st

from views.widgets import static_table

st.title("Pieces")
static_table(pd.DataFrame({{"piece": {PIECES!r}, "n": range({len(PIECES)})}}), labels={{"piece": "piece (as written)"}})
"""
DRAWN = "() => !!document.querySelector(\"[data-testid='stTable'] td\")"


def test_every_piece_reads_as_written(page, served_page):
    with served_page(APP) as base:
        page.goto(base)
        wait_ready(page, DRAWN, timeout_ms=60_000)
        table = page.locator("[data-testid='stTable']")
        assert table.locator("th").all_inner_texts() == ["piece (as written)", "n"]
        assert table_rows(table) == [[piece, str(n)] for n, piece in enumerate(PIECES)]
