"""Every layer's guess: the logit lens (nostalgebraist 2020, "interpreting GPT: the logit lens").

The residual stream after each block of the stack that gives the output is read out as if it were the last block's:
through that stack's final norm (none in a post-norm stack, whose blocks end with their own) and the model's read-out
to its vocabulary, then a softmax. The last block's row is what the model predicts (explorer.next_token); the rows
above show how early that guess forms. Only one layer's logits, a few positions at a time, exist at once: SmolLM2's
[30 layers, 512 positions, 49,152 pieces] would be 3 GB.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from explorer.config import CheckpointConfig, ConfigError
from explorer.model import Stack, Transformer
from explorer.prediction import piece_name, piece_text
from explorer.trace import Trace

LENS_COLUMNS = ["layer", "position", "rank", "piece", "text", "probability"]
ROWS_AT_ONCE = 64  # positions read out together: [64, V] float64 logits are 25 MB for SmolLM2's 49,152 pieces


def can_read_out(model: Transformer) -> bool:
    """Whether the model reads its stream out to a vocabulary (a language-model head): a Llama checkpoint, a trained
    model; not MiniLM, not a configured model with random weights."""
    return model.head is not None


def lens_refusal(model: Transformer) -> str:
    """The sentence saying why the logit lens (and a logit's attribution) does not apply to this model; "" when it
    does."""
    if can_read_out(model):
        return ""
    if isinstance(model.config, CheckpointConfig):
        return (
            "This checkpoint is a sentence-embedding encoder without a language-model head: nothing in it turns the "
            "stream into a guess at a word, so there is no layer's guess to read and no logit to share out."
        )
    if model.config is None:
        return (
            "A model imported with from_torch has no read-out to a vocabulary here, so there is no layer's guess to "
            "read and no logit to share out."
        )
    return (
        "A configured model has random weights and no read-out to a vocabulary, so there is no layer's guess to read "
        "and no logit to share out: train one on the Train page, and its output layer gives it one."
    )


def output_stack(model: Transformer, trace: Trace) -> Stack:
    """The stack that gives the output (the decoder of an encoder-decoder), checked against the trace."""
    stack = model.decoder if model.decoder is not None else model.encoder
    if len(stack.layers) != trace.last.n_layers or trace.last.residual.shape[-1] != model.d_model:
        raise ConfigError("This trace was not made by this model: run the model again and pass both.")
    return stack


def read_out(model: Transformer, norm: nn.Module | None, stream: torch.Tensor) -> torch.Tensor:
    """stream [T, D] float32 -> probabilities [T, V] float64: through the final norm (when there is one) and the
    read-out with its bias, then a softmax in float64 so that small probabilities still sum to 1."""
    normed = stream if norm is None else norm(stream)  # [T, D]
    return torch.softmax(model.head(normed).double(), dim=-1)  # [T, V]


def logit_lens(model: Transformer, trace: Trace, k: int = 5, positions: Sequence[int] | None = None) -> pd.DataFrame:
    """layer, position, rank, piece, text, probability: the k likeliest pieces at each position (all, or those in
    `positions`) after each block l = 0 .. L-1 of the stack that gives the output, read out through its final norm
    and the model's read-out. The last block's rows are next_token's. ConfigError (lens_refusal) for a model with no
    read-out."""
    if not can_read_out(model):
        raise ConfigError(lens_refusal(model))
    stack = output_stack(model, trace)
    shown = np.arange(len(trace.last.tokens)) if positions is None else np.asarray(positions, dtype=np.int64)
    k = max(1, min(int(k), model.head.out_features))
    names: dict[int, tuple[str, str]] = {}  # token id -> (piece, text), each looked up once
    blocks: list[pd.DataFrame] = []
    with torch.inference_mode():
        for layer in range(stack.spec.n_layers):
            last = layer == stack.spec.n_layers - 1
            # The last block's stream through the final norm is the trace's output, as next_token reads it.
            stream = trace.last.output if last else trace.last.residual[layer + 1]  # [T, D]
            norm = None if last else stack.norm
            for start in range(0, len(shown), ROWS_AT_ONCE):
                rows = shown[start : start + ROWS_AT_ONCE]  # [R]
                x = torch.from_numpy(np.ascontiguousarray(stream[rows]))  # [R, D]
                top = torch.topk(read_out(model, norm, x), k, dim=-1)  # [R, k] each
                ids = top.indices.numpy().ravel()  # [R * k]
                for token_id in set(ids.tolist()) - names.keys():
                    names[token_id] = (piece_name(model, token_id), piece_text(model, token_id))
                blocks.append(
                    pd.DataFrame(
                        {
                            "layer": layer,
                            "position": np.repeat(rows, k),
                            "rank": np.tile(np.arange(1, k + 1), len(rows)),
                            "piece": [names[i][0] for i in ids.tolist()],
                            "text": [names[i][1] for i in ids.tolist()],
                            "probability": top.values.numpy().ravel(),
                        }
                    )
                )
    return pd.concat(blocks, ignore_index=True) if blocks else pd.DataFrame(columns=LENS_COLUMNS)
