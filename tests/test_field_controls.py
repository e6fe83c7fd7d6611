"""The model's settings are drawn from one table (views/fields.py): the sidebar's controls, Compare's B controls and
a checkpoint's greyed-out values all carry its labels, help, keys and limits, so the two sets cannot drift apart."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from explorer.compare import B_FIELDS, default_b
from explorer.config import CHOICES, INT_LIMITS, ModelConfig
from views.fields import FIELD, MODEL_FIELDS
from views.state import STATE_KEY

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
# What shared links and people rely on: the labels as they have always been.
SIDEBAR_LABELS = {
    "arch": "Architecture",
    "norm": "Norm placement",
    "n_layers": "Layers",
    "n_heads": "Heads",
    "d_model": "d_model",
    "d_ff": "d_ff",
    "positional": "Positional encoding",
    "mask": "Mask",
    "activation": "Activation",
    "seed": "Seed",
}
B_LABELS = SIDEBAR_LABELS | {"norm": "Norm placement", "positional": "Positions"}  # short: "≠ A" must fit


def control(at: AppTest, key: str):
    """The select box or number input of that key."""
    found = [w for kind in ("selectbox", "number_input") for w in at.get(kind) if w.key == key]
    assert len(found) == 1, key
    return found[0]


def taken(widget) -> object:
    """What a control offers: its options, or its least and most value."""
    if widget.type == "selectbox":
        return list(widget.options)
    return widget.min, widget.max


@pytest.fixture(scope="module")
def compare() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("views/compare.py")
    at.query_params["b_seed"] = "5"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_table_covers_the_model_settings_with_their_labels():
    assert [f.name for f in MODEL_FIELDS] == list(B_FIELDS)  # the sidebar's fields are B's, in one order
    assert {f.name: f.label for f in MODEL_FIELDS} == SIDEBAR_LABELS
    assert {f.name: f.short for f in MODEL_FIELDS} == B_LABELS
    for field in MODEL_FIELDS:
        assert (field.options is None) == (field.name in INT_LIMITS)
        assert field.options == (list(CHOICES[field.name]) if field.name in CHOICES else None)


def test_the_sidebar_draws_each_field_from_the_table(compare):
    defaults = ModelConfig()
    for field in MODEL_FIELDS:
        widget = control(compare, field.name)
        assert (widget.label, widget.help) == (field.label, field.help)
        assert widget.proto.query_param_key == field.name
        assert widget.value == getattr(defaults, field.name)
        assert taken(widget) == (field.options if field.options is not None else field.limits)


def test_bs_controls_draw_the_same_fields_with_bs_label_help_and_default(compare):
    a, reference = ModelConfig(), default_b(ModelConfig())
    for field in MODEL_FIELDS:
        mine, sidebars = control(compare, "b_" + field.name), control(compare, field.name)
        differs = field.name in ("norm", "seed")  # default_b flips the norm; the link set b_seed=5
        assert mine.label == field.short + (" ≠ A" if differs else "")
        assert mine.help == f"B's {field.name}; A's (in the sidebar) is {getattr(a, field.name)}."
        assert mine.proto.query_param_key == "b_" + field.name
        assert mine.value == (5 if field.name == "seed" else getattr(reference, field.name))
        assert taken(mine) == taken(sidebars)  # the same options and limits as the sidebar's control
        assert type(mine) is type(sidebars)


def test_a_checkpoint_shows_the_fields_it_fixes_with_the_sidebars_labels():
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["model"] = "minilm-l6"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    cfg = at.session_state[STATE_KEY].config
    fixed = {w.key: w for kind in ("selectbox", "number_input") for w in at.sidebar.get(kind) if w.key}
    for field in MODEL_FIELDS:
        if field.name == "seed":  # real weights: no seed
            assert "fixed_seed" not in fixed
            continue
        widget = fixed["fixed_" + field.name]
        assert widget.label == FIELD[field.name].label and widget.disabled
        assert widget.value == getattr(cfg, field.name)
