"""Every query parameter's checking, and the sentences that say what happened to a value the app could not use.

Streamlit silently drops a bound URL value its widget cannot take (and strips it from the address bar), so the
app looks at the URL before the widgets exist. Two ways of saying so: a warning for this run (warn_junk_url), or a
note kept in session_state until the user changes that control (note_ignored_url_value, shown by show_url_notes),
for values the widget strips. The sidebar and Compare's B controls also fix near misses ("causal padding" is
"causal+padding"), and guard_number_urls_once keeps an overflowing number from crashing Streamlit's seeding.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import streamlit as st
from streamlit.elements.widgets import number_input

from explorer.compare import B_FIELDS, B_PREFIX
from explorer.config import CHOICES, INT_LIMITS, NORM_FORMULAS, ModelConfig
from views.fields import MODEL_FIELDS
from views.state import CONFIGURED
from views.widgets import clamp_view, code_text

NOTES_KEY = "_url_notes"  # the sidebar's notes: {parameter: (sentence, value used)}
MAX_URL_INT = 2**53 - 1  # a number input without bounds takes a URL value up to JavaScript's largest exact integer
URL_BOOLEAN = ["true", "false"]  # what a toggle takes from the URL, in any case
DEFAULTS = ModelConfig()


# --- Reading one value.


def url_int(raw: str) -> int | None:
    """The whole number a Streamlit number input makes of a URL value that is a finite number but not a whole one:
    int(float(raw)), so "2.7" is read as 2. None when raw is no number at all."""
    try:
        number = float(raw)
    except ValueError:
        return None
    return int(number) if math.isfinite(number) else None


def check_url_value(name: str, raw: str) -> tuple[Any, str | None]:
    """(value a model setting's control would take, None) for a good URL value, or (None, why it is unusable)."""
    if name in CHOICES:
        options = CHOICES[name]
        if raw in options:
            return raw, None
        fixed = raw.strip().lower().replace(" ", "+")  # "causal+padding" typed in a URL arrives as "causal padding"
        if fixed in options:
            return fixed, None
        if name == "norm":  # the placements differ by a formula: say each one
            return None, "it is not one of " + ", ".join(f"{n} ({formula})" for n, formula in NORM_FORMULAS.items())
        return None, "it is not one of " + ", ".join(options)
    if name in INT_LIMITS:
        try:
            value = int(raw.strip())
        except ValueError:
            return None, "it is not a whole number"
        low, high = INT_LIMITS[name]
        if not low <= value <= high:
            return None, f"it is outside {low} to {high}"
        return value, None
    return raw, None


def check_b_value(name: str, raw: str) -> tuple[Any, str | None]:
    """(value B's control would take, None) for a good b_<name> URL value, or (None, why it is unusable)."""
    if name in CHOICES or name in INT_LIMITS:
        return check_url_value(name, raw)
    return None, "B's controls on the Compare page do not include it"


def one_of(options: Iterable) -> Callable[[str], bool]:
    """Whether a URL value names one of the options (as the widget shows them)."""
    shown = {str(o) for o in options}
    return shown.__contains__


def is_whole_number(raw: str) -> bool:
    """Whether a URL value is a whole number, such as "3" or "-1"."""
    return raw.strip().lstrip("-").isdigit()


def whole_number_in(low: int, high: int) -> Callable[[str], bool]:
    """Whether a URL value is a whole number from low to high ("150" or "150.0"), as a number input takes it."""

    def accepted(raw: str) -> bool:
        try:
            number = float(raw)
        except ValueError:
            return False
        return number.is_integer() and low <= number <= high

    return accepted


def is_switch(raw: str) -> bool:
    """Whether a URL value is one a checkbox or toggle takes: true or false, in any case."""
    return raw.lower() in URL_BOOLEAN


# --- The sentences.


def ignored_url_value(key: str, raw: str, why: str) -> str:
    """The sentence that says a URL value was ignored, and why (the caller adds what is used instead)."""
    return f"URL parameter `{key}={code_text(raw)}` was ignored: {why}"


def not_whole_note(key: str, raw: str, read_as: int) -> str:
    """The sentence for a URL value that is a number but not a whole one, which a number input reads as `read_as`
    (url_int)."""
    return f"URL parameter `{key}={code_text(raw)}` is not a whole number: using {read_as}."


# --- Saying so: for this run, or kept until the control changes.


def warn_junk_url(allowed: dict[str, list[str] | None]) -> None:
    """Streamlit silently drops a URL value its widget cannot take: say so, for this run. {key: the values its widget
    takes, as the URL gives them; None for a whole number}."""
    for key, options in allowed.items():
        if key not in st.query_params:
            continue
        raw = st.query_params[key]
        if options is None:
            read_as = url_int(raw)
            if read_as is not None and abs(read_as) <= MAX_URL_INT:
                if read_as != float(raw):  # "12.7": Streamlit takes 12 ("12.0" is 12, nothing to say)
                    st.warning(not_whole_note(key, raw, read_as), icon=":material/link_off:")
                continue
            why = "it is not a whole number" if read_as is None else "it is too large"
        elif raw in options or (options == URL_BOOLEAN and raw.lower() in URL_BOOLEAN):
            continue
        else:
            why = "it is not one of " + ", ".join(options[:12]) + ("…" if len(options) > 12 else "")
        st.warning(f"{ignored_url_value(key, raw, why)}; using the default.", icon=":material/link_off:")


def note_ignored_url_value(notes_key: str, key: str, accepted: Callable[[str], bool], why: str) -> None:
    """Before the widget `key` exists: keep a note when the URL gives it a value it cannot take. Streamlit drops
    such a value silently and strips it from the URL, so the note says what happened until the user changes that
    widget (show_url_notes)."""
    notes = st.session_state.setdefault(notes_key, {})
    if key in st.query_params and not accepted(st.query_params[key]):
        notes[key] = (ignored_url_value(key, st.query_params[key], why), None)
    elif key in st.query_params:  # valid again (a sidebar change brought the option back): the note is stale
        notes.pop(key, None)


def show_url_notes(notes_key: str) -> None:
    """Show each kept note, {widget key: (message, value)}, until the user changes the widget it is about: the note
    goes once the widget no longer holds `value`. A note with value None (note_ignored_url_value's) takes the value
    its widget first shows, so call this once the widgets exist, into a container placed above them."""
    notes: dict[str, tuple[str, object]] = st.session_state.get(notes_key, {})
    for key, (message, used) in list(notes.items()):
        current = st.session_state.get(key)
        if used is None:
            notes[key] = (message, current)
        elif current != used:
            del notes[key]
            continue
        st.warning(message, icon=":material/link_off:")


# --- Each part of the app's parameters.


def screen_sidebar_params(models: list[str]) -> None:
    """Before any widget exists: record a note (NOTES_KEY) for each junk model setting in the URL, and fix near
    misses. `models`: the Model box's options, the configured model first."""
    notes: dict[str, tuple[str, Any]] = st.session_state.setdefault(NOTES_KEY, {})
    model = st.query_params.get("model")
    if model is not None and model not in models:
        installed = ", ".join(f"`{name}`" for name in models[1:]) or "none"
        notes["model"] = (
            f"The link asks for the model `{model[:80]}`, which this server does not have (installed: {installed}). "
            "Showing the configured model instead.",
            CONFIGURED,
        )
    for name in (f.name for f in MODEL_FIELDS):
        if name not in st.query_params:
            continue
        raw = st.query_params[name]
        value, problem = check_url_value(name, raw)
        if problem is None:
            if name in CHOICES and value != raw:  # a near miss such as "causal padding": take the option meant
                st.session_state[name] = value
            continue
        default = getattr(DEFAULTS, name)
        read_as = url_int(raw) if name in INT_LIMITS else None
        if read_as is not None and INT_LIMITS[name][0] <= read_as <= INT_LIMITS[name][1]:
            if read_as != float(raw):  # "2.7": Streamlit takes 2 ("128.0" is 128, nothing to say)
                notes[name] = (not_whole_note(name, raw, read_as), read_as)
            continue
        message = f"{ignored_url_value(name, raw, problem)}. Using {name} = `{default}` (the default) instead."
        notes[name] = (message, default)


def screen_b_params(defaults: dict[str, Any], notes_key: str, fixed_key: str) -> None:
    """Note (into `notes_key`) each junk b_<field> in the URL (Streamlit drops it silently) and fix near misses,
    once (`fixed_key` remembers which). `defaults`: {b_<field>: the default of B's control}."""
    notes: dict[str, tuple[str, Any]] = st.session_state.setdefault(notes_key, {})
    fixed: set[tuple[str, str]] = st.session_state.setdefault(fixed_key, set())
    for field in B_FIELDS:
        key = B_PREFIX + field
        if key not in st.query_params:
            continue
        raw = st.query_params[key]
        value, problem = check_b_value(field, raw)
        if problem is None:
            if isinstance(value, str) and value != raw and (key, raw) not in fixed:
                st.session_state[key] = value
                fixed.add((key, raw))
            continue
        notes[key] = (
            f"{ignored_url_value(key, raw, problem)}. B uses {field} = `{defaults[key]}` instead.",
            defaults[key],
        )


def b_url_value(field: str) -> Any | None:
    """The value B's control `field` takes from the URL, or None when the URL has none it can take."""
    key = B_PREFIX + field
    if key not in st.query_params:
        return None
    value, problem = check_b_value(field, st.query_params[key])
    return value if problem is None else None


def screen_view_params(notes_key: str, kinds: list[str], layers: list[int], heads: list) -> None:
    """Attention's view selectors (kind, layer, head): a note for a value the model has no such thing for. A whole
    number out of range is not junk: the page shows the nearest layer or head, and says so (clamp_view)."""
    view = (("kind", kinds, "kind of attention"), ("layer", layers, "layer"), ("head", heads, "head"))
    for key, options, what in view:
        why = f"the model has no such {what} (after a change in the sidebar, perhaps); showing the first instead."
        listed = one_of(options)
        accepted = listed if key == "kind" else (lambda raw, listed=listed: listed(raw) or is_whole_number(raw))
        note_ignored_url_value(notes_key, key, accepted, why)


def note_view_param(notes_key: str, key: str, options: list) -> None:
    """Compare's view selector `key` (kind, layer or head of either model): a whole number beyond the options shows
    the nearest (clamp_view); any other value the selector cannot take gets a note."""
    if clamp_view(key, options, key):
        return
    why = f"neither model has such a {key}; showing the first."
    note_ignored_url_value(notes_key, key, one_of(options), why)


def screen_train_params(notes_key: str, checks: Mapping[str, Callable[[str], bool]]) -> None:
    """Before Train's settings exist: a note for each train_* URL value its control cannot take (Streamlit would drop
    it without a word). `checks`: URL parameter -> whether its control takes a value; train_both, the checkbox of
    older links, is screened here too."""
    why = "not a value this setting can take; using its default."
    for key, accepted in {**checks, "train_both": is_switch}.items():
        note_ignored_url_value(notes_key, key, accepted, why)


# --- A guard for Streamlit 1.67's bound number inputs: a URL number too large for an int must not crash the page.

_GUARDED = "_explorer_guards_overflow"


def guard_number_urls_once() -> None:
    """Make every number_input's URL seeding treat an overflowing number as unusable (idempotent).

    Streamlit seeds a number_input bound to the URL through NumberInputSerde.deserialize, which calls int() on the
    parsed float. For "1e400" that float is infinite and int() raises OverflowError, which Streamlit's seeding does
    not catch (it catches ValueError, TypeError and IndexError), so every page showed a traceback. Treated here like
    any other unusable URL value: the widget takes its default and Streamlit drops the parameter from the URL;
    screen_sidebar_params says so in a sentence."""
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
