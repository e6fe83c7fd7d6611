"""The app's size limits: a model or a trace too large for a shared server is refused before it is built."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from explorer.config import ConfigError, ModelConfig
from explorer.limits import MAX_ATTENTION_CELLS, MAX_PARAMETERS, attention_cells, check_app_size

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")


def test_attention_cells_count_every_kind_of_attention():
    cfg = ModelConfig(n_layers=3, n_heads=2)
    assert attention_cells(cfg, 5) == 3 * 2 * 5 * 5
    both = ModelConfig(arch="encoder-decoder", n_layers=1, n_heads=1)
    assert attention_cells(both, 4, 3) == 4 * 4 + 3 * 3 + 3 * 4  # encoder, decoder self, cross


def test_the_largest_legal_model_is_refused_by_its_parameter_count():
    huge = ModelConfig(n_layers=24, d_model=2048, d_ff=8192)
    with pytest.raises(ConfigError, match=r"1,20\d,\d{3},\d{3} parameters .* at most 100,000,000"):
        check_app_size(huge, 6)
    check_app_size(ModelConfig(n_layers=12, n_heads=12, d_model=768, d_ff=3072), 256)  # BERT-base's blocks fit


def test_many_heads_on_a_long_input_are_refused_by_the_trace_size():
    cfg = ModelConfig(n_layers=12, n_heads=64)
    with pytest.raises(ConfigError, match="12 layers × 64 heads on 512 tokens would keep 201,326,592"):
        check_app_size(cfg, 512)
    check_app_size(cfg, 100)  # 7.7 million cells
    check_app_size(ModelConfig(), 5000)  # too long: left to explorer.run's own sentence
    assert MAX_PARAMETERS * 4 <= 400e6 and MAX_ATTENTION_CELLS * 8 <= 200e6  # the memory the docstrings promise


def test_the_page_says_so_instead_of_building():
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"n_layers": "24", "d_model": "2048", "d_ff": "8192"})
    at.run()
    assert not at.exception
    assert any("parameters" in e.value and "the app builds at most" in e.value for e in at.error)
    assert at.session_state["_model"] is None and at.session_state["_trace"] is None
