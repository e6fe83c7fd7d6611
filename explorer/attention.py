"""Scaled dot-product attention over several heads, the one module every block of every model uses.

Dimension letters as in explorer.model: B batch, T query positions, S key positions, D d_model, H heads, G key/value
heads, K d_head.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from explorer.ablation import remove_heads
from explorer.positional import apply_rope

NEG_INF = float("-inf")


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention over H heads; returns output, per-head weights and scores. With fewer key/value
    heads G than query heads H (grouped-query attention), query head h reads key/value head h // (H / G)."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        bias: bool = True,
        dropout: float = 0.0,
        rope: bool = False,
        n_kv_heads: int | None = None,
        rope_base: float = 10000.0,
        rope_layout: str = "interleaved",
        qk_norm: bool = False,
        eps: float = 1e-5,
    ):
        super().__init__()
        self.rope, self.rope_base, self.rope_layout = rope, rope_base, rope_layout
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads or n_heads
        self.d_head = d_model // n_heads
        self.dropout = dropout
        rows = d_model + 2 * self.n_kv_heads * self.d_head  # 3D, or D + 2GK for grouped-query attention
        self.in_proj_weight = nn.Parameter(torch.empty(rows, d_model))  # [D + 2GK, D]: W_q, W_k, W_v stacked
        self.in_proj_bias = nn.Parameter(torch.empty(rows)) if bias else None
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.q_norm = nn.RMSNorm(d_model, eps=eps) if qk_norm else None  # over all heads' queries at once
        self.k_norm = nn.RMSNorm(self.n_kv_heads * self.d_head, eps=eps) if qk_norm else None

    def forward(
        self,
        query: torch.Tensor,
        memory: torch.Tensor,
        allowed: torch.Tensor | None,
        train: bool = False,
        removed: torch.Tensor | None = None,
        removed_with: str = "zero",
        *,
        weights_out: torch.Tensor | None = None,
        scores_out: torch.Tensor | None = None,
        need_weights: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """query [B, T, D], memory [B, S, D], allowed [B or 1, T, S] (True = may attend) ->
        output [B, T, D], weights [B, H, T, S] (post-softmax, pre-dropout), scores [B, H, T, S] (-inf masked).
        `removed` [B or 1, H] (1 = removed) replaces those heads' weighted sums of values before the output projection
        (explorer.ablation.remove_heads); their weights are still computed and returned. With B = 1 and R rows of
        `removed`, the heads attend once and the output has R rows, one per removal (head_ablation_effects' batches).
        `weights_out` and `scores_out` [B, H, T, S], when given (outside autograd), receive the weights and scores,
        which are then returned: Stack.forward passes slices of one buffer per stack, so a trace keeps them without a
        copy. Without `need_weights` (and not training) weights and scores are None: the heads' sums come from torch's
        fused attention, which never holds a [T, S] map (4x faster at 512 pieces), equal to float32 rounding."""
        B, T, D = query.shape
        S = memory.shape[1]
        H, G, K = self.n_heads, self.n_kv_heads, self.d_head
        if query is memory:
            q, k, v = F.linear(query, self.in_proj_weight, self.in_proj_bias).split([D, G * K, G * K], dim=-1)
        else:
            w_q, w_kv = self.in_proj_weight.split([D, 2 * G * K])
            b_q, b_kv = self.in_proj_bias.split([D, 2 * G * K]) if self.in_proj_bias is not None else (None, None)
            q = F.linear(query, w_q, b_q)  # [B, T, D]
            k, v = F.linear(memory, w_kv, b_kv).chunk(2, dim=-1)  # 2 x [B, S, GK]
        if self.q_norm is not None:  # OLMo 2 normalises the full projections, before they split into heads
            q, k = self.q_norm(q), self.k_norm(k)  # [B, T, D], [B, S, GK]
        q = q.reshape(B, T, H, K).transpose(1, 2)  # [B, H, T, K]
        k = k.reshape(B, S, G, K).transpose(1, 2)  # [B, G, S, K]
        v = v.reshape(B, S, G, K).transpose(1, 2)  # [B, G, S, K]
        if self.rope:  # the score of query m and key n then depends on m - n only
            q, k = (apply_rope(t, self.rope_base, self.rope_layout) for t in (q, k))
        if G != H:  # grouped-query attention: each key/value head serves H / G query heads in a row
            k, v = k.repeat_interleave(H // G, dim=1), v.repeat_interleave(H // G, dim=1)  # [B, H, S, K] each
        if not need_weights and not train:
            attended, weights, scores = _fused(q, k, v, allowed), None, None  # [B, H, T, K]
        else:
            weights, scores = _weights(q, k, allowed, weights_out, scores_out)  # [B, H, T, S] each
            attended = F.dropout(weights, self.dropout, train) @ v  # [B, H, T, K]
        if removed is not None:
            attended = remove_heads(attended, removed, removed_with)  # [B, H, T, K]
        merged = attended.transpose(1, 2).reshape(-1, T, D)  # [B, T, D], or [R, T, D] (see `removed`)
        return self.out_proj(merged), weights, scores


def _weights(
    q: torch.Tensor,
    k: torch.Tensor,
    allowed: torch.Tensor | None,
    weights_out: torch.Tensor | None,
    scores_out: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q [B, H, T, K], k [B, H, S, K], allowed [B or 1, T, S] -> weights and scores [B, H, T, S], into the buffers
    when given (MultiHeadAttention.forward): scores scaled by 1/sqrt(K) and -inf where blocked, weights their softmax,
    0 on every key of a query with no allowed key."""
    scores = torch.matmul(q * math.sqrt(1.0 / q.shape[-1]), k.transpose(-2, -1), out=scores_out)  # [B, H, T, S]
    blocked = None if allowed is None else ~allowed.unsqueeze(1)  # [B or 1, 1, T, S]
    if blocked is None or not blocked.any():  # no mask, or one that blocks nothing (one unpadded sentence)
        weights = torch.softmax(scores, dim=-1, out=weights_out)  # [B, H, T, S]
    else:
        # -inf on blocked keys by adding a [B or 1, 1, T, S] bias of 0 and -inf: x + 0 is x exactly, and an
        # in-place add is 20x faster than masked_fill's broadcast (0.13 ms against 2.8 ms for 9 x 512 x 512)
        scores = scores.add_(torch.zeros(blocked.shape, dtype=scores.dtype).masked_fill_(blocked, NEG_INF))
        empty = blocked.all(dim=-1, keepdim=True)  # [B or 1, 1, T, 1]: rows with no allowed key
        if empty.any():  # softmax over no key is NaN: such a row gets weight 0 on every key
            weights = torch.softmax(scores.masked_fill(empty, 0.0), dim=-1, out=weights_out)
            # in place only in the buffer: autograd needs the softmax's own output for its backward
            weights = weights.masked_fill(blocked, 0.0) if weights_out is None else weights.masked_fill_(blocked, 0.0)
        else:  # exp(-inf) is exactly 0, so blocked keys get weight 0 without a second pass over [B, H, T, S]
            weights = torch.softmax(scores, dim=-1, out=weights_out)
    return weights, scores


def _fused(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """q [B, H, T, K], k and v [B, H, S, K], allowed [B or 1, T, S] -> the weighted sums of values [B, H, T, K] by
    torch's fused attention (scale 1/sqrt(K), as above); a query with no allowed key gets 0, as its weights are 0."""
    mask = None if allowed is None else allowed.unsqueeze(1)  # [B or 1, 1, T, S]
    attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # [B, H, T, K]
    if mask is not None:
        empty = ~mask.any(dim=-1, keepdim=True)  # [B or 1, 1, T, 1]
        if empty.any():
            attended = attended.masked_fill(empty, 0.0)
    return attended
