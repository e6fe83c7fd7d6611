"""Sentences of the Positional page that claimed more than the numbers show."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

import explorer
from explorer.analysis.position_analysis import encoding_table, permutation_demo, reorder, rope_angle_table, similarity
from explorer.config import ModelConfig
from explorer.positional_text import order_finding
from pictures.positional_charts import rope_angle_heatmap

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")


def test_untrained_learned_positions_are_not_called_useless():
    """A random table still gives each position its own vector (the reordering demo on the same model finds order
    visible); what its similarity shows is no pattern: cosine of neighbours 0.009 on average, of all pairs 0.001,
    spread 0.12 (d_model 64, 64 positions)."""
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update({"positional": "learned"})
    at.switch_page("views/positional.py").run()
    assert not at.exception
    [warning] = [w.value for w in at.warning if "Untrained" in w.value]
    assert "useless" not in warning and "alike only by chance" in warning
    table = encoding_table(explorer.build_model(ModelConfig(positional="learned")), 64).astype(np.float64)
    cosine = similarity(table)  # [64, 64]
    assert abs(np.diagonal(cosine, 1).mean()) < 0.05  # neighbours: alike only by chance
    demo = permutation_demo(ModelConfig(positional="learned"), "the cat sat on the mat", reorder(6, "reversed"))
    assert demo.max_difference > 0.01  # and yet the model sees order through them


def test_a_checkpoints_advice_names_the_encoder_a_decoder_cannot_reorder_blindly():
    """SmolLM2's advice said: set a configured model's encoding to none and the mask to none or padding; a configured
    decoder has no such mask (always causal), so its maps still change (0.91 on 'the cat sat on the mat')."""
    smol_like = explorer.CheckpointConfig(
        arch="decoder", positional="rope", mask="causal", norm="pre", activation="swiglu", family="llama",
        d_model=64, n_heads=4, n_layers=1, d_ff=64, checkpoint="smollm2-135m", n_kv_heads=4, vocab_size=100,
    )  # fmt: skip
    demo = permutation_demo(ModelConfig(positional="rope"), "the cat sat on the mat", reorder(6, "reversed"))
    kind, text = order_finding(smol_like, demo)
    assert kind == "visible" and "with an encoder" in text
    decoder = permutation_demo(ModelConfig(arch="decoder", positional="none"), "the cat sat", reorder(3, "reversed"))
    assert decoder.max_difference > 0.01  # the advice without an encoder would not work


def test_the_rotary_angles_say_how_far_the_slowest_pair_turns():
    """The subtitle said 'the last pairs barely move' whatever the head: with d_head 4 the last pair turns 36° by
    position 63, and with d_head 2 pair 0 is the last. SmolLM2's (base 100,000, d_head 64): 0.052°."""
    smol = rope_angle_heatmap(rope_angle_table(64, 64, 100000.0), 6, 100000.0)["panels"][0]["subtitle"]
    assert "the last (pair 31) 0.052° in all by position 63" in smol  # 63 / 100000^(62/64) rad
    narrow = rope_angle_heatmap(rope_angle_table(64, 4), 6)["panels"][0]["subtitle"]
    assert "barely" not in narrow and f"the last (pair 1) {math.degrees(63 / 100):.2g}° in all" in narrow
    single = rope_angle_heatmap(rope_angle_table(64, 2), 6)["panels"][0]["subtitle"]
    assert "the last" not in single and "pair 0 turns a full radian per position ·" in single
