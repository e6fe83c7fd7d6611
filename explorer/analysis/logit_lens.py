"""Every layer's guess: the logit lens (nostalgebraist 2020, "interpreting GPT: the logit lens").

The residual stream after each block of the stack that gives the output is read out as if it were the last block's:
through that stack's final norm (none in a post-norm stack, whose blocks end with their own) and the model's read-out
to its vocabulary, then a softmax. The last block's row is what the model predicts (explorer.next_token); the rows
above show how early that guess forms. Only one layer's logits, a few positions at a time, exist at once: SmolLM2's
[30 layers, 512 positions, 49,152 pieces] would be 3 GB.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from explorer.arguments import whole_in
from explorer.config import CheckpointConfig, ConfigError
from explorer.model import Stack, Transformer
from explorer.prediction import piece_name, piece_text
from explorer.trace import Trace

LENS_COLUMNS = ["layer", "position", "rank", "piece", "text", "probability"]
ROWS_AT_ONCE = 64  # positions read out together: [64, V] float64 probabilities are 25 MB for SmolLM2's 49,152 pieces


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


def reads_next_piece(model: Transformer) -> bool:
    """Whether the read-out at a position guesses the next piece (a decoder, or an encoder-decoder's decoder), not
    that position's own output (a trained encoder, e.g. the reverse task's)."""
    return model.decoder is not None


def output_stack(model: Transformer, trace: Trace) -> Stack:
    """The stack that gives the output (the decoder of an encoder-decoder), checked against the trace."""
    stack = model.decoder if model.decoder is not None else model.encoder
    if len(stack.layers) != trace.last.n_layers or trace.last.residual.shape[-1] != model.d_model:
        raise ConfigError("This trace was not made by this model: run the model again and pass both.")
    return stack


class ReadOut:
    """The read-out of at most ROWS_AT_ONCE rows at a time, into two buffers every call reuses: fresh [R, V] arrays
    for each call pile up in the C heap (glibc keeps what they freed), about 40 MB a call on SmolLM2."""

    def __init__(self, model: Transformer):
        self.head = model.head
        self.logits = torch.empty(ROWS_AT_ONCE, model.head.out_features)  # [R, V] float32
        self.probabilities = torch.empty(ROWS_AT_ONCE, model.head.out_features, dtype=torch.float64)  # [R, V]

    def __call__(self, normed: torch.Tensor) -> torch.Tensor:
        """normed [R, D] float32 (the stream after the final norm) -> probabilities [R, V] float64, a view of the
        buffer valid until the next call: the read-out with its bias, then a softmax in float64 so that small
        probabilities still sum to 1."""
        rows = len(normed)
        logits = torch.mm(normed, self.head.weight.T, out=self.logits[:rows])  # [R, V]
        if self.head.bias is not None:
            logits.add_(self.head.bias)
        probabilities = self.probabilities[:rows].copy_(logits)  # [R, V]
        probabilities.sub_(probabilities.amax(dim=-1, keepdim=True)).exp_()
        return probabilities.div_(probabilities.sum(dim=-1, keepdim=True))


def logit_lens(
    model: Transformer,
    trace: Trace,
    k: int = 5,
    positions: Sequence[int] | None = None,
    progress: Callable[[float], None] | None = None,
) -> pd.DataFrame:
    """layer, position, rank, piece, text, probability: the k likeliest pieces at each position (all, or those in
    `positions`) after each block l = 0 .. L-1 of the stack that gives the output, read out through its final norm
    and the model's read-out. The last block's rows are next_token's. ConfigError (lens_refusal) for a model with no
    read-out. `progress(share)` is told the share of (block, position) pairs read after each product: every position
    of a 512-piece SmolLM2 text takes about 16 s on two cores.

    The (block, position) pairs are read out ROWS_AT_ONCE at a time, in block order: a short text's every block in a
    few products with the read-out matrix (which is read once per product), a long one's never more than that."""
    if not can_read_out(model):
        raise ConfigError(lens_refusal(model))
    stack = output_stack(model, trace)
    T = len(trace.last.tokens)
    shown = np.arange(T) if positions is None else np.asarray(list(positions), dtype=np.int64)  # [P]
    if shown.size and (shown.min() < 0 or shown.max() >= T):
        raise ConfigError(f"The lens reads positions 0 to {T - 1} of this text; {shown.tolist()} goes beyond them.")
    L = stack.spec.n_layers
    layers = np.repeat(np.arange(L), len(shown))  # [L * P]: the block of each pair
    columns = np.tile(shown, L)  # [L * P]: the position of each pair
    k = min(whole_in("k", k, 1), model.head.out_features)  # more than the vocabulary: all of it
    names: dict[int, tuple[str, str]] = {}  # token id -> (piece, text), each looked up once
    blocks: list[pd.DataFrame] = []
    with torch.inference_mode():
        read_out = ReadOut(model)
        for start in range(0, len(layers), ROWS_AT_ONCE):
            layer, position = layers[start : start + ROWS_AT_ONCE], columns[start : start + ROWS_AT_ONCE]  # [R] each
            x = torch.from_numpy(trace.last.residual[layer + 1, position])  # [R, D]: the stream after block `layer`
            normed = x if stack.norm is None else stack.norm(x)  # [R, D]
            final = layer == L - 1
            if final.any():  # the last block's stream through the final norm is the trace's output, as next_token's
                normed[torch.from_numpy(final)] = torch.from_numpy(trace.last.output[position[final]])
            top = torch.topk(read_out(normed), k, dim=-1)  # [R, k] each
            ids = top.indices.numpy().ravel()  # [R * k]
            for token_id in set(ids.tolist()) - names.keys():
                names[token_id] = (piece_name(model, token_id), piece_text(model, token_id))
            blocks.append(
                pd.DataFrame(
                    {
                        "layer": np.repeat(layer, k),
                        "position": np.repeat(position, k),
                        "rank": np.tile(np.arange(1, k + 1), len(layer)),
                        "piece": [names[i][0] for i in ids.tolist()],
                        "text": [names[i][1] for i in ids.tolist()],
                        "probability": top.values.numpy().ravel(),
                    }
                )
            )
            if progress is not None:
                progress((start + len(layer)) / len(layers))
    return pd.concat(blocks, ignore_index=True) if blocks else pd.DataFrame(columns=LENS_COLUMNS)
