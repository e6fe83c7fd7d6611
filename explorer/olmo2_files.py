"""OLMo 2 folders (config.json with model_type "olmo2", safetensors): what differs from a Llama folder.

OLMo 2's config.json uses Llama's keys, with transformers' Olmo2Config defaults for missing ones. Its layers differ in
their tensors: no input_layernorm; an RMSNorm on each sub-layer's output (post_attention_layernorm,
post_feedforward_layernorm: res-post-norm, x + Norm(f(x))); an RMSNorm over the whole query and key projections
(self_attn.q_norm [D], self_attn.k_norm [GK]).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from explorer.checkpoint_common import Hyperparameters, decoder_shapes
from explorer.folder_files import llama_hparams, refuse_llama_extras

# transformers' Olmo2Config defaults, which a config.json without the key gets (the 7B model's sizes).
OLMO2_DEFAULTS: dict[str, Any] = {
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "intermediate_size": 11008,
    "vocab_size": 50304,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
}


def olmo2_hparams(source: Path, config: dict[str, Any]) -> Hyperparameters:
    """OLMo 2 hyperparameters from a parsed config.json; what the engine does not implement is refused."""
    refuse_llama_extras(source, config, "OLMo 2")
    # The other keys (sizes, rotary base and scaling, tied read-out, head width) are Llama's, read and checked alike.
    llama = llama_hparams(source, OLMO2_DEFAULTS | config)
    return dataclasses.replace(llama, family="olmo2")


def olmo2_shapes(hp: Hyperparameters) -> dict[str, tuple[int, ...]]:
    """Olmo2Model's state-dict names (plus lm_head.weight when untied) -> shapes."""
    d, f, kv = hp.d_model, hp.d_ff, hp.n_kv_heads * hp.head_dim
    layer = {
        "self_attn.q_proj": (d, d),
        "self_attn.k_proj": (kv, d),
        "self_attn.v_proj": (kv, d),
        "self_attn.q_norm": (d,),  # over all heads' queries at once
        "self_attn.k_norm": (kv,),
        "self_attn.o_proj": (d, d),
        "post_attention_layernorm": (d,),  # on the attention's output, before the residual add
        "mlp.gate_proj": (f, d),
        "mlp.up_proj": (f, d),
        "mlp.down_proj": (d, f),
        "post_feedforward_layernorm": (d,),  # on the feed-forward's output, before the residual add
    }
    return decoder_shapes(hp, layer)
