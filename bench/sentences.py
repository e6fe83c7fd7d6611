"""The input text every bench feeds the model: one sentence, repeated to the number of tokens wanted."""

from __future__ import annotations

SENTENCE = "the cat sat on the mat while a small dog ran after it across the long green field"


def words(n: int) -> str:
    """n whitespace-separated words, the sentence repeated as needed."""
    base = SENTENCE.split()
    return " ".join(base[i % len(base)] for i in range(n))
