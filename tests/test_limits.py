"""The app's size limits: a model or a trace too large for a shared server is refused before it is built."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer import machine_memory
from explorer.config import ConfigError, ModelConfig
from explorer.limits import attention_cells, check_app_size, run_bytes, trace_bytes
from views.state import STATE_KEY

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")


def kept_bytes(obj, seen: set[int] | None = None) -> int:
    """The bytes of every numpy array an object holds, found through its fields, however deep."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if dataclasses.is_dataclass(obj):
        return sum(kept_bytes(getattr(obj, f.name), seen) for f in dataclasses.fields(obj))
    if isinstance(obj, dict):
        return sum(kept_bytes(v, seen) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(kept_bytes(v, seen) for v in obj)
    return sum(kept_bytes(v, seen) for v in vars(obj).values()) if hasattr(obj, "__dict__") else 0


def test_attention_cells_count_every_kind_of_attention():
    assert attention_cells(ModelConfig(n_layers=3, n_heads=2), 5) == 3 * 2 * 5 * 5
    both = ModelConfig(arch="encoder-decoder", n_layers=1, n_heads=1)
    assert attention_cells(both, 4, 3) == 4 * 4 + 3 * 3 + 3 * 4  # encoder, decoder self, cross


@pytest.mark.parametrize("arch", ["encoder", "decoder", "encoder-decoder"])
@pytest.mark.parametrize(
    ("n_layers", "d_model", "d_ff", "n_heads", "n_tokens"), [(2, 64, 256, 4, 12), (3, 16, 512, 1, 40)]
)
def test_the_trace_estimate_bounds_what_a_trace_really_keeps(arch, n_layers, d_model, d_ff, n_heads, n_tokens):
    cfg = ModelConfig(arch=arch, n_layers=n_layers, d_model=d_model, d_ff=d_ff, n_heads=n_heads)
    words = " ".join(f"w{i}" for i in range(n_tokens))
    target = words if arch == "encoder-decoder" else None
    kept = kept_bytes(explorer.run(cfg, words, target, keep_scores=False))  # as the app runs it
    estimate = trace_bytes(cfg, n_tokens, n_tokens if target else None)
    assert kept <= estimate <= 1.6 * kept  # an upper bound, and not a wild one


def test_the_largest_legal_model_is_refused_by_its_parameter_count():
    huge = ModelConfig(n_layers=24, d_model=2048, d_ff=8192)
    with pytest.raises(ConfigError, match=r"1,20\d,\d{3},\d{3} parameters .* at most 100,000,000"):
        check_app_size(huge, 6)
    check_app_size(ModelConfig(n_layers=12, n_heads=12, d_model=768, d_ff=3072), 256)  # BERT-base's blocks fit


def test_a_run_too_large_to_keep_is_refused_by_its_trace_size():
    with pytest.raises(ConfigError, match=r"12 layers × 64 heads.* on 512 tokens\) would take about 8\d\d MB"):
        check_app_size(ModelConfig(n_layers=12, n_heads=64), 512)  # mostly attention: 201 million cells
    many_activations = ModelConfig(n_layers=24, d_model=512, d_ff=2048, n_heads=1)  # 75.7 million parameters
    with pytest.raises(ConfigError, match="per input"):
        check_app_size(many_activations, 512)  # mostly activations, not attention
    check_app_size(ModelConfig(n_layers=12, n_heads=64), 100)
    check_app_size(ModelConfig(), 5000)  # too long: left to explorer.run's own sentence


def test_the_page_says_so_instead_of_building():
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"n_layers": "24", "d_model": "2048", "d_ff": "8192"})
    at.run()
    assert not at.exception
    assert any("parameters" in e.value and "the app builds at most" in e.value for e in at.error)
    state = at.session_state[STATE_KEY]
    assert state.model is None and state.trace is None


def test_explorer_run_refuses_a_trace_larger_than_the_free_memory_before_running(monkeypatch):
    """5,000 pieces through SmolLM2 had torch ask for 27 GB deep in the forward and fail with its allocator's
    message; a machine's free memory is whatever it is, so the test sets it."""
    cfg = ModelConfig(n_layers=2, n_heads=4, d_model=64, d_ff=128)
    tokens = ["w"] * 100
    needed = trace_bytes(cfg, 100) + 4 * attention_cells(cfg, 100)  # with the scores run keeps by default
    assert run_bytes(explorer.build_model(cfg), 100, None, keep_scores=True) == (needed, 4 * attention_cells(cfg, 100))
    both = dataclasses.replace(cfg, arch="encoder-decoder")  # read from the model's stacks, as trace_bytes reads cfg
    assert run_bytes(explorer.build_model(both), 100, 7, keep_scores=False)[0] == trace_bytes(both, 100, 7)
    monkeypatch.setattr("explorer.limits.available_bytes", lambda: needed - 1)
    with pytest.raises(ConfigError, match=r"2 layers × 4 heads, 100 positions.*Use a shorter text"):
        explorer.run(cfg, tokens)
    assert explorer.run(cfg, tokens, keep_scores=False).attention.shape == (2, 4, 100, 100)  # no scores: it fits
    # the app's runs (views.caches.APP_RUN): a refusal that changed with the moment would reach pages uncaught
    assert explorer.run(cfg, tokens, check_memory=False).attention.shape == (2, 4, 100, 100)
    monkeypatch.setattr("explorer.limits.available_bytes", lambda: None)  # a system that does not say: no check
    assert explorer.run(cfg, tokens).attention.shape == (2, 4, 100, 100)


def test_the_free_memory_is_read_from_the_system_where_it_says(tmp_path, monkeypatch):
    (tmp_path / "meminfo").write_text("MemTotal: 8000 kB\nMemFree: 100 kB\nMemAvailable: 5000 kB\n")
    monkeypatch.setattr(machine_memory, "MEMINFO", tmp_path / "meminfo")
    monkeypatch.setattr(machine_memory, "CGROUP", tmp_path / "no cgroup")
    assert machine_memory.available_bytes() == 5000 * 1024
    (tmp_path / "cgroup").mkdir()
    (tmp_path / "cgroup" / "memory.max").write_text("4096000\n")
    (tmp_path / "cgroup" / "memory.current").write_text("1524000\n")
    (tmp_path / "cgroup" / "memory.stat").write_text("anon 1000000\ninactive_file 500000\nactive_file 24000\n")
    monkeypatch.setattr(machine_memory, "CGROUP", tmp_path / "cgroup")
    # the container's limit leaves less than the machine; the file cache it could drop counts as room
    assert machine_memory.available_bytes() == 4096000 - (1524000 - 500000)
    (tmp_path / "cgroup" / "memory.max").write_text("max\n")
    assert machine_memory.available_bytes() == 5000 * 1024
    monkeypatch.setattr(machine_memory, "MEMINFO", tmp_path / "absent")
    assert machine_memory.available_bytes() is None
