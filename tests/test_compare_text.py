"""What the Compare page says about A and B (explorer.compare_text), checked against the configurations and the
parameters of real models."""

from __future__ import annotations

import torch

import explorer
from explorer.analysis.gradients import objective_text
from explorer.analysis.placements import at_identity
from explorer.compare import MapPair, default_b, model_for_b
from explorer.compare_text import (
    b_objective_text,
    block_range,
    changes,
    describe,
    identity_values,
    missing_side,
    objectives_text,
    shared_weights_text,
    trained_by,
    unequal_depth_note,
    unshared,
    why_not_subtracted,
)
from explorer.config import CheckpointConfig, ModelConfig
from tests.tiny_checkpoints import perturbed_norms, tiny

A = ModelConfig()
TOKENS = "the cat sat on the mat"
MINILM = CheckpointConfig(checkpoint="minilm-l6", n_kv_heads=4, vocab_size=8)


def parameter_names(cfg: ModelConfig) -> set[str]:
    return {name for name, _ in explorer.build_model(cfg).named_parameters()}


def test_describe_puts_what_differs_from_the_other_in_bold():
    plain = "encoder · 2 layers · 4 heads · d_model 64 · d_ff 256 · post-norm · sinusoidal positions · mask none"
    assert describe(A, A) == plain + " · relu · seed 0"
    assert describe(A, default_b(A)) == plain.replace("post-norm", "**post-norm**") + " · relu · seed 0"
    b = A.replace(n_heads=8, seed=5)
    assert describe(b, A) == (
        "encoder · 2 layers · **8 heads** · d_model 64 · d_ff 256 · post-norm · sinusoidal positions · mask none · "
        "relu · **seed 5**"
    )


def test_describe_names_a_checkpoint_in_bold_only_when_the_other_is_another_model():
    title = "all-MiniLM-L6-v2 (BERT, post-norm)"
    rest = "2 layers · 4 heads · d_model 64 · post-norm · sinusoidal positions · mask none"
    assert describe(MINILM, MINILM) == f"{title} · {rest}"
    assert describe(MINILM, default_b(MINILM)) == f"{title} · {rest.replace('post-norm', '**post-norm**')}"
    assert describe(MINILM, A) == f"**{title}** · {rest}"


def test_describe_names_the_placement_a_flipped_checkpoint_was_trained_with():
    """B = MiniLM run pre-norm had read "all-MiniLM-L6-v2 (BERT, post-norm) · … · **pre-norm**": post- and pre-norm at
    once. Its title now says post-norm is how it was trained; A's, run as trained, is unchanged."""
    rest = "2 layers · 4 heads · d_model 64 · {} · sinusoidal positions · mask none"
    for norm in ("pre", "res-post", "peri"):
        flipped = MINILM.replace(norm=norm)
        assert describe(flipped, MINILM) == (
            f"all-MiniLM-L6-v2 (BERT, trained post-norm) · {rest.format(f'**{norm}-norm**')}"
        )
    assert describe(MINILM, MINILM.replace(norm="pre")).startswith("all-MiniLM-L6-v2 (BERT, post-norm) · ")
    smollm = CheckpointConfig(checkpoint="smollm2-135m", family="llama", norm="post", n_kv_heads=4, vocab_size=8)
    assert describe(smollm, smollm.replace(norm="pre")).startswith("SmolLM2-135M-Instruct (Llama, trained pre-norm) · ")
    local = CheckpointConfig(checkpoint="/models/bert-tiny", norm="pre", n_kv_heads=4, vocab_size=8)
    assert describe(local, MINILM).startswith("**bert-tiny** · ")  # a local title names no placement


def test_changes_lists_each_field_of_b_with_both_values_in_field_order():
    assert changes(A, A) == ""
    assert changes(A, A.replace(seed=3, norm="pre")) == "norm (post → pre), seed (0 → 3)"


def test_block_range_names_one_two_or_a_run_of_blocks():
    assert block_range([2]) == "2"
    assert block_range([2, 3]) == "2 and 3"
    assert block_range([2, 3, 4, 5]) == "2 to 5"


def test_unshared_names_the_final_norms_and_the_extra_blocks_of_real_models():
    a, b = A, A.replace(norm="pre", n_layers=4)
    only_b = sorted(parameter_names(b) - parameter_names(a))
    assert unshared(only_b, "B", "A") == (
        " B also has encoder.norm, the final norm every placement but post-norm has (LayerNorm at identity, weight 1, "
        "bias 0: a norm B adds starts as the identity); encoder blocks 2 and 3, drawn from B's seed, which A has not."
    )
    assert unshared(sorted(parameter_names(a) - parameter_names(b)), "A", "B") == ""
    pre = A.replace(arch="encoder-decoder", norm="pre")
    only_pre = sorted(parameter_names(pre) - parameter_names(pre.replace(norm="post")))
    assert unshared(only_pre, "A", "B") == (
        " A also has decoder.norm and encoder.norm, the final norm every placement but post-norm has (LayerNorms at "
        "identity, weight 1, bias 0: an untrained model's norms start so), which B has not."
    )
    both = sorted(parameter_names(A.replace(norm="peri")) - parameter_names(A))
    assert unshared(both, "B", "A") == (
        " B also has encoder.norm, the final norm every placement but post-norm has, plus out_norm1 and out_norm2 in "
        "its blocks (LayerNorms at identity, weight 1, bias 0: a norm B adds starts as the identity), which A has not."
    )
    peri = A.replace(norm="peri")
    only_peri = sorted(parameter_names(peri) - parameter_names(A.replace(norm="res-post")))
    assert unshared(only_peri, "B", "A") == (
        " B also has norm1 and norm2 in its blocks (LayerNorms at identity, weight 1, bias 0: a norm B adds starts as "
        "the identity), which A has not."
    )


def test_shared_weights_text_counts_the_shared_tensors_and_names_the_rest():
    b = A.replace(norm="pre", n_layers=3)
    names_a, names_b = parameter_names(A), parameter_names(b)
    facts = {"shared": len(names_a & names_b), "only_a": sorted(names_a - names_b), "only_b": sorted(names_b - names_a)}
    assert facts["shared"] == 24  # 12 tensors in each of the 2 blocks both have
    assert shared_weights_text(A, b, facts) == (
        "B runs on A's very weights: the 24 parameter tensors the two models share are identical (checked tensor "
        "by tensor). Only n_layers (2 → 3), norm (post → pre) differ. B also has encoder.norm, the final norm every "
        "placement but post-norm has (LayerNorm at identity, weight 1, bias 0: a norm B adds starts as the identity); "
        "encoder block 2, drawn from B's seed, which A has not."
    )
    one = shared_weights_text(A, A.replace(mask="causal"), {"shared": 24, "only_a": [], "only_b": []})
    assert one.endswith("Only mask (none → causal) differs.")


def test_missing_side_says_what_the_side_lacks(make_maps):
    maps = make_maps(n_layers=2, n_heads=3)
    assert missing_side("B", maps, "self-attention", 1, 2) is None
    assert missing_side("B", None, "cross-attention", 0, 0) == "B has no cross-attention"
    assert missing_side("A", maps, "self-attention", 2, 0) == "A has no layer 2 (it has 2)"
    assert missing_side("A", maps, "self-attention", 0, 3) == "A has no head 3 (it has 3)"


def test_why_not_subtracted_names_every_shape_that_differs(make_maps):
    a = make_maps(n_layers=2, n_heads=3)
    b = make_maps(n_layers=4, n_heads=3, tokens="the cat sat".split())
    reasons = "A's map is 6 × 6 tokens and B's 3 × 3; A has 2 layers and B 4"
    assert why_not_subtracted(MapPair("self-attention", 0, a, b)).startswith(f"No A − B map: {reasons}. ")
    deeper = MapPair("self-attention", 0, a, make_maps(n_layers=4, n_heads=2))
    assert why_not_subtracted(deeper, ranked_only=True) == (
        "No head ranking: A has 2 layers and B 4; A has 3 heads and B 2. Heads are ranked when A and B have the same "
        "layers and heads."
    )


def test_unequal_depth_note_only_when_both_have_the_stack_with_other_depths():
    trace_a = explorer.run(A, TOKENS)
    deeper = explorer.run(A.replace(n_layers=5), TOKENS)
    note = unequal_depth_note(trace_a, deeper, 0)
    assert note is not None and note.startswith("A has 2 layers and B 5:")
    assert "Like for like means blocks 0 to 1, which both have" in note
    assert unequal_depth_note(trace_a, explorer.run(default_b(A), TOKENS), 0) is None
    assert unequal_depth_note(trace_a, None, 0) is None
    decoder_only_in_b = explorer.run(A.replace(arch="encoder-decoder", n_layers=3), TOKENS, "le chat")
    assert unequal_depth_note(trace_a, decoder_only_in_b, 1) is None


def weight_facts_of(model_a: explorer.Transformer, b: ModelConfig) -> tuple[explorer.Transformer, dict]:
    """B's model on A's weights, and the facts the page gathers (views.caches.weight_facts)."""
    model_b = model_for_b(model_a, b)
    names_a, names_b = {n for n, _ in model_a.named_parameters()}, {n for n, _ in model_b.named_parameters()}
    facts = {"shared": len(names_a & names_b), "only_a": sorted(names_a - names_b), "only_b": sorted(names_b - names_a)}
    return model_b, facts


def test_a_checkpoints_own_norms_are_said_trained_and_only_the_norms_b_adds_at_identity():
    """A Llama-shaped checkpoint (RMSNorm, its norms moved off identity as trained ones are): flipped to post-norm,
    its final norm is said to be its trained RMSNorm; flipped to peri-norm, the output norms B adds are RMSNorms at
    weight 1 (no bias). Each claim is checked against the tensors."""
    a = tiny()
    model_a = perturbed_norms(explorer.build_model(a), 3, 0.1)
    model_b, facts = weight_facts_of(model_a, a.replace(norm="post"))
    assert facts["only_a"] == ["decoder.norm.weight"] and not facts["only_b"]
    assert not at_identity(model_a.get_submodule("decoder.norm"))
    text = shared_weights_text(a, a.replace(norm="post"), facts, trained_by(a, session_trained=False))
    assert text.endswith(
        " A also has decoder.norm, the final norm every placement but post-norm has (trained RMSNorm, weights from "
        "the checkpoint), which B has not."
    )
    assert "weight 1" not in text and "LayerNorm" not in text
    model_b, facts = weight_facts_of(model_a, a.replace(norm="peri"))
    assert {n.split(".")[3] for n in facts["only_b"]} == {"out_norm1", "out_norm2"}
    assert all(at_identity(model_b.get_submodule(n.rsplit(".", 1)[0])) for n in facts["only_b"])
    assert shared_weights_text(a, a.replace(norm="peri"), facts, "the checkpoint").endswith(
        " B also has out_norm1 and out_norm2 in its blocks (RMSNorms at identity, weight 1: a norm B adds starts as "
        "the identity), which A has not."
    )


def test_a_configured_models_new_norm_is_said_at_identity_and_a_trained_ones_own_norm_trained():
    """A configured pre-norm encoder against post-norm: untrained, A's final norm is at identity and said so; once
    trained (here: its norms moved), the same norm is said to come from this session's training."""
    a = A.replace(norm="pre")
    model_a = explorer.build_model(a)
    _, facts = weight_facts_of(model_a, A)
    assert facts["only_a"] == ["encoder.norm.bias", "encoder.norm.weight"]
    assert at_identity(model_a.get_submodule("encoder.norm"))
    assert trained_by(a, session_trained=False) is None
    assert "(LayerNorm at identity, weight 1, bias 0: an untrained model's norms start so)" in shared_weights_text(
        a, A, facts, None
    )
    assert not at_identity(perturbed_norms(model_a, 4, 0.1).get_submodule("encoder.norm"))
    trained = shared_weights_text(a, A, facts, trained_by(a, session_trained=True))
    assert "(trained LayerNorm, weights from this session's training)" in trained
    assert identity_values("RMSNorm") == "weight 1" and identity_values("LayerNorm") == "weight 1, bias 0"


def test_blocks_only_a_trained_a_has_are_said_trained_not_drawn_from_its_seed():
    """A trained 4-layer peri-norm A beside a 2-layer pre-norm B: A's blocks 2 and 3 (every parameter of them a
    trained tensor) come from its training, like its output norms; an untrained A's single extra block is named in
    the singular and drawn from its seed."""
    a = A.replace(norm="peri", n_layers=4)
    model_a = perturbed_norms(explorer.build_model(a), 5, 0.1)  # norms moved off identity, as training moves them
    b = a.replace(norm="pre", n_layers=2)
    _, facts = weight_facts_of(model_a, b)
    assert {int(n.split(".")[2]) for n in facts["only_a"] if ".layers." in n and "out_norm" not in n} == {2, 3}
    trained = shared_weights_text(a, b, facts, trained_by(a, session_trained=True))
    assert trained.endswith(
        " A also has out_norm1 and out_norm2 in its blocks (trained LayerNorms, weights from this session's "
        "training); encoder blocks 2 and 3 (trained, weights from this session's training), which B has not."
    )
    assert "seed" not in trained
    three = A.replace(norm="pre", n_layers=3)
    names_a, names_b = parameter_names(three), parameter_names(three.replace(n_layers=2))
    assert {n.split(".")[2] for n in names_a - names_b} == {"2"}
    assert (
        unshared(sorted(names_a - names_b), "A", "B")
        == " A also has encoder block 2, drawn from A's seed, which B has not."
    )


def test_b_objective_text_says_a_fresh_b_reads_out_through_a_head_of_its_own_seed():
    """A model with a read-out (as the Train page makes) beside B: a B on A's very weights reads out through A's
    read-out, the same tensor, and says what objective_text says; a B of another seed is built fresh, its read-out
    drawn from B's seed (the same as a fresh build's), and says so instead of calling it trained."""
    vocabulary = tuple("ABCDEFGH")
    model_a = explorer.build_model(A, vocabulary)
    flipped = model_for_b(model_a, A.replace(norm="pre"))
    assert torch.equal(flipped.head.weight, model_a.head.weight)
    assert b_objective_text(model_a, flipped) == objective_text(flipped) == objective_text(model_a)
    assert "trained model's own read-out" in b_objective_text(model_a, flipped)
    b = A.replace(seed=1)
    fresh = model_for_b(model_a, b)
    assert not torch.equal(fresh.head.weight, model_a.head.weight)
    assert torch.equal(fresh.head.weight, explorer.build_model(b, vocabulary).head.weight)
    said = b_objective_text(model_a, fresh)
    assert "trained model's own read-out" not in said and "its trained weights" not in said
    assert (
        "B's own read-out (its logits over A's vocabulary)" in said and "drawn from B's seed, its read-out too" in said
    )
    untrained = explorer.build_model(A)  # no read-out: B, fresh or not, gets the dummy tied read-out as A does
    assert b_objective_text(untrained, model_for_b(untrained, b)) == objective_text(untrained)


def test_objectives_text_gives_one_paragraph_for_one_objective_and_one_each_for_two():
    assert objectives_text("Objective: x.", "Objective: x.") == "A and B: Objective: x."
    assert objectives_text("Objective: x.", "Objective: y.") == "A: Objective: x.\n\nB: Objective: y."
