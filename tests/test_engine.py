"""The engine's exact properties: masks, normalisation, determinism, and the shape of what run() returns."""

import itertools
import subprocess
import sys

import numpy as np
import pytest
import torch

import explorer
from explorer.config import ARCHS, MASKS, NORMS, PAD_TOKEN, ModelConfig, applied_masks
from explorer.positional import apply_rope, rope_angles, sinusoidal

TOKENS = ["the", "cat", "sat", "on", "the", "mat"]
PADDED = ["the", "cat", PAD_TOKEN, "sat", PAD_TOKEN]


def small(**changes) -> explorer.ModelConfig:
    return explorer.ModelConfig(d_model=32, n_heads=4, n_layers=3, d_ff=64).replace(**changes)


def run_any(cfg: explorer.ModelConfig, tokens=TOKENS) -> explorer.Trace:
    target = ["le", "chat", PAD_TOKEN, "assis"] if cfg.arch == "encoder-decoder" else None
    return explorer.run(cfg, tokens, target)


ALL_CONFIGS = [small(arch=a, norm=n, mask=m) for a, n, m in itertools.product(ARCHS, NORMS, MASKS)]


@pytest.mark.parametrize("cfg", ALL_CONFIGS, ids=lambda c: f"{c.arch}-{c.norm}-{c.mask}")
def test_rows_sum_to_one_over_allowed_keys_and_masked_entries_are_exactly_zero(cfg):
    for maps in run_any(cfg, PADDED).attention_maps().values():
        weights = maps.weights  # [L, H, Tq, Tk]
        assert weights.dtype == np.float32 and np.isfinite(weights).all()
        assert (weights[..., ~maps.allowed] == 0.0).all()
        sums = weights.sum(axis=-1)  # [L, H, Tq]
        has_keys = ~maps.empty_rows
        np.testing.assert_allclose(sums[..., has_keys], 1.0, atol=1e-5)
        assert (sums[..., ~has_keys] == 0.0).all()
        assert np.isneginf(maps.scores[..., ~maps.allowed]).all()
        assert np.isfinite(maps.scores[..., maps.allowed]).all()


def test_causal_mask_blocks_exactly_the_upper_triangle():
    maps = run_any(small(mask="causal")).attention_maps()["self-attention"]
    upper = np.triu(np.ones((len(TOKENS), len(TOKENS)), dtype=bool), k=1)
    np.testing.assert_array_equal(maps.allowed, ~upper)
    assert (maps.weights[..., upper] == 0.0).all()
    assert (maps.weights[..., ~upper] > 0.0).all()


def test_padding_mask_blocks_pad_columns_only():
    maps = run_any(small(mask="padding"), PADDED).attention_maps()["self-attention"]
    pad_columns = np.array([t == PAD_TOKEN for t in PADDED])
    assert (maps.weights[..., pad_columns] == 0.0).all()
    assert (maps.weights[..., ~pad_columns] > 0.0).all()


def test_decoder_only_is_always_causal():
    maps = run_any(small(arch="decoder", mask="none")).attention_maps()["self-attention"]
    np.testing.assert_array_equal(maps.allowed, np.tril(np.ones((6, 6), dtype=bool)))


def test_encoder_decoder_masks_cross_attention_on_source_padding_and_decoder_is_causal():
    trace = explorer.run(small(arch="encoder-decoder", mask="padding"), PADDED, "a b c")
    cross = trace.attention_maps()["cross-attention"]
    assert trace.cross_attention.shape == (3, 4, 3, len(PADDED))
    np.testing.assert_array_equal(cross.allowed, np.tile([t != PAD_TOKEN for t in PADDED], (3, 1)))
    assert cross.query_tokens == ["a", "b", "c"] and cross.key_tokens == PADDED
    decoder = trace.attention_maps()["decoder self-attention"]
    np.testing.assert_array_equal(decoder.allowed, np.tril(np.ones((3, 3), dtype=bool)))
    assert trace.decoder_attention.shape == (3, 4, 3, 3)


def test_a_query_with_every_key_masked_is_all_zero_and_flagged_never_nan():
    trace = run_any(small(mask="causal+padding"), [PAD_TOKEN, "a", "b"])
    maps = trace.attention_maps()["self-attention"]
    np.testing.assert_array_equal(maps.empty_rows, [True, False, False])
    assert (maps.weights[:, :, 0, :] == 0.0).all()
    assert np.isfinite(trace.output).all() and np.isfinite(trace.residual).all()
    only_pads = run_any(small(mask="padding"), [PAD_TOKEN, PAD_TOKEN])
    assert only_pads.attention_maps()["self-attention"].empty_rows.all()
    assert (only_pads.attention == 0.0).all() and np.isfinite(only_pads.output).all()


@pytest.mark.parametrize("norm", NORMS)
def test_trace_shapes_and_residual_stream(norm):
    cfg = small(norm=norm)
    trace = run_any(cfg)
    L, H, T, D = cfg.n_layers, cfg.n_heads, len(TOKENS), cfg.d_model
    assert trace.tokens == TOKENS
    assert trace.attention.shape == trace.scores.shape == (L, H, T, T)
    assert trace.residual.shape == (L + 1, T, D)
    assert trace.first["blocks.0.attn.out"].shape == trace.first["blocks.2.ffn.out"].shape == (T, D)
    assert trace.first.activations["blocks.2.ffn.hidden"].shape == (T, cfg.d_ff)
    assert trace.output.shape == (T, D)
    if norm != "post":  # the residual stream is the sum of what every sub-layer wrote into it
        update = "out" if norm == "pre" else "out_ln_out"  # res-post and peri write their output norm's result
        written = [trace.first[f"blocks.{i}.{part}.{update}"] for i in range(L) for part in ("attn", "ffn")]
        rebuilt = trace.residual[0] + np.sum(written, axis=0)
        np.testing.assert_allclose(trace.residual[-1], rebuilt, atol=1e-4)
        ln = torch.nn.functional.layer_norm(torch.from_numpy(trace.residual[-1]), (D,))
        np.testing.assert_allclose(trace.output, ln.numpy(), atol=1e-5)
    else:  # post-norm: every block ends in a LayerNorm, so the stream leaves each block normalised
        np.testing.assert_allclose(trace.residual[1:].mean(axis=-1), 0.0, atol=1e-5)
        np.testing.assert_allclose(trace.residual[1:].std(axis=-1), 1.0, atol=1e-3)
        np.testing.assert_array_equal(trace.output, trace.residual[-1])


def test_repeated_word_gives_identical_embedding_rows():
    trace = run_any(small(positional="none"))
    np.testing.assert_array_equal(trace.residual[0][0], trace.residual[0][4])  # "the" twice
    assert not np.array_equal(trace.residual[0][0], trace.residual[0][1])
    with_positions = run_any(small(positional="sinusoidal"))
    np.testing.assert_allclose(with_positions.residual[0] - trace.residual[0], sinusoidal(6, 32).numpy(), atol=1e-6)


def test_sinusoidal_matches_the_formula():
    table = sinusoidal(50, 16).numpy()
    for p, i in [(0, 0), (7, 0), (7, 3), (49, 7)]:
        angle = p / 10000 ** (2 * i / 16)
        assert table[p, 2 * i] == pytest.approx(np.sin(angle), abs=1e-6)
        assert table[p, 2 * i + 1] == pytest.approx(np.cos(angle), abs=1e-6)
    assert sinusoidal(4, 5).shape == (4, 5)  # an odd width keeps its last sine


@pytest.mark.parametrize("positional", ["sinusoidal", "learned", "rope", "none"])
def test_position_matters_only_with_an_encoding(positional):
    cfg = small(positional=positional)
    forward, backward = run_any(cfg, ["a", "b", "c"]), run_any(cfg, ["c", "b", "a"])
    permuted = backward.attention[:, :, ::-1, ::-1]
    if positional == "none":
        np.testing.assert_allclose(forward.attention, permuted, atol=1e-6)
    else:
        assert np.abs(forward.attention - permuted).max() > 1e-3


def test_dropout_never_reaches_the_shown_attention():
    plain, dropped = run_any(small()), run_any(small(dropout=0.5))
    np.testing.assert_array_equal(plain.attention, dropped.attention)
    assert plain.attention.max() <= 1.0


def test_seed_changes_weights_and_build_leaves_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    explorer.build_model(small(positional="learned"))
    assert torch.equal(torch.rand(3), expected)
    assert not np.array_equal(run_any(small(seed=1)).attention, run_any(small(seed=2)).attention)


def test_accepts_512_tokens():
    trace = explorer.run(small(n_layers=1), " ".join(f"w{i}" for i in range(512)))
    assert trace.attention.shape == (1, 4, 512, 512)


DIGEST_SCRIPT = """
import hashlib, explorer
cfg = explorer.ModelConfig(arch="encoder-decoder", norm="pre", positional="learned", mask="causal+padding")
trace = explorer.run(cfg, "the cat sat on the [PAD]", "le chat")
digest = hashlib.sha256()
for stack in trace.stacks:
    for array in (stack.self_attention.weights, stack.residual, stack.output):
        digest.update(array.tobytes())
print(digest.hexdigest())
"""


def digest_in_a_new_process(script: str, hash_seed: str | None = None) -> str:
    """What `script` prints, run by a new interpreter (with PYTHONHASHSEED=`hash_seed`; None: Python's random one)."""
    env = {"PATH": ""} | ({"PYTHONHASHSEED": hash_seed} if hash_seed is not None else {})
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@pytest.fixture(scope="module")
def digests_by_hash_seed() -> dict[str, str]:
    """DIGEST_SCRIPT's digest in two new processes of different hash seeds: read by both tests below, so the float32
    reference the float64 test compares with costs no third process."""
    return {seed: digest_in_a_new_process(DIGEST_SCRIPT, seed) for seed in ("1", "2")}


def test_same_numbers_in_two_processes(digests_by_hash_seed):
    digests = set(digests_by_hash_seed.values())
    assert len(digests) == 1 and len(next(iter(digests))) == 64


FLOAT64_PRELUDE = """
import torch
torch.set_default_dtype(torch.float64)  # as some notebooks do
"""
FLOAT64_CHECKS = """
assert trace.attention.dtype == "float32" and torch.get_default_dtype() == torch.float64  # left as it was
layer = torch.nn.TransformerEncoderLayer(8, 2, 16)  # a float64 module, as this default makes it
explorer.run(explorer.from_torch(layer.eval()), torch.randn(3, 8))  # imported as float32, as the engine runs
torch.set_default_dtype(torch.float32)
explorer.run(cfg, "the cat sat", "le chat")  # no float64 left behind in a cache to clash with float32 weights
"""


def test_a_float64_default_dtype_changes_no_number(digests_by_hash_seed):
    float64_default = digest_in_a_new_process(FLOAT64_PRELUDE + DIGEST_SCRIPT + FLOAT64_CHECKS)
    assert float64_default == digests_by_hash_seed["1"]


def test_rope_rotates_each_pair_by_position_times_frequency():
    angles = rope_angles(10, 8).numpy()  # [P, K/2]
    assert angles[3, 1] == pytest.approx(3 / 10000 ** (2 / 8))
    x = torch.zeros(10, 8)
    x[:, 2] = 1.0  # the first coordinate of pair 1
    rotated = apply_rope(x).numpy()
    np.testing.assert_allclose(rotated[:, 2], np.cos(angles[:, 1]), atol=1e-6)
    np.testing.assert_allclose(rotated[:, 3], np.sin(angles[:, 1]), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(rotated, axis=1), 1.0, atol=1e-6)  # a rotation keeps lengths


def test_rope_stays_exact_far_along_the_sequence():
    """Cosine and sine of the exact angle: rounding the angle to float32 first is off by 4e-5 near position 4,000."""
    x = torch.randn(4096, 8, generator=torch.Generator().manual_seed(0))
    angles = np.arange(4096)[:, None] / 10000.0 ** (np.arange(0, 8, 2) / 8)  # [P, K/2] float64
    even, odd = x[:, 0::2].double().numpy(), x[:, 1::2].double().numpy()
    expected = np.stack(
        [even * np.cos(angles) - odd * np.sin(angles), even * np.sin(angles) + odd * np.cos(angles)], -1
    )
    np.testing.assert_allclose(apply_rope(x).numpy(), expected.reshape(4096, 8), atol=2e-6)


def test_rope_score_depends_only_on_the_offset():
    generator = torch.Generator().manual_seed(0)
    q, k = torch.randn(16, generator=generator), torch.randn(16, generator=generator)
    scores = apply_rope(q.expand(12, 16)) @ apply_rope(k.expand(12, 16)).T  # [12, 12]: q at m, k at n
    for shift in (1, 5):
        np.testing.assert_allclose(scores[shift:, shift:].numpy(), scores[:-shift, :-shift].numpy(), atol=1e-4)
    assert abs(scores[0, 3] - scores[3, 0]) > 1e-3  # ... on the signed offset, not just its size


def test_rope_model_scores_on_a_repeated_token_are_a_function_of_the_offset():
    scores = run_any(small(positional="rope"), ["a"] * 8).scores[0]  # [H, T, T] first layer
    np.testing.assert_allclose(scores[:, 3:, 3:], scores[:, :-3, :-3], atol=1e-4)
    assert np.abs(scores[:, 0, 1:] - scores[:, 0, :1]).max() > 1e-3  # yet it does vary with the offset


@pytest.mark.parametrize(("arch", "mask"), list(itertools.product(ARCHS, MASKS)))
def test_applied_masks_say_what_each_stack_really_masks(arch, mask):
    """The pages print applied_masks: check each claim against the mask the engine used."""
    tokens = "the [PAD] cat sat [PAD]"
    cfg = ModelConfig(arch=arch, mask=mask)
    trace = explorer.run(cfg, tokens, tokens if arch == "encoder-decoder" else None)
    claims = applied_masks(cfg)
    assert list(claims) == [stack.name for stack in trace.stacks]
    for stack in trace.stacks:
        expected = np.ones((5, 5), dtype=bool)
        if "causal" in claims[stack.name]:
            expected = np.tril(expected)
        if "padding" in claims[stack.name]:
            expected[:, [1, 4]] = False
        np.testing.assert_array_equal(stack.self_attention.allowed, expected)


def test_a_trace_prints_as_a_short_summary_in_a_notebook():
    """Printing a Trace printed every array: 26 kB at 64 tokens (found by an API review)."""
    trace = explorer.run(ModelConfig(arch="encoder-decoder"), " ".join(["w"] * 64), "x y")
    text = repr(trace)
    assert len(text) < 600
    assert "StackTrace('encoder', 64 tokens, residual [3, 64, 64])" in text and "'decoder', 2 tokens" in text
    assert repr(trace.first.self_attention).endswith("weights [2, 4, 64, 64] [layers, heads, query, key])")
