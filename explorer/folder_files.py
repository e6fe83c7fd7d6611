"""Hugging Face model folders: config.json plus model.safetensors (or its shards), for BERT, Llama and OLMo 2.

Nothing is unpickled: a folder holding only pytorch_model.bin is refused. Every tensor the config calls for is checked
by name, shape and dtype before any weight is loaded, and anything a user could get wrong raises a one-sentence
ConfigError.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open

from explorer.checkpoint_common import (
    SUPPORTED,
    Checkpoint,
    Hyperparameters,
    check_depth,
    check_heads,
    check_rotary,
    check_shape,
    expected_shapes,
    finite,
    missing_error,
    positive_number,
    whole_number,
)
from explorer.config import ConfigError

MAX_CONFIG_BYTES = 1_000_000  # config.json of a real model is a few KB
MAX_INDEX_BYTES = 16_000_000  # model.safetensors.index.json lists one line per tensor
FOLDER_FAMILIES = ("bert", "llama", "olmo2")
SAFETENSORS_FLOATS = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16"}


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


def _require(source: Path, config: dict[str, Any], key: str, default: Any = None) -> Any:
    """config[key], or the default; raise when there is neither."""
    value = config.get(key, default)
    if value is None:
        raise ConfigError(f"{source} has no '{key}', which the model needs.")
    return value


def _hyperparameters(source: Path, config: Any) -> Hyperparameters:
    """Hyperparameters from a parsed config.json, for the families this reader supports."""
    if not isinstance(config, dict):
        raise ConfigError(f"{source} must hold a JSON object of settings, not {type(config).__name__}.")
    model_type = config.get("model_type")
    if model_type not in FOLDER_FAMILIES:
        raise ConfigError(f"{source} has model_type {model_type!r}; supported are {SUPPORTED}.")
    if model_type == "olmo2":
        from explorer.olmo2_files import olmo2_hparams  # olmo2_files builds on this module, so it is imported late

        return check_depth(source, olmo2_hparams(source, config))
    hp = _bert_hparams(source, config) if model_type == "bert" else llama_hparams(source, config)
    return check_depth(source, hp)


def _bert_hparams(source: Path, config: dict[str, Any]) -> Hyperparameters:
    """BERT hyperparameters, with transformers' BertConfig defaults for missing keys."""
    activation = config.get("hidden_act", "gelu")
    if activation != "gelu":
        raise ConfigError(f"{source}: hidden_act {activation!r} is not supported; BERT here uses exact 'gelu'.")
    position = config.get("position_embedding_type", "absolute")
    if position != "absolute":
        raise ConfigError(f"{source}: position_embedding_type {position!r} is not supported, only 'absolute'.")
    whole = {
        key: whole_number(source, key, config.get(key, default))
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
    check_heads(source, whole["hidden_size"], heads, heads)
    return Hyperparameters(
        family="bert",
        n_layers=whole["num_hidden_layers"],
        d_model=whole["hidden_size"],
        n_heads=heads,
        n_kv_heads=heads,
        d_ff=whole["intermediate_size"],
        vocab_size=whole["vocab_size"],
        max_positions=whole["max_position_embeddings"],
        norm_eps=positive_number(source, "layer_norm_eps", config.get("layer_norm_eps", 1e-12)),
        rope_base=None,
        type_vocab_size=whole["type_vocab_size"],
        tie_embeddings=False,
        activation="gelu",
    )


def llama_hparams(source: Path, config: dict[str, Any]) -> Hyperparameters:
    """Llama hyperparameters, with transformers' LlamaConfig defaults for missing keys."""
    refuse_llama_extras(source, config)
    whole = {
        key: whole_number(source, key, _require(source, config, key, default))
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
    kv_heads = whole_number(source, "num_key_value_heads", config.get("num_key_value_heads") or heads)
    check_heads(source, whole["hidden_size"], heads, kv_heads)
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
        norm_eps=positive_number(source, "rms_norm_eps", config.get("rms_norm_eps", 1e-6)),
        rope_base=_llama_rope_base(source, config),
        type_vocab_size=None,
        tie_embeddings=tie,
        activation="silu",
    )
    check_rotary(source, hp, config.get("head_dim"))
    return hp


def refuse_llama_extras(source: Path, config: dict[str, Any], family: str = "Llama") -> None:
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
    return positive_number(source, "rope_theta", params.get("rope_theta", config.get("rope_theta", 10000.0)))


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
            raise missing_error(folder, missing, hp)
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
    check_shape(file, key, tuple(stored.get_shape()), shape)
    return dtype


def _load(file: Path, handle: Any, key: str) -> torch.Tensor:
    """One stored tensor as contiguous float32, in memory of its own."""
    try:
        tensor = handle.get_tensor(key)
    except (SafetensorError, OSError) as error:
        raise ConfigError(f"{file}: tensor '{key}' could not be read (the file is corrupt: {error}).") from None
    # A copy even of float32: get_tensor maps the file, and a model on that mapping dies (SIGBUS) if the file is cut.
    return finite(file, key, tensor.to(torch.float32, copy=True).contiguous())


def _safetensors_note(dtypes: set[str]) -> str:
    """Plain words for how the weights were stored."""
    if dtypes == {"F32"}:
        return "float32 as shipped"
    shipped = " and ".join(SAFETENSORS_FLOATS[d] for d in sorted(dtypes))
    return f"converted to float32 from {shipped} as shipped"
