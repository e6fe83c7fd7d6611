"""Which parts of the model make a prediction: direct logit attribution at the last position.

The stream the read-out sees is a sum: the stack's input (the embeddings), each head's output through its slice of the
attention's output projection, the projection's bias, each cross-attention and each feed-forward output, and the
biases norms add. Every norm on the way is linear once its scale is frozen at this run's value (s, the run's RMS or
standard deviation, eps included): RMSNorm takes a part p to p * w / s, LayerNorm to (p - mean(p)) * w / s and adds
its bias as a part of its own. Carried through every norm in the order the run applied them (pre-norm: parts only
accumulate; res-post and peri: each sub-layer's output parts pass through the norm on that output; post: every part
of the stream passes through the norm after each sum), then through the final norm and dotted with the piece's row of
the read-out, the parts' terms add up to the logit (TransformerLens's direct logit attribution; the frozen scale as
in its `apply_ln_to_stack`). A head's term is its direct effect only: what later layers make of its output is
credited to them.

Values are read from the trace (what each attention read, each sub-layer's output, each norm's input) and computed
in float64. A head the run removed (trace.ablated) adds what it added in that run: zero, or its mean output (its
weights as norm_attention.effective_weights gives them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from explorer.ablation import Head, checked_heads, checked_mode
from explorer.analysis.logit_lens import can_read_out, lens_refusal, output_stack
from explorer.analysis.norm_attention import attention_reads, effective_layer_weights, head_slices, head_values
from explorer.attention import MultiHeadAttention
from explorer.config import ConfigError
from explorer.model import Block, Transformer
from explorer.prediction import last_logits, piece_name, piece_text
from explorer.tokenization import byte_alphabet, byte_spelling
from explorer.trace import StackTrace, Trace, byte_level_pieces


@dataclass(frozen=True)
class LogitAttribution:
    """The logit of one piece at the last position, shared out over the parts of the model that wrote the stream."""

    piece: str  # as the vocabulary spells it ("ĠParis")
    text: str  # as text (" Paris")
    token_id: int
    position: int  # the position read out: the last one
    logit: float  # the model's logit for the piece there, read out from the trace's output
    embeddings: float  # the stack's input (token embedding and position; the encoder-decoder's decoder input)
    heads: np.ndarray  # [L, H]: each self-attention head's output through its slice of W_O
    attention_bias: np.ndarray  # [L]: the self-attention output projection's bias (0 without one)
    cross_attention: np.ndarray | None  # [L]: each cross-attention's output (decoder of an encoder-decoder), else None
    feed_forward: np.ndarray  # [L]: each feed-forward sub-layer's output
    norm_bias: float  # every LayerNorm bias on the way, the final norm's included
    read_out_bias: float  # the read-out's bias for the piece (0 without one)
    total: float  # the sum of all the parts above; equals `logit` up to float rounding
    placement: str = "pre"  # where the read-out stack's norms sit (config.NORMS): which norms a part passes through
    final_norm: bool = True  # whether that stack ends with a norm (every placement but post-norm's)

    @property
    def rest(self) -> float:
        """What the biases and an encoder-decoder's cross-attention add, the parts besides the heads, the feed-forward
        blocks and the embeddings: exactly 0 for a model with neither (SmolLM2)."""
        rest = float(self.attention_bias.sum()) + self.norm_bias + self.read_out_bias
        return rest + (float(self.cross_attention.sum()) if self.cross_attention is not None else 0.0)

    @property
    def n_layers(self) -> int:
        """L, the blocks of the stack read out."""
        return self.heads.shape[0]

    @property
    def n_heads(self) -> int:
        """H, the self-attention heads of each block."""
        return self.heads.shape[1]

    def __repr__(self) -> str:
        return (
            f"LogitAttribution({self.text!r} logit {self.logit:.4g}: heads {self.heads.sum():.4g}, feed-forward "
            f"{self.feed_forward.sum():.4g}, embeddings {self.embeddings:.4g}, total {self.total:.4g})"
        )


def logit_attribution(model: Transformer, trace: Trace, piece: str | int | None = None) -> LogitAttribution:
    """The direct logit attribution of `piece` (spelled as the vocabulary spells it, its id, or None: the likeliest
    next piece) at the last position of the stack that gives the output (see the module)."""
    if not can_read_out(model):
        raise ConfigError(lens_refusal(model))
    stack = output_stack(model, trace)
    st = trace.last
    L = stack.spec.n_layers
    H = stack.layers[0].self_attn.n_heads
    D = model.d_model
    has_cross = st.cross_attention is not None
    # One row per part: embeddings, heads [L, H], attention biases [L], cross-attentions [L], feed-forwards [L], norms'
    # biases. Rows not yet written are zero, and zero stays zero through a frozen norm.
    rows = _Rows(L, H)
    parts = torch.zeros(rows.count, D, dtype=torch.float64)  # [N, D]
    parts[rows.embeddings] = _last(st.residual[0])
    with torch.inference_mode():
        for layer, block in enumerate(stack.layers):
            update = torch.zeros_like(parts)  # [N, D]: what this sub-layer adds
            weights = effective_layer_weights(trace, st.self_attention, layer)  # [H, T, T]: removed heads as they acted
            update[rows.heads(layer)] = _head_outputs(block, st, weights, layer)  # [H, D]
            if block.self_attn.out_proj.bias is not None:
                update[rows.attention_bias(layer)] = block.self_attn.out_proj.bias.double()
            parts = _add(block, 1, "attn", st, layer, parts, update, rows)
            if has_cross:
                update = torch.zeros_like(parts)
                update[rows.cross(layer)] = _last(st.activations[f"blocks.{layer}.cross.out"])
                parts = _add(block, 2, "cross", st, layer, parts, update, rows)
            update = torch.zeros_like(parts)
            update[rows.feed_forward(layer)] = _last(st.activations[f"blocks.{layer}.ffn.out"])
            parts = _add(block, 3 if has_cross else 2, "ffn", st, layer, parts, update, rows)
        if stack.norm is not None:
            parts = _frozen(stack.norm, _last(st.residual[-1]), parts, rows.norm_bias)
        token_id = _token_id(model, trace, piece)
        row = model.head.weight[token_id].double()  # [D]
        terms = (parts @ row).numpy()  # [N]
        bias = 0.0 if model.head.bias is None else float(model.head.bias[token_id])
        logit = float(_last(st.output) @ row) + bias
    return LogitAttribution(
        piece=piece_name(model, token_id),
        text=piece_text(model, token_id),
        token_id=token_id,
        position=len(st.tokens) - 1,
        logit=logit,
        embeddings=float(terms[rows.embeddings]),
        heads=terms[rows.heads_all].reshape(L, H),
        attention_bias=terms[rows.attention_biases],
        cross_attention=terms[rows.crosses] if has_cross else None,
        feed_forward=terms[rows.feed_forwards],
        norm_bias=float(terms[rows.norm_bias]),
        read_out_bias=bias,
        total=float(terms.sum()) + bias,
        placement=stack.layers[0].placement,
        final_norm=stack.norm is not None,
    )


def replaced_direct_change(
    model: Transformer, trace: Trace, heads: Iterable[Head], mode: str = "zero", piece: str | int | None = None
) -> float:
    """What replacing the output of `heads` at the last position (by zero, or with mode="mean" by its mean over the
    positions, as explorer.run's ablate_with) would change the logit of `piece` by, had nothing after them changed:
    the sum over the heads of the replacement's direct term minus the head's own, both carried through the norms of
    `trace`'s run with their scales frozen (logit_attribution). With "zero" it is minus the heads' summed direct
    share; with "mean" the mean output's own direct share is taken back off. `trace`: a run with every head."""
    if trace.ablated:
        raise ConfigError("replaced_direct_change measures heads against a run with every head: pass that run.")
    if output_stack(model, trace) is not model.first_stack:  # heads are removed from the encoder, read out after
        raise ConfigError("An encoder-decoder's encoder heads write no direct share of the decoder's logit.")
    heads = checked_heads(heads, len(model.first_stack.layers), model.first_stack.layers[0].self_attn.n_heads)
    full = logit_attribution(model, trace, piece)
    own = sum(float(full.heads[layer, head]) for layer, head in heads)
    if checked_mode(mode) == "zero" or not heads:
        return -own
    # the same run, its heads marked as replaced: logit_attribution reads what they would have written from its weights
    replaced = logit_attribution(model, dataclasses.replace(trace, ablated=heads, ablate_with=mode), full.token_id)
    return sum(float(replaced.heads[layer, head]) for layer, head in heads) - own


def head_logit_attribution(model: Transformer, trace: Trace, piece: str | int | None = None) -> np.ndarray:
    """[L, H]: each self-attention head's direct effect on the logit of `piece` at the last position
    (logit_attribution's heads)."""
    return logit_attribution(model, trace, piece).heads


class _Rows:
    """Where each part sits among the rows of the parts matrix."""

    def __init__(self, n_layers: int, n_heads: int):
        self.L, self.H = n_layers, n_heads
        self.embeddings = 0
        self.heads_all = slice(1, 1 + n_layers * n_heads)
        start = 1 + n_layers * n_heads
        self.attention_biases = slice(start, start + n_layers)
        self.crosses = slice(start + n_layers, start + 2 * n_layers)
        self.feed_forwards = slice(start + 2 * n_layers, start + 3 * n_layers)
        self.norm_bias = start + 3 * n_layers
        self.count = self.norm_bias + 1

    def heads(self, layer: int) -> slice:
        return slice(1 + layer * self.H, 1 + (layer + 1) * self.H)

    def attention_bias(self, layer: int) -> int:
        return self.attention_biases.start + layer

    def cross(self, layer: int) -> int:
        return self.crosses.start + layer

    def feed_forward(self, layer: int) -> int:
        return self.feed_forwards.start + layer


def _last(values: np.ndarray) -> torch.Tensor:
    """[T, D] float32 -> [D] float64: the last position."""
    return torch.from_numpy(np.asarray(values[-1], dtype=np.float64))


def _frozen(norm: nn.Module, seen: torch.Tensor, parts: torch.Tensor, bias_row: int) -> torch.Tensor:
    """parts [N, D] through `norm` with its scale frozen at what it saw in the run, seen [D] (its input at the last
    position): RMSNorm p * w / s, LayerNorm (p - mean(p)) * w / s, its bias added to the norm-bias row."""
    eps = norm.eps if norm.eps is not None else torch.finfo(torch.float32).eps
    weight = torch.ones_like(seen) if norm.weight is None else norm.weight.double()  # [D]
    if isinstance(norm, nn.RMSNorm):
        scale = torch.sqrt(seen.square().mean() + eps)
        return parts * weight / scale
    scale = torch.sqrt(seen.var(unbiased=False) + eps)
    out = (parts - parts.mean(dim=-1, keepdim=True)) * weight / scale  # [N, D]
    if getattr(norm, "bias", None) is not None:
        out[bias_row] += norm.bias.double()
    return out


def _add(
    block: Block,
    sublayer: int,
    name: str,
    st: StackTrace,
    layer: int,
    parts: torch.Tensor,
    update: torch.Tensor,
    rows: _Rows,
) -> torch.Tensor:
    """The stream's parts after sub-layer `sublayer` added its parts `update` (both [N, D]), with the norms the block's
    placement puts on the way (Block.residual): post Norm(x + f), res-post and peri x + Norm_out(f), pre x + f."""
    norm_in, norm_out = block.norms_of(sublayer)
    prefix = f"blocks.{layer}.{name}"
    if block.placement == "post":
        return _frozen(norm_in, _last(st.activations[f"{prefix}.ln_in"]), parts + update, rows.norm_bias)
    if norm_out is not None:
        update = _frozen(norm_out, _last(st.activations[f"{prefix}.out_ln_in"]), update, rows.norm_bias)
    return parts + update


def _head_outputs(block: Block, st: StackTrace, weights: np.ndarray, layer: int) -> torch.Tensor:
    """[H, D] float64: each self-attention head's output at the last position, sum_j alpha_j v_j through its slice of
    the output projection. `weights` [H, T, T] are the weights that mixed the values: for a head the run removed,
    zero or its mean weights over the queries (norm_attention.effective_weights), so it gives what it gave there."""
    attention: MultiHeadAttention = block.self_attn
    x = torch.from_numpy(np.asarray(attention_reads(block, st, layer), dtype=np.float64))  # [T, D]
    values = head_values(attention, x).transpose(0, 1)  # [H, T, K]
    last = torch.from_numpy(np.asarray(weights[:, -1], dtype=np.float64))  # [H, T]: the last query only
    attended = torch.einsum("ht,htk->hk", last, values)  # [H, K]
    return torch.einsum("hk,dhk->hd", attended, head_slices(attention, torch.float64))  # [H, D]


def _token_id(model: Transformer, trace: Trace, piece: str | int | None) -> int:
    """The read-out row of `piece`: its id, the id of its spelling or of the one piece its text reads as, or (None)
    the likeliest next piece."""
    n_rows = model.head.out_features
    if piece is None:
        return int(torch.argmax(last_logits(model, trace)))
    if isinstance(piece, (int, np.integer)) and not isinstance(piece, bool):
        if not 0 <= piece < n_rows:
            raise ConfigError(f"Piece id {piece} is outside the model's vocabulary: ids run from 0 to {n_rows - 1}.")
        return int(piece)
    if isinstance(piece, str):
        # The text first: "é" is the text of the piece Ã© and the spelling of another, a byte piece ("<0xE9>")
        read = _pieces_read(model, piece)
        if len(read) == 1:
            return read[0]
        found = _spelled(model, piece)
        if found is None:  # a piece of only blanks, which the tokenizer alone will not read ("\n" is Ċ)
            found = _blank_piece(model, piece)
        if found is not None:
            return found
        if len(read) > 1:
            names = ", ".join(repr(piece_text(model, i)) for i in read)
            raise ConfigError(
                f"{piece!r} reads as {len(read)} pieces for this tokenizer ({names}); a logit is one piece's: pass "
                "one of them, its spelling or its id."
            )
        raise ConfigError(
            f"{piece!r} is not a piece of this model's vocabulary: write it as next_token's 'text' column shows it "
            "(' Paris'), as the vocabulary spells it (its 'piece' column: 'ĠParis'), or pass its id."
        )
    raise ConfigError(f"A piece is its text, its spelling or its id (a whole number), not {type(piece).__name__}.")


def _pieces_read(model: Transformer, text: str) -> list[int]:
    """The ids of the pieces the model's tokenizer reads `text` as, without the special pieces it adds (" Paris" ->
    [the id of ĠParis]); [] for a model without a tokenizer, or a text it keeps nothing of (blanks)."""
    if model.tokenizer is None or not text:
        return []
    try:
        encoding = model.tokenizer.encode(text)
    except ConfigError:  # only blanks or control characters
        return []
    return [i for i, span in zip(encoding.ids, encoding.offsets, strict=True) if span != (0, 0)]


def _blank_piece(model: Transformer, text: str) -> int | None:
    """The id of the byte-level piece that reads exactly `text` ("\\n" -> the id of Ċ), None for other tokenizers or
    when no single piece does."""
    if not byte_level_pieces(model):
        return None
    return model.tokenizer.token_id(byte_spelling(text, byte_alphabet()))


def _spelled(model: Transformer, piece: str) -> int | None:
    """The id of a piece spelled as the vocabulary spells it ("#12" for a model with no vocabulary of its own)."""
    if model.tokenizer is not None:
        return model.tokenizer.token_id(piece)
    if model.vocabulary is not None:
        return model.vocabulary.index(piece) if piece in model.vocabulary else None
    if piece.startswith("#") and piece[1:].isdigit() and int(piece[1:]) < model.head.out_features:
        return int(piece[1:])
    return None
