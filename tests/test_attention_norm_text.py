"""The sentence under the head-roles board: how many heads each role loses or gains when measured by what the heads
add (explorer.attention_text), on hand-made role labels where the counts are known."""

from __future__ import annotations

import numpy as np

from explorer.analysis.head_roles import BROAD, ROLES, HeadRoles, head_roles, norm_head_roles
from explorer.analysis.norm_attention import norm_shares
from explorer.attention_text import role_counts, role_shift_text

NAMES = {role: role for role in (*ROLES, BROAD)} | {"first": "the first token ([CLS])"}


def roles(labels: list[list[str]], first: list[list[float]] | None = None) -> HeadRoles:
    """HeadRoles with these [L, H] labels; `first`: each head's share on the first token (0 elsewhere)."""
    labels = np.array(labels)
    shares = np.zeros((*labels.shape, len(ROLES)))  # [L, H, R]
    if first is not None:
        shares[:, :, 0] = first
    return HeadRoles(shares=shares, breadth=np.zeros(labels.shape), labels=labels)


def test_role_counts_count_each_clear_role_and_broad():
    counted = role_counts(roles([["first", "first", ""], ["broad", "previous", "first"]]))
    assert counted == {"first": 3, "sep": 0, "punct": 0, "previous": 1, "next": 0, "self": 0, "broad": 1}


def test_the_sentence_says_what_each_role_loses_and_gains_biggest_loss_first():
    by_weights = roles([["first", "first", "first"], ["first", "previous", ""]], [[0.8, 0.6, 0.7], [0.5, 0.1, 0.2]])
    by_norms = roles([["", "broad", "first"], ["", "previous", "broad"]], [[0.1, 0.2, 0.5], [0.2, 0.0, 0.1]])
    text = role_shift_text(by_weights, by_norms, NAMES)
    assert text.startswith("**Measured by what the heads add** (‖α·f(x)‖) rather than by their weights")
    lost = "**the first token ([CLS])** loses 3 of its 4 heads (1 left)"
    gained = "**broad** gains 2 heads (0 → 2)"
    kept = "**previous** keeps its 1 head"
    assert text.index(lost) < text.index(gained) < text.index(kept)
    # the four heads that looked mostly at the first token: 0.65 of their weight there, 0.25 of what they add
    assert "The 4 heads that look mostly at the first token ([CLS]) put 0.65 of their weight there" in text
    assert "but 0.25 of what they add" in text
    assert "Heads with no clear role: 1 by weight, 2 by what they add (of 6)." in text
    assert "sep" not in text and "punct" not in text  # a role no head has under either measure goes unsaid


def test_a_role_that_only_gains_gets_no_detail_and_no_change_gets_one_sentence():
    gained = role_shift_text(roles([["", ""]]), roles([["first", ""]]), NAMES)
    assert "**the first token ([CLS])** gains 1 head (0 → 1)" in gained and "look mostly" not in gained
    same = roles([["first", "broad"]])
    assert role_shift_text(same, same, NAMES) == (
        "**Measured by what the heads add** (‖α·f(x)‖) rather than by their weights, every role keeps its number of "
        "heads on this sentence."
    )


def test_a_removed_head_is_left_out_of_the_role_shift_and_said_to_be():
    """A head removed with zero adds nothing, so by what it adds it has no role: its 'loss' of the first token is
    the removal's, not the measure's, and had been counted as one (on MiniLM, L0H0 removed, '**the first token**
    loses 1 of its 2 heads')."""
    by_weights = roles([["first", "first"], ["previous", ""]], [[0.8, 0.7], [0.1, 0.2]])
    by_norms = roles([["first", ""], ["previous", ""]], [[0.6, 0.0], [0.0, 0.1]])
    text = role_shift_text(by_weights, by_norms, NAMES, removed=[(0, 1)])
    assert "every role keeps its number of heads on this sentence" in text
    assert text.endswith("The removed head (L0H1) is left out: what a removed head adds no longer follows its weights.")
    both = role_shift_text(by_weights, roles([["", ""], ["previous", ""]]), NAMES, removed=[(0, 1), (1, 1)])
    assert (
        "loses 1 of its 1 head (0 left)" in both and "(of 2)." in both and "The removed heads (L0H1, L1H1) are" in both
    )
    assert "put 0.80 of their weight there" in both  # L0H0 alone: the removed L0H1's 0.7 is not averaged in


def test_norm_head_roles_layer_by_layer_equal_head_roles_of_the_norm_shares(make_maps):
    tokens = ["[CLS]", "the", "cat", ",", "sat", "[SEP]"]
    maps = make_maps(n_layers=3, n_heads=2, tokens=tokens, allowed=np.tril(np.ones((6, 6), dtype=bool)))
    sizes = np.random.default_rng(2).uniform(0.0, 3.0, size=(3, 2, 6)).astype(np.float32)  # [L, H, Tk]
    norms = maps.weights * sizes[:, :, None, :]  # [L, H, T, T]
    expected = head_roles(norm_shares(norms), tokens, maps.allowed)
    got = norm_head_roles(norms, tokens, maps.allowed)
    np.testing.assert_array_equal(got.shares, expected.shares)
    np.testing.assert_array_equal(got.breadth, expected.breadth)
    np.testing.assert_array_equal(got.labels, expected.labels)
