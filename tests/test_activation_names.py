"""The activation names (explorer.trace.ACTIVATION_NAMES): every name answers, with the shape the table states."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import explorer
from explorer.trace import ACTIVATION_NAMES, IN_FIELDS

SOURCE, TARGET = "the cat sat on the mat", "le chat dort"


@pytest.fixture(scope="module")
def trace() -> explorer.Trace:
    # Peri-norm has a norm on both sides of every sub-layer, so its decoder blocks answer to every name of the table.
    cfg = explorer.ModelConfig(arch="encoder-decoder", n_layers=2, n_heads=2, d_model=16, d_ff=24, norm="peri")
    return explorer.run(cfg, SOURCE, TARGET)


def letters(stack: explorer.StackTrace, trace: explorer.Trace) -> dict[str, int]:
    """What each letter of the table's shapes stands for in this run."""
    cfg = trace.config
    return {"T": len(stack.tokens), "S": len(trace.first.tokens), "D": cfg.d_model, "H": cfg.n_heads, "F": cfg.d_ff}


def test_every_name_of_the_table_answers_with_its_shape(trace):
    encoder, decoder = trace.stacks
    kinds = list(ACTIVATION_NAMES)
    assert [n.split(".", 2)[2] for n in decoder.activation_names()[: len(kinds)]] == kinds  # the decoder has them all
    assert not any(".cross." in n for n in encoder.activation_names())  # an encoder block has no cross-attention
    for stack in trace.stacks:
        sizes = letters(stack, trace)
        for name in stack.activation_names():
            shape, _ = ACTIVATION_NAMES[name.split(".", 2)[2]]
            expected = tuple(sizes[letter] for letter in shape.strip("[]").split(", "))
            assert stack[name].shape == expected, name
        per_block = [k for k in kinds if stack is decoder or not k.startswith("cross.")]
        assert len(stack.activation_names()) == stack.n_layers * len(per_block)


def test_names_kept_in_fields_are_those_fields_and_nothing_is_stored_twice(trace):
    encoder, decoder = trace.stacks
    np.testing.assert_array_equal(encoder["blocks.1.attn.pattern"], trace.attention[1])
    np.testing.assert_array_equal(encoder["blocks.0.attn.scores"], trace.scores[0])
    np.testing.assert_array_equal(decoder["blocks.1.cross.pattern"], trace.cross_attention[1])
    np.testing.assert_array_equal(encoder["blocks.0.resid_pre"], trace.residual[0])
    np.testing.assert_array_equal(encoder["blocks.0.resid_post"], encoder["blocks.1.resid_pre"])
    for stack in trace.stacks:
        assert not any(key.split(".", 2)[2] in IN_FIELDS for key in stack.activations)


def test_peri_norm_stream_is_the_input_plus_every_sub_layer_output_norm(trace):
    """Names mean what the table says: in peri-norm, each block adds its sub-layers' normalised outputs to its input."""
    decoder = trace.last
    for layer in range(decoder.n_layers):
        added = sum(decoder[f"blocks.{layer}.{part}.out_ln_out"] for part in ("attn", "cross", "ffn"))  # [T, D]
        rebuilt = decoder[f"blocks.{layer}.resid_pre"] + added
        np.testing.assert_allclose(decoder[f"blocks.{layer}.resid_post"], rebuilt, atol=1e-5)
        np.testing.assert_array_equal(decoder[f"blocks.{layer}.attn.ln_in"], decoder[f"blocks.{layer}.resid_pre"])
        np.testing.assert_array_equal(decoder[f"blocks.{layer}.ffn.out_ln_in"], decoder[f"blocks.{layer}.ffn.out"])


@pytest.mark.parametrize(("norm", "shared"), [("pre", True), ("peri", True), ("post", False), ("res-post", None)])
def test_what_the_first_norm_reads_is_the_residual_stream_itself_not_a_copy(norm, shared):
    """Pre- and peri-norm blocks normalise the stream entering them: attn.ln_in is that row of `residual`, held once.
    Post-norm's first norm reads x + attn(x), its own array; res-post has no norm on the input side."""
    stack = explorer.run(explorer.ModelConfig(n_layers=3, n_heads=2, d_model=16, d_ff=24, norm=norm), SOURCE).first
    for layer in range(stack.n_layers):
        name = f"blocks.{layer}.attn.ln_in"
        if shared is None:
            assert name not in stack.activations
            continue
        assert np.shares_memory(stack.activations[name], stack.residual) == shared
        if shared:
            np.testing.assert_array_equal(stack[name], stack[f"blocks.{layer}.resid_pre"])


@pytest.mark.parametrize("name", ["blocks.2.attn.pattern", "blocks.0.cross.out", "attn.pattern", "blocks.x.ffn.out"])
def test_a_wrong_name_says_what_the_names_are(trace, name):
    with pytest.raises(KeyError, match="names are blocks.<layer>.<kind>, layer 0 to 1"):
        trace.first[name]


def test_the_readme_table_lists_every_name_with_its_shape():
    """The README's table is what a notebook user reads first: it must not drift from the engine's."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z_.]+)` \| `(\[[A-Z, ]+\])` \|", readme, flags=re.MULTILINE)
    assert rows == [(name, shape) for name, (shape, _) in ACTIVATION_NAMES.items()]


def test_a_run_without_scores_keeps_every_other_number_and_no_score_name(trace):
    """keep_scores=False (what the app runs: its pages show no pre-softmax scores) drops the scores of every stack and
    kind, in the forward itself, and leaves every other array exactly as a full run has it."""
    lean = explorer.run(trace.config, SOURCE, TARGET, keep_scores=False)
    for full, thin in zip(trace.stacks, lean.stacks, strict=True):
        assert thin.self_attention.scores is None
        assert full.cross_attention is None or thin.cross_attention.scores is None
        assert [n for n in full.activation_names() if not n.endswith(".scores")] == thin.activation_names()
        for name in thin.activation_names():
            np.testing.assert_array_equal(thin[name], full[name], err_msg=name)
        with pytest.raises(KeyError, match="is not an activation"):
            thin["blocks.0.attn.scores"]
    assert lean.scores is None
