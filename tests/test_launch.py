"""launch.py, which `make run` and `make serve` start the dashboard with: which checkpoints it preloads, and where."""

from __future__ import annotations

import pytest

import launch
from explorer.pretrained import list_pretrained
from views import caches


def test_preload_names_all_none_or_installed_checkpoints_and_refuses_others():
    assert launch.checkpoints("all") == list_pretrained()
    assert launch.checkpoints("none") == []
    assert launch.checkpoints(" minilm-l6 ,") == ["minilm-l6"]
    with pytest.raises(SystemExit, match="gpt-9 is not installed; installed: minilm-l6"):
        launch.checkpoints("minilm-l6,gpt-9")


def test_preload_puts_a_checkpoint_where_the_pages_look_for_it_and_loads_it_once(minilm_model, capsys):
    """The pages take checkpoints from views.caches._CHECKPOINTS (pretrained_model): a preloaded one is the very
    model they get, and one already there is not loaded again."""
    assert caches._CHECKPOINTS["minilm-l6"] is minilm_model  # the session fixture put it there, as a page would
    launch.preload(["minilm-l6"])
    assert caches.pretrained_model("minilm-l6") is minilm_model
    assert "minilm-l6 loaded" in capsys.readouterr().out
