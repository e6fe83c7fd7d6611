"""From a config to a model: the stacks it asks for, weights drawn from its seed, its modules without memory (to
count parameters before building), and the weights two models share (a norm flip).

A fresh model is identical for the same config in any process: every weight comes from a generator seeded by
cfg.seed, never from torch's global random state, and at float32 whatever a notebook set as torch's default.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from explorer.attention import MultiHeadAttention
from explorer.config import CheckpointConfig, ConfigError, ModelConfig
from explorer.model import StackSpec, Transformer, float32_default


def init_weights(model: Transformer, seed: int) -> Transformer:
    """Fill every parameter from a generator seeded by `seed`, as torch's own modules initialise them,
    without touching the global random state."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, MultiHeadAttention):
                nn.init.xavier_uniform_(module.in_proj_weight, generator=generator)
                if module.in_proj_bias is not None:
                    nn.init.zeros_(module.in_proj_bias)
            elif isinstance(module, nn.Linear):
                nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5), generator=generator)
                if module.bias is not None:
                    bound = 1 / math.sqrt(module.in_features)
                    nn.init.uniform_(module.bias, -bound, bound, generator=generator)
            elif isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
                nn.init.ones_(module.weight)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)
        for module in model.modules():  # torch zeroes the attention output bias after the Linear init
            if isinstance(module, MultiHeadAttention) and module.out_proj.bias is not None:
                nn.init.zeros_(module.out_proj.bias)
        for embedding in (model.embedding, model.token_type):  # N(0, 1), as the hashed embeddings of an untrained model
            if embedding is not None:
                embedding.weight.copy_(torch.randn(embedding.weight.shape, generator=generator))
        table = model.positional.table
        if isinstance(table, nn.Parameter):  # N(0, 1/2): the sinusoids' scale, next to N(0, 1) token embeddings
            table.copy_(torch.randn(table.shape, generator=generator) / math.sqrt(2.0))
    return model


def copy_shared_weights(source: nn.Module, target: nn.Module, share: bool = False) -> list[str]:
    """Copy every parameter and buffer whose name and shape the two models share; returns the names copied. What the
    source has (or carried) and the target has no place for, the target carries, so a flip back loses nothing.
    `share`: the target takes the source's very tensors instead of copies (no memory for them), for two models that
    are only run, never trained: a write to one would change the other."""
    wanted = target.state_dict()
    offered = getattr(source, "carried", {}) | source.state_dict()
    kept = (lambda v: v) if share else (lambda v: v.clone())
    shared = {k: kept(v) for k, v in offered.items() if k in wanted and wanted[k].shape == v.shape}
    target.load_state_dict(shared, strict=False, assign=share)
    if isinstance(target, Transformer):
        target.carried = {k: kept(v) for k, v in offered.items() if k not in wanted}
    return sorted(shared)


def _stack_shape(cfg: ModelConfig) -> dict:
    """What every stack a config builds shares: its sizes, where its norms sit, and a final norm for all but post."""
    return dict(
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        n_layers=cfg.n_layers,
        d_ff=cfg.d_ff,
        placement=cfg.norm,
        final_norm=cfg.norm != "post",
    )


def checkpoint_spec(cfg: CheckpointConfig) -> StackSpec:
    """The one stack of a real checkpoint: BERT's post-norm encoder, Llama's pre-norm decoder (RMSNorm, rotary
    positions, grouped-query attention, SwiGLU, no biases), or OLMo 2's res-post-norm one (Llama's, plus an RMSNorm
    on the query and key projections). `cfg.norm` may set any placement on the same weights."""
    common = _stack_shape(cfg)
    if cfg.family == "bert":
        return StackSpec(**common, activation="gelu", eps=cfg.norm_eps)
    return StackSpec(
        **common,
        activation="silu",
        eps=cfg.norm_eps,
        bias=False,
        rope=True,
        rope_base=cfg.rope_base,
        rope_layout="half",
        n_kv_heads=cfg.n_kv_heads,
        norm_kind="rms",
        gated=True,
        qk_norm=cfg.family == "olmo2",
    )


def stack_specs(cfg: ModelConfig) -> tuple[StackSpec | None, StackSpec | None]:
    """The encoder and decoder specs a config asks for."""
    if isinstance(cfg, CheckpointConfig):
        spec = checkpoint_spec(cfg)
        return (spec, None) if cfg.arch == "encoder" else (None, spec)

    def spec(cross: bool) -> StackSpec:
        return StackSpec(
            **_stack_shape(cfg),
            activation=cfg.activation,
            cross_attention=cross,
            dropout=cfg.dropout,
            rope=cfg.positional == "rope",
        )

    if cfg.arch == "encoder":
        return spec(False), None
    if cfg.arch == "decoder":
        return None, spec(False)
    return spec(False), spec(True)


@float32_default()
def model_skeleton(cfg: ModelConfig, vocabulary: tuple[str, ...] | None = None) -> Transformer:
    """The model's modules on torch's meta device: every parameter's name, shape and dtype, with no memory behind
    them, so a model's size can be checked before it is built."""
    if not isinstance(cfg, ModelConfig):
        raise ConfigError(f"A model is built from a ModelConfig, not a {type(cfg).__name__}.")
    encoder, decoder = stack_specs(cfg)
    with torch.device("meta"):
        return Transformer(encoder, decoder, cfg.positional, cfg.max_tokens, config=cfg, vocabulary=vocabulary)


def parameter_total(cfg: ModelConfig, vocabulary: tuple[str, ...] | None = None) -> int:
    """How many parameters build_model(cfg, vocabulary) would have, counted without building it."""
    return sum(p.numel() for p in model_skeleton(cfg, vocabulary).parameters())


@float32_default()
def empty_model(cfg: ModelConfig, vocabulary: tuple[str, ...] | None = None) -> Transformer:
    """build_model's model before its weights are drawn: every parameter allocated but not filled (torch.empty: no
    page of memory is touched until written), the positional buffers made; in eval mode. For a caller that fills
    every parameter itself (compare.model_for_b, from A's tensors)."""
    model = model_skeleton(cfg, vocabulary).to_empty(device="cpu")
    model.tie_read_out()  # to_empty gives each module a tensor of its own
    model.positional.reset_buffers()
    return model.eval()


@float32_default()
def build_model(cfg: ModelConfig, vocabulary: tuple[str, ...] | None = None) -> Transformer:
    """A fresh model for the config, identical for the same config in any process; in eval mode.
    With a vocabulary it gets a learned embedding and a read-out to logits, ready to train."""
    return init_weights(empty_model(cfg, vocabulary), cfg.seed).eval()


def fill_new_norms(model: Transformer, filled: set[str]) -> bool:
    """Set every norm parameter of `model` whose name is not in `filled` to the identity (weight 1, bias 0), as
    init_weights does; False, leaving the model as it is, when a parameter other than a norm's is not in `filled`."""
    norms = {
        f"{name}.{kind}": parameter
        for name, module in model.named_modules()
        if isinstance(module, (nn.LayerNorm, nn.RMSNorm))
        for kind, parameter in module.named_parameters(recurse=False)
    }
    missing = [name for name, _ in model.named_parameters() if name not in filled]
    if any(name not in norms for name in missing):
        return False
    with torch.no_grad():
        for name in missing:
            (nn.init.ones_ if name.endswith("weight") else nn.init.zeros_)(norms[name])
    return True
