"""Head roles of a padded sentence leave the [PAD] queries out. A padding mask hides the [PAD] keys but lets a [PAD]
query see every real token, so their rows are full distributions; counted, they are no part of the sentence Clark et
al. measure, and on MiniLM with 4 [PAD]s they changed 12 of the 72 labels (found by a review of the page)."""

from __future__ import annotations

import numpy as np

import explorer
from explorer.config import PAD_TOKEN
from tests.test_attention_norms_page import opened
from views.trace_caches import _roles, trace_key

TEXT = "the cat sat on the mat [PAD] [PAD] [PAD] [PAD]"


def first_token_shares_by_hand(weights: np.ndarray, allowed: np.ndarray, text_rows: np.ndarray) -> np.ndarray:
    """[L, H] each head's mean weight on key 0 over the queries in `text_rows` that may see key 0 and another key."""
    rows = text_rows & allowed[:, 0] & (allowed.sum(axis=-1) > 1)  # [Tq]
    return weights[:, :, rows, 0].astype(np.float64).mean(axis=-1)  # [L, H]


def test_the_roles_the_page_draws_leave_padding_queries_out(minilm_model):
    trace = explorer.run(minilm_model, TEXT)
    maps = trace.first.self_attention
    padding = np.array([t == PAD_TOKEN for t in maps.query_tokens])  # [Tq]
    assert padding.sum() == 4 and maps.allowed[padding].any()  # the [PAD] rows see real tokens: they would count
    roles = _roles(trace.config, trace_key(trace), maps.kind, False, None, _trace=trace, _norms=None)
    expected = first_token_shares_by_hand(maps.weights, maps.allowed, ~padding)
    np.testing.assert_allclose(roles.share("first"), expected, rtol=1e-6)
    with_padding = first_token_shares_by_hand(maps.weights, maps.allowed, np.ones_like(padding))
    assert np.abs(with_padding - expected).max() > 1e-3  # the test can tell the two apart on this sentence


def test_the_caption_says_padding_is_left_out_only_when_there_is_some():
    padded = " ".join(c.value for c in opened({"model": "minilm-l6", "tokens": TEXT}).caption)
    assert "[PAD] queries are left out" in padded
    plain = " ".join(c.value for c in opened({"model": "minilm-l6", "tokens": "the cat sat on the mat"}).caption)
    assert "[PAD] queries are left out" not in plain
