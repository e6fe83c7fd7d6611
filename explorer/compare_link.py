"""What a link to a comparison holds: A's settings (or A's checkpoint), the texts, and B's, as URL query parameters."""

from __future__ import annotations

from explorer.compare import B_FIELDS, INPUT, reversed_text, to_query
from explorer.config import CheckpointConfig, ModelConfig

FLIPPED = "A with {norm}-norm"  # a checkpoint A's B on its own weights, as B's choice and the link (b_model) name it


def comparison_query(
    a: ModelConfig, b: ModelConfig, text_a: str, target_a: str | None, mode: str, text_b: str
) -> dict[str, str]:
    """A's settings that differ from the defaults (a checkpoint: its name, model=), the text, then B's (b_…) that
    differ from default_b(A) (a checkpoint A's B: b_model), or in `mode` INPUT B's text when it is not A's reversed."""
    if isinstance(a, CheckpointConfig):
        query = {"model": a.checkpoint}
    else:
        defaults = ModelConfig()
        query = {f: str(getattr(a, f)) for f in B_FIELDS if getattr(a, f) != getattr(defaults, f)}
    query["tokens"] = text_a
    if target_a is not None:
        query["target"] = target_a
    if mode == INPUT:
        query["compare"] = INPUT
        if text_b != reversed_text(text_a):
            query["b_tokens"] = text_b
    elif isinstance(a, CheckpointConfig):
        query["b_model"] = checkpoint_b(a, b)
    else:
        query.update(to_query(b, a))
    return query


def checkpoint_b(a: CheckpointConfig, b: ModelConfig) -> str:
    """B's choice for a checkpoint A: the other checkpoint's name, or A's own weights with B's norm placement."""
    if isinstance(b, CheckpointConfig) and b.checkpoint != a.checkpoint:
        return b.checkpoint
    return FLIPPED.format(norm=b.norm)
