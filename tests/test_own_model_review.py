"""An engineer's own torch module through from_torch, run and the notebook analyses: found by a review that rebuilt
every trace name, norm_attention and head removal from the module's weights in float64 (tests/test_torch_equivalence
holds the agreement itself)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import explorer
from explorer.config import ConfigError


def _encoder_layer(**settings: object) -> nn.TransformerEncoderLayer:
    torch.manual_seed(0)
    return nn.TransformerEncoderLayer(16, 2, 24, batch_first=True, **settings).eval()


class _Doubled(nn.TransformerEncoderLayer):
    def forward(self, src: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        return 2 * super().forward(src, *args, **kwargs)


class _HalfAttention(nn.TransformerEncoderLayer):
    def _sa_block(
        self,
        x: torch.Tensor,
        attn_mask: torch.Tensor | None,
        key_padding_mask: torch.Tensor | None,
        is_causal: bool = False,
    ) -> torch.Tensor:
        return 0.5 * super()._sa_block(x, attn_mask, key_padding_mask, is_causal)


class _Scaled(nn.TransformerEncoder):
    def forward(self, src: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        return 3 * super().forward(src, *args, **kwargs)


@pytest.mark.parametrize("layer_class", [_Doubled, _HalfAttention], ids=["forward", "_sa_block"])
def test_a_layer_subclass_with_its_own_computation_is_refused_not_given_torchs_numbers(layer_class):
    """A subclass overriding forward (x2) had been imported as the stock layer: its output was off by 2.1 on a scale
    of 4.2, with no word."""
    torch.manual_seed(0)
    layer = layer_class(16, 2, 24, batch_first=True).eval()
    with pytest.raises(ConfigError, match=r"replaces nn.TransformerEncoderLayer's .*not what this module computes"):
        explorer.from_torch(layer)


def test_a_stack_or_an_instance_with_its_own_forward_is_refused():
    stack = _Scaled(_encoder_layer(), 2, enable_nested_tensor=False)
    with pytest.raises(ConfigError, match=r"replaces nn.TransformerEncoder's forward\(\)"):
        explorer.from_torch(stack)
    patched = _encoder_layer()
    patched.forward = lambda src, *args, **kwargs: src
    with pytest.raises(ConfigError, match=r"replaces nn.TransformerEncoderLayer's forward\(\)"):
        explorer.from_torch(patched)


def test_a_subclass_that_only_builds_differently_still_imports_and_matches_torch():
    class Named(nn.TransformerEncoderLayer):
        pass

    torch.manual_seed(0)
    layer = Named(16, 2, 24, batch_first=True).eval()
    x = torch.randn(5, 16)
    with torch.no_grad():
        expected = layer(x[None])[0].numpy()
    np.testing.assert_allclose(explorer.run(explorer.from_torch(layer), x).output, expected, atol=1e-5)


def test_a_cross_attention_with_another_number_of_heads_is_refused():
    """The decoder's cross-attention swapped for one of 4 heads (its weights the same shape) had run with the
    self-attention's 2: the output was off by 0.13 on a scale of 2.2, with no word."""
    torch.manual_seed(0)
    model = nn.Transformer(16, 2, 1, 1, 24).eval()
    model.decoder.layers[0].multihead_attn = nn.MultiheadAttention(16, 4)
    with pytest.raises(ConfigError, match="self-attention has 2 heads and its cross-attention 4"):
        explorer.from_torch(model)


def test_tensors_the_stock_module_lacks_or_has_are_named_not_a_load_state_dict_traceback():
    """These raised torch's RuntimeError "Error(s) in loading state_dict for Transformer", naming keys the user's
    module does not have ("encoder.layers.0.self_attn.in_proj_bias")."""

    class Tempered(nn.TransformerEncoderLayer):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)
            self.register_buffer("temperature", torch.ones(1))

    with pytest.raises(ConfigError, match=r"This Tempered has temperature, unlike the stock torch module"):
        explorer.from_torch(Tempered(16, 2, 24))
    layer = _encoder_layer()
    layer.self_attn = nn.MultiheadAttention(16, 2, bias=False, batch_first=True)
    with pytest.raises(ConfigError, match=r"lacks self_attn.in_proj_bias, self_attn.out_proj.bias, unlike") as raised:
        explorer.from_torch(layer)
    assert "encoder.layers" not in str(raised.value)


def test_a_module_on_the_meta_device_is_told_to_load_its_weights():
    with pytest.raises(ConfigError, match="on the meta device, which holds their shapes but no values"):
        explorer.from_torch(nn.TransformerEncoderLayer(16, 2, 24, device="meta"))


def test_gradient_norms_of_an_imported_model_say_once_why_not():
    """A tensor was told "need typed tokens", and typed tokens were told "pass a float tensor": each refusal sent
    the user to the other."""
    model = explorer.from_torch(_encoder_layer())
    for source in (torch.randn(4, 16), "a b c d"):
        with pytest.raises(ConfigError, match="a model imported with from_torch has none") as raised:
            explorer.gradient_figure(model, source)
        assert "float tensor" not in str(raised.value)


def test_an_imported_models_padding_is_left_out_of_the_sentence_embedding_as_its_real_tokens_alone_give():
    """Its padding comes as a mask, not as [PAD] tokens, and the embedding had pooled the padded positions too: with 2
    of 6 positions padded, L1H2 read 0.0260 where the 4 real positions alone give 0.0267 (cells up to 8 % apart)."""
    torch.manual_seed(3)
    stack = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(32, 4, 37, batch_first=True), 2, enable_nested_tensor=False
    )
    for parameter in stack.parameters():
        nn.init.normal_(parameter, 0.0, 0.4)
    model = explorer.from_torch(stack.eval())
    x = torch.randn(6, 32)
    padding = torch.tensor([False, False, False, False, True, True])  # torch's key_padding_mask: True = padding
    allowed = ~padding.reshape(1, 6).expand(6, 6)
    padded = explorer.head_ablation_effects(model, x, mask=allowed)  # a mean removal averages padding in, as documented
    np.testing.assert_allclose(padded, explorer.head_ablation_effects(model, x[:4]), rtol=1e-4, atol=1e-7)
    trace = explorer.run(model, x, mask=allowed)
    np.testing.assert_allclose(
        explorer.analysis.ablation_effects.sentence_embedding(trace), trace.output[:4].astype(np.float64).mean(axis=0)
    )
    with pytest.raises(ConfigError, match="hides every position from every query"):
        explorer.head_ablation_effects(model, x, mask=torch.zeros(6, 6, dtype=torch.bool))


def test_a_list_of_stock_layers_is_told_a_line_of_python_that_imports_it_whole():
    """A model keeping its layers in an nn.ModuleList had been told to pass from_torch(model.layers.0): not Python, and
    one layer of three."""

    class Mine(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(10, 16)
            self.layers = nn.ModuleList(nn.TransformerEncoderLayer(16, 2, 24, batch_first=True) for _ in range(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer in self.layers:
                x = layer(x)
            return x

    torch.manual_seed(0)
    model = Mine().eval()
    with pytest.raises(ConfigError, match=r"Its `layers` holds 3 nn.TransformerEncoderLayer") as raised:
        explorer.from_torch(model)
    advice = str(raised.value)
    line = advice[advice.index("stack = ") : advice.index("; pass that")].replace("; ", "\n")
    names = {"nn": nn, "model": model}
    exec(line, names)  # the advice, followed
    x = torch.randn(5, 16)
    with torch.no_grad():
        expected = model(x[None])[0].numpy()
    np.testing.assert_allclose(explorer.run(explorer.from_torch(names["stack"]), x).output, expected, atol=1e-5)


def test_a_compiled_module_is_told_to_pass_the_module_it_compiled():
    layer = _encoder_layer()
    with pytest.raises(ConfigError, match=r"torch.compile wrapped the module: .*from_torch\(compiled._orig_mod\)"):
        explorer.from_torch(torch.compile(layer))
