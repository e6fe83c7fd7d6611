"""ModelConfig: one field per sidebar control, validated with messages a student understands."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from explorer.word_lists import listed


class ConfigError(ValueError):
    """A problem the user caused (a setting, the tokens, a URL parameter), with what to do about it."""


ARCHS = ("encoder", "decoder", "encoder-decoder")
NORMS = ("post", "pre", "res-post", "peri")
# One formula per placement, for the pages and for error messages: where the norm sits around a sub-layer f.
NORM_FORMULAS: dict[str, str] = {
    "post": "x = Norm(x + f(x))",
    "pre": "x = x + f(Norm(x))",
    "res-post": "x = x + Norm(f(x))",
    "peri": "x = x + Norm_out(f(Norm_in(x)))",
}
NORM_IN_FRONT = ("pre", "peri")  # placements whose sub-layers read a normalised copy of the stream
NORM_ON_OUTPUT = ("res-post", "peri")  # placements that normalise each sub-layer's output inside the residual branch
POSITIONALS = ("sinusoidal", "learned", "rope", "none")
MASKS = ("none", "causal", "padding", "causal+padding")
ACTIVATIONS = ("relu", "gelu")

# Inclusive ranges for the integer fields: large enough for real models, small enough to run on a laptop.
INT_LIMITS: dict[str, tuple[int, int]] = {
    "d_model": (1, 2048),
    "n_heads": (1, 64),
    "n_layers": (1, 24),
    "d_ff": (1, 8192),
    "seed": (0, 2**31 - 1),
    "max_tokens": (512, 4096),
}
CHOICES: dict[str, tuple[str, ...]] = {
    "arch": ARCHS,
    "norm": NORMS,
    "positional": POSITIONALS,
    "mask": MASKS,
    "activation": ACTIVATIONS,
}
PAD_TOKEN = "[PAD]"


@dataclass(frozen=True)
class ModelConfig:
    """Everything that decides the model; hashable, so it can key caches and URLs."""

    arch: str = "encoder"  # encoder: BERT-like; decoder: GPT-like, always causal; encoder-decoder: both
    d_model: int = 64  # width of the residual stream
    n_heads: int = 4  # heads per attention layer; d_model must divide evenly among them
    n_layers: int = 2  # blocks per stack (an encoder-decoder has this many in each stack)
    d_ff: int = 256  # hidden width of each feed-forward sub-layer (4 x d_model is the classic choice)
    norm: str = "post"  # where each sub-layer's norm sits: NORM_FORMULAS (post: 2017, BERT; pre: GPT-2, Llama; ...)
    positional: str = "sinusoidal"  # how token order enters the model; rope rotates queries and keys instead
    mask: str = "none"  # which keys each query may attend to; [PAD] tokens are the padding
    activation: str = "relu"  # non-linearity inside the feed-forward sub-layer
    dropout: float = 0.0  # only used while training; traces are always taken in eval mode
    seed: int = 0  # decides the weights and the token embeddings
    max_tokens: int = 512  # longest input; also the size of the learned position table

    def __post_init__(self) -> None:
        validate(self)

    @property
    def d_head(self) -> int:
        """Width of each head: d_model / n_heads."""
        return self.d_model // self.n_heads

    @property
    def reads_target(self) -> bool:
        """Whether a decoder reads a target text besides the source, cross-attending to the encoder's output (an
        encoder-decoder): the model then has two stacks, and a run takes a target."""
        return self.arch == "encoder-decoder"

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with the given fields changed (checked like any new config)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Every field by name, as the JSON exports and the URL write them."""
        return dataclasses.asdict(self)


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ModelConfig))
FAMILIES = ("bert", "llama", "olmo2")


@dataclass(frozen=True)
class CheckpointConfig(ModelConfig):
    """A real checkpoint's architecture: ModelConfig's fields as the checkpoint fixes them, plus what BERT and Llama
    need beyond a configured model. Hashable like any config, so a checkpoint (or its norm-flipped copy) keys caches.
    Only the checkpoint's own loader makes one: its values are checked against its files, not the sidebar's ranges."""

    checkpoint: str = ""  # what load_pretrained was given: an installed model's name, or a file or folder
    family: str = "bert"  # bert: learned positions, token types, embedding LayerNorm; llama: RMSNorm, RoPE, SwiGLU
    n_kv_heads: int = 0  # heads of keys and values: fewer than n_heads is grouped-query attention (Llama)
    norm_eps: float = 1e-5  # the epsilon of every LayerNorm / RMSNorm
    rope_base: float = 10000.0  # RoPE's theta: pair i of a head turns by position / rope_base^(2i / d_head)
    vocab_size: int = 0
    type_vocab_size: int = 0  # BERT's token-type (segment) table; the explorer always uses type 0
    tie_embeddings: bool = False  # the read-out to token logits is the token embedding table (Llama's lm_head)
    weights_note: str = ""  # where the numbers come from, in plain words for the pages

    def __post_init__(self) -> None:
        validate_checkpoint(self)

    @property
    def norm_kind(self) -> str:
        """ "rms" (Llama's RMSNorm: no mean subtracted, no bias) or "layer" (LayerNorm)."""
        return "layer" if self.family == "bert" else "rms"


def validate_checkpoint(cfg: CheckpointConfig) -> None:
    """Raise ConfigError for a checkpoint config that cannot describe a model."""
    if cfg.family not in FAMILIES:
        raise ConfigError(f"family {cfg.family!r} is not supported; the explorer runs {_quoted(FAMILIES)} checkpoints.")
    if cfg.norm not in NORMS:
        raise ConfigError(norm_error(cfg.norm))
    if cfg.arch not in ("encoder", "decoder") or cfg.mask not in MASKS:
        raise ConfigError("A checkpoint runs as an encoder or a decoder.")
    for name in ("d_model", "n_heads", "n_layers", "d_ff", "n_kv_heads", "vocab_size", "max_tokens"):
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"The checkpoint's {name} must be a positive whole number, not {value!r}.")
    if cfg.d_model % cfg.n_heads or cfg.n_heads % cfg.n_kv_heads:
        raise ConfigError(
            f"The checkpoint's {cfg.n_heads} heads must divide d_model {cfg.d_model}, and its {cfg.n_kv_heads} "
            "key/value heads must divide its heads."
        )


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _spoken_list(items: list[int]) -> str:
    return listed([str(i) for i in items], "or")


def applied_masks(cfg: ModelConfig) -> dict[str, str]:
    """The mask each stack's self-attention applies, by stack name: a decoder's is causal whatever cfg.mask says."""
    as_decoder = "causal+padding" if "padding" in cfg.mask else "causal"
    if cfg.arch == "encoder":
        return {"encoder": cfg.mask}
    if cfg.arch == "decoder":
        return {"decoder": as_decoder}
    return {"encoder": cfg.mask, "decoder": as_decoder}


def validate(cfg: ModelConfig) -> None:
    """Raise ConfigError for the first impossible value, saying what would work instead."""
    if cfg.norm not in NORMS:
        raise ConfigError(norm_error(cfg.norm))
    for name, allowed in CHOICES.items():
        value = getattr(cfg, name)
        if value not in allowed:
            raise ConfigError(f"{name} {value!r} is not one of the options; choose {_quoted(allowed)}.")
    for name, (low, high) in INT_LIMITS.items():
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{name} must be a whole number, not {value!r}.")
        if not low <= value <= high:
            raise ConfigError(f"{name} {value} is out of range; use a value from {low} to {high}.")
    if isinstance(cfg.dropout, bool) or not isinstance(cfg.dropout, (int, float)) or not 0.0 <= cfg.dropout < 1.0:
        raise ConfigError(f"dropout {cfg.dropout!r} must be a number from 0 up to (not including) 1.")
    rope = cfg.positional == "rope"
    usable = [
        heads
        for heads in _divisors(cfg.d_model)
        if heads <= INT_LIMITS["n_heads"][1] and not (rope and (cfg.d_model // heads) % 2)
    ]  # the head counts this d_model allows (for rope, only those giving each head an even width)
    if rope and not usable:
        raise ConfigError(
            f"rope rotates pairs of dimensions, so each head needs an even width, which an odd d_model "
            f"({cfg.d_model}) cannot give; use an even d_model."
        )
    if cfg.d_model % cfg.n_heads:
        even = " (with rope, each head needs an even width)" if rope else ""
        raise ConfigError(
            f"d_model {cfg.d_model} is not divisible by {cfg.n_heads} heads; with d_model {cfg.d_model} "
            f"you can use {_spoken_list(usable)} heads{even}."
        )
    if rope and cfg.d_head % 2:
        raise ConfigError(
            f"rope rotates pairs of dimensions, so each head needs an even width; d_model {cfg.d_model} / "
            f"{cfg.n_heads} heads = {cfg.d_head}. With d_model {cfg.d_model} you can use {_spoken_list(usable)} heads."
        )


def norm_error(value: object) -> str:
    """The sentence for a norm placement the explorer does not know: the four it does, each with its formula."""
    options = "; ".join(f'"{name}", {formula}' for name, formula in NORM_FORMULAS.items())
    return f"norm {value!r} is not a norm placement the explorer knows; choose one of: {options}."


def _quoted(options: tuple[str, ...]) -> str:
    return listed([f'"{o}"' for o in options], "or")


def parse_config(values: Mapping[str, Any], base: ModelConfig | None = None) -> ModelConfig:
    """Build a config from strings or values (a URL's query, a JSON export); unknown keys are ignored."""
    base = base or ModelConfig()
    changes: dict[str, Any] = {}
    for name in FIELDS:
        if name not in values:
            continue
        changes[name] = _coerce(name, values[name])
    return base.replace(**changes)


def _coerce(name: str, raw: Any) -> Any:
    if name in INT_LIMITS:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        try:
            return int(str(raw).strip())
        except ValueError:
            raise ConfigError(f"{name} must be a whole number, not {raw!r}.") from None
    if name == "dropout":
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise ConfigError(f"dropout must be a number from 0 up to 1, not {raw!r}.") from None
    return str(raw).strip()
