"""explorer.word_lists: a list of words as a sentence writes it."""

from explorer.word_lists import listed


def test_one_two_and_three_words_read_as_a_sentence_lists_them():
    assert listed(["post-norm"]) == "post-norm"
    assert listed(["L23H0", "L29H1"]) == "L23H0 and L29H1"
    assert listed(["a", "b", "c"]) == "a, b and c"
    assert listed(['"none"', '"causal"', '"padding"'], "or") == '"none", "causal" or "padding"'
