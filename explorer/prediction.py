"""What a causal model predicts after the text: its read-out applied to the last position of a trace."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from explorer.arguments import whole_in
from explorer.config import ConfigError
from explorer.model import Transformer, float32_default
from explorer.text_reading import part_character_text
from explorer.trace import Trace


def can_predict(model: Transformer) -> bool:
    """True for a causal model with a read-out to token logits (a Llama checkpoint, a trained decoder)."""
    return model.head is not None and model.encoder is None


@float32_default()
def next_token(model: Transformer, trace: Trace, k: int = 10) -> pd.DataFrame:
    """rank, piece, text, probability, logit: the k likeliest next tokens after the trace's last position,
    from the same forward pass the pages draw (its final output [D] through the model's read-out)."""
    if not can_predict(model):
        raise ConfigError(
            "Only a causal model with a read-out to its vocabulary predicts a next token (a bidirectional encoder such "
            "as BERT sees the whole sentence at once, and this model has no language-model head)."
        )
    return top_read_out(model, trace, k)


@float32_default()
def last_logits(model: Transformer, trace: Trace) -> torch.Tensor:
    """[V] float64: the read-out's logits at the last position of the trace's output stack, from its final output [D]
    (after the final norm); the softmax of these in float64 keeps tiny probabilities summing to 1."""
    last = torch.from_numpy(np.ascontiguousarray(trace.output[-1]))  # [D] after the final norm
    if last.shape[-1] != model.d_model:  # another model's run: torch's "mat1 and mat2 shapes cannot be multiplied"
        raise ConfigError(
            f"This trace was not made by this model (its stream is {last.shape[-1]} wide, the model's "
            f"{model.d_model}): run the model on the text and pass that trace."
        )
    with torch.inference_mode():
        return model.head(last).double()  # [V]


def top_read_out(model: Transformer, trace: Trace, k: int = 10) -> pd.DataFrame:
    """rank, piece, text, probability, logit of the k likeliest pieces the read-out gives at the last position of the
    trace's output stack, for any model with a read-out (next_token's table for a causal one)."""
    logits = last_logits(model, trace)  # [V]
    k = min(whole_in("k", k, 1), logits.numel())  # more than the vocabulary: all of it
    probabilities = torch.softmax(logits, dim=-1)  # [V], in float64 so tiny probabilities still sum to 1
    top = torch.topk(probabilities, k)
    ids = top.indices.tolist()
    return pd.DataFrame(
        {
            "rank": range(1, len(ids) + 1),
            "piece": [piece_name(model, i) for i in ids],
            "text": [piece_text(model, i) for i in ids],
            "probability": top.values.numpy(),
            "logit": logits[top.indices].numpy(),
        }
    )


def piece_name(model: Transformer, token_id: int) -> str:
    """The vocabulary's spelling of an id; "#12" for a model with no vocabulary of its own; a row of an embedding table
    padded past its tokenizer (OLMo 2 has 100,352 rows for 100,278 pieces) says so."""
    if model.tokenizer is not None:
        if token_id >= model.tokenizer.vocab_size:
            return f"(padding row {token_id})"
        return model.tokenizer.piece(token_id)
    return model.vocabulary[token_id] if model.vocabulary is not None else f"#{token_id}"


def piece_text(model: Transformer, token_id: int) -> str:
    """The token as text: " Paris" for the piece "ĠParis"; " <0xF0><0x9F>" for "ĠðŁ", a byte-level piece holding
    only part of a character (decoding writes " �" for every such piece alike)."""
    if model.tokenizer is None or token_id >= model.tokenizer.vocab_size:
        return piece_name(model, token_id)
    text = model.tokenizer.decode([token_id])
    if "\ufffd" in text:
        return part_character_text(model.tokenizer, model.tokenizer.piece(token_id)) or text
    return text
