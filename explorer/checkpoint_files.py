"""Read pretrained checkpoints (a Hugging Face folder of safetensors, or one GGUF file) into one float32 form, offline.

Nothing is unpickled: weights come from safetensors or GGUF only. Every tensor the hyperparameters call for is checked
by name and shape before any weight is loaded, and anything a user could get wrong raises a one-sentence ConfigError.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize
from safetensors import SafetensorError, safe_open

from explorer.config import ConfigError

MAX_CONFIG_BYTES = 1_000_000  # config.json of a real model is a few KB
MAX_INDEX_BYTES = 16_000_000  # model.safetensors.index.json lists one line per tensor
MAX_LAYERS = 1_000  # the deepest published transformers have a few hundred; a million would list 16 million tensors
FOLDER_FAMILIES = ("bert", "llama", "olmo2")
GGUF_ARCHITECTURES = ("llama",)
SUPPORTED = (
    "a folder with config.json for model_type 'bert', 'llama' or 'olmo2', or a GGUF file of architecture 'llama'"
)
SAFETENSORS_FLOATS = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16"}
# Every type gguf.quants.dequantize turns into float32.
GGUF_TYPES = frozenset(
    GGMLQuantizationType[name]
    for name in (
        "F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K TQ1_0 TQ2_0 MXFP4 NVFP4 "
        "IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M IQ4_NL IQ4_XS"
    ).split()
)
GGUF_READ_ERRORS = (OSError, ValueError, IndexError, KeyError, TypeError, OverflowError, UnicodeDecodeError)
# Hugging Face LlamaModel names (per layer) and the GGUF names llama.cpp's converter gives them.
LLAMA_LAYER_TO_GGUF = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
LLAMA_TOP_TO_GGUF = {"embed_tokens": "token_embd", "norm": "output_norm", "lm_head": "output"}
QUANT_SUFFIX = re.compile(r"[.-](I?Q\d\w*|T?Q\d_\d|B?F16|F32|MXFP4|NVFP4)$", re.IGNORECASE)

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
    # A GGUF's tokenizer.ggml.* metadata as python values, read with its weights: parsing the file's metadata is most of
    # its load time (about 9 s for SmolLM2 on one core), so the tokenizer is built from these instead of a second parse.
    tokenizer_fields: dict[str, Any] | None = None


def read_checkpoint(path: Path, progress: Progress | None = None) -> Checkpoint:
    """A .gguf file or a Hugging Face folder (config.json + safetensors), read and checked."""
    path = Path(path)
    if path.is_dir():
        return read_folder(path)
    if not path.exists():
        raise ConfigError(f"{path} does not exist; give {SUPPORTED}.")
    if path.suffix.lower() == ".gguf" or _starts_with(path, b"GGUF"):
        return read_gguf(path, progress)
    raise ConfigError(f"{path} is neither a folder nor a GGUF file; give {SUPPORTED}.")


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


def _check_shape(source: Path, name: str, shape: tuple[int, ...], expected: tuple[int, ...]) -> None:
    """Raise unless a stored tensor has the shape the hyperparameters call for."""
    if tuple(shape) != tuple(expected):
        raise ConfigError(
            f"{source}: tensor '{name}' has shape {list(shape)}, but the model's hyperparameters need {list(expected)}."
        )


def _missing(source: Path, names: list[str], hp: Hyperparameters) -> ConfigError:
    """The error for tensors the model needs that the file does not hold, with the sizes that call for them (a config
    that lost its sizes takes defaults, e.g. 12 layers, whose extra layers then look missing)."""
    shown = ", ".join(f"'{n}'" for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return ConfigError(
        f"{source} is missing tensor {shown} that the model's hyperparameters ({hp.n_layers} layers of width "
        f"{hp.d_model}) call for."
    )


# ---------------------------------------------------------------------------------------------------- values


def _whole(source: Path, key: str, value: Any) -> int:
    """A positive whole number from a config or metadata value."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ConfigError(f"{source}: '{key}' must be a positive whole number, not {value!r}.")
    return int(value)


def _positive(source: Path, key: str, value: Any) -> float:
    """A positive, finite number from a config or metadata value."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.number) or not 0 < value < math.inf:
        raise ConfigError(f"{source}: '{key}' must be a positive number, not {value!r}.")
    return float(value)


def _require(source: Path, config: dict[str, Any], key: str, default: Any = None) -> Any:
    """config[key], or the default; raise when there is neither."""
    value = config.get(key, default)
    if value is None:
        raise ConfigError(f"{source} has no '{key}', which the model needs.")
    return value


def _check_heads(source: Path, d_model: int, n_heads: int, n_kv_heads: int) -> None:
    """Heads must split d_model evenly, and query heads must split evenly among key/value heads."""
    if d_model % n_heads:
        raise ConfigError(f"{source}: the width {d_model} does not divide evenly among {n_heads} attention heads.")
    if n_heads % n_kv_heads:
        raise ConfigError(f"{source}: {n_heads} query heads do not divide evenly among {n_kv_heads} key/value heads.")


def _check_depth(source: Path, hp: Hyperparameters) -> Hyperparameters:
    """Refuse a layer count no real model has before any per-layer table of names is built from it."""
    if hp.n_layers > MAX_LAYERS:
        raise ConfigError(
            f"{source} asks for {hp.n_layers:,} layers; no real model has more than {MAX_LAYERS:,}, so the file is "
            "damaged or not a model's config."
        )
    return hp


def _check_rotary(source: Path, hp: Hyperparameters, head_dim: Any) -> None:
    """Rotary position encoding turns pairs of numbers, so a head must have an even width equal to d_model / heads."""
    if head_dim is not None and head_dim != hp.head_dim:
        raise ConfigError(
            f"{source}: a head width of {head_dim} (not d_model / heads = {hp.head_dim}) is not supported."
        )
    if hp.head_dim % 2:
        raise ConfigError(f"{source}: the head width {hp.head_dim} is odd, and rotary positions need an even one.")


# ---------------------------------------------------------------------------------------------------- folders


def read_folder(folder: Path, name: str | None = None) -> Checkpoint:
    """config.json + model.safetensors (or shards listed by model.safetensors.index.json): 'bert', 'llama', 'olmo2'."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{folder} is not a folder; give {SUPPORTED}.")
    config = _read_json(folder / "config.json", MAX_CONFIG_BYTES, "config.json")
    hp = _hyperparameters(folder / "config.json", config)
    tensors, dtypes = _read_safetensors(folder, hp)
    return Checkpoint(
        name=name or _folder_name(folder),
        hparams=hp,
        tensors=tensors,
        weights_note=_safetensors_note(dtypes),
        source=str(folder),
        license=None,
    )


def _read_json(path: Path, limit: int, what: str) -> Any:
    """A small JSON file, refused unread when it is bigger than any real one."""
    if not path.is_file():
        raise ConfigError(f"{path.parent} has no {what}; a Hugging Face model folder needs one.")
    size = path.stat().st_size
    if size > limit:
        raise ConfigError(f"{path} is {size:,} bytes; a real {what} is far smaller (at most {limit // 10**6} MB).")
    try:
        return json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as error:
        raise ConfigError(f"{path} is not JSON ({error}).") from None


def _hyperparameters(source: Path, config: Any) -> Hyperparameters:
    """Hyperparameters from a parsed config.json, for the families this reader supports."""
    if not isinstance(config, dict):
        raise ConfigError(f"{source} must hold a JSON object of settings, not {type(config).__name__}.")
    model_type = config.get("model_type")
    if model_type not in FOLDER_FAMILIES:
        raise ConfigError(f"{source} has model_type {model_type!r}; supported are {SUPPORTED}.")
    if model_type == "olmo2":
        from explorer.olmo2_files import olmo2_hparams  # olmo2_files builds on this module, so it is imported late

        return _check_depth(source, olmo2_hparams(source, config))
    hp = _bert_hparams(source, config) if model_type == "bert" else _llama_hparams(source, config)
    return _check_depth(source, hp)


def _bert_hparams(source: Path, config: dict[str, Any]) -> Hyperparameters:
    """BERT hyperparameters, with transformers' BertConfig defaults for missing keys."""
    activation = config.get("hidden_act", "gelu")
    if activation != "gelu":
        raise ConfigError(f"{source}: hidden_act {activation!r} is not supported; BERT here uses exact 'gelu'.")
    position = config.get("position_embedding_type", "absolute")
    if position != "absolute":
        raise ConfigError(f"{source}: position_embedding_type {position!r} is not supported, only 'absolute'.")
    whole = {
        key: _whole(source, key, config.get(key, default))
        for key, default in (
            ("num_hidden_layers", 12),
            ("hidden_size", 768),
            ("num_attention_heads", 12),
            ("intermediate_size", 3072),
            ("vocab_size", 30522),
            ("max_position_embeddings", 512),
            ("type_vocab_size", 2),
        )
    }
    heads = whole["num_attention_heads"]
    _check_heads(source, whole["hidden_size"], heads, heads)
    return Hyperparameters(
        family="bert",
        n_layers=whole["num_hidden_layers"],
        d_model=whole["hidden_size"],
        n_heads=heads,
        n_kv_heads=heads,
        d_ff=whole["intermediate_size"],
        vocab_size=whole["vocab_size"],
        max_positions=whole["max_position_embeddings"],
        norm_eps=_positive(source, "layer_norm_eps", config.get("layer_norm_eps", 1e-12)),
        rope_base=None,
        type_vocab_size=whole["type_vocab_size"],
        tie_embeddings=False,
        activation="gelu",
    )


def _llama_hparams(source: Path, config: dict[str, Any]) -> Hyperparameters:
    """Llama hyperparameters, with transformers' LlamaConfig defaults for missing keys."""
    _refuse_llama_extras(source, config)
    whole = {
        key: _whole(source, key, _require(source, config, key, default))
        for key, default in (
            ("num_hidden_layers", 32),
            ("hidden_size", 4096),
            ("num_attention_heads", 32),
            ("intermediate_size", 11008),
            ("vocab_size", 32000),
            ("max_position_embeddings", 2048),
        )
    }
    heads = whole["num_attention_heads"]
    kv_heads = _whole(source, "num_key_value_heads", config.get("num_key_value_heads") or heads)
    _check_heads(source, whole["hidden_size"], heads, kv_heads)
    tie = config.get("tie_word_embeddings", False)
    if not isinstance(tie, bool):
        raise ConfigError(f"{source}: 'tie_word_embeddings' must be true or false, not {tie!r}.")
    hp = Hyperparameters(
        family="llama",
        n_layers=whole["num_hidden_layers"],
        d_model=whole["hidden_size"],
        n_heads=heads,
        n_kv_heads=kv_heads,
        d_ff=whole["intermediate_size"],
        vocab_size=whole["vocab_size"],
        max_positions=whole["max_position_embeddings"],
        norm_eps=_positive(source, "rms_norm_eps", config.get("rms_norm_eps", 1e-6)),
        rope_base=_llama_rope_base(source, config),
        type_vocab_size=None,
        tie_embeddings=tie,
        activation="silu",
    )
    _check_rotary(source, hp, config.get("head_dim"))
    return hp


def _refuse_llama_extras(source: Path, config: dict[str, Any], family: str = "Llama") -> None:
    """Llama (or OLMo 2) variants the engine does not implement: biases, another activation."""
    for key in ("attention_bias", "mlp_bias"):
        if config.get(key, False):
            raise ConfigError(f"{source}: {key} is true, and {family} layers with biases are not supported.")
    activation = config.get("hidden_act", "silu")
    if activation != "silu":
        raise ConfigError(f"{source}: hidden_act {activation!r} is not supported; {family} here uses 'silu'.")


def _llama_rope_base(source: Path, config: dict[str, Any]) -> float:
    """rope_theta from the old (rope_theta + rope_scaling) or new (rope_parameters) layout; scaled rotary is refused."""
    params = config.get("rope_parameters")
    if params is None:
        params = {"rope_theta": config.get("rope_theta", 10000.0), "rope_type": "default"}
        if config.get("rope_scaling") is not None:
            raise ConfigError(f"{source}: rope_scaling {config['rope_scaling']!r} is not supported, only none.")
    if not isinstance(params, dict):
        raise ConfigError(f"{source}: 'rope_parameters' must be a JSON object, not {params!r}.")
    kind = params.get("rope_type", params.get("type", "default"))
    if kind != "default":
        raise ConfigError(f"{source}: rotary scaling of type {kind!r} is not supported, only the default.")
    return _positive(source, "rope_theta", params.get("rope_theta", config.get("rope_theta", 10000.0)))


def _folder_name(folder: Path) -> str:
    """The model card's title ('# all-MiniLM-L6-v2') when it is one short line, else the folder's name."""
    card = folder / "README.md"
    if card.is_file() and card.stat().st_size <= MAX_CONFIG_BYTES:
        for line in card.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("# ") and 0 < len(line[2:].strip()) <= 60:
                return line[2:].strip()
    return folder.resolve().name


def _weight_files(folder: Path) -> list[Path]:
    """model.safetensors, or the shards an index (or the model-0000X-of-0000Y names) lists."""
    single = folder / "model.safetensors"
    if single.exists():
        return [single]
    index = folder / "model.safetensors.index.json"
    if index.exists():
        return _index_shards(index)
    shards = sorted(folder.glob("model-*-of-*.safetensors"))
    if shards:
        return shards
    pickle = (
        " (pytorch_model.bin is a pickle, which is never loaded)" if (folder / "pytorch_model.bin").exists() else ""
    )
    raise ConfigError(f"{folder} has no model.safetensors or safetensors shards{pickle}.")


def _index_shards(index: Path) -> list[Path]:
    """The shard files a model.safetensors.index.json names, each a plain file name in the same folder."""
    info = _read_json(index, MAX_INDEX_BYTES, "model.safetensors.index.json")
    weight_map = info.get("weight_map") if isinstance(info, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise ConfigError(f"{index} has no 'weight_map' of tensor names to shard files.")
    shards = []
    for file_name in sorted(set(weight_map.values())):
        shard = index.parent / file_name
        if Path(file_name).name != file_name or not shard.is_file():
            raise ConfigError(f"{index} names shard {file_name!r}, which is not a file in {index.parent}.")
        shards.append(shard)
    return shards


def _stored_name(name: str, family: str) -> str:
    """A checkpoint key in this module's naming: 'bert.' and 'model.' prefixes stripped."""
    prefix = "bert." if family == "bert" else "model."
    return name.removeprefix(prefix)


def _read_safetensors(folder: Path, hp: Hyperparameters) -> tuple[dict[str, torch.Tensor], set[str]]:
    """Every expected tensor as float32, after checking names, shapes and dtypes; and the dtypes found."""
    shapes = expected_shapes(hp)
    with ExitStack() as stack:
        handles = {}
        for file in _weight_files(folder):
            handle = stack.enter_context(_open_safetensors(file))
            for key in handle.keys():  # noqa: SIM118 - safe_open is not a mapping
                handles.setdefault(_stored_name(key, hp.family), (file, handle, key))
        missing = [name for name in shapes if name not in handles]
        if missing:
            raise _missing(folder, missing, hp)
        dtypes = {_check_stored(*handles[name], name, shape) for name, shape in shapes.items()}
        tensors = {name: _load(*handles[name]) for name in shapes}
    return tensors, dtypes


def _open_safetensors(file: Path) -> Any:
    """safe_open, with a sentence in place of the library's error for a damaged file."""
    try:
        return safe_open(str(file), framework="pt")
    except (SafetensorError, OSError) as error:
        raise ConfigError(f"{file} is not a complete safetensors file (truncated or corrupt: {error}).") from None


def _check_stored(file: Path, handle: Any, key: str, name: str, shape: tuple[int, ...]) -> str:
    """Check one stored tensor's shape and dtype without loading it; -> its dtype name."""
    stored = handle.get_slice(key)
    dtype = stored.get_dtype()
    if dtype not in SAFETENSORS_FLOATS:
        raise ConfigError(f"{file}: tensor '{key}' holds {dtype} numbers, not floating-point weights.")
    _check_shape(file, key, tuple(stored.get_shape()), shape)
    return dtype


def _load(file: Path, handle: Any, key: str) -> torch.Tensor:
    """One stored tensor as contiguous float32, in memory of its own."""
    try:
        tensor = handle.get_tensor(key)
    except (SafetensorError, OSError) as error:
        raise ConfigError(f"{file}: tensor '{key}' could not be read (the file is corrupt: {error}).") from None
    # A copy even of float32: get_tensor maps the file, and a model on that mapping dies (SIGBUS) if the file is cut.
    return _finite(file, key, tensor.to(torch.float32, copy=True).contiguous())


def _finite(source: Path, name: str, tensor: torch.Tensor) -> torch.Tensor:
    """The tensor, unless it holds NaN or infinity: such weights would turn every attention map into NaN."""
    if not bool(torch.isfinite(tensor).all()):
        raise ConfigError(f"{source}: tensor '{name}' holds NaN or infinite values; the weights are damaged.")
    return tensor


def _safetensors_note(dtypes: set[str]) -> str:
    """Plain words for how the weights were stored."""
    if dtypes == {"F32"}:
        return "float32 as shipped"
    shipped = " and ".join(SAFETENSORS_FLOATS[d] for d in sorted(dtypes))
    return f"converted to float32 from {shipped} as shipped"


# ---------------------------------------------------------------------------------------------------- GGUF


def read_gguf(path: Path, progress: Progress | None = None) -> Checkpoint:
    """A llama GGUF file, dequantized to float32 in Hugging Face layout; progress(fraction 0..1, text) per tensor."""
    path = Path(path)
    reader = _open_gguf(path)
    architecture = _metadata(reader, "general.architecture")
    if architecture not in GGUF_ARCHITECTURES:
        raise ConfigError(f"{path} is a GGUF of architecture {architecture!r}; supported are {SUPPORTED}.")
    hp = _gguf_hparams(path, reader)
    stored = _gguf_tensors(path, reader, hp)
    tensors = dict(_dequantize_all(path, stored, hp, progress))
    license_ = _metadata(reader, "general.license")
    return Checkpoint(
        name=_gguf_name(path),
        hparams=hp,
        tensors=tensors,
        weights_note=_gguf_note({t.tensor_type for t in stored.values()}),
        source=str(path),
        license=license_ if isinstance(license_, str) else None,
        tokenizer_fields={
            name: field.contents() for name, field in reader.fields.items() if name.startswith(TOKENIZER)
        },
    )


TOKENIZER = "tokenizer.ggml."  # the prefix of a GGUF's tokenizer metadata


def _starts_with(path: Path, magic: bytes) -> bool:
    """Whether a file begins with these bytes."""
    with path.open("rb") as file:
        return file.read(len(magic)) == magic


def _open_gguf(path: Path) -> GGUFReader:
    """GGUFReader, with a sentence in place of the library's error for a missing, foreign or damaged file."""
    if not path.is_file():
        raise ConfigError(f"{path} does not exist or is not a file; give {SUPPORTED}.")
    if not _starts_with(path, b"GGUF"):
        raise ConfigError(f"{path} is not a GGUF file: it does not begin with the bytes 'GGUF'.")
    try:
        return GGUFReader(path)
    except GGUF_READ_ERRORS as error:
        raise ConfigError(f"{path} is a truncated or corrupt GGUF file ({error}).") from None


def _metadata(reader: GGUFReader, key: str) -> Any:
    """One GGUF metadata value (a number, a string or a list), or None when absent."""
    field = reader.fields.get(key)
    if field is None:
        return None
    try:
        return field.contents()
    except GGUF_READ_ERRORS:
        return None


def _gguf_hparams(path: Path, reader: GGUFReader) -> Hyperparameters:
    """Llama hyperparameters from GGUF metadata; tied embeddings when there is no output.weight."""
    _refuse_gguf_rope_scaling(path, reader)
    heads = _gguf_whole(path, reader, "attention.head_count")
    hp = Hyperparameters(
        family="llama",
        n_layers=_gguf_whole(path, reader, "block_count"),
        d_model=_gguf_whole(path, reader, "embedding_length"),
        n_heads=heads,
        n_kv_heads=_gguf_whole(path, reader, "attention.head_count_kv", heads),
        d_ff=_gguf_whole(path, reader, "feed_forward_length"),
        vocab_size=_whole(path, "llama.vocab_size", _gguf_vocab_size(path, reader)),
        max_positions=_gguf_whole(path, reader, "context_length"),
        norm_eps=_positive(
            path,
            "llama.attention.layer_norm_rms_epsilon",
            _gguf_value(path, reader, "attention.layer_norm_rms_epsilon"),
        ),
        rope_base=_positive(path, "llama.rope.freq_base", _gguf_value(path, reader, "rope.freq_base", 10000.0)),
        type_vocab_size=None,
        tie_embeddings=all(t.name != "output.weight" for t in reader.tensors),
        activation="silu",
    )
    _check_heads(path, hp.d_model, hp.n_heads, hp.n_kv_heads)
    _check_rotary(path, hp, _metadata(reader, "llama.rope.dimension_count"))
    return _check_depth(path, hp)


def _gguf_value(path: Path, reader: GGUFReader, key: str, default: Any = None) -> Any:
    """The metadata value 'llama.<key>', or the default; raise when there is neither."""
    value = _metadata(reader, f"llama.{key}")
    if value is None:
        value = default
    if value is None:
        raise ConfigError(f"{path} has no metadata 'llama.{key}', which the model needs.")
    return value


def _gguf_whole(path: Path, reader: GGUFReader, key: str, default: int | None = None) -> int:
    """A positive whole number from the metadata 'llama.<key>'."""
    return _whole(path, f"llama.{key}", _gguf_value(path, reader, key, default))


def _refuse_gguf_rope_scaling(path: Path, reader: GGUFReader) -> None:
    """Scaled rotary positions (linear, yarn, llama3's rope_freqs) are not implemented."""
    kind = _metadata(reader, "llama.rope.scaling.type")
    if kind not in (None, "none"):
        raise ConfigError(f"{path}: rotary scaling of type {kind!r} is not supported, only none.")


def _gguf_vocab_size(path: Path, reader: GGUFReader) -> Any:
    """llama.vocab_size, else the number of tokenizer tokens (as transformers does)."""
    size = _metadata(reader, "llama.vocab_size")
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    if size is None and tokens is not None:
        size = len(tokens.data)
    if size is None:
        raise ConfigError(f"{path} has neither 'llama.vocab_size' nor a tokenizer token list, so its vocabulary size.")
    return size


def gguf_tensor_name(name: str) -> str:
    """llama.cpp's GGUF name for a LlamaModel tensor: 'layers.3.self_attn.q_proj.weight' -> 'blk.3.attn_q.weight'."""
    match = re.fullmatch(r"layers\.(\d+)\.(.+)\.weight", name)
    if match:
        return f"blk.{match[1]}.{LLAMA_LAYER_TO_GGUF[match[2]]}.weight"
    return f"{LLAMA_TOP_TO_GGUF[name.removesuffix('.weight')]}.weight"


def _gguf_tensors(path: Path, reader: GGUFReader, hp: Hyperparameters) -> dict[str, Any]:
    """Hugging Face name -> GGUF ReaderTensor, after checking names, shapes and types; nothing dequantized yet."""
    shapes = expected_shapes(hp)
    by_name = {t.name: t for t in reader.tensors}
    wanted = {gguf_tensor_name(name): name for name in shapes}
    unexpected = sorted(set(by_name) - set(wanted))
    if unexpected:
        raise ConfigError(f"{path} holds tensor '{unexpected[0]}', which a plain Llama model does not have.")
    missing = [name for gguf_name, name in wanted.items() if gguf_name not in by_name]
    if missing:
        raise _missing(path, [gguf_tensor_name(name) for name in missing], hp)
    stored = {}
    for gguf_name, name in wanted.items():
        tensor = by_name[gguf_name]
        _check_shape(path, gguf_name, tuple(int(n) for n in reversed(tensor.shape)), shapes[name])
        if tensor.tensor_type not in GGUF_TYPES:
            raise ConfigError(
                f"{path}: tensor '{gguf_name}' uses the GGUF quantisation type {tensor.tensor_type.name}, "
                "which cannot be dequantized here."
            )
        stored[name] = tensor
    return stored


def _dequantize_all(
    source: Path, stored: dict[str, Any], hp: Hyperparameters, progress: Progress | None
) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, float32 tensor in Hugging Face layout) for each stored tensor, reporting progress by element count."""
    total = sum(int(t.n_elements) for t in stored.values())
    done = 0
    for name, tensor in stored.items():
        yield name, _dequantize(tensor, name, hp, source)
        done += int(tensor.n_elements)
        if progress is not None:
            progress(done / total, f"Dequantized {tensor.name} ({tensor.tensor_type.name})")


def _dequantize(tensor: Any, name: str, hp: Hyperparameters, source: Path) -> torch.Tensor:
    """One GGUF tensor as float32 in Hugging Face layout: numpy order is already ggml's dimensions reversed."""
    shape = tuple(int(n) for n in reversed(tensor.shape))  # [out, in] for a weight matrix
    values = dequantize(tensor.data, tensor.tensor_type).astype(np.float32, copy=False)
    if not values.flags.writeable:  # F32 comes back as a view of the read-only memory map
        values = values.copy()
    weight = _finite(source, tensor.name, torch.from_numpy(values).reshape(shape))
    if name.endswith("self_attn.q_proj.weight"):
        weight = unpermute_rotary(weight, hp.n_heads)
    elif name.endswith("self_attn.k_proj.weight"):
        weight = unpermute_rotary(weight, hp.n_kv_heads)
    return weight.contiguous()


def unpermute_rotary(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's row order for q/k projections: per head, interleaved pairs back to first-half/second-half.

    llama.cpp's converter writes HF row j (first half) and j + head_dim/2 (second half) of each head as rows 2j, 2j+1;
    viewing the rows as [heads, head_dim/2, 2] and swapping the last two axes restores [heads, 2, head_dim/2].
    """
    rows, cols = weight.shape  # [n_heads * head_dim, d_model]
    half = rows // n_heads // 2
    return weight.reshape(n_heads, half, 2, cols).transpose(1, 2).reshape(rows, cols)


def _gguf_name(path: Path) -> str:
    """The file name without '.gguf' and a quantisation suffix: 'SmolLM2-135M-Instruct.Q4_1.gguf' -> 'SmolLM2-...'."""
    stem = path.name[: -len(".gguf")] if path.name.lower().endswith(".gguf") else path.name
    return QUANT_SUFFIX.sub("", stem) or stem


def _gguf_note(types: set[GGMLQuantizationType]) -> str:
    """Plain words for how a GGUF file stored its weights, e.g. 'dequantized to float32 from 4-bit (Q4_1) ...'."""
    reduced = sorted((t for t in types if t != GGMLQuantizationType.F32), key=lambda t: (_bits(t), t.name))
    if not reduced:
        return "float32 as stored in the GGUF file"
    groups: dict[int, list[str]] = {}
    for t in reduced:
        groups.setdefault(_bits(t), []).append(t.name)
    parts = [f"{bits}-bit ({', '.join(names)})" for bits, names in groups.items()]
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"dequantized to float32 from {listed} GGUF weights"


def _bits(qtype: GGMLQuantizationType) -> int:
    """Nominal bits per weight, read from the type's name (Q4_1 -> 4, IQ2_XS -> 2, BF16 -> 16)."""
    return int(re.search(r"\d+", qtype.name)[0])
