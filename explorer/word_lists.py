"""A list of words in a sentence: "a", "a and b", "a, b and c"."""

from __future__ import annotations

from collections.abc import Sequence


def listed(words: Sequence[str], conjunction: str = "and") -> str:
    """The words joined as a sentence lists them, the last two by `conjunction` ("and", or "or" for choices)."""
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + f" {conjunction} {words[-1]}"
