"""Sections below a page's first screen, built only when opened: an expander bound to the URL (?<key>=true opens it
in a link, so a shared link shows the same charts), drawn in a fragment so that opening one reruns only it.

A closed section computes and sends nothing: a page lays out its first chart on load, and each further chart when
the reader asks for it (Positional and Activations had 4 to 8 charts on load)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import TypeVar

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from views.widgets import note_link_query, write_bound_param

T = TypeVar("T")
FIRST_DEFAULTS = "_lazy_section_defaults"  # session_state: {section key: whether it opened by default, first time}


def opened_by(params: Iterable[str]) -> bool:
    """Whether the URL sets one of a section's own controls (`params`): a link made before the section folded away
    opens it, so it still shows what it showed."""
    return any(p in st.query_params for p in params)


def first_default(key: str, expanded: bool) -> bool:
    """`expanded` the first time this session builds section `key`, the same ever after. Streamlit makes a new
    expander (back at its default) when `expanded` changes, so a section open by default with no positional
    encoding would fold away when the sidebar picks one; held fixed, it stays as the reader left it. The label must
    not change either, for the same reason."""
    return st.session_state.setdefault(FIRST_DEFAULTS, {}).setdefault(key, expanded)


def say_open_in_url(key: str, shown: bool, held: bool, fresh: bool) -> None:
    """Write `key`=true or false in the address bar when the section is `shown` at the default this session holds
    (`held`, first_default), so Streamlit leaves the URL without it, but a fresh session would open that URL at
    another default (`fresh`): a section left closed while the sidebar turned positions off, or left open after its
    own control went back to its default, opened otherwise from a copied link."""
    if key not in st.query_params and shown == held != fresh:
        write_bound_param(key, str(shown).lower())


def is_open(label: str, key: str, expanded: bool = False, icon: str | None = None) -> DeltaGenerator | None:
    """The expander `key` (its URL parameter too), or None while it is closed."""
    box = st.expander(label, expanded=expanded, key=key, bind="query-params", on_change="rerun", icon=icon)
    return box if box.open else None


def _drawn(
    label: str, key: str, draw: Callable[[], T], expanded: bool, icon: str | None, fresh: Callable[[], bool]
) -> T | None:
    box = is_open(label, key, expanded, icon)
    drawn = None
    if box is not None:
        with box:
            drawn = draw()
    say_open_in_url(key, box is not None, expanded, fresh())  # after draw: its controls have settled the URL
    note_link_query()  # the page's "Download this view" links to the URL as this run leaves it
    return drawn


_in_fragment = st.fragment(_drawn)


def lazy_section(
    label: str,
    key: str,
    draw: Callable[[], T],
    params: Iterable[str] = (),
    expanded: bool = False,
    icon: str | None = None,
    fragment: bool = True,
) -> T | None:
    """An expander that runs `draw` inside it only while open. `params`: the URL parameters of the controls inside,
    any of which opens it (opened_by); `expanded`: open unless the URL says otherwise; both as the session first
    finds them (first_default). `label`: the same in every run. As a `fragment`, opening it,
    closing it or using its controls reruns it alone (and it returns None); otherwise the whole page reruns, and it
    returns what `draw` returns (None while closed), for a page whose other parts depend on it."""
    params = tuple(params)
    opened = first_default(key, expanded or opened_by(params))
    fresh = partial(_opens_fresh, expanded, params)  # read again in each run of a fragment: its controls change the URL
    if fragment:
        _in_fragment(label, key, draw, opened, icon, fresh)
        return None
    return _drawn(label, key, draw, opened, icon, fresh)


def _opens_fresh(expanded: bool, params: tuple[str, ...]) -> bool:
    """Whether a fresh session would open the section at the URL as it is now, unless the URL says otherwise."""
    return expanded or opened_by(params)
