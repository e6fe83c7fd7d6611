"""What every checkpoint reader shares: the Checkpoint it returns, the hyperparameters, the tensor names and shapes a
model of each family needs, and the checks of numbers read from a config or a file's metadata.

The readers are explorer.folder_files (a Hugging Face folder of safetensors) and explorer.gguf_files (one GGUF file);
explorer.checkpoint_files.read_checkpoint picks one by what it is given.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from explorer.config import ConfigError

MAX_LAYERS = 1_000  # the deepest published transformers have a few hundred; a million would list 16 million tensors
SUPPORTED = (
    "a folder with config.json for model_type 'bert', 'llama' or 'olmo2', or a GGUF file of architecture 'llama'"
)

Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class Hyperparameters:
    """The shape of a pretrained model: enough to rebuild it and to check every tensor's shape."""

    family: str  # "bert", "llama" or "olmo2"
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int  # equals n_heads for BERT; fewer for grouped-query attention
    d_ff: int
    vocab_size: int
    max_positions: int  # BERT's position table (512); Llama's context length (8192)
    norm_eps: float
    rope_base: float | None  # llama only
    type_vocab_size: int | None  # bert only
    tie_embeddings: bool  # llama: True when there is no separate lm_head / output.weight
    activation: str  # "gelu" (exact erf) for bert, "silu" for llama

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.d_model // self.n_heads


@dataclass(frozen=True)
class Checkpoint:
    """A pretrained model read from disk: hyperparameters plus float32 tensors under Hugging Face names."""

    name: str  # e.g. "all-MiniLM-L6-v2" / "SmolLM2-135M-Instruct"
    hparams: Hyperparameters
    tensors: dict[
        str, torch.Tensor
    ]  # float32, contiguous; BertModel names without "bert.", LlamaModel without "model."
    weights_note: str  # plain words for the page, e.g. "float32 as shipped"
    source: str  # the file or folder read
    license: str | None  # from GGUF general.license, or None
    # A GGUF's tokenizer.ggml.* metadata as python values, read with its weights (or kept with them in the weights
    # cache): parsing a GGUF's metadata is the slowest part of reading it, so the tokenizer is built from these instead.
    tokenizer_fields: dict[str, Any] | None = None


# ---------------------------------------------------------------------------------------------------- shapes


def expected_shapes(hp: Hyperparameters) -> dict[str, tuple[int, ...]]:
    """Every tensor name the model needs -> its shape, from the hyperparameters alone."""
    if hp.family == "olmo2":
        from explorer.olmo2_files import olmo2_shapes  # olmo2_files builds on this module, so it is imported late

        return olmo2_shapes(hp)
    return _bert_shapes(hp) if hp.family == "bert" else _llama_shapes(hp)


def _bert_shapes(hp: Hyperparameters) -> dict[str, tuple[int, ...]]:
    """BertModel's state-dict names (no pooler) -> shapes."""
    d, f = hp.d_model, hp.d_ff
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.word_embeddings.weight": (hp.vocab_size, d),
        "embeddings.position_embeddings.weight": (hp.max_positions, d),
        "embeddings.token_type_embeddings.weight": (hp.type_vocab_size or 0, d),
        "embeddings.LayerNorm.weight": (d,),
        "embeddings.LayerNorm.bias": (d,),
    }
    linear = {
        "attention.self.query": (d, d),
        "attention.self.key": (d, d),
        "attention.self.value": (d, d),
        "attention.output.dense": (d, d),
        "intermediate.dense": (f, d),
        "output.dense": (d, f),
    }
    for i in range(hp.n_layers):
        prefix = f"encoder.layer.{i}."
        for part, (rows, cols) in linear.items():
            shapes[f"{prefix}{part}.weight"] = (rows, cols)
            shapes[f"{prefix}{part}.bias"] = (rows,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[f"{prefix}{norm}.weight"] = (d,)
            shapes[f"{prefix}{norm}.bias"] = (d,)
    return shapes


def _llama_shapes(hp: Hyperparameters) -> dict[str, tuple[int, ...]]:
    """LlamaModel's state-dict names (plus lm_head.weight when untied) -> shapes."""
    d, f, kv = hp.d_model, hp.d_ff, hp.n_kv_heads * hp.head_dim
    layer = {
        "input_layernorm": (d,),
        "self_attn.q_proj": (d, d),
        "self_attn.k_proj": (kv, d),
        "self_attn.v_proj": (kv, d),
        "self_attn.o_proj": (d, d),
        "post_attention_layernorm": (d,),
        "mlp.gate_proj": (f, d),
        "mlp.up_proj": (f, d),
        "mlp.down_proj": (d, f),
    }
    return decoder_shapes(hp, layer)


def decoder_shapes(hp: Hyperparameters, layer: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """A Llama-like decoder's state-dict names -> shapes: the token embeddings, `layer`'s weights (module -> shape) in
    every block, the final norm, and lm_head.weight when the read-out is not tied."""
    d = hp.d_model
    shapes: dict[str, tuple[int, ...]] = {"embed_tokens.weight": (hp.vocab_size, d)}
    for i in range(hp.n_layers):
        shapes.update({f"layers.{i}.{part}.weight": shape for part, shape in layer.items()})
    shapes["norm.weight"] = (d,)
    if not hp.tie_embeddings:
        shapes["lm_head.weight"] = (hp.vocab_size, d)
    return shapes


def check_shape(source: Path, name: str, shape: tuple[int, ...], expected: tuple[int, ...]) -> None:
    """Raise unless a stored tensor has the shape the hyperparameters call for."""
    if tuple(shape) != tuple(expected):
        raise ConfigError(
            f"{source}: tensor '{name}' has shape {list(shape)}, but the model's hyperparameters need {list(expected)}."
        )


def missing_error(source: Path, names: list[str], hp: Hyperparameters) -> ConfigError:
    """The error for tensors the model needs that the file does not hold, with the sizes that call for them (a config
    that lost its sizes takes defaults, e.g. 12 layers, whose extra layers then look missing)."""
    shown = ", ".join(f"'{n}'" for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return ConfigError(
        f"{source} is missing tensor {shown} that the model's hyperparameters ({hp.n_layers} layers of width "
        f"{hp.d_model}) call for."
    )


# ---------------------------------------------------------------------------------------------------- values


def whole_number(source: Path, key: str, value: Any) -> int:
    """A positive whole number from a config or metadata value."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ConfigError(f"{source}: '{key}' must be a positive whole number, not {value!r}.")
    return int(value)


def positive_number(source: Path, key: str, value: Any) -> float:
    """A positive, finite number from a config or metadata value."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.number) or not 0 < value < math.inf:
        raise ConfigError(f"{source}: '{key}' must be a positive number, not {value!r}.")
    return float(value)


def check_heads(source: Path, d_model: int, n_heads: int, n_kv_heads: int) -> None:
    """Heads must split d_model evenly, and query heads must split evenly among key/value heads."""
    if d_model % n_heads:
        raise ConfigError(f"{source}: the width {d_model} does not divide evenly among {n_heads} attention heads.")
    if n_heads % n_kv_heads:
        raise ConfigError(f"{source}: {n_heads} query heads do not divide evenly among {n_kv_heads} key/value heads.")


def check_depth(source: Path, hp: Hyperparameters) -> Hyperparameters:
    """Refuse a layer count no real model has before any per-layer table of names is built from it."""
    if hp.n_layers > MAX_LAYERS:
        raise ConfigError(
            f"{source} asks for {hp.n_layers:,} layers; no real model has more than {MAX_LAYERS:,}, so the file is "
            "damaged or not a model's config."
        )
    return hp


def check_rotary(source: Path, hp: Hyperparameters, head_dim: Any) -> None:
    """Rotary position encoding turns pairs of numbers, so a head must have an even width equal to d_model / heads."""
    if head_dim is not None and head_dim != hp.head_dim:
        raise ConfigError(
            f"{source}: a head width of {head_dim} (not d_model / heads = {hp.head_dim}) is not supported."
        )
    if hp.head_dim % 2:
        raise ConfigError(f"{source}: the head width {hp.head_dim} is odd, and rotary positions need an even one.")


def finite(source: Path, name: str, tensor: torch.Tensor) -> torch.Tensor:
    """The tensor, unless it holds NaN or infinity: such weights would turn every attention map into NaN."""
    # The smallest and largest value in one pass: NaN and infinity show in them, without isfinite's boolean copy of the
    # whole tensor (SmolLM2's 135 M weights: about 25 times as fast).
    if tensor.numel() and not all(bool(torch.isfinite(extreme)) for extreme in torch.aminmax(tensor)):
        raise ConfigError(f"{source}: tensor '{name}' holds NaN or infinite values; the weights are damaged.")
    return tensor


def starts_with(path: Path, magic: bytes) -> bool:
    """Whether a file begins with these bytes."""
    with path.open("rb") as file:
        return file.read(len(magic)) == magic
