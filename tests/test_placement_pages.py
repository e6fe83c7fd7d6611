"""Every page with res-post-norm and peri-norm, through streamlit.testing: no traceback, and what the pages say about
the placement is the placement's (its formula, its norms), on every architecture that has cross-attention too."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from explorer.config import NORM_FORMULAS

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
# Each page once with a new placement (Attention and Activations, which say most about the norms, with both): what
# differs between the placements is in the engine and the sentences, which their own tests check.
PAGES = [
    ("views/attention.py", "res-post"),
    ("views/attention.py", "peri"),
    ("views/mixing.py", "peri"),
    ("views/positional.py", "res-post"),
    ("views/activations.py", "res-post"),
    ("views/activations.py", "peri"),
]


def open_page(page: str, **params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update(params)
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def shown_text(at: AppTest) -> str:
    parts = [e.value for kind in ("caption", "markdown", "info", "warning", "error") for e in at.get(kind)]
    return " ".join(str(p) for p in parts)


@pytest.mark.parametrize(("page", "norm"), PAGES)
def test_every_page_draws_an_encoder_decoder_with_the_new_placements(page, norm):
    at = open_page(page, arch="encoder-decoder", norm=norm, n_layers="2")
    assert not at.error, [e.value for e in at.error]
    assert at.selectbox(key="norm").value == norm
    if page == "views/activations.py":  # the depth story is the placement's, with this run's numbers
        assert f"{norm.capitalize()}-norm: each sub-layer" in shown_text(at)


@pytest.mark.parametrize("norm", ["res-post", "peri"])
def test_anatomy_states_the_placements_formula(norm):
    text = shown_text(open_page("views/anatomy.py", norm=norm))
    assert NORM_FORMULAS[norm] in text


def test_a_placement_the_explorer_does_not_know_is_named_with_the_four_formulas():
    at = open_page("views/attention.py", norm="sideways")
    warned = " ".join(w.value for w in at.warning)
    assert "`norm=sideways` was ignored" in warned
    assert all(f"{name} ({formula})" in warned for name, formula in NORM_FORMULAS.items())
    assert at.selectbox(key="norm").value == "post"  # the default stands in
