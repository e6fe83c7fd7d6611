"""Every mistake a user can make ends in ConfigError with a sentence that says what to do."""

import warnings

import numpy as np
import pytest
import torch
from torch import nn

import explorer
from explorer import ConfigError, ModelConfig, parse_config


def test_defaults_are_valid_and_hashable():
    cfg = ModelConfig()
    assert cfg.d_model % cfg.n_heads == 0
    assert hash(cfg) == hash(ModelConfig())
    assert parse_config(cfg.to_dict()) == cfg


def test_heads_not_dividing_d_model_lists_the_heads_that_work():
    with pytest.raises(ConfigError) as error:
        ModelConfig(d_model=30, n_heads=4)
    assert str(error.value) == (
        "d_model 30 is not divisible by 4 heads; with d_model 30 you can use 1, 2, 3, 5, 6, 10, 15 or 30 heads."
    )


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"norm": "sideways"}, ["norm", "sideways", '"res-post", x = x + Norm(f(x))', '"peri"']),
        ({"arch": "rnn"}, ["arch", '"encoder-decoder"']),
        ({"mask": "future"}, ["mask", '"causal+padding"']),
        ({"positional": "fourier"}, ["positional", '"sinusoidal"']),
        ({"positional": "rope", "d_model": 12, "n_heads": 4}, ["rope", "even", "12 / 4 heads = 3"]),
        ({"activation": "tanh"}, ["activation", '"gelu"']),
        ({"n_layers": 0}, ["n_layers 0 is out of range", "1 to 24"]),
        ({"n_heads": 65}, ["n_heads 65 is out of range"]),
        ({"d_model": 4096}, ["d_model 4096 is out of range"]),
        ({"d_ff": -1}, ["d_ff -1 is out of range"]),
        ({"seed": -3}, ["seed -3 is out of range"]),
        ({"max_tokens": 100}, ["max_tokens 100", "512"]),
        ({"n_heads": 2.5}, ["n_heads must be a whole number"]),
        ({"n_layers": True}, ["n_layers must be a whole number"]),
        ({"dropout": 1.0}, ["dropout 1.0 must be a number from 0"]),
    ],
)
def test_impossible_values_say_what_to_use(changes, words):
    with pytest.raises(ConfigError) as error:
        ModelConfig(**changes)
    for word in words:
        assert word in str(error.value)


@pytest.mark.parametrize(("d_model", "n_heads"), [(60, 7), (12, 4), (63, 4), (64, 3)])
def test_every_head_count_a_rope_message_suggests_works(d_model, n_heads):
    """With rope, the suggested head counts must give each head an even width, or the next try fails too."""
    with pytest.raises(ConfigError) as error:
        ModelConfig(positional="rope", d_model=d_model, n_heads=n_heads)
    message = str(error.value)
    if d_model % 2:
        assert "use an even d_model" in message
        return
    suggested = [int(n) for n in message.split("you can use ")[1].split(" heads")[0].replace(" or", ",").split(", ")]
    assert suggested and all(ModelConfig(positional="rope", d_model=d_model, n_heads=h) for h in suggested)
    assert all(d_model % h or (d_model // h) % 2 or h in suggested for h in range(1, 65))  # and none is left out


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ({"n_heads": "abc"}, ["n_heads must be a whole number, not 'abc'"]),
        ({"norm": "sideways"}, ["norm 'sideways'"]),
        ({"dropout": "lots"}, ["dropout must be a number"]),
        ({"d_model": "30", "n_heads": "4"}, ["not divisible"]),
    ],
)
def test_url_values_are_parsed_or_explained(query, words):
    with pytest.raises(ConfigError) as error:
        parse_config(query)
    for word in words:
        assert word in str(error.value)


def test_url_strings_become_typed_values_and_unknown_keys_are_ignored():
    cfg = parse_config({"n_heads": " 8 ", "norm": "pre", "dropout": "0.1", "tokens": "hello", "utm": "x"})
    assert (cfg.n_heads, cfg.norm, cfg.dropout) == (8, "pre", 0.1)


@pytest.mark.parametrize(
    ("source", "words"),
    [("", ["empty", "at least one token"]), ("   ", ["empty"]), (["a", ""], ["empty token"])],
)
def test_empty_input_is_explained(source, words):
    with pytest.raises(ConfigError) as error:
        explorer.run(ModelConfig(), source)
    for word in words:
        assert word in str(error.value)


def test_too_many_tokens_is_explained():
    with pytest.raises(ConfigError, match="5,000 tokens, more than the 512"):
        explorer.run(ModelConfig(), " ".join(["word"] * 5000))


def test_target_is_required_by_an_encoder_decoder_and_refused_by_others():
    with pytest.raises(ConfigError, match="needs a target"):
        explorer.run(ModelConfig(arch="encoder-decoder"), "a b")
    with pytest.raises(ConfigError, match="Only an encoder-decoder takes a target"):
        explorer.run(ModelConfig(), "a b", "c d")
    with pytest.raises(ConfigError, match="The target is empty"):
        explorer.run(ModelConfig(arch="encoder-decoder"), "a b", " ")


def test_tensor_inputs_and_masks_are_checked():
    model = explorer.from_torch(nn.TransformerEncoderLayer(16, 2, 32))
    with pytest.raises(ConfigError, match=r"float \[T, 16\]"):
        explorer.run(model, torch.randn(3, 8))
    with pytest.raises(ConfigError, match=r"float \[T, 16\]"):
        explorer.run(model, torch.ones(3, 16, dtype=torch.long))
    with pytest.raises(ConfigError, match="True = may attend"):
        explorer.run(model, torch.randn(3, 16), mask=torch.zeros(3, 3))
    with pytest.raises(ConfigError, match=r"bool tensor \[3, 3\]"):
        explorer.run(model, torch.randn(3, 16), mask=torch.ones(2, 2, dtype=torch.bool))


def test_non_numbers_and_non_models_are_named_not_passed_on():
    model = explorer.from_torch(nn.TransformerEncoderLayer(16, 2, 32))
    x = torch.randn(5, 16)
    x[2, 3] = float("nan")
    x[4, 0] = float("inf")
    with pytest.raises(ConfigError, match=r"NaN or infinite values \(row 2, 4\)"):  # else all attention is NaN
        explorer.run(model, x)
    for wrong in (None, {"n_heads": 2}):
        with pytest.raises(ConfigError, match="takes a ModelConfig or an explorer model"):
            explorer.run(wrong, "a b")
    with pytest.raises(ConfigError, match="built from a ModelConfig"):
        explorer.build_model(None)
    layer = nn.TransformerEncoderLayer(16, 2, 32)
    with pytest.raises(ConfigError, match="has no layers"):
        explorer.from_torch(nn.TransformerEncoder(layer, 0, enable_nested_tensor=False))


def test_the_torch_style_mask_warning_points_at_the_callers_line():
    model = explorer.from_torch(nn.TransformerEncoderLayer(16, 2, 32))
    blocked_diagonal = ~torch.eye(3, dtype=torch.bool)
    with pytest.warns(UserWarning, match="pass ~mask") as caught:
        explorer.run(model, torch.randn(3, 16), mask=blocked_diagonal)
    assert caught[0].filename == __file__


def test_target_and_memory_masks_are_refused_without_a_decoder_to_use_them():
    """A mask the model has no use for would otherwise be ignored in silence."""
    model = explorer.from_torch(nn.TransformerEncoderLayer(16, 2, 32))
    causal = torch.ones(3, 3, dtype=torch.bool).tril()
    for name in ("target_mask", "memory_mask"):
        with pytest.raises(ConfigError, match="pass this model's mask as mask"):
            explorer.run(model, torch.randn(3, 16), **{name: causal})
    with pytest.raises(ConfigError, match="Only an encoder-decoder takes target_mask"):
        explorer.run(ModelConfig(), "a b c", target_mask=causal)


def test_from_torch_refuses_what_it_cannot_copy():
    with pytest.raises(ConfigError, match="from_torch takes"):
        explorer.from_torch(nn.Linear(4, 4))
    with pytest.raises(ConfigError, match="relu and gelu"):
        explorer.from_torch(nn.TransformerEncoderLayer(16, 2, 32, activation=torch.tanh))
    with pytest.raises(ConfigError, match="nn.LayerNorm"):
        explorer.from_torch(
            nn.TransformerEncoder(
                nn.TransformerEncoderLayer(16, 2, 32), 2, norm=nn.RMSNorm(16), enable_nested_tensor=False
            )
        )


@pytest.mark.parametrize(
    "changed_norm",
    [nn.LayerNorm(16, eps=0.1), nn.LayerNorm(16, elementwise_affine=False), nn.LayerNorm(16, bias=False)],
    ids=["other eps", "no weight", "no bias"],
)
def test_from_torch_refuses_a_layer_whose_norms_were_changed(changed_norm):
    """The engine builds a block's norms as torch's constructor does; a hand-changed norm would give other numbers."""
    layer = nn.TransformerEncoderLayer(16, 2, 32)
    layer.norm2 = changed_norm
    with pytest.raises(ConfigError, match="norm2 differs"):
        explorer.from_torch(layer)


def test_notebook_mistakes_with_an_imported_model_are_sentences_not_wrong_numbers():
    """Found by an API review: each of these ran, or failed deep in torch, instead of saying what to pass."""
    layer = nn.TransformerEncoderLayer(16, 2, 32).eval()
    model = explorer.from_torch(layer)
    x = torch.randn(4, 16)
    with pytest.raises(ConfigError, match=r"explorer.from_torch\(module\) first"):
        explorer.run(layer, x)
    with pytest.raises(ConfigError, match="no token embeddings of its own"):
        explorer.run(model, "a b c")  # hashed embeddings would have nothing to do with the user's model
    for rows in (x.tolist(), list(x)):  # their printed form must never become tokens
        with pytest.raises(ConfigError, match="no token embeddings of its own"):
            explorer.run(model, rows)
        with pytest.raises(ConfigError, match=r"a list of token strings, or a float torch.Tensor"):
            explorer.run(ModelConfig(d_model=16, n_heads=2), rows)
    with pytest.raises(ConfigError, match=r"runs on the CPU: pass the input as x.cpu\(\)"):
        explorer.run(model, torch.empty(4, 16, device="meta"))
    with pytest.raises(ConfigError, match=r"runs on the CPU: pass mask as mask.cpu\(\) \(it is on meta\)"):
        explorer.run(model, x, mask=torch.ones(4, 4, dtype=torch.bool, device="meta"))  # had raised torch's error
    np.testing.assert_array_equal(explorer.run(model, x.numpy()).output, explorer.run(model, x).output)


def test_a_torch_style_mask_draws_a_warning_that_names_the_fix():
    """torch's attn_mask is True = blocked, the explorer's True = may attend: a causal torch mask passed as it is
    hides every token from itself, which a real mask almost never does."""
    model = explorer.from_torch(nn.TransformerEncoderLayer(16, 2, 32))
    x = torch.randn(4, 16)
    torch_causal = torch.triu(torch.ones(4, 4, dtype=torch.bool), 1)  # True = blocked
    with pytest.warns(UserWarning, match=r"pass ~mask instead"):
        explorer.run(model, x, mask=torch_causal)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        explorer.run(model, x, mask=~torch_causal)  # the explorer's convention: no warning


def test_a_float_torch_mask_is_told_how_to_become_the_explorers():
    """generate_square_subsequent_mask is 0 / -inf: the advice "pass ~mask" was itself a TypeError on a float."""
    model = explorer.from_torch(nn.TransformerEncoderLayer(16, 2, 32))
    x = torch.randn(4, 16)
    floating = nn.Transformer.generate_square_subsequent_mask(4)
    with pytest.raises(ConfigError, match=r"pass mask == 0\.") as raised:
        explorer.run(model, x, mask=floating)
    assert "~mask" not in str(raised.value)
    causal = explorer.run(model, x, mask=floating == 0)  # the advice, followed
    assert np.triu(causal.attention[0, 0], 1).max() == 0.0
    ones = torch.tril(torch.ones(4, 4))  # 1 = seen: "mask == 0" would have turned it inside out
    with pytest.raises(ConfigError, match=r"pass mask.bool\(\)"):
        explorer.run(model, x, mask=ones)
    np.testing.assert_array_equal(explorer.run(model, x, mask=ones.bool()).attention, causal.attention)


def test_each_kind_of_wrong_mask_is_told_what_to_pass_and_the_advice_works():
    """Found by a notebook review: a 0 / -1e9 padding mask was told "pass mask.bool()", which inverts it (the blocked
    keys became the only ones seen), and a key padding mask, a batched mask or a numpy mask were told "pass ~mask"."""
    model = explorer.from_torch(nn.TransformerEncoderLayer(16, 2, 32, batch_first=True))
    x = torch.randn(6, 16)
    padded = torch.tensor([True, True, True, True, False, False])  # the last two keys are padding
    allowed = padded.reshape(1, 6).expand(6, 6)
    expected = explorer.run(model, x, mask=allowed).attention

    def advice(mask) -> str:
        with pytest.raises(ConfigError) as raised:
            explorer.run(model, x, mask=mask)
        return str(raised.value)

    large_negative = torch.where(allowed, 0.0, -1e9)
    assert "pass mask == 0." in advice(large_negative) and "bool()" not in advice(large_negative)
    np.testing.assert_array_equal(explorer.run(model, x, mask=large_negative == 0).attention, expected)
    kpm = ~padded[None]  # torch's key_padding_mask, [1, S], True = padding
    assert "pass ~kpm.reshape(1, 6).expand(6, 6)." in advice(kpm)
    np.testing.assert_array_equal(explorer.run(model, x, mask=~kpm.reshape(1, 6).expand(6, 6)).attention, expected)
    assert "pass (kpm == 0).reshape(1, 6)" in advice(torch.where(kpm[0], float("-inf"), 0.0))
    assert "mask[0]" in advice(allowed[None])
    assert "pass mask.bool()" in advice(allowed.long())
    assert "an additive bias that weights keys" in advice(torch.randn(6, 6))
    assert "not a list" in advice(allowed.tolist())
    np.testing.assert_array_equal(explorer.run(model, x, mask=allowed.numpy()).attention, expected)  # taken as is


def test_a_transposed_cross_attention_mask_is_named():
    model = explorer.from_torch(nn.Transformer(16, 2, 1, 1, 32, batch_first=True))
    source, target = torch.randn(5, 16), torch.randn(3, 16)
    with pytest.raises(ConfigError, match=r"got torch.bool \[5, 3\]\. It looks transposed: .* \(mask.T\)"):
        explorer.run(model, source, target, memory_mask=torch.ones(5, 3, dtype=torch.bool))


def test_from_torch_names_the_stack_inside_a_wrapper_and_refuses_a_custom_one():
    """Found by a notebook review: a custom_encoder raised AttributeError: 'MyEncoder' object has no attribute
    'layers'; a model wrapping an encoder was told only "got Wrapper"."""

    class Wrapper(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(10, 16)
            self.body = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, batch_first=True), 2)

    class MyEncoder(nn.Module):
        def forward(self, x: torch.Tensor, **_: object) -> torch.Tensor:
            return x

    with pytest.raises(
        ConfigError, match=r"Its `body` is an nn.TransformerEncoder: pass that, from_torch\(model.body\)"
    ):
        explorer.from_torch(Wrapper())
    with pytest.raises(ConfigError, match="encoder is a MyEncoder, not an nn.TransformerEncoder"):
        explorer.from_torch(nn.Transformer(16, 2, 1, 1, 32, custom_encoder=MyEncoder()))


def test_torch_relu_is_relu_and_a_batch_is_told_to_pass_one_sequence():
    layer = nn.TransformerEncoderLayer(16, 2, 32, activation=torch.relu, batch_first=True).eval()
    x = torch.randn(1, 4, 16)
    model = explorer.from_torch(layer)  # had been refused as "not relu or gelu"
    with torch.no_grad():
        np.testing.assert_allclose(explorer.run(model, x[0]).output, layer(x)[0].numpy(), atol=1e-5)
    with pytest.raises(ConfigError, match=r"One sequence at a time: pass x\[i\]"):
        explorer.run(model, x)
