"""Hostile uploads to the Train page's "Load a trained model": each is refused with a sentence, nothing is built
for it, and the server's memory does not move (the files are read within their caps)."""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import save as save_safetensors
from streamlit.testing.v1 import AppTest

import explorer
from explorer import checkpoints
from explorer.config import ConfigError
from explorer.tasks import make_task
from explorer.training import train
from tests.traced import TracedPeak

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
MEMORY_BOUND = 8 * 2**20  # bytes Python may allocate to refuse one upload: a few times the largest file here (1 MB)


@pytest.fixture(scope="module")
def saved() -> tuple[bytes, str]:
    """The two files the Train page downloads, for a model trained a few steps on copy."""
    result = train(explorer.ModelConfig(), make_task("copy", 6), steps=2)
    weights, meta = checkpoints.save(result.model, make_task("copy", 6))
    return weights, meta


def as_zip(data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("model.safetensors", data)
    return buffer.getvalue()


def half_precision(weights: bytes) -> bytes:
    tensors = checkpoints.load_safetensors(weights)
    return save_safetensors({name: t.half() for name, t in tensors.items()})


def wrong_shape(weights: bytes) -> bytes:
    tensors = checkpoints.load_safetensors(weights)
    name = sorted(tensors)[0]
    tensors[name] = torch.zeros(*[n + 1 for n in tensors[name].shape])
    return save_safetensors(tensors)


def huge_header(_: bytes) -> bytes:
    return struct.pack("<Q", 2**62) + b"{}"  # a header length of 4 EiB: must not be believed


def nested(meta: str) -> str:
    return "[" * 50_000 + "]" * 50_000  # 100 kB of nesting: over the JSON cap before it is parsed


def deep_but_small(meta: str) -> str:
    return "[" * 30_000  # 30 kB, under the cap: its parser runs out of recursion, not the server of memory


def huge_model(meta: str) -> str:
    info = json.loads(meta)
    info["config"] |= {
        "n_layers": 24,
        "d_model": 2048,
        "n_heads": 32,
        "d_ff": 8192,
    }  # 1.2 billion parameters, checked on a skeleton
    return json.dumps(info)


CASES = {
    "truncated weights": (lambda w: w[: len(w) // 2], None, "not a readable safetensors file"),
    "half-precision weights": (half_precision, None, "do not match"),
    "a tensor of the wrong shape": (wrong_shape, None, "do not match"),
    "a zip renamed .safetensors": (as_zip, None, "not a readable safetensors file"),
    "a header claiming 4 EiB": (huge_header, None, "not a readable safetensors file"),
    "a JSON bomb over the cap": (None, nested, "64 KiB"),
    "a JSON bomb under the cap": (None, deep_but_small, "nests too deeply"),
    "a JSON describing a billion parameters": (None, huge_model, "do not belong to the model"),
    "weights where the JSON goes": (None, lambda m: "\x00\x01binary", "not valid JSON"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_upload_is_refused_with_a_sentence_and_costs_no_memory(saved, case):
    break_weights, break_meta, message = CASES[case]
    weights = break_weights(saved[0]) if break_weights else saved[0]
    meta = break_meta(saved[1]) if break_meta else saved[1]
    with TracedPeak() as traced, pytest.raises(ConfigError, match=message):
        checkpoints.load_trained(weights, meta)
    assert traced.peak < MEMORY_BOUND, f"{case}: {traced.peak / 2**20:.1f} MiB to refuse it"


@pytest.mark.parametrize("case", ["a zip renamed .safetensors", "a JSON bomb under the cap", "truncated weights"])
def test_the_train_page_says_why_and_keeps_working(saved, case):
    break_weights, break_meta, message = CASES[case]
    weights = break_weights(saved[0]) if break_weights else saved[0]
    meta = break_meta(saved[1]) if break_meta else saved[1]
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("views/train.py")
    at.run()
    at.file_uploader(key="train_upload").set_value(
        [("model.safetensors", weights, "application/octet-stream"), ("model.json", meta.encode(), "application/json")]
    )
    at.button(key="train_load").click().run()
    assert not at.exception
    assert any(message in e.value for e in at.error), [e.value for e in at.error]
    at.switch_page("views/attention.py").run()  # the other pages still work, on the sidebar's model
    assert not at.exception and not at.error
