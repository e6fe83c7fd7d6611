"""views/query_params.py: what each kind of control takes from the URL, and the sentences when it takes nothing."""

from __future__ import annotations

import pytest

from views.query_params import (
    ignored_url_value,
    is_switch,
    is_whole_number,
    not_whole_note,
    one_of,
    url_int,
    whole_number_in,
)


def test_one_of_reads_options_as_the_widget_shows_them():
    batch = one_of([8, 16, 32])
    assert batch("16") and not batch("16.0") and not batch("x")
    assert one_of(["0.001", "0.003"])("0.003") and not one_of([])("")


@pytest.mark.parametrize(
    ("raw", "whole", "from_10_to_20"),
    [("15", True, True), ("-1", True, False), ("15.0", False, True), ("15.5", False, False), ("1e1", False, True),
     ("abc", False, False), ("", False, False), ("nan", False, False), ("inf", False, False), ("25", True, False)],
)  # fmt: skip
def test_whole_numbers(raw, whole, from_10_to_20):
    assert is_whole_number(raw) == whole  # a selector's option, as typed in a link
    assert whole_number_in(10, 20)(raw) == from_10_to_20  # a number input's value, "15.0" included


def test_a_switch_takes_true_or_false_in_any_case():
    assert all(is_switch(raw) for raw in ("true", "FALSE", "True"))
    assert not any(is_switch(raw) for raw in ("1", "yes", "", "truee"))


def test_url_int_reads_as_a_number_input_does():
    assert (url_int("2.7"), url_int("-2.7"), url_int("128.0"), url_int("1e3")) == (2, -2, 128, 1000)
    assert url_int("abc") is None and url_int("inf") is None and url_int("nan") is None


def test_the_sentences_quote_the_value_safely():
    assert ignored_url_value("seed", "a`b\nc", "why") == "URL parameter `seed=a'b c` was ignored: why"
    assert ignored_url_value("tokens", "x" * 60, "why").startswith(f"URL parameter `tokens={'x' * 40}…`")
    assert not_whole_note("n_layers", "2.7", 2) == "URL parameter `n_layers=2.7` is not a whole number: using 2."
