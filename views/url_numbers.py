"""A guard for Streamlit 1.67's bound number inputs: a URL number too large for an int must not crash the page.

Streamlit seeds a number_input bound to the URL through NumberInputSerde.deserialize, which calls int() on the
parsed float. For "1e400" that float is infinite and int() raises OverflowError, which Streamlit's seeding does
not catch (it catches ValueError, TypeError and IndexError), so every page showed a traceback. Treated here like
any other unusable URL value: the widget takes its default and Streamlit drops the parameter from the URL;
dashboard.screen_query_params says so in a sentence.
"""

from __future__ import annotations

import functools
from typing import Any

from streamlit.elements.widgets import number_input

_GUARDED = "_explorer_guards_overflow"


def guard_number_urls_once() -> None:
    """Make every number_input's URL seeding treat an overflowing number as unusable (idempotent)."""
    serde = number_input.NumberInputSerde
    if getattr(serde.deserialize, _GUARDED, False):
        return
    original = serde.deserialize

    @functools.wraps(original)
    def deserialize(self: Any, ui_value: Any) -> Any:
        try:
            return original(self, ui_value)
        except OverflowError:  # int(inf): a number beyond any limit is not a value this widget can take
            return self.value

    setattr(deserialize, _GUARDED, True)
    serde.deserialize = deserialize
