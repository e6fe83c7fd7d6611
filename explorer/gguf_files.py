"""GGUF files of architecture llama (llama.cpp's format): metadata read, tensors checked and dequantized to float32
in Hugging Face's layout (llama.cpp's rotary row order undone), so the explorer runs them as it runs a folder.

A file once dequantized is kept in the weights cache (explorer.weights_cache), which later loads read instead: read_gguf
goes through the cache, dequantize_gguf does not.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from explorer import weights_cache
from explorer.checkpoint_common import (
    SUPPORTED,
    Checkpoint,
    Hyperparameters,
    Progress,
    check_depth,
    check_heads,
    check_rotary,
    check_shape,
    expected_shapes,
    finite,
    missing_error,
    positive_number,
    starts_with,
    whole_number,
)
from explorer.config import ConfigError
from explorer.word_lists import listed

if TYPE_CHECKING:  # the gguf library is imported when a file is parsed: a load from the weights cache never needs it
    from gguf import GGMLQuantizationType, GGUFReader

GGUF_ARCHITECTURES = ("llama",)
# Every type gguf.quants.dequantize turns into float32, by its GGMLQuantizationType name.
GGUF_TYPES = frozenset(
    "F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K TQ1_0 TQ2_0 MXFP4 NVFP4 "
    "IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M IQ4_NL IQ4_XS".split()
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


def read_gguf(path: Path, progress: Progress | None = None) -> Checkpoint:
    """A llama GGUF file as float32 tensors in Hugging Face layout: from the weights cache when this file was read on
    this machine before, else dequantized (and cached); progress(fraction 0..1, text) hears how far it is."""
    path = Path(path)
    _check_gguf_file(path)
    key = weights_cache.key_for(path)
    if key is not None:
        cached = weights_cache.load(key, _gguf_name(path), path)
        if cached is not None:
            return cached
    first_time = " (the first time on this machine; later starts read the cache)" if key is not None else ""
    checkpoint = dequantize_gguf(path, progress, first_time)
    if key is not None:
        if progress is not None:
            progress(1.0, "keeping the dequantized weights for later starts")
        weights_cache.save(key, checkpoint)
    return checkpoint


def dequantize_gguf(path: Path, progress: Progress | None = None, said: str = "") -> Checkpoint:
    """A llama GGUF file parsed and dequantized (no cache); `said` follows each progress text."""
    path = Path(path)
    if progress is not None:
        progress(0.0, f"reading the GGUF file's metadata{said}")
    reader = _open_gguf(path)
    architecture = _metadata(reader, "general.architecture")
    if architecture not in GGUF_ARCHITECTURES:
        raise ConfigError(f"{path} is a GGUF of architecture {architecture!r}; supported are {SUPPORTED}.")
    hp = _gguf_hparams(path, reader)
    stored = _gguf_tensors(path, reader, hp)
    tensors = dict(_dequantize_all(path, stored, hp, progress, said))
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


def _check_gguf_file(path: Path) -> None:
    """Refuse a path that is not a file beginning with the bytes 'GGUF'."""
    if not path.is_file():
        raise ConfigError(f"{path} does not exist or is not a file; give {SUPPORTED}.")
    if not starts_with(path, b"GGUF"):
        raise ConfigError(f"{path} is not a GGUF file: it does not begin with the bytes 'GGUF'.")


def _open_gguf(path: Path) -> GGUFReader:
    """GGUFReader, with a sentence in place of the library's error for a missing, foreign or damaged file."""
    _check_gguf_file(path)
    try:
        return gguf_reader(path)
    except GGUF_READ_ERRORS as error:
        raise ConfigError(f"{path} is a truncated or corrupt GGUF file ({error}).") from None


def gguf_reader(path: Path) -> GGUFReader:
    """gguf's GGUFReader on a file, parsed about 2.7 times as fast (it raises what GGUFReader raises)."""
    return _reader_class()(path)


@functools.cache
def _reader_class() -> type[GGUFReader]:
    """GGUFReader reading through a plain ndarray view of its memory map: numpy's memmap subclass runs Python code on
    every slice, and a vocabulary's metadata is a quarter of a million slices (SmolLM2's parse: 12 s to 4.6 s)."""
    from gguf import GGUFReader

    class PlainReader(GGUFReader):
        def _get(self, offset: int, dtype: Any, count: int = 1, override_order: str | None = None) -> np.ndarray:
            """GGUFReader._get (gguf 0.19) on the map as a plain ndarray: the same bytes, the same views."""
            plain = self.__dict__.get("_plain")
            if plain is None:
                plain = self._plain = self.data.view(np.ndarray)
            count = int(count)
            values = plain[offset : offset + np.dtype(dtype).itemsize * count].view(dtype=dtype)[:count]
            return values.view(values.dtype.newbyteorder(self.byte_order if override_order is None else override_order))

    return PlainReader


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
        vocab_size=whole_number(path, "llama.vocab_size", _gguf_vocab_size(path, reader)),
        max_positions=_gguf_whole(path, reader, "context_length"),
        norm_eps=positive_number(
            path,
            "llama.attention.layer_norm_rms_epsilon",
            _gguf_value(path, reader, "attention.layer_norm_rms_epsilon"),
        ),
        rope_base=positive_number(path, "llama.rope.freq_base", _gguf_value(path, reader, "rope.freq_base", 10000.0)),
        type_vocab_size=None,
        tie_embeddings=all(t.name != "output.weight" for t in reader.tensors),
        activation="silu",
    )
    check_heads(path, hp.d_model, hp.n_heads, hp.n_kv_heads)
    check_rotary(path, hp, _metadata(reader, "llama.rope.dimension_count"))
    return check_depth(path, hp)


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
    return whole_number(path, f"llama.{key}", _gguf_value(path, reader, key, default))


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
        raise missing_error(path, [gguf_tensor_name(name) for name in missing], hp)
    stored = {}
    for gguf_name, name in wanted.items():
        tensor = by_name[gguf_name]
        check_shape(path, gguf_name, tuple(int(n) for n in reversed(tensor.shape)), shapes[name])
        if tensor.tensor_type.name not in GGUF_TYPES:
            raise ConfigError(
                f"{path}: tensor '{gguf_name}' uses the GGUF quantisation type {tensor.tensor_type.name}, "
                "which cannot be dequantized here."
            )
        stored[name] = tensor
    return stored


def _dequantize_all(
    source: Path, stored: dict[str, Any], hp: Hyperparameters, progress: Progress | None, said: str
) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, float32 tensor in Hugging Face layout) for each stored tensor, reporting progress by element count."""
    total = sum(int(t.n_elements) for t in stored.values())
    done = 0
    for name, tensor in stored.items():
        yield name, _dequantize(tensor, name, hp, source)
        done += int(tensor.n_elements)
        if progress is not None:
            progress(done / total, f"dequantized {tensor.name} ({tensor.tensor_type.name}){said}")


def _dequantize(tensor: Any, name: str, hp: Hyperparameters, source: Path) -> torch.Tensor:
    """One GGUF tensor as float32 in Hugging Face layout: numpy order is already ggml's dimensions reversed."""
    shape = tuple(int(n) for n in reversed(tensor.shape))  # [out, in] for a weight matrix
    from gguf.quants import dequantize

    values = dequantize(tensor.data, tensor.tensor_type).astype(np.float32, copy=False)
    if not values.flags.writeable:  # F32 comes back as a view of the read-only memory map
        values = values.copy()
    weight = finite(source, tensor.name, torch.from_numpy(values).reshape(shape))
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
    reduced = sorted((t for t in types if t.name != "F32"), key=lambda t: (_bits(t), t.name))
    if not reduced:
        return "float32 as stored in the GGUF file"
    groups: dict[int, list[str]] = {}
    for t in reduced:
        groups.setdefault(_bits(t), []).append(t.name)
    parts = [f"{bits}-bit ({', '.join(names)})" for bits, names in groups.items()]
    return f"dequantized to float32 from {listed(parts)} GGUF weights"


def _bits(qtype: GGMLQuantizationType) -> int:
    """Nominal bits per weight, read from the type's name (Q4_1 -> 4, IQ2_XS -> 2, BF16 -> 16)."""
    return int(re.search(r"\d+", qtype.name)[0])
