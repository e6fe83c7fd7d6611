"""transformers' LlamaForCausalLM holding the very tensors of the explorer's SmolLM2 (test helper): the reference the
logit lens and the logit attribution are computed with directly. Built once per process, for the test's own use (the
shared checkpoint is read, never changed)."""

from __future__ import annotations

import functools

import torch

import explorer


@functools.cache
def llama_reference(model: explorer.Transformer):
    """A LlamaForCausalLM (eager attention, eval mode) with `model`'s weights under transformers' names: q, k and v
    split out of in_proj_weight, norm1/norm2 as input_layernorm/post_attention_layernorm, the read-out tied to the
    token embeddings as SmolLM2's is."""
    import transformers

    cfg = model.config
    config = transformers.LlamaConfig(
        hidden_size=cfg.d_model,
        intermediate_size=cfg.d_ff,
        num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads,
        num_key_value_heads=cfg.n_kv_heads,
        vocab_size=cfg.vocab_size,
        rms_norm_eps=cfg.norm_eps,
        rope_theta=cfg.rope_base,
        max_position_embeddings=cfg.max_tokens,
        tie_word_embeddings=cfg.tie_embeddings,
        attn_implementation="eager",
    )
    kv = cfg.n_kv_heads * (cfg.d_model // cfg.n_heads)  # G * K
    state = {"model.embed_tokens.weight": model.embedding.weight, "model.norm.weight": model.decoder.norm.weight}
    for i, block in enumerate(model.decoder.layers):
        q, k, v = block.self_attn.in_proj_weight.split([cfg.d_model, kv, kv])
        ours = {
            "self_attn.q_proj": q,
            "self_attn.k_proj": k,
            "self_attn.v_proj": v,
            "self_attn.o_proj": block.self_attn.out_proj.weight,
            "mlp.gate_proj": block.gate.weight,
            "mlp.up_proj": block.linear1.weight,
            "mlp.down_proj": block.linear2.weight,
            "input_layernorm": block.norm1.weight,
            "post_attention_layernorm": block.norm2.weight,
        }
        state |= {f"model.layers.{i}.{name}.weight": tensor for name, tensor in ours.items()}
    with torch.device("meta"):
        reference = transformers.LlamaForCausalLM(config)
    # The tensors are shared with `model`, not copied (540 MB): detached, and neither model ever writes them.
    reference.load_state_dict({name: tensor.detach() for name, tensor in state.items()}, strict=False, assign=True)
    reference.tie_weights()
    reference.model.rotary_emb = type(reference.model.rotary_emb)(config)  # its frequencies, off the meta device
    return reference.eval()
