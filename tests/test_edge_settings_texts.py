"""What the pages say at the edges of the configured model's settings (one token, one layer, a mask that leaves one
key), found by a review of every page there. Each sentence must hold for the numbers it stands beside."""

from __future__ import annotations

import numpy as np

import explorer
from explorer.analysis.ablation_effects import head_ablation_effects
from explorer.analysis.activations import depth_story, layer_statistics
from explorer.analysis.placements import ENTROPY, RMS, placement_run
from explorer.analysis.stats import head_entropy, head_mean_distance, head_sparsity
from explorer.config import NORMS, ModelConfig
from explorer.placements_text import placements_paragraphs
from pictures.output_charts import ablation_board_figure
from pictures.positional_charts import _typed_tokens_hint
from tests.drawn import figure_title, figure_titled
from tests.test_app_compare_placements import TITLE as PLACEMENTS_TITLE
from tests.test_app_compare_placements import opened as placements_page
from tests.test_heads_page import opened as heads_page
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
    said = placements_paragraphs(result, "untrained weights", True)  # the notebook's words, the page's too
    assert not any("overflowed" in p for p in said) and said[-1].startswith("No attention entropy")
    at = placements_page({"mask": "padding", "tokens": "[PAD]", "placements": "true"})
    words = " ".join(m.value for m in at.markdown)
    assert "overflowed" not in words
    assert "No attention entropy: no query of this stack has a key it may attend to" in words
    assert "Residual RMS from the input (1.1)" in words
    notes = [a["text"] for a in figure_titled(at, PLACEMENTS_TITLE)["layout"]["annotations"]]
    assert "no query has a key<br>it may attend to" in notes


def test_removing_a_head_by_its_mean_on_one_token_is_said_to_change_nothing_and_measures_0():
    """One token: a head's mean over the positions is its own output, and the run is the same to the bit. Was: the
    banner "From layer 0's output on, the stream differs", and the board 1e-14 to 1.6e-14 of float rounding for the
    4 heads of layer 0 ("largest 1e-09", a floor, for a 1-head model whose every cell was 0)."""
    cfg = ModelConfig()
    model = explorer.build_model(cfg)
    full, removed = explorer.run(model, "a"), explorer.run(model, "a", ablate=[(0, 0)], ablate_with="mean")
    assert np.array_equal(full.first.output, removed.first.output)
    assert (head_ablation_effects(cfg, "a", mode="mean") == 0).all()
    assert (head_ablation_effects(ModelConfig(mask="padding"), "a [PAD] [PAD]", mode="mean") == 0).all()
    assert (head_ablation_effects(cfg, "a b", mode="mean") > 0).any()  # two positions: the mean is not each output
    at = heads_page(tokens="a", ablate="L0H0", ablate_with="mean")
    [banner] = [i.value for i in at.info if "removed: every page shows" in i.value]
    assert "the stream differs" not in banner and "Here there is one position" in banner
    subtitle = figure_title(figure_titled(at, "What each head does to the sentence embedding"))
    assert "every cell is 0: no head alone changes it" in subtitle and "1e-09" not in subtitle


def test_removing_a_head_by_its_mean_where_every_query_reads_one_padded_token_is_said_to_change_nothing():
    at = heads_page(tokens="a [PAD] [PAD]", mask="padding", ablate="L0H0,L0H1", ablate_with="mean")
    [banner] = [i.value for i in at.info if "removed: every page shows" in i.value]
    assert "every query may attend only to the same one key" in banner and "the stream differs" not in banner
    zero = heads_page(tokens="a [PAD] [PAD]", mask="padding", ablate="L0H0", ablate_with="zero")
    assert any("the stream differs" in i.value for i in zero.info)  # set to zero, the head's output is gone


def test_a_board_with_an_effect_gives_its_largest_value():
    subtitle = figure_title(ablation_board_figure(np.array([[0.0, 0.25], [0.0125, 0.0]])).to_plotly_json())
    assert "largest 0.25" in subtitle


def test_one_token_one_block_and_one_target_token_are_counted_in_the_singular():
    """Was: "the 1 typed tokens' positions 0–0", "after each of the 1 blocks", "the source's 1 positions ... its 1
    target tokens", "(1 tokens)" and "T = 1 tokens"."""
    trace = explorer.run(ModelConfig(n_layers=1), "a")
    story = depth_story(layer_statistics(trace.first), "post")
    assert "after its one block is re-normalised" in story and "each of the 1" not in story
    assert _typed_tokens_hint(1, 64) == "red: the typed token's position 0"
    assert _typed_tokens_hint(2, 64) == "red: the 2 typed tokens' positions 0–1"
    query = {"arch": "encoder-decoder", "tokens": "a", "target": "b", "act_open_tokens": "true"}
    shown = " ".join(
        c.value
        for page in (ACTIVATIONS, "views/positional.py", "views/anatomy.py")
        for c in open_page(page, **query).caption
    )
    assert "(1 tokens)" not in shown and "1 positions" not in shown and "= 1 tokens" not in shown
    assert "Red marks the source's 1 position; the decoder adds the same table to its 1 target token." in shown
    assert "S = 1 source token, T = 1 target token" in shown and "stack (1 token)" in shown
