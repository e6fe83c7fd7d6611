"""run(...) -> Trace: every intermediate a page may show, as numpy float32."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from explorer.config import ConfigError, ModelConfig
from explorer.model import Record, Transformer, build_model
from explorer.tokens import embed_tokens, padding_keys, split_tokens


@dataclass(frozen=True)
class AttentionMaps:
    """One kind of attention (e.g. encoder self-attention) for every layer and head."""

    kind: str  # "self-attention", "encoder self-attention", "decoder self-attention" or "cross-attention"
    weights: np.ndarray  # [L, H, Tq, Tk] post-softmax, pre-dropout; 0 where masked and on empty rows
    scores: np.ndarray  # [L, H, Tq, Tk] scaled q.k before softmax; -inf where masked
    allowed: np.ndarray  # [Tq, Tk] bool, True = this query may attend to this key
    query_tokens: list[str]
    key_tokens: list[str]

    @property
    def empty_rows(self) -> np.ndarray:
        """[Tq] bool: queries with no allowed key; their weights are all zero (flagged, never NaN)."""
        return ~self.allowed.any(axis=-1)

    @property
    def n_layers(self) -> int:
        return self.weights.shape[0]

    @property
    def n_heads(self) -> int:
        return self.weights.shape[1]


@dataclass(frozen=True)
class StackTrace:
    """What one stack (the encoder or the decoder) did to its tokens."""

    name: str  # "encoder" or "decoder"
    tokens: list[str]
    self_attention: AttentionMaps
    cross_attention: AttentionMaps | None  # decoder of an encoder-decoder only
    residual: np.ndarray  # [L + 1, T, D]: after embedding + position, then after each block
    attn_out: np.ndarray  # [L, T, D]: each self-attention sub-layer's output, before the residual add
    ffn_out: np.ndarray  # [L, T, D]: each feed-forward sub-layer's output, before the residual add
    output: np.ndarray  # [T, D]: the stack's output (after the final LayerNorm when there is one)
    activations: dict[str, np.ndarray] = field(default_factory=dict)  # stable names, e.g. "blocks.0.ffn.hidden"


@dataclass(frozen=True)
class Trace:
    """Everything one forward pass computed; stacks in the order they ran (encoder first)."""

    config: ModelConfig | None  # None for a model imported with from_torch
    stacks: tuple[StackTrace, ...]

    @property
    def first(self) -> StackTrace:
        return self.stacks[0]

    @property
    def last(self) -> StackTrace:
        return self.stacks[-1]

    @property
    def tokens(self) -> list[str]:
        """The input tokens (the source, for an encoder-decoder)."""
        return self.first.tokens

    @property
    def attention(self) -> np.ndarray:
        """[L, H, T, T] self-attention of the first stack (the encoder, or a decoder-only model)."""
        return self.first.self_attention.weights

    @property
    def scores(self) -> np.ndarray:
        return self.first.self_attention.scores

    @property
    def residual(self) -> np.ndarray:
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

    def attention_maps(self) -> dict[str, AttentionMaps]:
        """Every kind of attention this model has, by the name a page shows."""
        maps = {}
        for stack in self.stacks:
            maps[stack.self_attention.kind] = stack.self_attention
            if stack.cross_attention is not None:
                maps[stack.cross_attention.kind] = stack.cross_attention
        return maps


Source = str | list[str] | tuple[str, ...] | torch.Tensor
SKIPPED_ACTIVATIONS = ("attn.pattern", "attn.scores", "cross.pattern", "cross.scores", "resid_pre", "resid_post")


def run(
    model_or_config: ModelConfig | Transformer,
    source: Source,
    target: Source | None = None,
    *,
    mask: torch.Tensor | None = None,
    target_mask: torch.Tensor | None = None,
    memory_mask: torch.Tensor | None = None,
) -> Trace:
    """Run the model once, in eval mode, and keep everything it computed.

    `source` (and `target`, for an encoder-decoder) is text split on whitespace, a list of tokens, or a float
    tensor [T, d_model] of input embeddings taken as they are (no position added). With tokens the masks come
    from the config; `mask` / `target_mask` / `memory_mask` override them: bool [T, S], True = may attend
    (torch's attn_mask uses True = blocked: pass `~attn_mask`).
    """
    model = build_model(model_or_config) if isinstance(model_or_config, ModelConfig) else model_or_config
    cfg = model.config
    has_encoder, has_decoder = model.encoder is not None, model.decoder is not None
    if has_encoder and has_decoder and target is None:
        raise ConfigError("An encoder-decoder needs a target sentence as well as the source; type one.")
    if not (has_encoder and has_decoder) and target is not None:
        raise ConfigError("Only an encoder-decoder takes a target; this model reads a single input.")
    encoder_decoder = has_encoder and has_decoder
    causal_first = not has_encoder or (cfg is not None and "causal" in cfg.mask)  # a decoder-only model is causal
    with torch.inference_mode():
        x, tokens = _input(model, source, "source" if encoder_decoder else "input")
        allowed = _allowed(mask, "mask", cfg, tokens, tokens, causal_first)
        if encoder_decoder:
            y, target_tokens = _input(model, target, "target")
            y_allowed = _allowed(target_mask, "target_mask", cfg, target_tokens, target_tokens, cfg is not None)
            memory_allowed = _allowed(memory_mask, "memory_mask", cfg, target_tokens, tokens, False)
            runs = model(
                x.unsqueeze(0), _batched(allowed), y.unsqueeze(0), _batched(y_allowed), _batched(memory_allowed)
            )
        else:
            runs = model(x.unsqueeze(0), _batched(allowed))
        out, records = runs[0]
        kind = "encoder self-attention" if encoder_decoder else "self-attention"
        stacks = [_stack_trace("encoder" if has_encoder else "decoder", kind, tokens, x, out[0], records, allowed)]
        if encoder_decoder:
            out_y, records_y = runs[1]
            cross = (tokens, memory_allowed)
            kind = "decoder self-attention"
            stacks.append(_stack_trace("decoder", kind, target_tokens, y, out_y[0], records_y, y_allowed, cross))
    return Trace(config=cfg, stacks=tuple(stacks))


def _input(model: Transformer, source: Source, what: str) -> tuple[torch.Tensor, list[str]]:
    """-> x [T, D] (embedding + position for tokens; the tensor as it is) and the tokens' labels."""
    if isinstance(source, torch.Tensor):
        if source.dim() != 2 or source.shape[1] != model.d_model or not source.is_floating_point():
            raise ConfigError(
                f"The {what} tensor must be float [T, {model.d_model}] (one row per position); "
                f"got {source.dtype} {list(source.shape)}."
            )
        if not 1 <= source.shape[0] <= model.max_positions:
            raise ConfigError(f"The {what} must have 1 to {model.max_positions:,} rows; it has {source.shape[0]:,}.")
        return source.detach().float(), [f"x{i}" for i in range(source.shape[0])]
    tokens = split_tokens(source, model.max_positions, what)
    seed = model.config.seed if model.config is not None else 0
    embedded = embed_tokens(tokens, model.d_model, seed)  # [T, D]
    return model.positional(embedded), tokens


def _allowed(
    given: torch.Tensor | None, name: str, cfg: ModelConfig | None, queries: list[str], keys: list[str], causal: bool
) -> torch.Tensor:
    """[Tq, Tk] bool: the mask the caller gave, checked; else causal (query i sees keys <= i) and, when the
    config asks for padding, [PAD] keys blocked."""
    if given is not None:
        return _checked_mask(given, len(queries), len(keys), name)
    allowed = torch.ones(len(queries), len(keys), dtype=torch.bool)
    if causal:
        allowed = torch.tril(allowed)
    if cfg is not None and "padding" in cfg.mask:
        allowed = allowed & padding_keys(keys).unsqueeze(0)
    return allowed


def _checked_mask(mask: torch.Tensor, n_query: int, n_key: int, name: str) -> torch.Tensor:
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or tuple(mask.shape) != (n_query, n_key):
        raise ConfigError(
            f"{name} must be a bool tensor [{n_query}, {n_key}] with True = may attend "
            "(for a torch-style mask with True = blocked, pass ~mask)."
        )
    return mask


def _batched(allowed: torch.Tensor) -> torch.Tensor | None:
    """[Tq, Tk] -> [1, Tq, Tk], or None when nothing is masked (the cheaper path)."""
    return None if bool(allowed.all()) else allowed.unsqueeze(0)


def _stack_trace(
    name: str,
    kind: str,
    tokens: list[str],
    embedded: torch.Tensor,
    output: torch.Tensor,
    records: list[Record],
    allowed: torch.Tensor,
    cross: tuple[list[str], torch.Tensor] | None = None,
) -> StackTrace:
    def layers(key: str) -> np.ndarray:
        return torch.stack([record[key][0] for record in records]).numpy()  # [L, ...]

    allowed_np = allowed.numpy()
    self_maps = AttentionMaps(kind, layers("attn.pattern"), layers("attn.scores"), allowed_np, tokens, tokens)
    cross_maps = None
    if cross is not None:
        memory_tokens, memory_allowed = cross
        cross_maps = AttentionMaps(
            "cross-attention",
            layers("cross.pattern"),
            layers("cross.scores"),
            memory_allowed.numpy(),
            tokens,
            memory_tokens,
        )
    residual = torch.stack([embedded] + [record["resid_post"][0] for record in records]).numpy()  # [L + 1, T, D]
    activations = {
        f"blocks.{i}.{key}": value[0].numpy()
        for i, record in enumerate(records)
        for key, value in record.items()
        if key not in SKIPPED_ACTIVATIONS
    }
    return StackTrace(
        name=name,
        tokens=list(tokens),
        self_attention=self_maps,
        cross_attention=cross_maps,
        residual=residual,
        attn_out=layers("attn.out"),
        ffn_out=layers("ffn.out"),
        output=output.numpy(),
        activations=activations,
    )
