"""What the Compare page says about A and B (explorer.compare_text), checked against the configurations and the
parameters of real models."""

from __future__ import annotations

import explorer
from explorer.compare import MapPair, default_b
from explorer.compare_text import (
    block_range,
    changes,
    describe,
    missing_side,
    shared_weights_text,
    unequal_depth_note,
    unshared,
    why_not_subtracted,
)
from explorer.config import CheckpointConfig, ModelConfig

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
        " B also has encoder.norm, the final norm every placement but post-norm has (weight 1, bias 0: a norm B adds "
        "starts as the identity); encoder blocks 2 and 3, drawn from B's seed, which A has not."
    )
    assert unshared(sorted(parameter_names(a) - parameter_names(b)), "A", "B") == ""
    pre = A.replace(arch="encoder-decoder", norm="pre")
    only_pre = sorted(parameter_names(pre) - parameter_names(pre.replace(norm="post")))
    assert unshared(only_pre, "A", "B") == (
        " A also has decoder.norm and encoder.norm, the final norm every placement but post-norm has, which B has not."
    )
    both = sorted(parameter_names(A.replace(norm="peri")) - parameter_names(A))
    assert unshared(both, "B", "A") == (
        " B also has encoder.norm, the final norm every placement but post-norm has, plus out_norm1 and out_norm2 in "
        "its blocks (weight 1, bias 0: a norm B adds starts as the identity), which A has not."
    )
    peri = A.replace(norm="peri")
    only_peri = sorted(parameter_names(peri) - parameter_names(A.replace(norm="res-post")))
    assert unshared(only_peri, "B", "A") == (
        " B also has norm1 and norm2 in its blocks (weight 1, bias 0: a norm B adds starts as the identity), "
        "which A has not."
    )


def test_shared_weights_text_counts_the_shared_tensors_and_names_the_rest():
    b = A.replace(norm="pre", n_layers=3)
    names_a, names_b = parameter_names(A), parameter_names(b)
    facts = {"shared": len(names_a & names_b), "only_a": sorted(names_a - names_b), "only_b": sorted(names_b - names_a)}
    assert facts["shared"] == 24  # 12 tensors in each of the 2 blocks both have
    assert shared_weights_text(A, b, facts) == (
        "B runs on A's very weights: the 24 parameter tensors the two models share are identical (checked tensor "
        "by tensor). Only n_layers (2 → 3), norm (post → pre) differ. B also has encoder.norm, the final norm every "
        "placement but post-norm has (weight 1, bias 0: a norm B adds starts as the identity); encoder blocks 2, "
        "drawn from B's seed, which A has not."
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
