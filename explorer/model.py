"""Attention, blocks (post-norm and pre-norm side by side), stacks and the encoder-decoder.

Dimension letters used in the shape comments:
    B batch, T query positions, S key positions (the source, in cross-attention),
    D d_model, H heads, K d_head = D / H, F d_ff, L layers.

Parameter names follow torch.nn.Transformer* (self_attn.in_proj_weight, linear1, norm1 ...), so a stock
module's state dict loads as it is. Every forward returns what it computed instead of hiding it in hooks
or module attributes: a cached model is shared by every Streamlit session and must stay untouched.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from explorer.config import ConfigError, ModelConfig
from explorer.positional import PositionalEncoding, apply_rope

NEG_INF = float("-inf")
Record = dict[str, torch.Tensor]  # stable activation names -> tensors, e.g. "attn.pattern"
Sublayer = Callable[[torch.Tensor], torch.Tensor]
StackRun = tuple[torch.Tensor, list[Record]]  # a stack's output [B, T, D] and one record per block


@dataclass(frozen=True)
class StackSpec:
    """The shape and wiring of one stack of identical blocks."""

    d_model: int
    n_heads: int
    n_layers: int
    d_ff: int
    norm_first: bool  # True: pre-norm, x + f(LN(x)); False: post-norm, LN(x + f(x))
    final_norm: bool  # a LayerNorm after the last block (a pre-norm stack needs one)
    activation: str = "relu"
    eps: float = 1e-5
    bias: bool = True
    cross_attention: bool = False  # decoder blocks of an encoder-decoder attend to the encoder's output
    dropout: float = 0.0
    rope: bool = False  # rotary positions: self-attention rotates queries and keys by their position


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention over H heads; returns output, per-head weights and scores."""

    def __init__(self, d_model: int, n_heads: int, bias: bool = True, dropout: float = 0.0, rope: bool = False):
        super().__init__()
        self.rope = rope
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.dropout = dropout
        self.in_proj_weight = nn.Parameter(torch.empty(3 * d_model, d_model))  # [3D, D]: W_q, W_k, W_v stacked
        self.in_proj_bias = nn.Parameter(torch.empty(3 * d_model)) if bias else None
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(
        self, query: torch.Tensor, memory: torch.Tensor, allowed: torch.Tensor | None, train: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """query [B, T, D], memory [B, S, D], allowed [B or 1, T, S] (True = may attend) ->
        output [B, T, D], weights [B, H, T, S] (post-softmax, pre-dropout), scores [B, H, T, S] (-inf masked)."""
        B, T, D = query.shape
        S = memory.shape[1]
        H, K = self.n_heads, self.d_head
        if query is memory:
            q, k, v = F.linear(query, self.in_proj_weight, self.in_proj_bias).chunk(3, dim=-1)  # 3 x [B, T, D]
        else:
            w_q, w_kv = self.in_proj_weight.split([D, 2 * D])
            b_q, b_kv = self.in_proj_bias.split([D, 2 * D]) if self.in_proj_bias is not None else (None, None)
            q = F.linear(query, w_q, b_q)  # [B, T, D]
            k, v = F.linear(memory, w_kv, b_kv).chunk(2, dim=-1)  # 2 x [B, S, D]
        q = q.reshape(B, T, H, K).transpose(1, 2)  # [B, H, T, K]
        k = k.reshape(B, S, H, K).transpose(1, 2)  # [B, H, S, K]
        v = v.reshape(B, S, H, K).transpose(1, 2)  # [B, H, S, K]
        if self.rope:  # the score of query m and key n then depends on m - n only
            q, k = apply_rope(q), apply_rope(k)
        scores = (q * math.sqrt(1.0 / K)) @ k.transpose(-2, -1)  # [B, H, T, S]
        if allowed is None:
            weights = torch.softmax(scores, dim=-1)  # [B, H, T, S]
        else:
            blocked = ~allowed.unsqueeze(1)  # [B or 1, 1, T, S]
            scores = scores.masked_fill(blocked, NEG_INF)
            empty = blocked.all(dim=-1, keepdim=True)  # [B or 1, 1, T, 1]: rows with no allowed key
            weights = torch.softmax(scores.masked_fill(empty, 0.0), dim=-1).masked_fill(blocked, 0.0)
        attended = F.dropout(weights, self.dropout, train) @ v  # [B, H, T, K]
        merged = attended.transpose(1, 2).reshape(B, T, D)  # [B, T, D]
        return self.out_proj(merged), weights, scores


class Block(nn.Module):
    """One transformer block: self-attention, optional cross-attention, feed-forward, each wrapped by
    a residual connection and a LayerNorm placed before (pre-norm) or after (post-norm) the sub-layer."""

    def __init__(self, spec: StackSpec):
        super().__init__()
        D, F_, bias = spec.d_model, spec.d_ff, spec.bias
        self.norm_first = spec.norm_first
        self.activation = spec.activation
        self.dropout = spec.dropout
        self.self_attn = MultiHeadAttention(D, spec.n_heads, bias, spec.dropout, rope=spec.rope)
        self.multihead_attn = MultiHeadAttention(D, spec.n_heads, bias, spec.dropout) if spec.cross_attention else None
        self.linear1 = nn.Linear(D, F_, bias=bias)
        self.linear2 = nn.Linear(F_, D, bias=bias)
        self.norm1 = nn.LayerNorm(D, eps=spec.eps, bias=bias)
        self.norm2 = nn.LayerNorm(D, eps=spec.eps, bias=bias)
        self.norm3 = nn.LayerNorm(D, eps=spec.eps, bias=bias) if spec.cross_attention else None

    def residual(
        self, x: torch.Tensor, norm: nn.LayerNorm, sublayer: Sublayer, record: Record, name: str, train: bool
    ) -> torch.Tensor:
        """Post-norm: LN(x + f(x)). Pre-norm: x + f(LN(x)). The only place the two placements differ."""
        if self.norm_first:
            normed = norm(x)
            out = sublayer(normed)
            record[f"{name}.ln_in"], record[f"{name}.ln_out"] = x, normed
            result = x + F.dropout(out, self.dropout, train)
        else:
            out = sublayer(x)
            summed = x + F.dropout(out, self.dropout, train)
            result = norm(summed)
            record[f"{name}.ln_in"], record[f"{name}.ln_out"] = summed, result
        record[f"{name}.out"] = out
        return result

    def forward(
        self,
        x: torch.Tensor,
        allowed: torch.Tensor | None,
        memory: torch.Tensor | None = None,
        memory_allowed: torch.Tensor | None = None,
        train: bool = False,
    ) -> tuple[torch.Tensor, Record]:
        """x [B, T, D] -> x [B, T, D] and everything computed on the way."""
        record: Record = {"resid_pre": x}

        def self_attention(h: torch.Tensor) -> torch.Tensor:
            out, record["attn.pattern"], record["attn.scores"] = self.self_attn(h, h, allowed, train)
            return out

        def cross_attention(h: torch.Tensor) -> torch.Tensor:
            out, record["cross.pattern"], record["cross.scores"] = self.multihead_attn(h, memory, memory_allowed, train)
            return out

        def feed_forward(h: torch.Tensor) -> torch.Tensor:
            hidden = F.gelu(self.linear1(h)) if self.activation == "gelu" else F.relu(self.linear1(h))  # [B, T, F]
            record["ffn.hidden"] = hidden
            return self.linear2(F.dropout(hidden, self.dropout, train))  # [B, T, D]

        x = self.residual(x, self.norm1, self_attention, record, "attn", train)
        if self.multihead_attn is not None:
            x = self.residual(x, self.norm2, cross_attention, record, "cross", train)
            x = self.residual(x, self.norm3, feed_forward, record, "ffn", train)
        else:
            x = self.residual(x, self.norm2, feed_forward, record, "ffn", train)
        record["resid_post"] = x
        return x, record


class Stack(nn.Module):
    """n_layers identical blocks, then the final LayerNorm when the spec asks for one."""

    def __init__(self, spec: StackSpec):
        super().__init__()
        self.spec = spec
        self.layers = nn.ModuleList(Block(spec) for _ in range(spec.n_layers))
        self.norm = nn.LayerNorm(spec.d_model, eps=spec.eps, bias=spec.bias) if spec.final_norm else None

    def forward(
        self,
        x: torch.Tensor,
        allowed: torch.Tensor | None,
        memory: torch.Tensor | None = None,
        memory_allowed: torch.Tensor | None = None,
        train: bool = False,
    ) -> tuple[torch.Tensor, list[Record]]:
        """x [B, T, D] -> output [B, T, D] and one record per block."""
        records = []
        for block in self.layers:
            x, record = block(x, allowed, memory, memory_allowed, train)
            records.append(record)
        return (x if self.norm is None else self.norm(x)), records


class Transformer(nn.Module):
    """An encoder, a decoder, or both; positions are added to the input embeddings of each stack."""

    def __init__(
        self,
        encoder: StackSpec | None,
        decoder: StackSpec | None,
        positional: str = "none",
        max_positions: int = 512,
        config: ModelConfig | None = None,
        vocabulary: tuple[str, ...] | None = None,
    ):
        super().__init__()
        spec = encoder or decoder
        assert spec is not None, "a Transformer needs an encoder, a decoder or both"
        self.config = config
        self.d_model = spec.d_model
        self.max_positions = max_positions
        self.encoder = Stack(encoder) if encoder else None
        self.decoder = Stack(decoder) if decoder else None
        self.positional = PositionalEncoding(positional, spec.d_model, max_positions)
        # A trainable model has its own vocabulary: a learned embedding in, a linear read-out to token logits.
        # Without one, tokens get fixed hashed embeddings (explorer.tokens) and there is no read-out.
        self.vocabulary = vocabulary
        self.embedding = nn.Embedding(len(vocabulary), spec.d_model) if vocabulary else None
        self.head = nn.Linear(spec.d_model, len(vocabulary)) if vocabulary else None

    def forward(
        self,
        x: torch.Tensor,
        allowed: torch.Tensor | None,
        target: torch.Tensor | None = None,
        target_allowed: torch.Tensor | None = None,
        memory_allowed: torch.Tensor | None = None,
        train: bool = False,
    ) -> tuple[StackRun, ...]:
        """x [B, T, D] (and target [B, T_target, D] for an encoder-decoder): embeddings with positions
        already added. Masks are [B or 1, Tq, Tk] bool, True = may attend, or None for all.
        -> (output [B, T, D], one record per block) for each stack, in the order they ran."""
        first = self.encoder if self.encoder is not None else self.decoder
        runs = (first(x, allowed, train=train),)
        if self.encoder is not None and self.decoder is not None:
            memory = runs[0][0]  # [B, S, D]
            runs += (self.decoder(target, target_allowed, memory, memory_allowed, train),)
        return runs


def init_weights(model: Transformer, seed: int) -> Transformer:
    """Fill every parameter from a generator seeded by `seed`, as torch's own modules initialise them,
    without touching the global random state."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, MultiHeadAttention):
                nn.init.xavier_uniform_(module.in_proj_weight, generator=generator)
                if module.in_proj_bias is not None:
                    nn.init.zeros_(module.in_proj_bias)
            elif isinstance(module, nn.Linear):
                nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5), generator=generator)
                if module.bias is not None:
                    bound = 1 / math.sqrt(module.in_features)
                    nn.init.uniform_(module.bias, -bound, bound, generator=generator)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        for module in model.modules():  # torch zeroes the attention output bias after the Linear init
            if isinstance(module, MultiHeadAttention) and module.out_proj.bias is not None:
                nn.init.zeros_(module.out_proj.bias)
        if model.embedding is not None:  # N(0, 1), as the hashed embeddings of an untrained model
            model.embedding.weight.copy_(torch.randn(model.embedding.weight.shape, generator=generator))
        table = model.positional.table
        if isinstance(table, nn.Parameter):  # N(0, 1/2): the sinusoids' scale, next to N(0, 1) token embeddings
            table.copy_(torch.randn(table.shape, generator=generator) / math.sqrt(2.0))
    return model


def copy_shared_weights(source: nn.Module, target: nn.Module) -> list[str]:
    """Copy every parameter and buffer whose name and shape the two models share; returns the names copied."""
    wanted = target.state_dict()
    shared = {k: v.clone() for k, v in source.state_dict().items() if k in wanted and wanted[k].shape == v.shape}
    target.load_state_dict(shared, strict=False)
    return sorted(shared)


def stack_specs(cfg: ModelConfig) -> tuple[StackSpec | None, StackSpec | None]:
    """The encoder and decoder specs a config asks for."""
    pre = cfg.norm == "pre"

    def spec(cross: bool) -> StackSpec:
        return StackSpec(
            d_model=cfg.d_model,
            n_heads=cfg.n_heads,
            n_layers=cfg.n_layers,
            d_ff=cfg.d_ff,
            norm_first=pre,
            final_norm=pre,
            activation=cfg.activation,
            cross_attention=cross,
            dropout=cfg.dropout,
            rope=cfg.positional == "rope",
        )

    if cfg.arch == "encoder":
        return spec(False), None
    if cfg.arch == "decoder":
        return None, spec(False)
    return spec(False), spec(True)


@contextmanager
def float32_default() -> Iterator[None]:
    """torch's default dtype held at float32 inside (as a `with` or a decorator). A notebook that ran
    torch.set_default_dtype(torch.float64) would otherwise draw other random weights for the same seed, and get
    float64 traces: a seed must give the same numbers everywhere. A no-op when float32 is already the default."""
    previous = torch.get_default_dtype()
    if previous == torch.float32:
        yield
        return
    torch.set_default_dtype(torch.float32)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


@float32_default()
def model_skeleton(cfg: ModelConfig, vocabulary: tuple[str, ...] | None = None) -> Transformer:
    """The model's modules on torch's meta device: every parameter's name, shape and dtype, with no memory behind
    them, so a model's size can be checked before it is built."""
    if not isinstance(cfg, ModelConfig):
        raise ConfigError(f"A model is built from a ModelConfig, not a {type(cfg).__name__}.")
    encoder, decoder = stack_specs(cfg)
    with torch.device("meta"):
        return Transformer(encoder, decoder, cfg.positional, cfg.max_tokens, config=cfg, vocabulary=vocabulary)


def parameter_total(cfg: ModelConfig, vocabulary: tuple[str, ...] | None = None) -> int:
    """How many parameters build_model(cfg, vocabulary) would have, counted without building it."""
    return sum(p.numel() for p in model_skeleton(cfg, vocabulary).parameters())


@float32_default()
def build_model(cfg: ModelConfig, vocabulary: tuple[str, ...] | None = None) -> Transformer:
    """A fresh model for the config, identical for the same config in any process; in eval mode.
    With a vocabulary it gets a learned embedding and a read-out to logits, ready to train."""
    model = model_skeleton(cfg, vocabulary).to_empty(device="cpu")
    model.positional.reset_buffers()
    return init_weights(model, cfg.seed).eval()
