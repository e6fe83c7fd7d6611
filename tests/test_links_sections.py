"""A copied link opens Positional's and Activations' sections as the page that made it shows them
(views/lazy_sections.py), whichever way the session came to its view.

A session holds each section's default from its first run, so that a section stays as the reader left it; a fresh
session computes the default from the link (open with no positional encoding, open when the link sets one of the
section's controls). Where the two differ, the URL has to say which.
"""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
ORDER = "**Why position matters"  # the reordering demonstration, open by default with no positional encoding
HISTOGRAM = "**Distribution of values"


def opened(at: AppTest, label_start: str) -> bool:
    """Whether the section whose label starts with `label_start` is open (its content built)."""
    (section,) = [e for e in at.get("expander") if e.label.startswith(label_start)]
    assert section.proto.expanded == bool(section.children), "a section built whether or not it is open"
    return section.proto.expanded


def page(path: str, query: dict[str, str]) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(path)
    at.query_params.update(query)
    at.run()
    assert not at.exception, [e.value[:300] for e in at.exception]
    return at


def link(at: AppTest, changed: dict[str, str | None]) -> dict[str, str]:
    """The address bar after the user changed controls: what the browser wrote for them (`changed`, None for a
    control back at its default, which the browser drops), with what the server wrote (at.query_params)."""
    query = {**at.query_params, **changed}
    return {key: value for key, value in query.items() if value is not None}


def test_a_section_left_closed_when_positions_went_off_stays_closed_in_the_link():
    at = page("views/positional.py", {"tokens": "a b c"})
    at.selectbox(key="positional").set_value("none").run()
    assert not opened(at, ORDER)  # as the reader left it
    shared = link(at, {"positional": "none"})
    assert not opened(page("views/positional.py", shared), ORDER), shared


def test_a_section_open_since_positions_were_off_stays_open_in_the_link():
    at = page("views/positional.py", {"tokens": "a b c", "positional": "none"})
    assert opened(at, ORDER)
    at.selectbox(key="positional").set_value("sinusoidal").run()
    assert opened(at, ORDER)
    shared = link(at, {"positional": None})
    assert opened(page("views/positional.py", shared), ORDER), shared


def test_a_section_a_link_opened_stays_open_when_its_control_goes_back_to_its_default():
    at = page("views/activations.py", {"tokens": "a b c", "act_log": "true"})  # a link that set the histogram's axis
    assert opened(at, HISTOGRAM)
    at.toggle(key="act_log").set_value(False).run()
    assert opened(at, HISTOGRAM)
    shared = link(at, {"act_log": None})
    assert opened(page("views/activations.py", shared), HISTOGRAM), shared


def test_a_section_at_the_default_a_fresh_session_gives_adds_nothing_to_the_link():
    at = page("views/positional.py", {"tokens": "a b c", "positional": "none"})
    at.number_input(key="seed").set_value(3).run()
    assert opened(at, ORDER)
    assert not any(key.startswith("pos_open_") for key in at.query_params), dict(at.query_params)
