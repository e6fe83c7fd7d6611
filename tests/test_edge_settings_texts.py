"""What the pages say at the edges of the configured model's settings (one token, one layer, a mask that leaves one
key), found by a review of every page there. Each sentence must hold for the numbers it stands beside."""

from __future__ import annotations

import numpy as np

import explorer
from explorer.analysis.placements import ENTROPY, RMS, placement_run
from explorer.analysis.stats import head_entropy, head_mean_distance, head_sparsity
from explorer.config import NORMS, ModelConfig
from tests.drawn import figure_titled
from tests.test_app_compare_placements import TITLE as PLACEMENTS_TITLE
from tests.test_app_compare_placements import opened as placements_page
from tests.test_mixing_page import opened as mixing_page
from tests.test_positional_activations_anatomy_pages import ACTIVATIONS, open_page


def test_the_per_head_caption_of_one_token_says_no_head_has_a_choice_not_a_scale_from_0_to_0():
    """Was: "(0 = one key; 0.00 nats = uniform over the allowed keys)" and "uniform attention scores 0.00"."""
    at = open_page(ACTIVATIONS, tokens="a", act_open_heads="true")
    [caption] = [c.value for c in at.caption if "stack; queries with no allowed key" in c.value]
    assert "0.00 nats = uniform" not in caption and "uniform attention scores 0.00" not in caption
    assert "Every query may see only one key" in caption and "one key is itself, so it is 0" in caption


def test_a_padded_token_that_every_query_must_read_gets_its_distance_and_no_choice():
    """ "a [PAD] [PAD]" with a padding mask: every query sees only `a` (entropy and sparsity 0 in every head), at
    distances 0, 1 and 2 from the three queries: a mean distance of 1 in every head."""
    maps = explorer.run(ModelConfig(mask="padding"), "a [PAD] [PAD]").first.self_attention
    assert np.allclose(head_entropy(maps)["entropy"], 0) and np.allclose(head_sparsity(maps)["sparsity"], 0)
    assert np.allclose(head_mean_distance(maps)["distance"], 1.0)
    at = open_page(ACTIVATIONS, tokens="a [PAD] [PAD]", mask="padding", act_open_heads="true")
    [caption] = [c.value for c in at.caption if "stack; queries with no allowed key" in c.value]
    assert "Every query may see only one key" in caption and "one key, 1.00 on average" in caption


def test_mixing_of_one_token_says_there_is_nothing_to_mix_not_that_rollout_piles_up():
    """Was: "Rollout after 1 block finds almost all of every position in `a` (at least 1 of each row). Multiplying 1
    mixing matrices compounds the share each block gives that token", of a 1 x 1 rollout that is 1 by definition."""
    at = mixing_page(n_layers="1", n_heads="1", tokens="a")
    captions = [c.value for c in at.caption]
    assert not any("piles up" in c or "Multiplying 1 mixing" in c for c in captions), captions
    assert "With one token there is nothing to mix: rollout and flow give all of its one row to `a` (1)" in " ".join(
        captions
    )
    assert any(c.startswith("Rollout after block 0 is block 0's own mixing matrix") for c in captions)
    assert not any("blocks 0 to 0" in c for c in captions)


def test_mixing_of_two_blocks_still_says_rollout_multiplies_them():
    at = mixing_page(tokens="a b c")
    assert any("Rollout after block 1 multiplies the mixing of blocks 0 to 1" in c.value for c in at.caption)


def test_four_placements_of_an_all_padding_text_say_no_query_has_a_key_not_that_float32_overflowed():
    """Was: "Post-norm, pre-norm, res-post-norm and peri-norm gave values that are not numbers (float32 overflowed
    somewhere in the run)" for "[PAD]" with a padding mask, whose RMS is finite in every placement (input 1.1) and
    whose entropy is undefined because no query may attend to anything; and an empty entropy panel without a word."""
    result = placement_run(explorer.build_model(ModelConfig(mask="padding")), "[PAD]", None)
    for placement in NORMS:
        assert np.isfinite(result.values(placement, RMS, "encoder")).all()
        assert np.isnan(result.values(placement, ENTROPY, "encoder")).all()
    at = placements_page({"mask": "padding", "tokens": "[PAD]", "placements": "true"})
    words = " ".join(m.value for m in at.markdown)
    assert "overflowed" not in words
    assert "No attention entropy: no query of this stack has a key it may attend to" in words
    assert "Residual RMS from the input (1.1)" in words
    notes = [a["text"] for a in figure_titled(at, PLACEMENTS_TITLE)["layout"]["annotations"]]
    assert "no query has a key<br>it may attend to" in notes
