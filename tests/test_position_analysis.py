"""The positional page's numbers: formula, wavelengths, similarities, and the permutation demonstration."""

import math

import numpy as np
import pytest

import explorer
from explorer.analysis.position_analysis import (
    check_range,
    encoding_table,
    learned_rows,
    offset_token,
    permutation_demo,
    rope_angle_table,
    similarity,
    wavelengths,
)


def test_sinusoid_pair_repeats_after_its_wavelength():
    table = encoding_table(explorer.build_model(explorer.ModelConfig(d_model=16)), 400)
    lengths = wavelengths(16)
    assert lengths[0] == pytest.approx(2 * math.pi)
    assert lengths[1] == pytest.approx(2 * math.pi * 10000 ** (2 / 16))
    period = lengths[1]  # about 19.9 positions: pair 1 at p and p + period agree
    p = np.arange(50)
    np.testing.assert_allclose(np.sin(p / 10000 ** (2 / 16)), table[p, 2], atol=1e-6)
    np.testing.assert_allclose(np.sin((p + period) / 10000 ** (2 / 16)), table[p, 2], atol=1e-5)


def test_similarity_is_highest_on_the_diagonal_and_falls_off_with_distance():
    table = encoding_table(explorer.build_model(explorer.ModelConfig(d_model=64)), 64)
    cosine = similarity(table, "cosine")
    np.testing.assert_allclose(np.diag(cosine), 1.0, atol=1e-6)
    assert cosine[10, 11] > cosine[10, 20] > cosine[10, 40]
    np.testing.assert_allclose(similarity(table, "dot"), table.astype(np.float64) @ table.T, rtol=1e-6)


def test_learned_table_is_the_model_parameter_and_none_has_no_table():
    model = explorer.build_model(explorer.ModelConfig(positional="learned"))
    np.testing.assert_array_equal(encoding_table(model, 5), model.positional.table[:5].detach().numpy())
    assert encoding_table(explorer.build_model(explorer.ModelConfig(positional="none")), 5) is None
    assert rope_angle_table(8, 16).shape == (8, 8)


def test_with_no_positions_reordering_tokens_only_reorders_attention():
    demo = permutation_demo(explorer.ModelConfig(positional="none"), "I love AI")
    assert demo.shuffled == ["AI", "love", "I"]
    assert demo.max_difference < 1e-6
    assert not np.allclose(demo.attention, demo.shuffled_attention)  # the maps do move


@pytest.mark.parametrize("positional", ["sinusoidal", "learned", "rope"])
def test_with_positions_reordering_changes_the_attention(positional):
    assert permutation_demo(explorer.ModelConfig(positional=positional), "I love AI").max_difference > 1e-3


def test_the_typed_run_a_caller_has_gives_the_demo_its_own_run_would():
    cfg = explorer.ModelConfig(positional="rope", mask="causal", n_layers=3)
    model = explorer.build_model(cfg)
    text = "the cat sat on the mat"
    order = [5, 0, 4, 1, 3, 2]
    typed = explorer.run(model, text, keep_scores=False).first.self_attention
    given, ran = permutation_demo(model, text, order, typed=typed), permutation_demo(model, text, order)
    np.testing.assert_array_equal(given.attention, ran.attention)
    np.testing.assert_array_equal(given.shuffled_attention, ran.shuffled_attention)
    assert given.max_difference == ran.max_difference > 1e-3
    for layer, head in [(0, 0), (2, 3)]:  # one head's moved map is that head of every head's moved maps
        np.testing.assert_array_equal(given.permuted_map(layer, head), ran.permuted_attention[layer, head])
    with pytest.raises(explorer.ConfigError, match="other tokens"):
        permutation_demo(model, "the dog sat on the mat", order, typed=typed)


def test_ranges_are_explained():
    with pytest.raises(explorer.ConfigError, match="Max position 10,000,000 is out of range"):
        check_range(10**7, [0], 64)
    with pytest.raises(explorer.ConfigError, match="Dimension 64 does not exist"):
        check_range(10, [3, 64], 64)
    with pytest.raises(explorer.ConfigError, match="each position"):
        permutation_demo(explorer.ModelConfig(), "a b c", [0, 0, 1])


def test_a_learned_table_bounds_the_positions_asked_for():
    learned = explorer.build_model(explorer.ModelConfig(positional="learned", max_tokens=600))
    assert learned_rows(learned) == 600
    assert learned_rows(explorer.build_model(explorer.ModelConfig(positional="sinusoidal"))) is None  # any length
    check_range(600, [], 64, learned_rows(learned))
    with pytest.raises(explorer.ConfigError, match="The learned table has 600 positions"):
        check_range(601, [], 64, learned_rows(learned))


def test_the_offset_demo_repeats_a_word_not_padding_or_a_special_piece():
    special = {"[CLS]", "[SEP]", "[PAD]"}
    assert offset_token(["[CLS]", "the", "cat", "[SEP]"], special) == "the"  # MiniLM's texts start with [CLS]
    assert offset_token(["[PAD]", "cat"]) == "cat"
    assert offset_token(["[CLS]", "[SEP]"], special) == "[CLS]"  # nothing else typed: the first non-padding piece
    assert offset_token(["[PAD]"]) == offset_token([]) == "a"
