"""What the Attention page says in its rare cases, found by a review of the page: an input whose every query has no
key (all padding), a causal model's one piece, and a trained decoder's next-token table, whose vocabulary is not
SmolLM2's. Each sentence must hold for the numbers it stands beside."""

from __future__ import annotations

import numpy as np

import explorer
from explorer.analysis.head_roles import head_roles
from explorer.analysis.stats import head_entropy
from explorer.attention_text import no_clear_role_text
from explorer.config import ModelConfig
from explorer.tasks import make_task
from explorer.training import train
from pictures.attention_panels import entropy_panel
from tests.drawn import panel_matrix
from tests.test_attention_norms_page import opened
from views.state import AppState, TrainedModel


def test_the_entropy_of_an_all_padding_input_is_said_to_be_missing_not_nan_uniform():
    """Was: "0 = each query looks at one key; nan = uniform over the allowed keys", and NaN written in every cell."""
    trace = explorer.run(ModelConfig(mask="padding"), "[PAD] [PAD]")
    panel = entropy_panel(head_entropy(trace.first.self_attention))
    assert "nan" not in panel["subtitle"].lower()
    assert "no query of this input has a key to attend to" in panel["subtitle"]
    assert panel_matrix(panel).masked.all()  # grey, with a sentence on hover, rather than "NaN" in each cell


def test_the_entropy_of_one_causal_piece_says_no_head_has_a_choice():
    """Was: "0 = each query looks at one key; 0.00 = uniform over the allowed keys", both ends of the scale 0."""
    trace = explorer.run(ModelConfig(arch="decoder", mask="causal"), "hi")
    entropy = head_entropy(trace.first.self_attention)
    assert (entropy["entropy"] == 0).all()
    panel = entropy_panel(entropy)
    assert "0.00 = uniform" not in panel["subtitle"] and "every head's entropy is 0" in panel["subtitle"]


def test_no_role_is_said_to_be_measurable_when_no_query_may_see_two_keys():
    maps = explorer.run(ModelConfig(arch="decoder", mask="causal"), "hi").first.self_attention
    roles = head_roles(maps.weights, list(maps.key_tokens), maps.allowed)
    assert np.isnan(roles.shares).all() and np.isnan(roles.breadth).all()
    assert no_clear_role_text(roles).startswith("No role can be measured")
    longer = explorer.run(ModelConfig(arch="decoder", mask="causal"), "a b c").first.self_attention
    mixed = head_roles(longer.weights, list(longer.key_tokens), longer.allowed)
    assert no_clear_role_text(mixed) == "No head has one clear role on this sentence."


def test_smollm2_on_one_piece_says_no_role_can_be_measured():
    """Was: "No head has one clear role on this sentence." under a board grey all over (no share is defined)."""
    at = opened({"model": "smollm2-135m", "tokens": "Hi"})
    captions = [c.value for c in at.caption]
    assert any(c.startswith("No role can be measured") for c in captions)
    assert "No head has one clear role on this sentence." not in captions


def test_a_trained_decoders_next_pieces_are_not_said_to_spell_a_space_as_g():
    """Was: the column "vocabulary piece (Ġ = a space)" over the letters A to J of a trained induction model."""
    task = make_task("induction", 8)
    result = train(ModelConfig(arch="decoder"), task, steps=3)
    at = opened({"tokens": "A B C D A B C"}, AppState(trained=TrainedModel(result.model, task, "induction")))
    assert any(c.value.startswith("After `") for c in at.caption)  # the next-token section is drawn
    [table] = at.table
    columns = list(table.value.columns)
    assert "vocabulary piece" in columns and not any("Ġ" in c for c in columns)


def test_smollm2_next_pieces_still_say_how_a_space_is_spelled():
    at = opened({"model": "smollm2-135m", "tokens": "The capital of France is"})
    [table] = at.table
    assert "vocabulary piece (Ġ = a space)" in list(table.value.columns)
