"""A teacher's link reproduces what the teacher sees: what a page draws from the view in the URL on a student's first
run, and what the address bar and the downloads hold after the teacher's clicks."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.drawn import app_boards

pytestmark = pytest.mark.slow

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
SENTENCE = "The teacher explains why the cat sat down."


def opened(query: dict[str, str], page: str | None = None) -> AppTest:
    """A student's first run of the link `query` (on `page`, e.g. "views/compare.py")."""
    at = AppTest.from_file(APP, default_timeout=300)
    if page is not None:
        at.switch_page(page)
    at.query_params.update(query)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def roles_frame(at: AppTest) -> list[int] | None:
    """The red frame of the head-roles board: [layer, head, 1, 1], or None."""
    [panel] = app_boards(at)["roles"]["panels"]
    return panel.get("frame")


def test_a_link_to_a_head_frames_it_on_the_head_roles_board(minilm_model):
    # The teacher's board framed L2 H4, the head shown below it; a student's first run had no frame at all, since the
    # board is drawn above the selectors and read their state only.
    at = opened({"model": "minilm-l6", "tokens": SENTENCE, "layer": "2", "head": "4"})
    assert roles_frame(at) == [2, 4, 1, 1]
    average = {"model": "minilm-l6", "tokens": SENTENCE, "layer": "2", "head": "average of heads"}
    assert roles_frame(opened(average)) is None
