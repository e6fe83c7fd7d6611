"""Gradient norms per layer for a stated dummy objective, without writing .grad on a shared model."""

from __future__ import annotations

import dataclasses
import math
import re
import threading
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from explorer.analysis.read_out_loss import TableGradient, read_out_loss, read_out_loss_and_table_gradient
from explorer.config import PAD_TOKEN, ConfigError
from explorer.inputs import Inputs, Source, StackInput, prepare_inputs
from explorer.malloc import give_back
from explorer.model import Transformer, float32_default
from explorer.numbers import readable
from explorer.tokens import embed_tokens

GRADIENT_OBJECTIVE = (
    "Dummy objective: every position predicts the next typed token, as a language model does. The logits are "
    "the model's output times the embeddings of the distinct tokens typed, divided by sqrt(d_model) (a tied "
    "read-out); the loss is their cross-entropy averaged over positions (the last position, and positions whose "
    "next token is [PAD], are left out). For an encoder-decoder the decoder's output predicts the target. "
    "The weights are untrained, so these gradients show how the architecture passes a signal back through "
    "its layers (cf. Xiong et al. 2020), not what a trained model would learn."
)
TRAINED_OBJECTIVE = (
    "Dummy objective: every position predicts the next typed token, as a language model does, through the trained "
    "model's own read-out (its logits over its vocabulary); the loss is their cross-entropy averaged over positions "
    "(the last position is left out). The model was trained on another objective, its task, so these gradients show "
    "how its trained weights pass this signal back through its layers, not how it learned the task."
)
CHECKPOINT_OBJECTIVE = (
    "Objective: every piece predicts the next piece of the text, as a language model does: the logits are the "
    "model's output times its token embedding table ({read_out}), and the loss is their cross-entropy averaged over "
    "positions (the last one is left out). These are real pretrained weights, so the gradients show how a trained "
    "model passes a language-modelling signal back through its layers."
)
READ_OUTS = {  # what the token table is to a checkpoint, by whether it has a read-out head tied to it
    "tied": "its read-out to next-piece logits: the two are one tensor",
    "bert": "BERT, which was pre-trained to fill in masked words rather than to continue text, has no next-piece "
    "head, so this reads its output the way a tied read-out would",
    "untied": "not its own read-out head, which is a separate tensor: the same objective as for every checkpoint",
}
# The resolution check (gradient_change): the input embeddings moved by one part in a million, and a block's total
# gradient norm that then changes by more than 10 % is not resolved in float32. A well-conditioned pass moves by
# about 1e-6 times its condition; 10 % needs a condition of 1e5, past the few digits float32's 7 leave it. Measured
# on the shipped checkpoints (the README): every placement moves by under 1 %, but SmolLM2 flipped to res-post by
# ×3 to ×120, which float64 confirms (its float32 and float64 norms differ as much).
JITTER = 1e-6
UNRESOLVED = 1.1
TRIMS_PER_PASS = 8  # give_back calls as the backward pass goes (5-50 ms each)
_BLOCK_PARAMETER = re.compile(r"^(encoder|decoder)\.layers\.(\d+)\.(.+)$")


@float32_default()
def gradient_norms(
    model: Transformer, source: Source, target: Source | None = None, jitter: float = 0.0
) -> pd.DataFrame:
    """One row per parameter tensor: stack, layer (None outside blocks), parameter, norm (L2 of its gradient).

    Each norm is taken as the backward pass reaches its parameter, and the pass keeps a one-number stand-in instead of
    the gradient: every gradient at once is the model's size again (540 MB for SmolLM2). The model is only read: no
    .grad is written, and a backward pass of another thread through the same tensors is left alone (on the CPU a
    backward pass runs in the thread that asked for it). `jitter`: each input embedding is first scaled by 1 + jitter
    times a fixed standard normal draw per unit (gradient_change)."""
    names, parameters = zip(*[(n, p) for n, p in model.named_parameters() if p.requires_grad], strict=True)
    norms: dict[int, float] = {}  # parameter index -> the L2 norm of its gradient (none: it has no gradient)
    # A checkpoint's read-out's share of its token table's gradient, taken apart (_objective's table_apart)
    table_part: TableGradient | None = None
    table = model.embedding.weight if model.tokenizer is not None else None
    table_index = next((i for i, parameter in enumerate(parameters) if parameter is table), None)
    caller = threading.get_ident()
    # The pass frees many arrays of a few MB, which glibc keeps (explorer.malloc): handed back after the forward and
    # each eighth of the parameters, SmolLM2 on 512 pieces took the Activations page to 2.2 GB instead of 2.5
    every = max(1, len(parameters) // TRIMS_PER_PASS)

    def norm_taker(index: int) -> Callable[[torch.Tensor], torch.Tensor | None]:
        def take(grad: torch.Tensor) -> torch.Tensor | None:
            if threading.get_ident() != caller:
                return None
            apart = table_part is not None and index == table_index
            norms[index] = table_part.norm_with(grad) if apart else float(grad.norm())
            if len(norms) % every == 0:
                give_back()
            return grad.new_zeros(()).expand_as(grad)

        return take

    hooks = [parameter.register_hook(norm_taker(i)) for i, parameter in enumerate(parameters)]
    try:
        with torch.enable_grad():
            loss, table_part = _objective(model, source, target, table_index is not None, jitter)
            give_back()
            torch.autograd.grad(loss, parameters, allow_unused=True)
    finally:
        for hook in hooks:
            hook.remove()
    if table_part is not None and table_index is not None:  # the lookup gave the table no gradient: the read-out's
        norms.setdefault(table_index, table_part.squared_norm**0.5)
    rows = []
    for i, name in enumerate(names):
        match = _BLOCK_PARAMETER.match(name)
        stack, layer, parameter = (match[1], int(match[2]), match[3]) if match else (name.split(".")[0], None, name)
        rows.append({"stack": stack, "layer": layer, "parameter": parameter, "norm": norms.get(i, 0.0)})
    return pd.DataFrame(rows).astype({"layer": "Int64"})


def objective_text(model: Transformer) -> str:
    """The objective `objective` uses for this model, in words: a trained model reads out through its own head."""
    if model.tokenizer is not None:
        cfg = model.config
        if getattr(cfg, "family", None) == "bert":
            kind = "bert"
        else:
            kind = "tied" if getattr(cfg, "tie_embeddings", False) else "untied"
        return CHECKPOINT_OBJECTIVE.format(read_out=READ_OUTS[kind])
    return GRADIENT_OBJECTIVE if model.head is None else TRAINED_OBJECTIVE


def objective(model: Transformer, source: Source, target: Source | None = None) -> torch.Tensor:
    """The scalar loss of objective_text(model) (differentiable when grad mode is on)."""
    return _objective(model, source, target, table_apart=False)[0]


def _objective(
    model: Transformer, source: Source, target: Source | None, table_apart: bool, jitter: float = 0.0
) -> tuple[torch.Tensor, TableGradient | None]:
    """objective(...) and, with `table_apart` for a checkpoint, the read-out's share of the gradient of its token
    table taken apart: the loss's gradient then reaches the table through the lookup alone, and no gradient as large
    as the table is made for the read-out (108 MB for SmolLM2, held from the read-out to the end of the pass)."""
    if model.config is None and model.vocabulary is None:  # from_torch: input tensors, no tokens to predict
        raise ConfigError(
            "Gradient norms need typed tokens, and a model imported with from_torch has none: the objective predicts "
            "each next token through token embeddings, which your module does not give the explorer."
        )
    if isinstance(source, torch.Tensor) or isinstance(target, torch.Tensor):
        raise ConfigError("Gradient norms need typed tokens: the objective predicts each token from the output.")
    inputs = _jittered(prepare_inputs(model, source, target), jitter)
    # No records: the loss needs the output alone, and records held every block's attention maps for the backward
    # pass (with torch's fused attention instead, SmolLM2 on 512 pieces took 0.3 GB less)
    output = inputs.forward(model, record=False)[-1][0][0]  # [T, D] the last stack's output
    give_back()  # the blocks' arrays, freed (the backward pass makes them again), before the read-out makes its own
    tokens = (inputs.target or inputs.source).tokens
    what = "target" if inputs.target else "input"
    if model.tokenizer is not None:  # a real checkpoint: its pieces, read out through its token embedding table
        if len(tokens) < 2:
            raise ConfigError(_too_few(what))
        labels = torch.tensor([model.tokenizer.token_id(t) for t in tokens[1:]])  # [T - 1]
        table = model.embedding.weight  # [V, D]; logits [T - 1, V] are made a few rows at a time
        if not table_apart:
            return read_out_loss(output[:-1], table, labels), None
        looked_up = [
            model.tokenizer.token_id(t) for stack in (inputs.source, inputs.target) if stack for t in stack.tokens
        ]
        return read_out_loss_and_table_gradient(output[:-1], table, labels, torch.tensor(sorted(set(looked_up))))
    if model.head is not None:  # a trained model: its own read-out, over its own vocabulary
        if len(tokens) < 2:
            raise ConfigError(_too_few(what))
        labels = torch.tensor([model.vocabulary.index(t) for t in tokens[1:]])  # [T - 1]
        return F.cross_entropy(model.head(output[:-1]), labels), None  # logits [T - 1, V]
    seed = model.config.seed if model.config is not None else 0
    return _next_token_loss(output, tokens, model.d_model, seed, what), None


def _jittered(inputs: Inputs, jitter: float) -> Inputs:
    """The inputs with each stack's embeddings x [T, D] scaled by 1 + jitter * N(0, 1), the same draw every time."""
    if jitter == 0.0:
        return inputs
    generator = torch.Generator().manual_seed(0)

    def moved(stack: StackInput | None) -> StackInput | None:
        if stack is None:
            return None
        noise = torch.randn(stack.x.shape, generator=generator, dtype=stack.x.dtype)  # [T, D]
        return dataclasses.replace(stack, x=stack.x * (1.0 + jitter * noise))

    return dataclasses.replace(inputs, source=moved(inputs.source), target=moved(inputs.target))


def gradient_change(model: Transformer, source: Source, target: Source | None, totals: pd.DataFrame) -> pd.DataFrame:
    """`totals` (layer_gradient_totals of this model and input) with `change`: how many times larger or smaller each
    block's total is when the input embeddings move by JITTER (the larger over the smaller; 1 is unmoved). Above
    UNRESOLVED the block's norm is float32 rounding, not a measurement (see JITTER). One more backward pass."""
    moved = layer_gradient_totals(gradient_norms(model, source, target, jitter=JITTER))
    both = totals.merge(moved, on=["stack", "layer"], suffixes=("", "_moved"))
    ratio = (both["norm"] / both["norm_moved"]).to_numpy(dtype=np.float64)  # [blocks]
    change = np.maximum(ratio, 1.0 / ratio)
    return both.drop(columns="norm_moved").assign(change=np.where(both["norm"] == both["norm_moved"], 1.0, change))


def unresolved_change(totals: pd.DataFrame) -> float | None:
    """The largest `change` of gradient_change's totals when some block's is not resolved (above UNRESOLVED, or not
    a number, which then is the value); None when every block's is, or the totals were not checked."""
    if "change" not in totals:
        return None
    changes = totals["change"].to_numpy(dtype=np.float64)  # [blocks]
    return None if (changes <= UNRESOLVED).all() else float(np.max(changes))  # np.max: a NaN is the answer


def change_words(change: float) -> str:
    """How far a block's norm moved under JITTER, as a sentence says it: "×39.9", or that it is not a number."""
    return f"×{readable(change)}" if np.isfinite(change) else "a value that is not a number"


def _too_few(what: str) -> str:
    return (
        f"Gradient norms need at least two tokens in the {what}, the second or a later one not {PAD_TOKEN} (the "
        f"objective predicts each {what} token from the one before)."
    )


def layer_gradient_totals(norms: pd.DataFrame) -> pd.DataFrame:
    """stack, layer, norm: the L2 norm of all of a block's parameter gradients together."""
    blocks = norms.dropna(subset=["layer"]).assign(squared=lambda df: df["norm"] ** 2)
    # skipna=False: a gradient that is not a number leaves its block's total not a number, not a smaller one (or 0)
    totals = blocks.groupby(["stack", "layer"], sort=False)["squared"].sum(skipna=False) ** 0.5
    return totals.rename("norm").reset_index()


def _next_token_loss(output: torch.Tensor, tokens: list[str], d_model: int, seed: int, what: str) -> torch.Tensor:
    """Cross-entropy of position t predicting token t + 1 from output [T, D] through tied embeddings; `what` names
    the tokens (input, or an encoder-decoder's target) in the error when there is nothing to predict."""
    vocabulary = sorted(set(tokens) - {PAD_TOKEN})
    keep = torch.tensor([t != PAD_TOKEN for t in tokens[1:]], dtype=torch.bool)  # [T - 1]
    if not keep.any():
        raise ConfigError(_too_few(what))
    index = {token: i for i, token in enumerate(vocabulary)}
    labels = torch.tensor([index.get(t, 0) for t in tokens[1:]])  # [T - 1]
    logits = output[:-1] @ embed_tokens(vocabulary, d_model, seed).T / math.sqrt(d_model)  # [T - 1, V]
    return F.cross_entropy(logits[keep], labels[keep])
