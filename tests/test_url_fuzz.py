"""Any string in any URL parameter, on any page: a sentence and a working page, never a traceback.

The parameters are not listed by hand: every widget bound to the URL on a page is found from the page itself (its
protobuf names the query parameter), so a control added later is fuzzed too. Hypothesis generates the values:
numbers too large for a float, NaN, infinities, negatives, non-ASCII digits, empty strings, control characters,
thousands of characters, and a parameter repeated.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from explorer.config import CHOICES, INT_LIMITS, ModelConfig
from views.ablation_controls import read_heads
from views.query_params import check_url_value, url_int

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
PAGES = ["views/attention.py", "views/mixing.py", "views/heads.py", "views/compare.py", "views/positional.py",
         "views/activations.py", "views/anatomy.py", "views/train.py"]  # fmt: skip
OPEN_SECTIONS = [f"pos_open_{s}" for s in ("table", "wavelengths", "similarity", "offset", "order")] + [
    f"act_open_{s}" for s in ("norms", "tokens", "histogram", "zeros", "heads", "gradients")
]
HOSTILE = [
    "1e400", "-1e400", "1e-400", "nan", "NaN", "inf", "-inf", "Infinity", "", " ", "0", "-1", "-0", "2.5", "1e3",
    "9" * 400, "0x10", "٣", "𝟙", "Ⅻ", "\x00", "\n", "🙂", "a" * 5000, "%", "&", "?", "#", "causal+padding",
    "encoder-decoder", "true", "false", "None", "[PAD]", "<script>alert(1)</script>", "'; DROP TABLE x; --",
    "L0H1", "L1H3,L0H0", "l0h2, L1H1", "L0H0,L0H0", "L99H0", "L0H1,,x", "LH", "mean", "zero", "heads",
]  # fmt: skip
hostile = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(max_size=40),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


def bound_keys(at: AppTest) -> set[str]:
    """The URL parameter of every widget on the page that is bound to the URL."""
    keys = set()
    for kind in ("selectbox", "radio", "number_input", "text_input", "toggle", "slider", "select_slider", "expander"):
        for widget in at.get(kind):
            key = getattr(widget.proto, "query_param_key", "")
            if key:
                keys.add(key)
    return keys


@pytest.fixture(scope="module")
def page_keys() -> dict[str, list[str]]:
    """Each page's URL parameters, read from the page as a fresh session draws it (Compare in both of its modes)."""
    found = {}
    for page in PAGES:
        keys: set[str] = set()
        # The last link also removes heads, in the sidebar and in Compare's B, so that their mode controls show.
        many = {
            "zoom": "true",
            "tokens": " ".join(["w"] * 130),
            "ablate": "L0H1",
            "compare": "heads",
            "b_ablate": "L0H0",
            **dict.fromkeys(OPEN_SECTIONS, "true"),  # Positional's and Activations' sections, and the controls in them
        }
        for query in ({}, {"compare": "input"}, many):
            at = AppTest.from_file(APP, default_timeout=120)
            at.switch_page(page)
            at.query_params.update(query)
            at.run()
            keys |= bound_keys(at)
        found[page] = sorted(keys | {"model"})
    return found


def test_the_pages_bind_the_parameters_a_link_carries(page_keys):
    sidebar = {"tokens", "arch", "norm", "n_layers", "n_heads", "d_model", "d_ff", "positional", "mask", "seed"}
    sidebar |= {"ablate", "ablate_with"}
    for page in PAGES:
        assert sidebar <= set(page_keys[page]), page  # every page has the sidebar
    assert {"layer", "head", "stretch", "zoom"} <= set(page_keys["views/attention.py"])
    assert {"compare", "b_norm", "b_tokens", "b_ablate", "b_ablate_with"} <= set(page_keys["views/compare.py"])
    assert {*OPEN_SECTIONS[:5], "stretch", "pos_order", "pos_offset_layer"} <= set(page_keys["views/positional.py"])
    assert {*OPEN_SECTIONS[5:], "act_layer", "act_point", "act_energy"} <= set(page_keys["views/activations.py"])


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted({*CHOICES, *INT_LIMITS})), raw=hostile)
def test_the_sidebars_url_check_takes_any_string(name, raw):
    value, problem = check_url_value(name, raw)
    assert (problem is None) == (value is not None)  # a value to use, or a reason not to: never both, never neither
    if problem is None and name in INT_LIMITS:
        low, high = INT_LIMITS[name]
        assert isinstance(value, int) and low <= value <= high
    if problem is None and name in CHOICES:
        assert value in CHOICES[name]
    if problem is not None:
        assert isinstance(problem, str) and problem
    read = url_int(raw)
    assert read is None or isinstance(read, int)


@settings(max_examples=300, deadline=None)
@given(
    raw=st.one_of(
        hostile,
        st.lists(st.from_regex(r"[lL]\d{1,3}\s?[hH]\d{1,3}|\w{0,4}", fullmatch=True), max_size=6).map(",".join),
    ),
    n_layers=st.integers(1, 30),
    n_heads=st.integers(1, 16),
)
def test_the_ablate_url_check_takes_any_string(raw, n_layers, n_heads):
    kept, ignored = read_heads(raw, n_layers, n_heads)
    assert list(kept) == sorted(set(kept))  # sorted, once each
    assert all(0 <= layer < n_layers and 0 <= head < n_heads for layer, head in kept)
    assert len(kept) + len(ignored) == sum(1 for part in raw.split(",") if part.strip())  # each part kept or named
    assert all(isinstance(why, str) and why for why in ignored)


@pytest.mark.slow
# 50 random links a run (about half a minute with eight pages): each CI run draws new ones, so the links tried add
# up run after run.
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_strings_in_any_parameters_give_a_page_not_a_traceback(page_keys, data):
    page = data.draw(st.sampled_from(PAGES), label="page")
    names = data.draw(st.lists(st.sampled_from(page_keys[page]), min_size=1, max_size=4, unique=True), label="names")
    query: dict[str, str | list[str]] = {}
    for name in names:
        value = data.draw(hostile, label=name)
        repeated = data.draw(st.booleans(), label=f"{name} repeated")
        query[name] = [value, data.draw(hostile)] if repeated else value
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(page)
    at.query_params.update(query)
    at.run()
    assert not at.exception, (page, query, [e.value[:300] for e in at.exception])
    assert at.title, (page, query)  # the page drew itself, with its title


@pytest.mark.parametrize("raw", ["1e400", "-1e400", "nan", "inf"])
def test_a_number_too_large_for_a_float_gets_a_sentence_on_every_numeric_control(raw):
    numeric = ["n_layers", "n_heads", "d_model", "d_ff", "seed"]  # the sidebar's number inputs
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({name: raw for name in numeric})
    at.run()
    assert not at.exception, [e.value[:300] for e in at.exception]
    for name in numeric:
        assert at.number_input(key=name).value == getattr(ModelConfig(), name)  # the default, as the note says
        assert any(f"`{name}={raw}`" in w.value for w in at.warning), name  # named, with the value
