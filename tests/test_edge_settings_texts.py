"""What the pages say at the edges of the configured model's settings (one token, one layer, a mask that leaves one
key), found by a review of every page there. Each sentence must hold for the numbers it stands beside."""

from __future__ import annotations

import numpy as np

import explorer
from explorer.analysis.stats import head_entropy, head_mean_distance, head_sparsity
from explorer.config import ModelConfig
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
