"""A table a teacher shows is in the link: the switches that show a page's tables, and Anatomy's per-module list,
are bound to the URL like every other control (they were not, so a link opened without them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")


def page(path: str, query: dict[str, str]) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(path)
    at.query_params.update({"tokens": "a b c", **query})
    at.run()
    assert not at.exception, [e.value[:300] for e in at.exception]
    return at


@pytest.mark.parametrize(
    ("path", "key"),
    [
        ("views/positional.py", "pos_typed_table"),
        ("views/activations.py", "act_stats_table"),
        ("views/activations.py", "act_heads_table"),  # its section opens for it, as for its other controls
        ("views/activations.py", "act_grads_table"),
        ("views/attention.py", "entropy_table"),
        ("views/compare.py", "ranking_table"),
    ],
)
def test_a_link_shows_the_table_its_switch_showed(path, key):
    closed = page(path, {})
    shown = page(path, {key: "true"})
    assert shown.toggle(key=key).value, key
    assert len(shown.dataframe) == len(closed.dataframe) + 1  # that one table more
    assert not shown.warning


def test_a_link_opens_anatomys_list_of_modules():
    def expanded(at: AppTest) -> bool:
        (box,) = [e for e in at.get("expander") if e.label.startswith("Parameters of each")]
        return box.proto.expanded

    assert not expanded(page("views/anatomy.py", {}))
    assert expanded(page("views/anatomy.py", {"ana_open_params": "true"}))
