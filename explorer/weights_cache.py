"""A cache of dequantized GGUF weights: the first load of a GGUF file on a machine keeps its float32 tensors, so later
loads (another server, another notebook) read them memory-mapped instead of parsing and dequantizing the file again.

Where: the directory named by the environment variable ATTENTION_EXPLORER_CACHE, or else the platform's user cache
directory (platformdirs.user_cache_dir("attention-explorer"), e.g. ~/.cache/attention-explorer on Linux). Setting
ATTENTION_EXPLORER_CACHE to an empty value or to "off" turns the cache off: every load dequantizes.

An entry is one safetensors file per GGUF: the tensors exactly as the model loads them (float32, Hugging Face names,
llama.cpp's rotary row order undone) and, in its metadata, the hyperparameters, the weights' note, the licence and the
tokenizer.ggml.* fields, so a hit never parses the GGUF (nor imports gguf). It is named by the source file's content
hash (SHA-256, about 0.1 s for SmolLM2's 98 MB) and holds that hash, the file's size and the gguf library's version: a
changed file reads as a miss and is dequantized again, and its new entry replaces the old one (one entry per file
name; SmolLM2's is 540 MB, and deleting the directory is always safe). A hit maps the tensors copy-on-write: the model's
weights are page cache, one copy however many processes (servers, test workers) load them.

Entries are written to a temporary file in the same directory, flushed and renamed into place, so a reader sees a whole
entry or none, and no writer ever changes a file a model maps. Anything that goes wrong (a corrupt or cut entry, a
read-only directory, a full disk) costs a dequantization and one sentence in this module's log, never a load.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import importlib.metadata
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from explorer.checkpoint_common import Checkpoint, Hyperparameters, check_depth, expected_shapes

ENVIRONMENT = "ATTENTION_EXPLORER_CACHE"
FORMAT = "1"  # what an entry holds: raise it when read_gguf's tensors or fields change, and old entries read as misses
STALE_SECONDS = 3600  # a temporary file this old was left by a killed writer (writing one takes seconds)
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Key:
    """Where a source file's entry is, and what the entry must say about the source to be its own."""

    entry: Path
    size: int
    sha256: str


def cache_dir() -> Path | None:
    """The directory entries go in, or None when ATTENTION_EXPLORER_CACHE turns the cache off."""
    value = os.environ.get(ENVIRONMENT)
    if value is None:
        import platformdirs

        return Path(platformdirs.user_cache_dir("attention-explorer"))
    if value.strip().lower() in ("", "off"):
        return None
    return Path(value).expanduser()


def key_for(source: Path) -> Key | None:
    """A GGUF file's cache key (its size and content hash), or None when the cache is off or the file unreadable."""
    directory = cache_dir()
    if directory is None:
        return None
    try:
        with source.open("rb") as file:
            digest = hashlib.file_digest(file, "sha256").hexdigest()
            size = os.fstat(file.fileno()).st_size
    except OSError as error:
        log.warning("The weights cache skips %s, which could not be read for its hash (%s).", source, error)
        return None
    return Key(directory / f"{_stem(source)}.{digest[:16]}.safetensors", size, digest)


def load(key: Key, name: str, source: Path) -> Checkpoint | None:
    """The checkpoint an entry holds, its tensors mapped from the file; None (and a sentence in the log) on a miss."""
    if not key.entry.is_file():
        log.info("No cached weights for %s yet: dequantizing it, and keeping the result in %s.", source, key.entry)
        return None
    try:
        with safe_open(str(key.entry), framework="pt") as file:
            meta = file.metadata() or {}
            if {field: meta.get(field) for field in _identity(key)} != _identity(key):
                log.warning(
                    "The cached weights %s were not written from this %s by this version: dequantizing it again.",
                    key.entry,
                    source,
                )
                return None
            saved = json.loads(meta["checkpoint"])
            hparams = Hyperparameters(**saved["hparams"])
            shapes = expected_shapes(check_depth(key.entry, hparams))  # a ConfigError is a ValueError
            if set(file.keys()) != set(shapes):
                raise ValueError("its tensor names are not the model's")
            # get_tensor maps the file (copy-on-write): the weights stay in the page cache that processes share.
            tensors = {tensor_name: file.get_tensor(tensor_name) for tensor_name in shapes}
        for tensor_name, tensor in tensors.items():
            if tensor.dtype != torch.float32 or tuple(tensor.shape) != shapes[tensor_name]:
                raise ValueError(f"its '{tensor_name}' is not the float32 tensor of the shape the model needs")
        return Checkpoint(
            name=name,
            hparams=hparams,
            tensors=tensors,
            weights_note=saved["weights_note"],
            source=str(source),
            license=saved["license"],
            tokenizer_fields=saved["tokenizer_fields"],
        )
    except (SafetensorError, OSError, ValueError, KeyError, TypeError) as error:
        log.warning("The cached weights %s cannot be read (%s): dequantizing %s instead.", key.entry, error, source)
        return None


def save(key: Key, checkpoint: Checkpoint) -> None:
    """Write a checkpoint's entry atomically; a failure leaves no file behind and says why in the log."""
    try:
        described = json.dumps(
            {
                "hparams": dataclasses.asdict(checkpoint.hparams),
                "weights_note": checkpoint.weights_note,
                "license": checkpoint.license,
                "tokenizer_fields": checkpoint.tokenizer_fields,
            }
        )
    except (TypeError, ValueError) as error:  # metadata no JSON can hold
        log.warning(
            "The weights of %s are not cached: their metadata cannot be written (%s).", checkpoint.source, error
        )
        return
    metadata = _identity(key) | {"checkpoint": described}
    temporary = None
    try:
        key.entry.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale(key.entry)
        handle, temporary = tempfile.mkstemp(prefix=f"{key.entry.name}.", suffix=".tmp", dir=key.entry.parent)
        os.close(handle)
        save_file(checkpoint.tensors, temporary, metadata=metadata)
        with open(temporary, "rb") as file:
            os.fsync(file.fileno())  # the data on disk before the name points at it
        os.replace(temporary, key.entry)
        temporary = None
        _remove_older_entries(key.entry)
    except (OSError, SafetensorError) as error:
        log.warning(
            "The weights cache %s could not be written (%s); later loads of %s dequantize it again.",
            key.entry,
            error,
            checkpoint.source,
        )
    finally:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)


def _identity(key: Key) -> dict[str, str]:
    """What an entry's metadata must say to be this key's: the format, the dequantizing library, the source file."""
    return {
        "format": FORMAT,
        "gguf": importlib.metadata.version("gguf"),  # another version may dequantize otherwise
        "source_size": str(key.size),
        "source_sha256": key.sha256,
    }


def _stem(source: Path) -> str:
    """The source's file name without '.gguf', for an entry's name a person can recognise."""
    name = source.name
    return name[: -len(".gguf")] if name.lower().endswith(".gguf") else name


def _remove_stale(entry: Path) -> None:
    """Delete the temporary files of this entry that a killed writer left (those older than STALE_SECONDS)."""
    now = time.time()
    for leftover in entry.parent.glob(f"{glob.escape(entry.name)}.*.tmp"):
        try:
            if now - leftover.stat().st_mtime > STALE_SECONDS:
                leftover.unlink()
        except OSError:
            continue  # another process removed it, or may not: either way not this load's business


def _remove_older_entries(entry: Path) -> None:
    """Delete the entries of other versions of the same file (same name, another hash): one entry per file name. A
    process still mapping one keeps its pages; only the name goes."""
    stem = entry.name[: -len(".0123456789abcdef.safetensors")]
    for other in entry.parent.glob(f"{glob.escape(stem)}.*.safetensors"):
        digest = other.name[len(stem) + 1 : -len(".safetensors")]
        if other != entry and len(digest) == 16 and set(digest) <= set("0123456789abcdef"):
            other.unlink(missing_ok=True)
