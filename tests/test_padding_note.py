"""views/padding_note.py: the sidebar says when the padding mask has no [PAD] to block, and names a pad spelled
another way; dashboard.py shows the sentence under the mask and drops it once a [PAD] is typed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

import explorer
from explorer.config import PAD_TOKEN, ModelConfig
from views.padding_note import padding_note

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")


def test_the_note_comes_only_when_a_padding_mask_has_nothing_to_block():
    assert padding_note("none", "the cat") is None
    assert padding_note("causal", "the cat") is None
    assert padding_note("padding", f"the cat {PAD_TOKEN}") is None
    assert padding_note("causal+padding", "le chat", f"the {PAD_TOKEN}") is None  # a [PAD] in the target counts
    note = padding_note("causal+padding", "the cat sat")
    assert note is not None and PAD_TOKEN in note and "changes nothing" in note
    assert padding_note("padding", f"a{PAD_TOKEN}") is not None  # glued to a word, it is another token


def test_the_note_names_the_pads_spelled_another_way_and_leaves_the_word_alone():
    note = padding_note("padding", "the cat <pad> [pad] PAD <pad>")
    assert note is not None
    assert "`<pad>`, `PAD`, `[pad]` are ordinary tokens here" in note
    assert "ordinary" not in padding_note("padding", "a launch pad")
    assert "`{PAD}` is an ordinary token here" in padding_note("padding", "x {PAD}")


def test_the_note_is_right_that_the_mask_changes_nothing_without_a_pad():
    """What the sentence claims, checked on the engine: no [PAD], the same weights with and without the mask."""
    text = "the cat <pad> <pad>"
    with_mask = explorer.run(ModelConfig(mask="padding"), text).attention
    np.testing.assert_array_equal(with_mask, explorer.run(ModelConfig(mask="none"), text).attention)
    padded = explorer.run(ModelConfig(mask="padding"), f"the cat {PAD_TOKEN}").attention
    assert (padded[..., -1] == 0).all()  # with one, its key is blocked for every query


def test_the_sidebar_says_it_under_the_mask_until_a_pad_is_typed():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"mask": "padding", "tokens": "the cat <pad>"})
    at.run()
    assert not at.exception
    captions = [c.value for c in at.sidebar.caption]
    assert any("changes nothing" in c and "`<pad>` is an ordinary token" in c for c in captions), captions
    at.text_input(key="tokens").set_value(f"the cat {PAD_TOKEN}").run()
    assert not at.exception
    assert not [c.value for c in at.sidebar.caption if "changes nothing" in c.value]
