"""from_torch: look inside a stock torch.nn.Transformer* module with the explorer's engine."""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from explorer.config import ConfigError
from explorer.model import StackSpec, Transformer, float32_default

SUPPORTED = "nn.TransformerEncoderLayer, nn.TransformerEncoder or nn.Transformer"
LayerType = type[nn.TransformerEncoderLayer] | type[nn.TransformerDecoderLayer]


@float32_default()
def from_torch(module: nn.Module) -> Transformer:
    """An explorer model holding a copy of the module's weights: same outputs, per-head attention visible.

    Run it with `explorer.run(model, x)` where x is a float tensor [T, d_model] of input embeddings (and
    `target` [T_target, d_model] for nn.Transformer); batch_first does not matter since one sequence is run.
    With a key padding mask, torch's nested-tensor path (eval, no grad, batch_first nn.TransformerEncoder) returns
    0 at padded positions; there the explorer gives what the layers compute, as torch does without that path.
    """
    if isinstance(module, nn.TransformerEncoderLayer):
        encoder = _stack_spec([module], None, cross=False)
        model, prefix = Transformer(encoder, None, max_positions=_MAX_POSITIONS), "encoder.layers.0."
    elif isinstance(module, nn.TransformerEncoder):
        _check_stock_code(module, nn.TransformerEncoder)
        encoder = _stack_spec(list(module.layers), module.norm, cross=False)
        model, prefix = Transformer(encoder, None, max_positions=_MAX_POSITIONS), "encoder."
        _copy_final_norm(model.encoder, module.norm)
    elif isinstance(module, nn.Transformer):
        _check_stock_code(module, nn.Transformer)
        _check_stock_stacks(module)
        encoder = _stack_spec(list(module.encoder.layers), module.encoder.norm, cross=False)
        decoder = _stack_spec(list(module.decoder.layers), module.decoder.norm, cross=True)
        model, prefix = Transformer(encoder, decoder, max_positions=_MAX_POSITIONS), ""
        _copy_final_norm(model.encoder, module.encoder.norm)
        _copy_final_norm(model.decoder, module.decoder.norm)
    else:
        raise ConfigError(f"from_torch takes an {SUPPORTED}; got {type(module).__name__}.{_inner_hint(module)}")
    _load(model, module, prefix)
    return model.eval()


# The methods whose computation the engine redoes, by stock class: a subclass (or an instance) that replaces one of
# them computes something else, and a copy of its weights alone would give torch's numbers, not the module's.
STOCK_CODE: dict[type[nn.Module], tuple[str, ...]] = {
    nn.Transformer: ("forward",),
    nn.TransformerEncoder: ("forward",),
    nn.TransformerDecoder: ("forward",),
    nn.TransformerEncoderLayer: ("forward", "_sa_block", "_ff_block"),
    nn.TransformerDecoderLayer: ("forward", "_sa_block", "_mha_block", "_ff_block"),
    nn.MultiheadAttention: ("forward",),
    nn.LayerNorm: ("forward",),
    nn.Linear: ("forward",),
}


def _check_stock_code(module: nn.Module, stock: type[nn.Module]) -> None:
    """ConfigError when `module` runs code of its own where the stock class's is (see STOCK_CODE)."""
    changed = [
        name
        for name in STOCK_CODE[stock]
        if name in vars(module) or getattr(type(module), name) is not getattr(stock, name)
    ]
    if changed:
        methods = ", ".join(f"{name}()" for name in changed)
        raise ConfigError(
            f"This {type(module).__name__} replaces nn.{stock.__name__}'s {methods}: from_torch copies the weights and "
            f"computes what torch's own nn.{stock.__name__} does, which is not what this module computes."
        )


def _load(model: Transformer, module: nn.Module, prefix: str) -> None:
    """The module's tensors into the model (whose names are the module's after `prefix`), as float32; ConfigError for
    a module on the meta device (shapes, no values) or one with tensors the stock module lacks or the other way round
    (a subclass's extra parameter, an attention without the biases of its linear layers), named as the module names
    them."""
    state = module.state_dict()
    if any(tensor.is_meta for tensor in state.values()):
        raise ConfigError(
            "This module's weights are on the meta device, which holds their shapes but no values: load its weights "
            "(module.to_empty(device='cpu'), then module.load_state_dict(...)) before from_torch."
        )
    floats = {prefix + key: value.detach().float().clone() for key, value in state.items()}
    missing, unexpected = model.load_state_dict(floats, strict=False)
    if missing or unexpected:
        named = [
            (what, [key.removeprefix(prefix) for key in keys])
            for what, keys in (("has", unexpected), ("lacks", missing))
        ]
        parts = [f"{what} {', '.join(keys[:4])}{'…' if len(keys) > 4 else ''}" for what, keys in named if keys]
        raise ConfigError(
            f"This {type(module).__name__} {' and '.join(parts)}, unlike the stock torch module of its settings: "
            "from_torch copies only the tensors torch's own modules have."
        )


def _inner_hint(module: nn.Module) -> str:
    """For a model wrapping a stock stack (embeddings, a head and an nn.TransformerEncoder), or a list of stock layers,
    or torch.compile's wrapper: what to pass instead, written as Python (model.layers[0], not model.layers.0)."""
    compiled = getattr(module, "_orig_mod", None)
    if isinstance(compiled, nn.Module):  # torch.compile's OptimizedModule: the same weights, the module inside
        return " torch.compile wrapped the module: pass the module you compiled, from_torch(compiled._orig_mod)."
    kinds = (nn.Transformer, nn.TransformerEncoder, nn.TransformerEncoderLayer)
    inner = next(((name, m) for name, m in module.named_modules() if name and isinstance(m, kinds)), None)
    if inner is None:
        return ""
    name, found = inner
    holder_name = name.rpartition(".")[0]
    holder = module.get_submodule(holder_name) if holder_name else module
    if isinstance(holder, nn.ModuleList) and all(isinstance(m, nn.TransformerEncoderLayer) for m in holder):
        layers = f"model{_python_path(holder_name)}"
        return (
            f" Its `{holder_name}` holds {len(holder)} nn.TransformerEncoderLayer: make them one stack, "
            f"stack = nn.TransformerEncoder({layers}[0], {len(holder)}, enable_nested_tensor=False); "
            f"stack.layers = {layers}; pass that, from_torch(stack), and give explorer.run your model's embeddings of "
            "the tokens."
        )
    return (
        f" Its `{name}` is an nn.{type(found).__name__}: pass that, from_torch(model{_python_path(name)}), and give "
        "explorer.run your model's embeddings of the tokens."
    )


def _python_path(name: str) -> str:
    """A submodule's name as Python reaches it from its model: "blocks.0.attn" -> ".blocks[0].attn" ("" -> "")."""
    return "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in name.split(".") if part)


def _check_stock_stacks(module: nn.Transformer) -> None:
    """nn.Transformer(custom_encoder=..., custom_decoder=...) holds stacks from_torch cannot read layer by layer."""
    for name, stock in (("encoder", nn.TransformerEncoder), ("decoder", nn.TransformerDecoder)):
        stack = getattr(module, name)
        if not isinstance(stack, stock):
            raise ConfigError(
                f"This nn.Transformer's {name} is a {type(stack).__name__}, not an nn.{stock.__name__}: from_torch "
                "reads only torch's own stacks."
            )
        _check_stock_code(stack, stock)


_MAX_POSITIONS = 4096  # imported models have no position table; this only bounds the input length


def _copy_final_norm(stack: nn.Module, final_norm: nn.Module | None) -> None:
    """The stack's final LayerNorm as the torch module has it: its own eps, and weight and bias only if it has them
    (it need not match the layers' norms). The values come with the state dict."""
    if final_norm is not None:  # a new module, so on the CPU in float32 like the rest of the model
        has_weight, has_bias = final_norm.weight is not None, final_norm.bias is not None
        stack.norm = nn.LayerNorm(final_norm.normalized_shape, final_norm.eps, has_weight, bias=has_bias)


def _stack_spec(layers: list[nn.Module], final_norm: nn.Module | None, cross: bool) -> StackSpec:
    expected: LayerType = nn.TransformerDecoderLayer if cross else nn.TransformerEncoderLayer
    if not layers:
        raise ConfigError("This stack has no layers; from_torch needs at least one to show attention.")
    specs = {_layer_spec(layer, expected, cross, final_norm) for layer in layers}
    if len(specs) != 1:
        raise ConfigError("The layers of this stack differ in shape or settings; from_torch needs identical layers.")
    return dataclasses.replace(specs.pop(), n_layers=len(layers))


def _layer_spec(layer: nn.Module, expected: LayerType, cross: bool, final_norm: nn.Module | None) -> StackSpec:
    if not isinstance(layer, expected):
        raise ConfigError(f"Expected {expected.__name__} layers, found {type(layer).__name__}.")
    _check_stock_code(layer, expected)
    attentions = [layer.self_attn] + ([layer.multihead_attn] if cross else [])
    for attention in attentions:
        if not isinstance(attention, nn.MultiheadAttention):
            raise ConfigError(
                f"The layer's attention must be an nn.MultiheadAttention, not {type(attention).__name__}."
            )
        _check_stock_code(attention, nn.MultiheadAttention)
        if not attention._qkv_same_embed_dim or attention.bias_k is not None or attention.add_zero_attn:
            raise ConfigError("from_torch needs kdim = vdim = d_model, no add_bias_kv and no add_zero_attn.")
    if len({attention.num_heads for attention in attentions}) > 1:
        raise ConfigError(
            f"The layer's self-attention has {layer.self_attn.num_heads} heads and its cross-attention "
            f"{layer.multihead_attn.num_heads}: from_torch needs one number of heads in a layer."
        )
    for linear in (layer.linear1, layer.linear2):
        if not isinstance(linear, nn.Linear):
            raise ConfigError(f"The layer's linear1 and linear2 must be nn.Linear, not {type(linear).__name__}.")
        _check_stock_code(linear, nn.Linear)
    if final_norm is not None and not isinstance(final_norm, nn.LayerNorm):
        raise ConfigError(f"The stack's final norm must be an nn.LayerNorm, not {type(final_norm).__name__}.")
    if final_norm is not None:
        _check_stock_code(final_norm, nn.LayerNorm)
    _check_layer_norms(layer, cross)
    return StackSpec(
        d_model=layer.self_attn.embed_dim,
        n_heads=layer.self_attn.num_heads,
        n_layers=1,
        d_ff=layer.linear1.out_features,
        placement="pre" if layer.norm_first else "post",
        final_norm=final_norm is not None,
        activation=_activation_name(layer.activation),
        eps=layer.norm1.eps,
        bias=layer.linear1.bias is not None,
        cross_attention=cross,
        dropout=float(layer.dropout.p),
    )


def _check_layer_norms(layer: nn.Module, cross: bool) -> None:
    """The engine gives a block's LayerNorms one eps, a weight, and a bias when its linear layers have one, as
    torch's constructor does: refuse a layer whose norms were changed since, rather than give other numbers."""
    has_bias = layer.linear1.bias is not None
    for name in ("norm1", "norm2") + (("norm3",) if cross else ()):
        norm = getattr(layer, name)
        if not isinstance(norm, nn.LayerNorm):
            raise ConfigError(f"The layer's {name} must be an nn.LayerNorm, not {type(norm).__name__}.")
        _check_stock_code(norm, nn.LayerNorm)
        if norm.eps != layer.norm1.eps or norm.weight is None or (norm.bias is not None) != has_bias:
            raise ConfigError(
                f"The layer's {name} differs from what nn.{type(layer).__name__} builds (eps {norm.eps}, "
                f"weight {norm.weight is not None}, bias {norm.bias is not None}); from_torch needs the norms of a "
                "layer to share one eps, have a weight, and have a bias exactly when the linear layers do."
            )


def _activation_name(activation: object) -> str:
    if activation is F.relu or activation is torch.relu or isinstance(activation, nn.ReLU):
        return "relu"
    if activation is F.gelu or (isinstance(activation, nn.GELU) and activation.approximate == "none"):
        return "gelu"
    raise ConfigError(f"from_torch supports relu and gelu feed-forward activations, not {activation!r}.")
