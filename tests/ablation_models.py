"""Models with hand-set weights for the ablation tests (test helpers): a head that copies the previous token, and a
configured model whose attention biases are not zero."""

from __future__ import annotations

import math

import torch

import explorer
from explorer.config import ModelConfig

COPY_TOKENS = (2, 0, 3, 1, 1, 2)  # the input's tokens, from a vocabulary of 4, one position each
VOCAB, POSITIONS = 4, len(COPY_TOKENS)
TOKEN_DIMS = slice(0, VOCAB)  # the stream: token one-hot in dimensions 0-3,
POSITION_DIMS = slice(VOCAB, VOCAB + POSITIONS)  # position one-hot in 4-9,
COPY_DIMS = slice(10, 10 + VOCAB)  # and what the copy head writes, the previous token's one-hot, in 10-13 (of 16)
COPY_HEAD, IDLE_HEAD = (0, 0), (0, 1)  # (layer, head): head 1 has every weight zero and adds nothing
PREVIOUS_SCORE = 20.0  # the scaled score of the previous position (0 elsewhere): weight 1 - 5e-9 there


def copy_head_model() -> tuple[explorer.Transformer, torch.Tensor]:
    """One res-post-norm block, d_model 16, 2 heads of 8: head 0 attends from each position to the previous one
    (query: its position; key: the position after its own) and copies that token's one-hot (value) into COPY_DIMS
    (output projection); head 1 and the feed-forward are all zeros. Res-post-norm, so attention reads the stream as it
    is. Returns the model and its input x [T, 16] (token + position one-hots, given as a tensor: no position added)."""
    cfg = ModelConfig(d_model=16, n_heads=2, n_layers=1, d_ff=4, norm="res-post", positional="none")
    model = explorer.build_model(cfg)
    D, K = cfg.d_model, cfg.d_head
    attention = model.encoder.layers[0].self_attn
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" not in name:  # the norms stay at weight 1, bias 0
                parameter.zero_()
        w = attention.in_proj_weight  # [3D, D]: W_q, W_k, W_v; head 0 is rows 0-7 of each
        for p in range(POSITIONS):
            w[p, VOCAB + p] = PREVIOUS_SCORE * math.sqrt(K)  # query of position p: head dimension p
            if p + 1 < POSITIONS:
                w[D + p + 1, VOCAB + p] = 1.0  # key of position p: head dimension p + 1, met by the query of p + 1
        for t in range(VOCAB):
            w[2 * D + t, t] = 1.0  # value: the token's one-hot in head dimensions 0-3
            attention.out_proj.weight[COPY_DIMS.start + t, t] = 1.0  # output: head dimensions 0-3 -> COPY_DIMS
    x = torch.zeros(POSITIONS, D)  # [T, D]
    for position, token in enumerate(COPY_TOKENS):
        x[position, token] = 1.0
        x[position, VOCAB + position] = 1.0
    return model, x


def biased_model(**fields) -> explorer.Transformer:
    """A configured model whose attention input and output biases are drawn from N(0, 1) (torch starts both at zero,
    which would hide a bias the ablation forgot)."""
    model = explorer.build_model(ModelConfig(**fields))
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith(("in_proj_bias", "out_proj.bias")):
                parameter.copy_(torch.randn(parameter.shape, generator=generator))
    return model
