"""Anatomy: parameter counts add up to the model's, multiply-adds agree with torch's own FLOP counter."""

import re

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import explorer
from explorer.anatomy import block_diagram, forward_steps, multiply_adds, parameter_counts, parameter_groups
from explorer.inputs import prepare_inputs
from tests.tiny_checkpoints import tiny

CONFIGS = [
    explorer.ModelConfig(d_model=32, n_heads=4, n_layers=3, d_ff=48),
    explorer.ModelConfig(d_model=32, n_heads=4, n_layers=2, d_ff=48, arch="decoder", norm="pre", positional="rope"),
    explorer.ModelConfig(d_model=24, n_heads=3, n_layers=2, d_ff=40, arch="encoder-decoder", positional="learned"),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.arch)
def test_parameter_counts_sum_to_the_model_total(cfg):
    model = explorer.build_model(cfg)
    counts = parameter_counts(model)
    assert counts["parameters"].sum() == sum(p.numel() for p in model.parameters())
    assert counts["module"].is_unique


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.arch)
def test_multiply_adds_match_torch_flop_counter(cfg):
    model = explorer.build_model(cfg)
    target = "x y z" if cfg.arch == "encoder-decoder" else None
    with torch.no_grad():
        inputs = prepare_inputs(model, "a b c d e f g", target)
        with FlopCounterMode(display=False) as counter:
            inputs.forward(model)
    estimate = multiply_adds(cfg, 7, 3 if target else None)
    assert 2 * estimate["multiply_adds"].sum() == counter.get_total_flops()


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.arch)
def test_each_multiply_add_formula_gives_its_number_with_the_steps_tables_letters(cfg):
    """S is the source and T the target in an encoder-decoder (as the steps table names them); T the input else."""
    n_source, n_target = 7, 3
    encoder_decoder = cfg.arch == "encoder-decoder"
    table = multiply_adds(cfg, n_source, n_target if encoder_decoder else None)
    for row in table.itertuples():
        letters = {"S": n_source, "T": n_target} if encoder_decoder else {"T": n_source}
        values = letters | {"d_model": cfg.d_model, "d_ff": cfg.d_ff, "layers": cfg.n_layers}
        factors = row.formula.replace(" x ", " ").split()  # e.g. "layers x 3 S d_model^2"
        product = 1
        for factor in factors:
            name, _, power = factor.partition("^")
            product *= (int(name) if name.isdigit() else values[name]) ** int(power or 1)
        assert product == row.multiply_adds, row
        if encoder_decoder and row.stack == "encoder":
            assert "T" not in factors and not any(f.startswith("T^") for f in factors)


def test_forward_steps_show_the_attention_shapes_for_this_input():
    steps = forward_steps(explorer.ModelConfig(n_heads=4, d_model=64, norm="pre"), 6)
    sizes = dict(zip(steps["shape"], steps["size"], strict=False))
    assert sizes["[heads, T, T]"] == "[4, 6, 6]"
    assert sizes["[heads, T, d_head]"] == "[4, 6, 16]"
    assert steps["step"].iloc[-2] == "final LayerNorm"


def test_the_scores_step_names_the_mask_each_stack_applies():
    def scores_steps(cfg):
        return [s for s in forward_steps(cfg, 6, 4 if cfg.arch == "encoder-decoder" else None)["step"] if "scores" in s]

    assert scores_steps(explorer.ModelConfig()) == ["block × 2: scores Q K^T / sqrt(d_head)"]  # mask none: unmasked
    assert scores_steps(explorer.ModelConfig(arch="decoder")) == [
        "block × 2: scores Q K^T / sqrt(d_head), causal mask"  # a decoder is causal whatever the mask control says
    ]
    both = scores_steps(explorer.ModelConfig(arch="encoder-decoder", mask="padding"))
    assert both[0] == "encoder block × 2: scores Q K^T / sqrt(d_head), padding mask"
    assert both[1] == "decoder block × 2: scores Q K^T / sqrt(d_head), causal+padding mask"


@pytest.mark.parametrize("norm", ["post", "pre", "res-post", "peri"])
def test_block_diagram_places_layernorm_where_the_norm_setting_says(norm):
    dot = block_diagram(explorer.ModelConfig(norm=norm, arch="encoder-decoder"))
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")
    assert "cross-attention" in dot and "masked multi-head" in dot
    edges = {
        "post": ["input -> attn;", "attn -> attn_add;", "attn_add -> attn_ln;", "attn_ln -> cross_add"],
        "pre": ["input -> attn_ln;", "attn_ln -> attn;", "attn -> attn_add;", "attn_add -> cross_add"],
        "res-post": ["input -> attn;", "attn -> attn_out_ln;", "attn_out_ln -> attn_add;", "attn_add -> cross_add"],
        "peri": ["input -> attn_ln;", "attn_ln -> attn;", "attn -> attn_out_ln;", "attn_out_ln -> attn_add;"],
    }[norm]
    assert all(edge in dot for edge in edges), edges
    assert ("final_ln" in dot) == (norm != "post")
    assert ("attn_out_ln" in dot) == (norm in ("res-post", "peri"))
    # The title's lines set the diagram's width: one line of 50 characters made it 327 pt, drawn at 7 px in half of
    # a 1024 px page
    title = re.search(r'label="([^"]*)"; labelloc=t', dot).group(1)
    assert max(len(line) for line in title.split("\\n")) <= 34, title
    # A node's line beside the "residual" edge label sets it too: "(keys, values: encoder output)" (30 characters)
    # made the decoder's diagram 271 pt wide, its text drawn at 9.7 px in half a 1024 px page (Streamlit draws a
    # diagram's text at 9.6 units, scaled with the diagram); at 22 characters it is 219 pt and 12 px
    nodes = re.findall(r'^  \w+ \[label="([^"]*)"', dot, flags=re.MULTILINE)
    assert max(len(line) for label in nodes for line in label.split("\\n")) <= 24, nodes


@pytest.mark.parametrize("norm", ["res-post", "peri"])
def test_forward_steps_put_a_norm_on_every_sub_layers_output(norm):
    steps = forward_steps(explorer.ModelConfig(norm=norm, arch="decoder"), 5)["step"].tolist()
    output_side = [i for i, s in enumerate(steps) if "output side" in s]
    assert len(output_side) == 2  # after self-attention and after the feed-forward
    assert "output projection" in steps[output_side[0] - 1] and "+ residual" in steps[output_side[0] + 1]
    assert ("input side" in " ".join(steps)) == (norm == "peri")
    assert steps[-2] == "final LayerNorm"


def step_names(cfg, *args) -> list[str]:
    return forward_steps(cfg, *args)["step"].tolist()


def test_bert_steps_add_the_token_type_and_the_embedding_norm_the_model_adds(minilm_model):
    assert minilm_model.token_type is not None and minilm_model.embed_norm is not None  # Transformer.embed's steps
    steps = step_names(minilm_model.config, 7)
    start = steps.index("+ learned positions")
    assert steps[start + 1 : start + 3] == ["+ token type 0", "embedding LayerNorm"]
    assert "+ token type 0" not in step_names(explorer.ModelConfig(positional="learned"), 7)  # configured: none


def test_a_read_out_ends_the_steps_as_the_multiply_adds_count_it(smollm_model):
    cfg, vocabulary = smollm_model.config, smollm_model.head.out_features  # 49,152 pieces, tied to the embeddings
    steps = forward_steps(cfg, 5, None, vocabulary)
    last = steps.iloc[-1]
    assert last["step"] == "read-out to token logits (tied: the token embedding table)"
    assert last["size"] == f"[5, {vocabulary}]"
    assert multiply_adds(cfg, 5, None, vocabulary)["component"].iloc[-1] == "output to token logits"
    assert not step_names(cfg, 5)[-1].startswith("read-out")  # no read-out asked for, none listed


def test_grouped_query_attention_repeats_keys_after_the_split_and_rope_as_the_model_does(smollm_model):
    cfg = smollm_model.config  # 9 query heads, 3 key/value heads, rope
    table = forward_steps(cfg, 5)
    steps = [s.removeprefix(f"block × {cfg.n_layers}: ") for s in table["step"]]
    order = [
        "K, V = x W_k, x W_v (3 key/value heads)",
        "split K, V into key/value heads",
        "rotate K by position (rope)",
        "repeat each K, V head for 3 query heads",
        "scores Q K^T / sqrt(d_head), causal mask",
    ]
    assert [steps.index(s) for s in order] == sorted(steps.index(s) for s in order)
    rotated = table.iloc[steps.index("rotate K by position (rope)")]
    assert rotated["size"] == f"[3, 5, {cfg.d_head}]"  # the 3 key heads are turned, not 9 copies


def test_olmo2s_q_and_k_norms_are_steps_and_count_as_norms():
    cfg = tiny().replace(family="olmo2", norm="res-post", checkpoint="tiny-olmo2")  # OLMo 2's shape, made small
    model = explorer.build_model(cfg)
    q_k = sum(p.numel() for n, p in model.named_parameters() if re.search(r"\.[qk]_norm\.", n))
    assert q_k > 0
    groups = parameter_groups(parameter_counts(model), "RMSNorm").set_index("group")["parameters"]
    norms = sum(p.numel() for n, p in model.named_parameters() if re.search(r"norm", n))
    assert groups["RMSNorm"] == norms  # q/k norms included, not filed under self-attention
    steps = step_names(cfg, 5)
    assert "block × 2: RMSNorm on Q (the whole projection)" in steps


def test_cross_attention_says_it_masks_the_sources_padding():
    padded = step_names(explorer.ModelConfig(arch="encoder-decoder", mask="padding"), 5, 3)
    assert "decoder block × 2: cross-attention: scores Q K^T / sqrt(d_head), padding mask" in padded
    plain = step_names(explorer.ModelConfig(arch="encoder-decoder", mask="none"), 5, 3)
    assert "decoder block × 2: cross-attention: scores Q K^T / sqrt(d_head)" in plain


def test_the_diagram_draws_swiglus_three_matrices(smollm_model):
    assert "silu(gate) × up,\\ndown linear" in block_diagram(smollm_model.config)
    assert "linear, relu, linear" in block_diagram(explorer.ModelConfig(activation="relu"))
