"""The Mixing page's sentences and download table (explorer.mixing_text, explorer.mixing_export): pure functions of
numbers."""

from __future__ import annotations

import re

import numpy as np
import pytest

from explorer.mixing_export import last_block_label, mixing_table
from explorer.mixing_text import (
    FLOW_PAGE_MAX_WORK,
    board_caption,
    explanation,
    first_stack_note,
    flow_max_tokens,
    flow_offered,
    flow_too_big,
    flow_work,
    opening_query,
    piled_up_note,
    predicts_next,
    reach_sentence,
    reach_title,
    removal_note,
    rows_note,
    top_tokens,
)


def test_the_explanation_names_the_residual_share_and_the_formula():
    text = explanation(0.5)
    assert "0.5·I + 0.5·A" in text and "residual connection" in text and "Abnar & Zuidema 2020" in text
    assert "0.3·I + 0.7·A" in explanation(0.3)


def test_only_an_encoder_decoder_gets_a_note_on_which_stack():
    assert first_stack_note(["encoder"]) is None
    note = first_stack_note(["encoder", "decoder"])
    assert note is not None and "encoder's self-attention" in note and "cross-attention" in note


def test_flow_work_is_problems_times_edges():
    # every row: T x T max-flow problems, each on L x T x T edges; one row: T problems
    assert flow_work(6, 48, None) == 48 * 48 * 6 * 48 * 48
    assert flow_work(6, 48, 1) == 48 * 6 * 48 * 48
    assert flow_work(30, 16, 3) == 3 * 16 * 30 * 16 * 16


@pytest.mark.parametrize(("layers", "every_row"), [(2, True), (6, True), (30, True), (6, False), (30, False)])
def test_the_most_tokens_is_the_edge_of_what_the_page_offers(layers, every_row):
    most = flow_max_tokens(layers, every_row)
    rows = None if every_row else 1
    assert flow_offered(layers, most, rows) and not flow_offered(layers, most + 1, rows)
    assert flow_work(layers, most, most if every_row else 1) <= FLOW_PAGE_MAX_WORK


def test_the_limit_matches_the_bench():
    # bench/bench_mixing.py: every row of MiniLM (6 layers) at 32 pieces took 1.1 s and at 64 pieces 9.6 s; SmolLM2
    # (30 layers) at 16 pieces 0.3 s: the first and last must be offered, the 64-piece one not
    assert flow_offered(6, 32, None) and flow_offered(30, 16, None) and not flow_offered(6, 64, None)
    assert flow_offered(6, 64, 1)  # one row at 64 pieces: 0.2 s


def test_the_too_big_sentence_says_how_much_and_how_to_get_flow():
    text = flow_too_big(2, 60, "token", every_row=True)
    assert "3,600 max-flow problems" in text and "7,200 edges" in text and "2 layers × 60 × 60 tokens" in text
    assert f"at most {flow_max_tokens(2, True)} tokens" in text and "one position's row is cheaper" in text
    # the limit, not a time: refused cases had taken 0.37-0.88 s ("more than the page solves in a few seconds")
    assert "25,920,000 units of work (problems × edges), more than the page's limit of 8,000,000" in text
    assert "than the page solves in a few seconds" not in text
    row = flow_too_big(30, 200, "piece", every_row=False)
    assert row.startswith("This position's flow") and "200 max-flow problems" in row and "pieces" in row
    assert "explorer.attention_flow" in row


def test_only_a_decoder_only_model_predicts_and_opens_on_its_last_position():
    assert predicts_next(["decoder"]) and opening_query(4, True) == 3  # the last position predicts the next token
    for stacks in (["encoder"], ["encoder", "decoder"]):  # an encoder-decoder's rollout follows its encoder
        assert not predicts_next(stacks)
    assert opening_query(4, False) == 0
    assert "reach the prediction" in reach_title("mat", 5, 6, predicts=True)
    assert (
        reach_title("mat", 5, 6, predicts=False) == "Which input tokens reach position 5 (“mat”) after the last block"
    )


def test_top_tokens_lists_the_largest_first_and_drops_what_rounds_to_zero():
    tokens = ["a", "b", "c", "d"]
    assert top_tokens(tokens, np.array([0.1, 0.6, 0.3, 0.0])) == "`b` (0.60), `c` (0.30), `a` (0.10)"
    assert top_tokens(tokens, np.array([1.0, 0.001, 0.0, 0.0])) == "`a` (1.00)"


def test_reach_sentence_with_and_without_flow():
    tokens = ["x", "y"]
    raw, rollout, flow = np.array([0.2, 0.8]), np.array([0.7, 0.3]), np.array([1.0, 0.5])
    text = reach_sentence(tokens, 1, raw, rollout, flow)
    assert text.startswith("At position 1 (`y`)") and "weights most `y` (0.80), `x` (0.20)" in text
    assert "flow" not in reach_sentence(tokens, 1, raw, rollout, None)


def test_the_reach_sentence_says_rollout_is_an_estimate_and_flow_is_not_a_share():
    """Found by a review: "rollout finds most of ... in it; flow, [CLS] (1.00), [SEP] (1.00), tired (0.95)" read
    flow's values, which sum to 2.95 there, as shares of the position."""
    tokens = ["[CLS]", "tired", "[SEP]"]
    flow = np.array([1.0, 0.95, 1.0])  # three max flows: each token alone can reach the position fully
    text = reach_sentence(tokens, 1, np.array([0.5, 0.3, 0.2]), np.array([0.6, 0.3, 0.1]), flow)
    assert "rollout estimates that it is made most of `[CLS]` (0.60), `tired` (0.30), `[SEP]` (0.10)" in text
    assert "the most that can pass from it to each input token on its own" in text and "not a share" in text
    assert "a row can sum to more than 1" in text
    assert "is largest for `[CLS]` (1.00), `[SEP]` (1.00), `tired` (0.95)." in text


def test_a_row_that_nothing_reaches_is_said_so_not_named_as_a_token_of_0():
    """At residual 0 a row whose keys are all masked is all zeros: the sentence had named its first token "(0.00)"."""
    tokens = ["[PAD]", "the", "cat"]
    zeros = np.zeros(3)
    text = reach_sentence(tokens, 0, zeros, zeros, zeros)
    assert "(0.00)" not in text
    assert "puts no weight on any key" in text and "nothing reaches it" in text
    assert "no flow can pass from it to any input token" in text
    assert top_tokens(tokens, np.array([0.004, 0.0, 0.001])) == ""  # every value rounds to 0.00


def test_rows_sum_to_1_or_to_0_where_nothing_reaches():
    assert rows_note(np.eye(3)) == "rows sum to 1"
    empty = np.array([[0.0, 0.0], [0.4, 0.6]])  # position 0: nothing reaches it
    assert rows_note(empty) == "rows sum to 1 (0 where nothing reaches)"


def test_the_board_caption_names_the_maps_drawn_and_says_what_flow_is():
    # by the maps' titles: "Left, Middle, Right" was wrong at every width (a projector's page puts flow under raw, a
    # phone stacks all three)
    three = board_caption(flow_shown=True)
    assert three.startswith("Raw: where the last layer's heads look") and not re.search(r"Left|Middle|Right", three)
    assert "Rollout: by this estimate" in three and "Flow: the most that can pass" in three
    assert "each cell its own max-flow problem, not a share (a row can sum to more than 1)" in three
    assert "rows sum to 1, or 0 where nothing reaches" in three
    two = board_caption(flow_shown=False)  # flow not computed: two maps, no middle one
    assert "Rollout: by this estimate" in two and "flow" not in two.lower()


def test_the_explanation_says_flow_is_not_a_share():
    assert "not a share" in explanation(0.5) and "a row of flow can sum to more than 1" in explanation(0.5)


def test_piled_up_note_only_when_every_row_sits_on_one_token():
    piled = np.array([[1.0, 0.0, 0.0], [0.95, 0.05, 0.0], [0.92, 0.04, 0.04]])
    note = piled_up_note(["The", "cat", "sat"], piled, 30)
    assert note is not None and "`The`" in note and "at least 0.92" in note and "30 blocks" in note
    assert piled_up_note(["The", "cat", "sat"], np.eye(3), 2) is None
    # SmolLM2's rollout after 30 blocks: "almost all ... (at least 1.00 of each row)" said two things at once
    nearly = np.array([[1.0, 0.0], [0.99962, 0.00038]])
    assert "at least 0.9996 of each row" in piled_up_note(["Em", "oji"], nearly, 30)


def test_mixing_table_has_a_row_per_position_and_input_token():
    tokens = ["a", "b", "c"]
    rollout = np.arange(9, dtype=np.float64).reshape(3, 3) / 10
    flow = np.ones((1, 3))
    table = mixing_table(tokens, [2], {"rollout": rollout[2:], "flow": flow, "gone": None}, 0.3)
    columns = ["position", "position_token", "input", "input_token", "residual_share", "rollout", "flow"]
    assert list(table.columns) == columns
    assert list(table["residual_share"]) == [0.3] * 3  # no CSV had said which residual share its numbers used
    assert list(table["position_token"]) == ["c"] * 3 and list(table["input_token"]) == tokens
    np.testing.assert_array_equal(table["rollout"], rollout[2])
    with pytest.raises(ValueError, match="not 1 positions x 3 tokens"):
        mixing_table(tokens, [2], {"rollout": rollout}, 0.5)


def test_the_removal_note_says_what_each_kind_of_removal_does_to_a():
    """The zero-weight sentence had been printed for a mean removal too, where no weight becomes zero."""
    zero = removal_note("L0H1", "zero", 0.5, hidden=False)
    assert "zero weight" in zero and "keeps more than 0.5 of itself" in zero and "later tokens" not in zero
    mean = removal_note("L0H1", "mean", 0.5, hidden=True)
    assert "its mean weight on each key over the queries" in mean and "became zero" not in mean
    assert "a position receives tokens its mask hides from it (with a causal mask, later tokens)" in mean
    unmasked = removal_note("L0H1", "mean", 0.5, hidden=False)  # every position sees every token already
    assert "became zero" not in unmasked and "mask hides" not in unmasked and unmasked.endswith("the same way.")


def test_the_last_blocks_csv_is_named_by_what_it_holds():
    assert last_block_label(flow_shown=True) == "Raw, rollout and flow (CSV)"
    assert last_block_label(flow_shown=False) == "Raw and rollout (CSV)"  # had said "Rollout and flow" without flow


def test_the_piled_up_note_says_flow_spreads_more_only_when_flow_was_computed_and_does():
    piled = np.array([[1.0, 0.0, 0.0], [0.95, 0.05, 0.0], [0.92, 0.04, 0.04]])  # `The` holds 2.87 / 3 of rollout
    assert "flow" not in piled_up_note(["The", "cat", "sat"], piled, 30).lower()  # flow not computed: not claimed
    spread = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 0.9, 0.8]])  # `The` holds 3 / 5.7 of the flow
    note = piled_up_note(["The", "cat", "sat"], piled, 30, spread)
    assert "spreads more: `The` holds 0.526 of this map's flow values summed, against 0.957 of rollout's." in note
    narrow = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])  # all of flow on `The` too
    assert "flow" not in piled_up_note(["The", "cat", "sat"], piled, 30, narrow).lower()


def test_one_token_piles_up_nowhere():
    """A 1 × 1 rollout is 1 by definition, whatever the heads do: no note says that multiplying blocks piled it up."""
    assert piled_up_note(["a"], np.ones((1, 1)), 4) is None


def test_tokens_tied_with_the_last_one_named_are_counted_not_left_out():
    """Found by a review: on MiniLM and a 21-piece sentence, flow rows have 6 input tokens at 1.00, and the sentence
    named three of them as where flow "is largest"."""
    tokens = ["[CLS]", "when", "the", "fox", "jumped", "[SEP]"]
    flow = np.array([1.0, 0.9999999, 1.0, 0.99999994, 1.0, 0.71])  # five print as 1.00
    assert top_tokens(tokens, flow) == "`[CLS]` (1.00), `the` (1.00), `jumped` (1.00) and 2 more tokens at 1.00"
    text = reach_sentence(tokens, 5, np.full(6, 1 / 6), np.full(6, 1 / 6), flow)
    assert "is largest for `[CLS]` (1.00), `the` (1.00), `jumped` (1.00) and 2 more tokens at 1.00." in text
    assert (
        top_tokens(tokens, np.array([0.5, 0.2, 0.2, 0.05, 0.05, 0.0])) == "`[CLS]` (0.50), `when` (0.20), `the` (0.20)"
    )


def test_a_row_spread_thinner_than_the_rounding_is_not_said_to_be_empty():
    """Found by a review: the default encoder made 6 layers deep at 512 tokens spreads the last layer's average over
    every key (largest 0.0035, the row summing to 1), and the sentence said it "puts no weight on any key"."""
    tokens = [f"w{i}" for i in range(512)]
    raw = np.full(512, 1 / 512)
    raw[7] = 0.0035
    rollout = np.full(512, 0.9 / 511)
    rollout[3] = 0.0041
    flow = np.zeros(512)
    flow[2] = 0.003
    text = reach_sentence(tokens, 0, raw, rollout, flow)
    assert "no weight on any key" not in text and "nothing reaches" not in text and "no flow can pass" not in text
    assert "spreads its weight thinly over the keys, none as much as 0.005 (the most: `w7` at 0.0035)" in text
    assert "made of many input tokens in small shares, none as much as 0.005 (the most: `w3` at 0.0041)" in text
    assert "is small for every input token, none as much as 0.005 (the most: `w2` at 0.003)." in text


def test_the_too_big_sentence_points_to_one_row_only_when_that_row_is_drawn():
    """SmolLM2 (30 layers) at 80 pieces: every row and one row are both past the limit, and the first sentence said
    "below, one position's row is cheaper" above a second saying this position's flow is not computed either."""
    assert not flow_offered(30, 80, 1)
    assert "one position's row" not in flow_too_big(30, 80, "piece", every_row=True)
    assert flow_offered(30, 40, 1) and "below, one position's row is cheaper" in flow_too_big(30, 40, "piece", True)


@pytest.mark.parametrize(
    ("residual", "said", "unsaid"),
    [
        (0.0, "so there the heads kept count for more", "keeps more than"),
        (1.0, "With a residual share of 1 nothing mixes, so the removal changes neither rollout nor flow", "keeps"),
        (0.3, "so there a token keeps more than 0.3 of itself", "count for more"),
    ],
)
def test_the_zero_removal_note_holds_at_every_residual_share(residual, said, unsaid):
    """At share 1 Ã is the identity whatever the heads (a token keeps 1 of itself, not "more than 1"); at share 0 a
    token has no share of its own ("keeps more than 0 of itself" is false where its own weight is 0)."""
    note = removal_note("L0H1", "zero", residual, False)
    assert said in note and unsaid not in note


def test_the_mean_removal_note_says_nothing_reaches_hidden_tokens_at_a_residual_share_of_1():
    assert "mask hides" in removal_note("L0H1", "mean", 0.9, True)
    assert "mask hides" not in removal_note("L0H1", "mean", 1.0, True)  # rollout is the identity there
