"""run(...) -> Trace: every intermediate a page may show, as numpy float32."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import torch

from explorer.ablation import Head, HeadAblation, checked_heads, checked_mode, heads_text, parse_heads
from explorer.build import build_model
from explorer.config import ConfigError, ModelConfig
from explorer.inputs import Source, prepare_inputs
from explorer.limits import check_fits_in_memory
from explorer.model import Records, Transformer, float32_default
from explorer.text_reading import drawn_text, piece_label
from explorer.tokenization import BYTE_LEVEL_BPE

# Every activation a stack keeps for each block, by the name after "blocks.<layer>." (as TransformerLens's
# ActivationCache names its hooks): its shape for one input, and what it holds. T: this stack's tokens, S: the
# source tokens (cross-attention reads the encoder's output), D: d_model, H: heads, F: d_ff. "attn" is the
# self-attention sub-layer, "cross" the cross-attention of a decoder block of an encoder-decoder (there only), "ffn"
# the feed-forward sub-layer. A norm is LayerNorm, or RMSNorm in a Llama.
ACTIVATION_NAMES: dict[str, tuple[str, str]] = {
    "resid_pre": ("[T, D]", "the residual stream entering the block (block 0: embeddings plus positions)"),
    "attn.ln_in": ("[T, D]", "what norm1 reads: post-norm x + attn(x); pre- and peri-norm the stream x (no res-post)"),
    "attn.ln_out": ("[T, D]", "what norm1 returns: post-norm the new stream; pre- and peri-norm what attention reads"),
    "attn.scores": ("[H, T, T]", "scaled q·k before the softmax, per head [query, key]; -inf where masked"),
    "attn.pattern": ("[H, T, T]", "attention weights after the softmax, before dropout; 0 where masked"),
    "attn.out": ("[T, D]", "the self-attention sub-layer's output, before any output norm and the residual add"),
    "attn.out_ln_in": ("[T, D]", "res-post, peri only: what out_norm1 reads, the same as attn.out"),
    "attn.out_ln_out": ("[T, D]", "res-post, peri only: what out_norm1 returns, the update added to the stream"),
    "cross.ln_in": ("[T, D]", "as attn.ln_in, for the cross-attention sub-layer (norm2)"),
    "cross.ln_out": ("[T, D]", "as attn.ln_out, for the cross-attention sub-layer (norm2)"),
    "cross.scores": ("[H, T, S]", "cross-attention scores: decoder queries against encoder keys"),
    "cross.pattern": ("[H, T, S]", "cross-attention weights after the softmax"),
    "cross.out": ("[T, D]", "the cross-attention sub-layer's output, before any output norm and the residual add"),
    "cross.out_ln_in": ("[T, D]", "as attn.out_ln_in, for the cross-attention sub-layer (out_norm2)"),
    "cross.out_ln_out": ("[T, D]", "as attn.out_ln_out, for the cross-attention sub-layer (out_norm2)"),
    "ffn.ln_in": ("[T, D]", "as attn.ln_in, for the feed-forward sub-layer (norm2, or norm3 after cross)"),
    "ffn.ln_out": ("[T, D]", "as attn.ln_out, for the feed-forward sub-layer"),
    "ffn.hidden": ("[T, F]", "the hidden units after the activation function (gated: act(gate(x)) * linear1(x))"),
    "ffn.out": ("[T, D]", "the feed-forward sub-layer's output, before any output norm and the residual add"),
    "ffn.out_ln_in": ("[T, D]", "as attn.out_ln_in, for the feed-forward sub-layer (out_norm2; out_norm3 after cross)"),
    "ffn.out_ln_out": ("[T, D]", "as attn.out_ln_out, for the feed-forward sub-layer"),
    "resid_post": ("[T, D]", "the residual stream leaving the block"),
}
# Kept once, in StackTrace's own fields (residual, self_attention, cross_attention), not in its `activations` dict.
IN_FIELDS = ("resid_pre", "resid_post", "attn.scores", "attn.pattern", "cross.scores", "cross.pattern")


@dataclass(frozen=True)
class AttentionMaps:
    """One kind of attention (e.g. encoder self-attention) for every layer and head."""

    kind: str  # "self-attention", "encoder self-attention", "decoder self-attention" or "cross-attention"
    weights: np.ndarray  # [L, H, Tq, Tk] post-softmax, pre-dropout; 0 where masked and on empty rows
    scores: np.ndarray | None  # [L, H, Tq, Tk] scaled q.k before softmax; -inf where masked (None: not kept)
    allowed: np.ndarray  # [Tq, Tk] bool, True = this query may attend to this key
    query_tokens: list[str]  # as the vocabulary spells them ("ĠcafÃ©"): what the analyses, keys and downloads use
    key_tokens: list[str]
    byte_level: bool = False  # the tokens are byte-level BPE pieces (SmolLM2's), which labels write as they read

    @property
    def query_labels(self) -> list[str]:
        """The query tokens as axes label them: a byte-level piece as it reads ("␣café", text_reading.piece_label)."""
        return token_axis_labels(self.query_tokens, self.byte_level)

    @property
    def key_labels(self) -> list[str]:
        """The key tokens as axes label them (query_labels)."""
        return token_axis_labels(self.key_tokens, self.byte_level)

    @property
    def empty_rows(self) -> np.ndarray:
        """[Tq] bool: queries with no allowed key; their weights are all zero (flagged, never NaN)."""
        return ~self.allowed.any(axis=-1)

    @property
    def n_layers(self) -> int:
        """L, the layers these maps come from."""
        return self.weights.shape[0]

    @property
    def n_heads(self) -> int:
        """H, the heads of each layer."""
        return self.weights.shape[1]

    def __repr__(self) -> str:  # the arrays would flood a notebook cell
        return f"AttentionMaps({self.kind!r}, weights {list(self.weights.shape)} [layers, heads, query, key])"


def token_axis_labels(tokens: list[str], byte_level: bool) -> list[str]:
    """`tokens` as axes label them: byte-level pieces as they read ("␣café", text_reading.piece_label), others as
    they are but for characters that draw nothing, written as escapes (text_reading.drawn_text)."""
    return [piece_label(token) if byte_level else drawn_text(token) for token in tokens]


def byte_level_pieces(model: Transformer) -> bool:
    """Whether the model's tokens are byte-level BPE pieces (SmolLM2's "Ġthe"), which axes label as they read."""
    return model.tokenizer is not None and model.tokenizer.kind == BYTE_LEVEL_BPE


@dataclass(frozen=True)
class StackTrace:
    """What one stack (the encoder or the decoder) did to its tokens."""

    name: str  # "encoder" or "decoder"
    tokens: list[str]
    self_attention: AttentionMaps
    cross_attention: AttentionMaps | None  # decoder of an encoder-decoder only
    residual: np.ndarray  # [L + 1, T, D]: after embedding + position, then after each block
    output: np.ndarray  # [T, D]: the stack's output (after the final LayerNorm when there is one)
    # "blocks.0.ffn.hidden" -> [T, F]: the names of ACTIVATION_NAMES not kept in a field above (IN_FIELDS)
    activations: dict[str, np.ndarray] = field(default_factory=dict)

    def __repr__(self) -> str:  # the arrays would flood a notebook cell
        return f"StackTrace({self.name!r}, {len(self.tokens)} tokens, residual {list(self.residual.shape)})"

    @property
    def labels(self) -> list[str]:
        """The tokens as axes label them: a byte-level piece as it reads (AttentionMaps.query_labels)."""
        return self.self_attention.query_labels

    @property
    def n_layers(self) -> int:
        """L, the blocks of this stack."""
        return self.residual.shape[0] - 1

    def activation_names(self) -> list[str]:
        """Every name this stack answers to, "blocks.0.resid_pre" first, in the order ACTIVATION_NAMES lists them."""
        kinds = [k for k in ACTIVATION_NAMES if k in IN_FIELDS or f"blocks.0.{k}" in self.activations]
        kinds = [k for k in kinds if not k.startswith("cross.") or self.cross_attention is not None]
        kinds = [k for k in kinds if not k.endswith(".scores") or self.self_attention.scores is not None]
        return [f"blocks.{layer}.{kind}" for layer in range(self.n_layers) for kind in kinds]

    def __getitem__(self, name: str) -> np.ndarray:
        """One activation by its name, e.g. stack["blocks.1.attn.pattern"] -> [H, T, T] (ACTIVATION_NAMES lists every
        name with its shape), whether it is kept in a field (the residual stream, the attention maps) or in
        `activations`."""
        names = self.activation_names()
        if name not in names:
            kinds = ", ".join(dict.fromkeys(n.split(".", 2)[2] for n in names))
            raise KeyError(
                f"{name!r} is not an activation of this {self.name} stack: names are blocks.<layer>.<kind>, layer 0 to "
                f"{self.n_layers - 1}, kind one of {kinds}"
            )
        _, layer_text, kind = name.split(".", 2)
        layer = int(layer_text)
        if kind in ("resid_pre", "resid_post"):
            return self.residual[layer + (kind == "resid_post")]  # [T, D]
        if kind in IN_FIELDS:  # attn.pattern, cross.scores ...
            maps = self.self_attention if kind.startswith("attn.") else self.cross_attention
            return (maps.weights if kind.endswith(".pattern") else maps.scores)[layer]  # [H, T, T] or [H, T, S]
        return self.activations[name]


@dataclass(frozen=True)
class Trace:
    """Everything one forward pass computed; stacks in the order they ran (encoder first)."""

    config: ModelConfig | None  # None for a model imported with from_torch
    stacks: tuple[StackTrace, ...]
    ablated: tuple[Head, ...] = ()  # (layer, head) of the first stack's self-attention removed in this run
    ablate_with: str = "zero"  # what a removed head's output became: "zero" or "mean" (explorer.ablation)

    def __repr__(self) -> str:  # the arrays would flood a notebook cell
        stacks = ", ".join(repr(stack) for stack in self.stacks)
        removed = f", ablated={heads_text(self.ablated)!r}" if self.ablated else ""
        return f"Trace(config={self.config!r}, stacks=({stacks}){removed})"

    @property
    def first(self) -> StackTrace:
        """The stack that reads the input: the encoder, or a decoder-only model's decoder."""
        return self.stacks[0]

    @property
    def last(self) -> StackTrace:
        """The stack that gives the output: the decoder of an encoder-decoder, else the only stack."""
        return self.stacks[-1]

    @property
    def tokens(self) -> list[str]:
        """The input tokens (the source, for an encoder-decoder)."""
        return self.first.tokens

    @property
    def labels(self) -> list[str]:
        """The input tokens as axes label them (StackTrace.labels)."""
        return self.first.labels

    @property
    def target_tokens(self) -> tuple[str, ...] | None:
        """The target the decoder of an encoder-decoder read; None for a model of one stack."""
        return tuple(self.last.tokens) if len(self.stacks) > 1 else None

    @property
    def attention(self) -> np.ndarray:
        """[L, H, T, T] self-attention of the first stack (the encoder, or a decoder-only model)."""
        return self.first.self_attention.weights

    @property
    def scores(self) -> np.ndarray:
        """[L, H, T, T] scaled q.k before softmax of the first stack (the encoder's, for an encoder-decoder);
        -inf where masked; None when run(..., keep_scores=False)."""
        return self.first.self_attention.scores

    @property
    def residual(self) -> np.ndarray:
        """[L + 1, T, D] the first stack's residual stream (the encoder's, for an encoder-decoder): after embedding
        and position, then after each block."""
        return self.first.residual

    @property
    def output(self) -> np.ndarray:
        """[T, D] the model's output (the decoder's, for an encoder-decoder)."""
        return self.last.output

    @property
    def decoder_attention(self) -> np.ndarray | None:
        """[L, H, T_target, T_target] decoder self-attention of an encoder-decoder."""
        return self.stacks[1].self_attention.weights if len(self.stacks) > 1 else None

    @property
    def cross_attention(self) -> np.ndarray | None:
        """[L, H, T_target, T_source] decoder-to-encoder attention of an encoder-decoder."""
        maps = self.last.cross_attention
        return None if maps is None else maps.weights

    def maps(self, kind: str) -> AttentionMaps:
        """One kind of attention by the name a page shows (a key of attention_maps()); ConfigError naming the kinds
        this model has otherwise, and how to pass one (an encoder-decoder has no plain "self-attention", the
        figures' default kind)."""
        maps = self.attention_maps()
        if kind not in maps:
            kinds = ", ".join(repr(name) for name in maps)
            raise ConfigError(
                f"This trace has no {kind!r}; it has {kinds}: pass one of them as kind, e.g. kind={list(maps)[-1]!r}."
            )
        return maps[kind]

    def attention_maps(self) -> dict[str, AttentionMaps]:
        """Every kind of attention this model has, by the name a page shows."""
        maps = {}
        for stack in self.stacks:
            maps[stack.self_attention.kind] = stack.self_attention
            if stack.cross_attention is not None:
                maps[stack.cross_attention.kind] = stack.cross_attention
        return maps


@float32_default()
def run(
    model_or_config: ModelConfig | Transformer,
    source: Source,
    target: Source | None = None,
    *,
    mask: torch.Tensor | None = None,
    target_mask: torch.Tensor | None = None,
    memory_mask: torch.Tensor | None = None,
    ablate: Iterable[Head] | str | None = None,
    ablate_with: str = "zero",
    keep_scores: bool = True,
    check_memory: bool = True,
) -> Trace:
    """Run the model once, in eval mode, and keep everything it computed.

    `source` (and `target`, for an encoder-decoder) is text split on whitespace, a list of tokens, or a float
    tensor [T, d_model] of input embeddings taken as they are (no position added). With tokens the masks come
    from the config; `mask` / `target_mask` / `memory_mask` override them: bool [T, S], True = may attend
    (torch's attn_mask uses True = blocked: pass `~attn_mask`).

    `ablate` removes self-attention heads of the first stack (the encoder, or a decoder-only model's decoder):
    (layer, head) pairs, or a text such as "L1H3,L2H5". A removed head's output (its weighted sum of values, before
    the output projection) becomes zero, or with `ablate_with="mean"` its mean over the positions; nothing else
    changes, and the model itself is not touched (explorer.ablation).

    `keep_scores=False` keeps no pre-softmax scores (AttentionMaps.scores is None): the app shows none, and for
    SmolLM2 on 512 pieces they are 283 MB of a 910 MB trace.

    A run whose trace would not fit in the memory the machine has free is refused with a ConfigError before the
    forward (explorer.limits.check_fits_in_memory); `check_memory=False` skips that, for a caller with limits of its
    own (the app: its size limits and memory gate, and a run the cache dropped is made again from inside a page).
    """
    if isinstance(model_or_config, torch.nn.Module) and not isinstance(model_or_config, Transformer):
        raise ConfigError(
            f"explorer.run takes a ModelConfig or an explorer model; import your {type(model_or_config).__name__} "
            "with explorer.from_torch(module) first."
        )
    if not isinstance(model_or_config, (ModelConfig, Transformer)):
        raise ConfigError(
            f"explorer.run takes a ModelConfig or an explorer model, not a {type(model_or_config).__name__}; "
            "for settings in a dict, pass explorer.parse_config(settings)."
        )
    model = build_model(model_or_config) if isinstance(model_or_config, ModelConfig) else model_or_config
    heads, ablation = _ablation(model, ablate, ablate_with)
    with torch.inference_mode():
        inputs = prepare_inputs(model, source, target, mask=mask, target_mask=target_mask, memory_mask=memory_mask)
        if check_memory:
            n_target = None if inputs.target is None else len(inputs.target.tokens)
            check_fits_in_memory(model, len(inputs.source.tokens), n_target, keep_scores)
        runs = inputs.forward(model, ablation=ablation, keep_scores=keep_scores)
        first, second = inputs.source, inputs.target
        out, records = runs[0]
        kind = "self-attention" if second is None else "encoder self-attention"
        name = model.stack_names[0]
        byte_level = byte_level_pieces(model)
        stacks = [
            _stack_trace(name, kind, first.tokens, first.x, out[0], records, first.allowed, keep_scores, byte_level)
        ]
        if second is not None:
            out_y, records_y = runs[1]
            cross = (first.tokens, inputs.memory_allowed)
            stacks.append(
                _stack_trace(
                    "decoder",
                    "decoder self-attention",
                    second.tokens,
                    second.x,
                    out_y[0],
                    records_y,
                    second.allowed,
                    keep_scores,
                    byte_level,
                    cross,
                )
            )
    mode = "zero" if ablation is None else ablation.mode  # a run that removed no head records the default
    return Trace(config=model.config, stacks=tuple(stacks), ablated=heads, ablate_with=mode)


def _ablation(
    model: Transformer, ablate: Iterable[Head] | str | None, mode: str
) -> tuple[tuple[Head, ...], HeadAblation | None]:
    """The checked heads to remove and the forward's HeadAblation (None when no head is removed)."""
    checked_mode(mode)
    if ablate is None:
        return (), None
    first = model.first_stack
    attention = first.layers[0].self_attn
    heads = checked_heads(
        parse_heads(ablate) if isinstance(ablate, str) else ablate, len(first.layers), attention.n_heads
    )
    if not heads:
        return (), None
    return heads, HeadAblation.of(heads, len(first.layers), attention.n_heads, mode)


def _stack_trace(
    name: str,
    kind: str,
    tokens: list[str],
    embedded: torch.Tensor,
    output: torch.Tensor,
    records: Records,
    allowed: torch.Tensor,
    keep_scores: bool,
    byte_level: bool,
    cross: tuple[list[str], torch.Tensor] | None = None,
) -> StackTrace:
    def layers(key: str) -> np.ndarray:
        """[L, ...] one record entry of every block of the first (only) batch row. The blocks wrote the attention
        maps into one buffer (Records.stacked): taken as it is. Otherwise each entry is taken out of its record as it
        is copied: torch.stack of them all would hold every layer twice at once (566 MB more for SmolLM2's weights
        and scores at 512 pieces)."""
        buffer = records.stacked.get(key)  # [L, B, ...]
        if buffer is not None and buffer.shape[1] == 1:
            return buffer[:, 0].numpy()  # [L, ...], no copy
        first = records[0][key][0]  # [...]
        stacked = np.empty((len(records), *first.shape), dtype=np.float32)  # [L, ...]
        for layer, record in enumerate(records):
            stacked[layer] = record.pop(key)[0].numpy()
        return stacked

    def scores(key: str) -> np.ndarray | None:
        return layers(key) if keep_scores else None  # without them the forward dropped them block by block

    allowed_np = allowed.numpy()
    self_maps = AttentionMaps(
        kind, layers("attn.pattern"), scores("attn.scores"), allowed_np, tokens, tokens, byte_level
    )
    cross_maps = None
    if cross is not None:
        memory_tokens, memory_allowed = cross
        cross_maps = AttentionMaps(
            "cross-attention",
            layers("cross.pattern"),
            scores("cross.scores"),
            memory_allowed.numpy(),
            tokens,
            memory_tokens,
            byte_level,
        )
    residual = torch.stack([embedded] + [record["resid_post"][0] for record in records]).numpy()  # [L + 1, T, D]

    def entering(i: int, value: torch.Tensor) -> bool:
        """Whether block i's record entry `value` [1, T, D] is the stream entering the block (a pre- or peri-norm
        block's attn.ln_in), which residual[i] holds already."""
        if value is not records[i]["resid_pre"]:
            return False
        return value is records[i - 1]["resid_post"] if i > 0 else torch.equal(value[0], embedded)

    # A pre-norm block's attn.ln_in is a view of residual, not a second copy (35 MB of SmolLM2's trace at 512 pieces)
    activations = {
        f"blocks.{i}.{key}": residual[i] if entering(i, value) else value[0].numpy()
        for i, record in enumerate(records)
        for key, value in record.items()
        if key not in IN_FIELDS
    }
    return StackTrace(
        name=name,
        tokens=list(tokens),
        self_attention=self_maps,
        cross_attention=cross_maps,
        residual=residual,
        output=output.numpy(),
        activations=activations,
    )
