"""Blocks (post-, pre-, res-post- and peri-norm side by side), stacks and the encoder-decoder; attention itself is
explorer.attention, and making a model from a config (specs, seeded weights) is explorer.build.

Dimension letters used in the shape comments:
    B batch, T query positions, S key positions (the source, in cross-attention),
    D d_model, H heads, G key/value heads (H for all but grouped-query attention), K d_head = D / H, F d_ff,
    L layers, V vocabulary.

Parameter names follow torch.nn.Transformer* (self_attn.in_proj_weight, linear1, norm1 ...), so a stock
module's state dict loads as it is. Every forward returns what it computed instead of hiding it in hooks
or module attributes: a cached model is shared by every Streamlit session and must stay untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from explorer.ablation import HeadAblation
from explorer.attention import MultiHeadAttention
from explorer.config import NORM_ON_OUTPUT, CheckpointConfig, ModelConfig
from explorer.malloc import give_back
from explorer.positional import PositionalEncoding

# A forward that keeps nothing of its blocks (a recomputing one, or one with on_block) hands freed heap pages back
# every this many blocks (explorer.malloc): on SmolLM2's 30 blocks at 512 pieces glibc had kept 190 MB of the
# gradient pass's forward, and 350 MB of a placement's measured run, at the top of the Compare page
BLOCKS_PER_GIVE_BACK = 3

Record = dict[str, torch.Tensor]  # stable activation names -> tensors, e.g. "attn.pattern"
Sublayer = Callable[[torch.Tensor], torch.Tensor]


class Records(list[Record]):
    """One record per block run, in order, and `stacked`: entries the blocks wrote into one buffer, by key, e.g.
    "attn.pattern" [n_run, B, H, T, S], whose slice i is record i's entry (Stack.forward, outside autograd)."""

    def __init__(self, records: list[Record] | None = None, stacked: dict[str, torch.Tensor] | None = None):
        super().__init__(records or [])
        self.stacked = stacked or {}


StackRun = tuple[torch.Tensor, Records]  # a stack's output [B, T, D] and one record per block
OnBlock = Callable[[int, Record], None]  # (layer, its record) as each block has run, for a caller that keeps none
StackOnBlock = Callable[[str, int, Record], None]  # the same for a whole model: (stack name, layer, record)


@dataclass(frozen=True)
class StackSpec:
    """The shape and wiring of one stack of identical blocks."""

    d_model: int
    n_heads: int
    n_layers: int
    d_ff: int
    placement: str  # where each sub-layer's norm sits: "post", "pre", "res-post" or "peri" (config.NORM_FORMULAS)
    final_norm: bool  # a norm after the last block (every placement but post-norm needs one)
    activation: str = "relu"
    eps: float = 1e-5
    bias: bool = True
    cross_attention: bool = False  # decoder blocks of an encoder-decoder attend to the encoder's output
    dropout: float = 0.0
    rope: bool = False  # rotary positions: self-attention rotates queries and keys by their position
    rope_base: float = 10000.0  # theta: pair i of a head turns by position / rope_base^(2i / d_head)
    rope_layout: str = "interleaved"  # pairs (2i, 2i+1); "half": pairs (i, i + K/2), Hugging Face Llama's layout
    n_kv_heads: int | None = None  # heads of keys and values; fewer than n_heads is grouped-query attention (Llama)
    norm_kind: str = "layer"  # "layer": LayerNorm; "rms": RMSNorm (no mean subtracted, no bias), as in Llama
    gated: bool = False  # a gated feed-forward (SwiGLU with silu): linear2(act(gate(x)) * linear1(x))
    qk_norm: bool = False  # OLMo 2: an RMSNorm on the whole query projection [D] and key projection [GK], before RoPE

    @property
    def input_norms(self) -> bool:
        """Whether blocks have norm1..3: the norm before each sub-layer (pre, peri) or after the sum (post)."""
        return self.placement != "res-post"

    @property
    def output_norms(self) -> bool:
        """Whether blocks have out_norm1..3, on each sub-layer's output inside the residual branch (res-post, peri)."""
        return self.placement in NORM_ON_OUTPUT


def make_norm(spec: StackSpec) -> nn.Module:
    """The stack's normalisation: LayerNorm, or RMSNorm (Llama's: x / rms(x) * weight, no bias)."""
    if spec.norm_kind == "rms":
        return nn.RMSNorm(spec.d_model, eps=spec.eps)
    return nn.LayerNorm(spec.d_model, eps=spec.eps, bias=spec.bias)


ACTIVATION_FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,  # the exact erf form, as BERT's "gelu"
    "silu": F.silu,  # x * sigmoid(x): Llama's, inside its gated feed-forward
    "swiglu": F.silu,  # how a config names Llama's gated feed-forward: silu on the gate
}


class Block(nn.Module):
    """One transformer block: self-attention, optional cross-attention, feed-forward, each wrapped by a residual
    connection and norms placed as the spec says. Norms are named by where they sit, so a flip of placement keeps
    the ones both placements have: norm1..3 before each sub-layer (pre, peri) or after the sum (post), out_norm1..3
    on each sub-layer's output (res-post, peri)."""

    def __init__(self, spec: StackSpec):
        super().__init__()
        D, F_, bias = spec.d_model, spec.d_ff, spec.bias
        self.placement = spec.placement
        self.activation = spec.activation
        self.dropout = spec.dropout
        self.self_attn = MultiHeadAttention(
            D,
            spec.n_heads,
            bias,
            spec.dropout,
            spec.rope,
            spec.n_kv_heads,
            spec.rope_base,
            spec.rope_layout,
            spec.qk_norm,
            spec.eps,
        )
        self.multihead_attn = MultiHeadAttention(D, spec.n_heads, bias, spec.dropout) if spec.cross_attention else None
        self.gate = nn.Linear(D, F_, bias=bias) if spec.gated else None
        self.linear1 = nn.Linear(D, F_, bias=bias)
        self.linear2 = nn.Linear(F_, D, bias=bias)
        n_sublayers = 3 if spec.cross_attention else 2
        for i in range(1, n_sublayers + 1):
            if spec.input_norms:
                self.add_module(f"norm{i}", make_norm(spec))
            if spec.output_norms:
                self.add_module(f"out_norm{i}", make_norm(spec))

    def norms_of(self, sublayer: int) -> tuple[nn.Module | None, nn.Module | None]:
        """The norm on the input side (or post-norm's, after the sum) and on the output side of sub-layer 1, 2 or 3."""
        return getattr(self, f"norm{sublayer}", None), getattr(self, f"out_norm{sublayer}", None)

    def residual(
        self, x: torch.Tensor, sublayer_index: int, sublayer: Sublayer, record: Record, name: str, train: bool
    ) -> torch.Tensor:
        """The only place the placements differ, x [B, T, D] -> x [B, T, D]:
        post Norm(x + f(x)); pre x + f(Norm(x)); res-post x + Norm(f(x)); peri x + Norm_out(f(Norm_in(x)))."""
        norm_in, norm_out = self.norms_of(sublayer_index)
        if self.placement == "post":
            out = sublayer(x)
            summed = x + F.dropout(out, self.dropout, train)
            result = norm_in(summed)
            record[f"{name}.ln_in"], record[f"{name}.ln_out"] = summed, result
            record[f"{name}.out"] = out
            return result
        read = x
        if norm_in is not None:
            read = norm_in(x)
            record[f"{name}.ln_in"], record[f"{name}.ln_out"] = x, read
        out = sublayer(read)
        update = out
        if norm_out is not None:
            update = norm_out(out)
            record[f"{name}.out_ln_in"], record[f"{name}.out_ln_out"] = out, update
        record[f"{name}.out"] = out
        return x + F.dropout(update, self.dropout, train)

    def forward(
        self,
        x: torch.Tensor,
        allowed: torch.Tensor | None,
        memory: torch.Tensor | None = None,
        memory_allowed: torch.Tensor | None = None,
        train: bool = False,
        removed: torch.Tensor | None = None,
        removed_with: str = "zero",
        into: Record | None = None,
        need_weights: bool = True,
    ) -> tuple[torch.Tensor, Record]:
        """x [B, T, D] -> x [B, T, D] and everything computed on the way; `removed` [B or 1, H] self-attention heads
        are removed (MultiHeadAttention.forward). `into`: tensors to write some record entries into (its keys, e.g.
        "attn.pattern"), outside autograd. Without `need_weights` the record has no attention weights or scores."""
        record: Record = {"resid_pre": x}
        into = into or {}

        def self_attention(h: torch.Tensor) -> torch.Tensor:
            out, pattern, scores = self.self_attn(
                h,
                h,
                allowed,
                train,
                removed,
                removed_with,
                weights_out=into.get("attn.pattern"),
                scores_out=into.get("attn.scores"),
                need_weights=need_weights,
            )
            if pattern is not None:
                record["attn.pattern"], record["attn.scores"] = pattern, scores
            return out

        def cross_attention(h: torch.Tensor) -> torch.Tensor:
            out, pattern, scores = self.multihead_attn(
                h,
                memory,
                memory_allowed,
                train,
                weights_out=into.get("cross.pattern"),
                scores_out=into.get("cross.scores"),
                need_weights=need_weights,
            )
            if pattern is not None:
                record["cross.pattern"], record["cross.scores"] = pattern, scores
            return out

        def feed_forward(h: torch.Tensor) -> torch.Tensor:
            act = ACTIVATION_FUNCTIONS[self.activation]
            hidden = act(self.linear1(h)) if self.gate is None else act(self.gate(h)) * self.linear1(h)  # [B, T, F]
            record["ffn.hidden"] = hidden
            return self.linear2(F.dropout(hidden, self.dropout, train))  # [B, T, D]

        x = self.residual(x, 1, self_attention, record, "attn", train)
        if self.multihead_attn is not None:
            x = self.residual(x, 2, cross_attention, record, "cross", train)
            x = self.residual(x, 3, feed_forward, record, "ffn", train)
        else:
            x = self.residual(x, 2, feed_forward, record, "ffn", train)
        record["resid_post"] = x
        return x, record


class Stack(nn.Module):
    """n_layers identical blocks, then the final LayerNorm when the spec asks for one."""

    def __init__(self, spec: StackSpec):
        super().__init__()
        self.spec = spec
        self.layers = nn.ModuleList(Block(spec) for _ in range(spec.n_layers))
        self.norm = make_norm(spec) if spec.final_norm else None

    def forward(
        self,
        x: torch.Tensor,
        allowed: torch.Tensor | None,
        memory: torch.Tensor | None = None,
        memory_allowed: torch.Tensor | None = None,
        train: bool = False,
        ablation: HeadAblation | None = None,
        first_layer: int = 0,
        keep_scores: bool = True,
        record: bool = True,
        on_block: OnBlock | None = None,
    ) -> StackRun:
        """x [B, T, D] -> output [B, T, D] and one record per block run. `ablation` removes self-attention heads;
        `first_layer` > 0 starts from that block, x then being the stream entering it (the blocks below are reused).
        Without `keep_scores` the records drop each block's pre-softmax scores as soon as it has run. Outside
        autograd the blocks write their attention weights (and scores) into one buffer each: Records.stacked.
        Without `record`, only the output: no records, and no attention weights computed (MultiHeadAttention's
        need_weights), for a caller that runs the stack many times and reads only where it ends. Without `record`
        under autograd (gradient norms), each block keeps only its input for the backward pass and runs again there:
        every block's activations at once were 0.9 GB for SmolLM2 on 512 pieces, one block's are 30 MB. With
        `on_block`, each block's record goes to on_block(layer, record) as the block has run, and is not kept (the
        records come back empty): for a caller that reduces every block to a few numbers. Those two forwards keep
        nothing of their blocks, and hand the heap pages the blocks freed back every BLOCKS_PER_GIVE_BACK blocks."""
        n_run = len(self.layers) - first_layer
        recompute = not record and torch.is_grad_enabled() and not train  # train: dropout would draw other masks
        buffered = record and not torch.is_grad_enabled() and n_run > 0 and on_block is None
        stacked = self._buffers_for(x, memory, n_run, keep_scores) if buffered else {}
        records = Records(stacked=stacked)
        for index in range(first_layer, len(self.layers)):
            removed = None if ablation is None else ablation.layer(index)  # [B or 1, H] or None
            mode = "zero" if ablation is None else ablation.mode
            into = {key: buffer[len(records)] for key, buffer in stacked.items()}
            if recompute:
                x = checkpoint(_block_output, self.layers[index], x, allowed, memory, memory_allowed, removed, mode,
                               use_reentrant=False)  # fmt: skip
            else:
                x, block_record = self.layers[index](
                    x, allowed, memory, memory_allowed, train, removed, mode, into, need_weights=record
                )
                if record and on_block is not None:
                    on_block(index, block_record)
                elif record:
                    if not keep_scores:
                        block_record = {k: v for k, v in block_record.items() if not k.endswith(".scores")}
                    records.append(block_record)
            if (recompute or on_block is not None) and (index + 1) % BLOCKS_PER_GIVE_BACK == 0:
                give_back()  # what the blocks made, none of which is kept
        return (x if self.norm is None else self.norm(x)), records

    def _buffers_for(
        self, x: torch.Tensor, memory: torch.Tensor | None, n_run: int, keep_scores: bool
    ) -> dict[str, torch.Tensor]:
        """Empty [n_run, B, H, T, S] buffers for the attention weights (and scores) of n_run blocks on x [B, T, D]:
        each block writes its own slice, so its maps are never copied from one array into another."""
        B, T, _ = x.shape
        keys = [("attn", T)] + (
            [("cross", memory.shape[1])] if memory is not None and self.spec.cross_attention else []
        )
        kinds = ("pattern", "scores") if keep_scores else ("pattern",)
        shape = (n_run, B, self.spec.n_heads, T)
        return {f"{sub}.{kind}": x.new_empty((*shape, S)) for sub, S in keys for kind in kinds}


def _block_output(
    block: Block,
    x: torch.Tensor,
    allowed: torch.Tensor | None,
    memory: torch.Tensor | None,
    memory_allowed: torch.Tensor | None,
    removed: torch.Tensor | None,
    mode: str,
) -> torch.Tensor:
    """A block's output [B, T, D] alone, in eval mode and without attention weights: what a recomputed block gives."""
    return block(x, allowed, memory, memory_allowed, False, removed, mode, {}, need_weights=False)[0]


class Transformer(nn.Module):
    """An encoder, a decoder, or both; positions are added to the input embeddings of each stack. Built from a
    CheckpointConfig it has a real checkpoint's embeddings too: token types and an embedding LayerNorm (BERT), or a
    read-out tied to the token embeddings (Llama); its `tokenizer` turns text into the checkpoint's pieces."""

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
        # A checkpoint has a tokenizer and a vocabulary of pieces instead (explorer.pretrained sets the tokenizer).
        self.vocabulary = vocabulary
        self.tokenizer = None
        # Norm tensors a placement flip took from another model that this placement has no place for: kept aside, not
        # parameters, so flipping back (copy_shared_weights) restores them and the original numbers exactly.
        self.carried: dict[str, torch.Tensor] = {}
        checkpoint = config if isinstance(config, CheckpointConfig) else None
        n_tokens = len(vocabulary) if vocabulary else (checkpoint.vocab_size if checkpoint else 0)
        self.embedding = _unfilled_embedding(n_tokens, spec.d_model) if n_tokens else None
        self.head = nn.Linear(spec.d_model, len(vocabulary)) if vocabulary else None
        bert = checkpoint is not None and checkpoint.family == "bert"
        # BERT's token-type table: row 0 is used
        self.token_type = _unfilled_embedding(checkpoint.type_vocab_size, spec.d_model) if bert else None
        self.embed_norm = nn.LayerNorm(spec.d_model, eps=checkpoint.norm_eps) if bert else None
        if checkpoint is not None and checkpoint.family != "bert":  # Llama and OLMo 2 read out next-token logits
            self.head = nn.Linear(spec.d_model, checkpoint.vocab_size, bias=False)  # [V, D]: logits of the next token
            self.tie_read_out()

    @property
    def stack_names(self) -> tuple[str, ...]:
        """The stacks it has, in the order they run: ("encoder",), ("decoder",) or ("encoder", "decoder")."""
        return tuple(name for name in ("encoder", "decoder") if getattr(self, name) is not None)

    @property
    def first_stack(self) -> Stack:
        """The stack that reads the input: the encoder, or a decoder-only model's decoder."""
        return getattr(self, self.stack_names[0])

    def tie_read_out(self) -> None:
        """A checkpoint with tied embeddings reads logits out through its token embedding table: one tensor."""
        if isinstance(self.config, CheckpointConfig) and self.config.tie_embeddings and self.head is not None:
            self.head.weight = self.embedding.weight

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """ids [..., T] -> the first block's input [..., T, D]: token embedding + position (+ token type 0, then
        the embedding LayerNorm, for BERT)."""
        x = self.positional(self.embedding(ids))  # [..., T, D]
        if self.token_type is not None:
            x = x + self.token_type.weight[0]
        return x if self.embed_norm is None else self.embed_norm(x)

    def forward(
        self,
        x: torch.Tensor,
        allowed: torch.Tensor | None,
        target: torch.Tensor | None = None,
        target_allowed: torch.Tensor | None = None,
        memory_allowed: torch.Tensor | None = None,
        train: bool = False,
        ablation: HeadAblation | None = None,
        keep_scores: bool = True,
        record: bool = True,
        on_block: StackOnBlock | None = None,
    ) -> tuple[StackRun, ...]:
        """x [B, T, D] (and target [B, T_target, D] for an encoder-decoder): embeddings with positions
        already added. Masks are [B or 1, Tq, Tk] bool, True = may attend, or None for all. `ablation` removes
        self-attention heads of the first stack (explorer.ablation); without `keep_scores` no record keeps scores;
        without `record` no record at all, and attention through torch's fused kernel (Stack.forward); with
        `on_block`, each block's record goes to on_block(stack name, layer, record) instead of into the records.
        -> (output [B, T, D], one record per block) for each stack, in the order they ran."""
        kept = {"keep_scores": keep_scores, "record": record}
        first, first_name = self.first_stack, self.stack_names[0]
        runs = (first(x, allowed, train=train, ablation=ablation, on_block=_named(on_block, first_name), **kept),)
        if self.encoder is not None and self.decoder is not None:
            memory = runs[0][0]  # [B, S, D]
            runs += (
                self.decoder(
                    target, target_allowed, memory, memory_allowed, train, on_block=_named(on_block, "decoder"), **kept
                ),
            )
        return runs


def _named(on_block: StackOnBlock | None, stack: str) -> OnBlock | None:
    """Transformer.forward's on_block for one of its stacks."""
    return None if on_block is None else lambda layer, record: on_block(stack, layer, record)


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


def _unfilled_embedding(rows: int, width: int) -> nn.Embedding:
    """nn.Embedding without torch's N(0, 1) fill, which every builder overwrites (init_weights, a checkpoint's tensors):
    on the meta device that fill imports torch._dynamo, about 3 s of a server's first model."""
    return nn.Embedding(rows, width, _weight=torch.empty(rows, width))
