"""What a link to a comparison holds: A's settings, the texts, and B's, as URL query parameters."""

from __future__ import annotations

from explorer.compare import B_FIELDS, INPUT, reversed_text, to_query
from explorer.config import ModelConfig


def comparison_query(
    a: ModelConfig, b: ModelConfig, text_a: str, target_a: str | None, mode: str, text_b: str
) -> dict[str, str]:
    """A's settings that differ from the defaults, the text, then B's (b_…) that differ from default_b(A), or in
    `mode` INPUT B's text when it is not A's reversed."""
    defaults = ModelConfig()
    query = {f: str(getattr(a, f)) for f in B_FIELDS if getattr(a, f) != getattr(defaults, f)}
    query["tokens"] = text_a
    if target_a is not None:
        query["target"] = target_a
    if mode == INPUT:
        query["compare"] = INPUT
        if text_b != reversed_text(text_a):
            query["b_tokens"] = text_b
    else:
        query.update(to_query(b, a))
    return query
