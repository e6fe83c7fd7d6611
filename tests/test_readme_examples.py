"""Every Python example in README.md runs as printed, and the values its comments promise are the values it gives.

A notebook user copies these blocks first; a renamed function or argument would otherwise go stale in silence.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

README = Path(__file__).resolve().parents[1] / "README.md"
OLMO_PATH = "/path/to/OLMo-2-0425-1B"  # the README's stand-in for a local copy: a tiny random OLMo 2 folder here


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def block_with(needle: str) -> str:
    [block] = [b for b in python_blocks() if needle in b]
    return block


def run_block(code: str, **names) -> dict:
    namespace = dict(names)
    exec(compile(code, str(README), "exec"), namespace)
    return namespace


def test_every_python_block_is_checked_here():
    needles = [
        "explorer.list_pretrained()",
        OLMO_PATH,
        "explorer.norm_attention(model, trace)",
        "explorer.logit_attribution(model, trace)",
        "explorer.from_torch(my_encoder_layer)",
    ]
    assert len(python_blocks()) == len(needles)
    for needle in needles:
        block_with(needle)  # exactly one block each


@pytest.mark.slow
def test_the_pretrained_example_gives_what_its_comments_say():
    ns = run_block(block_with("explorer.list_pretrained()"))
    explorer, model, trace = ns["explorer"], ns["model"], ns["trace"]
    assert explorer.list_pretrained() == ["minilm-l6", "smollm2-135m"]
    assert trace.tokens == ["The", "Ġcapital", "Ġof", "ĠFrance", "Ġis"]
    assert trace.labels == ["The", "␣capital", "␣of", "␣France", "␣is"]
    top = explorer.next_token(model, trace, k=3)
    assert list(top["text"]) == [" Paris", " the", " London"]
    assert [round(p, 2) for p in top["probability"]] == [0.77, 0.06, 0.01]


@pytest.mark.slow
def test_the_olmo2_example_runs_on_a_folder_of_that_family(tmp_path):
    from tests.test_olmo2 import save_olmo2

    save_olmo2(tmp_path, n_kv_heads=2, tie=False, seed=0)
    ns = run_block(block_with(OLMO_PATH).replace(OLMO_PATH, str(tmp_path)))
    assert ns["model"].config.norm == "res-post"


@pytest.mark.slow
def test_the_norms_and_mixing_example_gives_the_shapes_its_comments_say():
    ns = run_block(block_with("explorer.norm_attention(model, trace)"))
    layers, heads, tokens = 6, 12, len(ns["trace"].tokens)
    assert ns["norms"].shape == (layers, heads, tokens, tokens)
    np.testing.assert_allclose(ns["shares"].sum(-1), 1, atol=1e-5)
    assert ns["rollout"].shape == (layers, tokens, tokens)
    assert ns["flow"].shape == (tokens,)


@pytest.mark.slow
def test_the_what_heads_do_example_runs():
    ns = run_block(block_with("explorer.logit_attribution(model, trace)"))
    explorer, model, trace, minilm = ns["explorer"], ns["model"], ns["trace"], ns["minilm"]
    assert ns["parts"].heads.shape == ns["heads"].shape == (30, 9)
    by_text, by_spelling = (explorer.head_logit_attribution(model, trace, piece=p) for p in (" John", "ĠJohn"))
    np.testing.assert_array_equal(by_text, by_spelling)  # the comment's two spellings name the same piece
    assert list(ns["lens"].columns) == ["layer", "position", "rank", "piece", "text", "probability"]
    also = explorer.run(model, ns["text"], ablate="L29H1,L23H0", ablate_with="mean")  # the comment's other spelling
    assert also.tokens == trace.tokens
    change = explorer.prediction_change(model, trace, ns["without"])
    assert change["text"].iloc[0] == " Mary"
    text = "The cat sat on the mat because it was tired."
    effects = explorer.head_ablation_effects(minilm, text)
    assert effects.shape == (6, 12)
    lent = explorer.head_ablation_effects(minilm, text, base=explorer.run(minilm, text))
    np.testing.assert_allclose(lent, effects, atol=1e-6)


def test_the_python_api_example_gives_the_shape_its_comment_says():
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    ns = run_block(block_with("explorer.from_torch(my_encoder_layer)"), my_encoder_layer=layer)
    assert ns["trace"].attention.shape == (2, 4, 6, 6)
    x = torch.randn(5, 16)
    assert ns["explorer"].run(ns["model"], x).attention.shape == (1, 2, 5, 5)
