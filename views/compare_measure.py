"""Compare's maps by the measure picked (the measure URL parameter): the weights α, or what each head adds,
‖α·f(x)‖ (Kobayashi et al. 2020), for A from the session's model and for B from B's own model."""

from __future__ import annotations

from dataclasses import replace

from explorer.compare import MapPair, align_pair
from explorer.config import ModelConfig
from explorer.trace import Trace
from views.caches import compare_norms
from views.state import model_key
from views.trace_caches import norm_attention_of


def with_norms(pair: MapPair, trace_a: Trace, b: tuple[ModelConfig, ModelConfig, str, str | None] | None) -> MapPair:
    """`pair` with each side's weights replaced by its ‖α·f(x)‖ [L, H, Tq, Tk]: A's is the session's model on the
    sidebar's trace (norm_attention_of), B's is compare_norms of `b` = (A's config, B's config, B's text, B's
    target), the arguments that made B's trace."""
    maps_a = None if pair.a is None else replace(pair.a, weights=norm_attention_of(trace_a, pair.a.kind))
    maps_b = None
    if pair.b is not None and b is not None:
        maps_b = replace(pair.b, weights=compare_norms(*b, model_key(), pair.b.kind))
    return MapPair(pair.label, pair.stack, maps_a, maps_b)


def norm_pairs(
    pairs: list[MapPair], trace_a: Trace, b: tuple[ModelConfig, ModelConfig, str, str | None] | None, order
) -> list[MapPair]:
    """with_norms of each of paired_attention's `pairs` (B's maps in B's own token order), lined up to A's tokens
    as the page lines up the weights when `order` (token_order) is given."""
    measured = [with_norms(pair, trace_a, b) for pair in pairs]
    return measured if order is None else [align_pair(pair, order) for pair in measured]
