"""What a head adds, not only where it looks: norm-based attention (Kobayashi et al. 2020).

Kobayashi, Kuribayashi, Yokoi and Inui (2020), "Attention is Not Only a Weight: Analyzing Transformers with Vector
Norms", write head h's output at query i as the sum over keys j of alpha_ij * f_h(x_j), where
f_h(x) = (x W_V^h + b_V^h) W_O^h is the value vector of key j projected by the head's slice of the output projection
(the output bias is shared by all heads and left out, as in the paper). A weight only says where the head looks;
||alpha_ij * f_h(x_j)|| = alpha_ij * ||f_h(x_j)|| says how much key j actually adds to query i's stream. A head that
parks its weight on a token whose f_h(x_j) is tiny (BERT's [CLS] and [SEP]) looks at it and adds almost nothing.

x_j is what the attention sub-layer reads: the stream itself in a post-norm or res-post-norm block, the norm's output
in a pre-norm or peri-norm block, and the encoder's output for cross-attention. In res-post and peri the heads' sum
then passes through the norm on the sub-layer's output, which divides each query's whole sum by one number (after
LayerNorm subtracts its mean) and scales unit by unit by its gain: the measure is taken before that norm. With
grouped-query attention a query head uses the value of the key/value head it shares, with its own slice of W_O.
"""

from __future__ import annotations

import numpy as np
import torch

from explorer.ablation import Head
from explorer.attention import MultiHeadAttention
from explorer.config import NORM_IN_FRONT
from explorer.model import Block, Stack, Transformer
from explorer.run_of import check_run_of
from explorer.trace import AttentionMaps, StackTrace, Trace


def value_norms(model: Transformer, trace: Trace, kind: str | None = None) -> np.ndarray:
    """[L, H, Tk] float32: ||f_h(x_j)||, the size of what head h would add from key j at weight 1 (see the module).

    `kind` names the attention, a key of trace.attention_maps(); None is the first stack's self-attention, the one
    trace.attention holds. Only one layer's [Tk, H, D] projection exists at a time."""
    stack, maps, modules, inputs = _attention_inputs(model, trace, kind)
    norms = np.empty((maps.n_layers, maps.n_heads, len(maps.key_tokens)), dtype=np.float32)  # [L, H, Tk]
    with torch.inference_mode():
        for layer, attention in enumerate(modules):
            x = torch.from_numpy(np.ascontiguousarray(inputs(layer)))  # [Tk, D]
            norms[layer] = _head_value_norms(attention, x).numpy()
    return norms


def norm_attention(model: Transformer, trace: Trace, kind: str | None = None) -> np.ndarray:
    """[L, H, Tq, Tk] float32: ||alpha_ij * f_h(x_j)|| = alpha_ij * ||f_h(x_j)|| (Kobayashi et al. 2020), how much key j
    adds to query i through head h, with alpha the effective_weights; 0 where masked and on rows with no allowed key,
    except for a head the run replaced by its mean (removal() "mean"): its output reaches every query from every key.
    `kind` as in value_norms."""
    maps = _maps(trace, kind)
    norms = value_norms(model, trace, kind)  # [L, H, Tk]
    return effective_weights(trace, maps) * norms[:, :, None, :]  # [L, H, Tq, Tk]


def effective_weights(trace: Trace, maps: AttentionMaps) -> np.ndarray:
    """[L, H, Tq, Tk]: the weights by which each head mixes the values into its output. They are the maps' weights,
    except for heads the run removed (explorer.ablation): zero when their output was set to zero, and each key's mean
    weight over the queries when it was set to its mean over the positions (the mean of sum_j alpha_ij f(x_j) over i
    is sum_j mean_i(alpha_ij) f(x_j))."""
    if not removed_heads(trace, maps):
        return maps.weights
    return np.stack([effective_layer_weights(trace, maps, layer) for layer in range(maps.n_layers)])


def effective_layer_weights(trace: Trace, maps: AttentionMaps, layer: int) -> np.ndarray:
    """[H, Tq, Tk]: effective_weights of one layer, copied only when the run removed one of its heads."""
    heads = [h for at, h in removed_heads(trace, maps) if at == layer]
    if not heads:
        return maps.weights[layer]
    weights = maps.weights[layer].copy()  # [H, Tq, Tk]
    for head in heads:
        if trace.ablate_with == "zero":
            weights[head] = 0.0
        else:
            weights[head] = mean_mixing(weights[head])  # [1, Tk] over every query
    return weights


def mean_mixing(weights: np.ndarray) -> np.ndarray:
    """[..., 1, Tk]: what mixes a head's output once it is set to its mean over the positions (weights [..., Tq, Tk]):
    each key's weight averaged over every query, keys a query may not see included."""
    return weights.mean(axis=-2, keepdims=True)


def removal(trace: Trace, maps: AttentionMaps, layer: int, head: int | None) -> str | None:
    """What the run did to head `head` of `layer` of these maps: "zero" or "mean" (trace.ablate_with) when it removed
    the head, None when it kept it (or for the average of heads, `head` None)."""
    return trace.ablate_with if head is not None and (layer, head) in removed_heads(trace, maps) else None


def removed_heads(trace: Trace, maps: AttentionMaps) -> tuple[Head, ...]:
    """The (layer, head) pairs the run removed from these maps: only the first stack's self-attention loses heads."""
    return trace.ablated if maps is trace.first.self_attention else ()


def norm_shares(norms: np.ndarray) -> np.ndarray:
    """[..., Tq, Tk] float32: each query's ||alpha * f(x)|| divided by their sum over the keys, the share of what the
    head adds that comes from each key (comparable with the weights, which also sum to 1); all-zero rows stay 0."""
    norms = np.asarray(norms, dtype=np.float32)
    totals = norms.sum(axis=-1, keepdims=True)  # [..., Tq, 1]
    return np.divide(norms, totals, out=np.zeros_like(norms), where=totals > 0)


def head_values(attention: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    """x [Tk, D] -> [Tk, H, K]: x W_V^g + b_V^g, the value each query head h reads (g: its key/value head), computed in
    x's dtype (float64 weights for a float64 x)."""
    H, G, K = attention.n_heads, attention.n_kv_heads, attention.d_head
    D = attention.out_proj.weight.shape[0]
    w_v = attention.in_proj_weight[D + G * K :].to(x.dtype)  # [GK, D]: the value rows, after the query and key rows
    b_v = None if attention.in_proj_bias is None else attention.in_proj_bias[D + G * K :].to(x.dtype)  # [GK]
    values = torch.nn.functional.linear(x, w_v, b_v).reshape(len(x), G, K)  # [Tk, G, K]
    return values.repeat_interleave(H // G, dim=1)  # [Tk, H, K]: query head h reads key/value head h // (H / G)


def head_slices(attention: MultiHeadAttention, dtype: torch.dtype) -> torch.Tensor:
    """[D, H, K]: each head's slice of the output projection W_O, in `dtype`."""
    D = attention.out_proj.weight.shape[0]
    return attention.out_proj.weight.to(dtype).reshape(D, attention.n_heads, attention.d_head)


def attention_reads(block: Block, stack: StackTrace, layer: int) -> np.ndarray:
    """[T, D]: what block `layer`'s self-attention read in the run: the norm's output in a pre- or peri-norm block, the
    stream entering the block in a post- or res-post-norm one."""
    if block.placement in NORM_IN_FRONT:
        return stack.activations[f"blocks.{layer}.attn.ln_out"]
    return stack.residual[layer]


def _head_value_norms(attention: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    """x [Tk, D] -> [H, Tk]: ||(x W_V^g + b_V^g) W_O^h|| for every query head h (g: its key/value head)."""
    projected = torch.einsum("thk,dhk->htd", head_values(attention, x), head_slices(attention, x.dtype))  # [H, Tk, D]
    return torch.linalg.vector_norm(projected, dim=-1)  # [H, Tk]


def _maps(trace: Trace, kind: str | None) -> AttentionMaps:
    """The attention `kind` names (None: the first stack's self-attention)."""
    return trace.first.self_attention if kind is None else trace.maps(kind)


def _attention_inputs(model: Transformer, trace: Trace, kind: str | None):
    """(stack trace, maps, each layer's attention module, layer -> what that attention reads as keys [Tk, D])."""
    maps = _maps(trace, kind)
    cross = maps.kind == "cross-attention"
    index = len(trace.stacks) - 1 if cross or maps.kind == "decoder self-attention" else 0
    stack_trace: StackTrace = trace.stacks[index]
    check_run_of(model, trace, "norm_attention")
    stack: Stack = model.first_stack if index == 0 else model.decoder  # both there: check_run_of compared stacks
    if cross:
        modules = [block.multihead_attn for block in stack.layers]
        memory = trace.first.output  # [S, D]: every decoder block's cross-attention reads the encoder's output

        def inputs(layer: int) -> np.ndarray:
            return memory

    else:
        modules = [block.self_attn for block in stack.layers]

        def inputs(layer: int) -> np.ndarray:
            return attention_reads(stack.layers[layer], stack_trace, layer)  # [T, D]

    return stack_trace, maps, modules, inputs
