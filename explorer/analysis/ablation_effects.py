"""What removing a head does to what the model is for: the sentence embedding's direction (MiniLM is a
sentence-embedding model), every head's effect on it in batched runs, and a causal model's next-token table before
and after.

The sentence embedding is the mean of the output stack's vectors over the real positions, as sentence-transformers
pools all-MiniLM-L6-v2 (its attention mask leaves padding out); its last step, dividing by the length, does not change
a cosine. A real position is not a [PAD] token and is a key some query may see: an imported model's padding comes as
a mask that hides those keys from every query, with no [PAD] token to name it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from explorer.ablation import HeadAblation, checked_mode, heads_text
from explorer.build import build_model
from explorer.config import PAD_TOKEN, ConfigError, ModelConfig
from explorer.inputs import Inputs, Source, prepare_inputs
from explorer.model import Stack, Transformer, float32_default
from explorer.prediction import can_predict, last_logits, piece_name, piece_text
from explorer.run_of import check_run_of
from explorer.trace import StackTrace, Trace, run

Progress = Callable[[float, str], None]  # (share done 0..1, what comes next)
BATCH_BYTES = 256 * 2**20  # what one batch of ablated rows may hold at once while a block runs (_row_bytes)
PREDICTION_COLUMNS = ["rank", "rank_after", "piece", "text", "probability_before", "probability_after", "change"]


def real_positions(stack: StackTrace) -> np.ndarray:
    """[T] bool: the positions a sentence embedding pools: not [PAD] (explorer.config.PAD_TOKEN), and a key some query
    of the stack's self-attention may see (an imported model's key padding mask hides its padding from every query)."""
    real = np.array([token != PAD_TOKEN for token in stack.tokens], dtype=bool)
    if not real.any():
        raise ConfigError("The text is only [PAD] pieces: a sentence embedding needs at least one real piece.")
    real &= np.asarray(stack.self_attention.allowed, dtype=bool).any(axis=0)  # [T]: seen by some query
    if not real.any():
        raise ConfigError(
            "The mask hides every position from every query, as padding: a sentence embedding needs at least one "
            "position some query may see."
        )
    return real


def sentence_embedding(trace: Trace) -> np.ndarray:
    """[D] float64: the mean of the output stack's vectors over its real positions (real_positions: not [PAD], not
    hidden by the mask from every query), as sentence-transformers' mean pooling of MiniLM, before its normalisation to
    length 1."""
    return _pooled(trace.last.output[None], real_positions(trace.last))[0]


def embedding_cosine(before: Trace, after: Trace) -> float:
    """The cosine between two runs' sentence embeddings (1: the same direction); the runs must be of the same text."""
    if before.last.tokens != after.last.tokens:
        raise ConfigError(
            "The two runs read different texts: compare the embeddings of one text, with and without heads."
        )
    return float(_cosines(sentence_embedding(before), sentence_embedding(after)[None])[0])


@float32_default()
def head_ablation_effects(
    model: Transformer | ModelConfig,
    source: Source,
    target: Source | None = None,
    mode: str = "zero",
    progress: Progress | None = None,
    base: Trace | None = None,
    *,
    mask: torch.Tensor | None = None,
    target_mask: torch.Tensor | None = None,
    memory_mask: torch.Tensor | None = None,
) -> np.ndarray:
    """[L, H]: 1 - cosine of the sentence embedding with each self-attention head of the first stack removed alone
    (its output set to zero, or with mode="mean" to its mean over the positions) against none removed; 0 means no
    change, 2 the opposite direction. One batch of heads per layer, starting from the unablated run's stream at that
    layer (the blocks below are the same and are not run again, and that layer's heads attend once for the whole batch),
    in chunks of at most BATCH_BYTES. For an encoder-decoder the embedding is the decoder's output, so the encoder's
    heads act through the decoder's cross-attention. `progress(share, what)` is told before each layer. `base`: the
    model's run of this text with no head removed, when the caller has it (a page's trace), instead of running it
    again. `mask`, `target_mask` and `memory_mask` as explorer.run takes them (an imported model's causal or padding
    mask): every run with a head removed keeps the same masks."""
    checked_mode(mode)
    model = build_model(model) if isinstance(model, ModelConfig) else model
    masks = {"mask": mask, "target_mask": target_mask, "memory_mask": memory_mask}
    if base is None:  # scores unread: 283 MB of SmolLM2 on 512 pieces
        base = run(model, source, target, keep_scores=False, **masks)
    else:
        _check_base(model, prepare_inputs(model, source, target, **masks), base)
    first = model.first_stack
    L, H = len(first.layers), first.layers[0].self_attn.n_heads
    real = real_positions(base.last)
    unablated = sentence_embedding(base)  # [D]
    effects = np.zeros((L, H))
    if mode == "mean" and mean_is_own_output(base.first.self_attention.allowed):
        return effects  # each head's mean is what it already writes: exactly no change, not float rounding's 1e-14
    with torch.inference_mode():
        allowed = _allowed(base.first)
        for layer in range(L):
            if progress is not None:
                progress(layer / L, f"layer {layer} ({layer + 1} of {L}): {H} heads removed one at a time")
            stream = torch.from_numpy(base.first.residual[layer])  # [T, D] entering block `layer`, the same in each run
            rows = max(1, min(H, BATCH_BYTES // _row_bytes(model, base, layer)))
            for start in range(0, H, rows):
                heads = torch.arange(start, min(H, start + rows))  # [B]
                removed = torch.zeros(len(heads), L, H)  # [B, L, H]: row b removes head heads[b] of this layer
                removed[torch.arange(len(heads)), layer, heads] = 1.0
                x = stream[None]  # [1, T, D]: block `layer` attends once; removing a head per row makes [B, T, D]
                out, _ = first(x, allowed, ablation=HeadAblation(removed, mode), first_layer=layer, record=False)
                if base.last is not base.first:
                    out = _decoder_output(model.decoder, base.last, out)
                embeddings = _pooled(out.numpy(), real)  # [B, D]
                effects[layer, start : start + len(heads)] = 1.0 - _cosines(unablated, embeddings)
    if progress is not None:
        progress(1.0, "done")
    return effects


def _check_base(model: Transformer, inputs: Inputs, base: Trace) -> None:
    """Refuse a lent run that is not the model's plain run of these inputs and masks: the board would measure
    another one. An imported model's inputs are x0, x1 ... whatever the tensor holds, so the stream entering each
    stack and its masks are compared, not only the tokens."""
    if base.ablated:
        raise ConfigError(
            f"The run lent to head_ablation_effects has heads removed ({heads_text(base.ablated)}): lend the run "
            "with every head, against which each head's removal is measured."
        )
    check_run_of(model, base, "head_ablation_effects")
    stacks = [s for s in (inputs.source, inputs.target) if s is not None]
    if [s.tokens for s in stacks] != [s.tokens for s in base.stacks]:
        raise ConfigError("The run lent to head_ablation_effects is of another text than the one given.")
    for given, ran in zip(stacks, base.stacks, strict=True):
        if not np.allclose(given.x.detach().numpy(), ran.residual[0], rtol=1e-5, atol=1e-6):  # to rounding
            raise ConfigError(
                f"The run lent to head_ablation_effects read another {ran.name} input than the one given."
            )
        if not np.array_equal(given.allowed.numpy(), np.asarray(ran.self_attention.allowed, dtype=bool)):
            raise ConfigError(
                f"The run lent to head_ablation_effects masked its {ran.name} otherwise: pass the same mask to both."
            )
    memory = base.last.cross_attention
    memory_given = inputs.memory_allowed
    if memory_given is not None and memory is not None and not np.array_equal(memory_given.numpy(), memory.allowed):
        raise ConfigError("The run lent to head_ablation_effects masked its cross-attention otherwise.")


def prediction_change(model: Transformer, before: Trace, after: Trace, k: int = 10) -> pd.DataFrame:
    """The next pieces in the top k of either run: rank (before; 1 = likeliest, over the whole vocabulary), rank_after,
    piece, text, probability_before, probability_after and change (after - before), sorted by rank before."""
    if not can_predict(model):
        raise ConfigError(
            "Only a causal model with a read-out to its vocabulary predicts a next token, so there is no prediction "
            "to compare; for an encoder, compare the sentence embeddings (embedding_cosine)."
        )
    if before.last.tokens != after.last.tokens:
        raise ConfigError(
            "The two runs read different texts: compare the predictions for one text, with and without heads."
        )
    p_before, p_after = (torch.softmax(last_logits(model, trace), dim=-1) for trace in (before, after))  # [V] float64
    top = min(k, p_before.numel())
    ids = torch.cat([torch.topk(p_before, top).indices, torch.topk(p_after, top).indices]).unique()  # the union
    rank_before = _ranks(p_before, ids)
    order = torch.argsort(rank_before)
    ids, rank_before = ids[order], rank_before[order]
    table = pd.DataFrame(
        {
            "rank": rank_before.numpy(),
            "rank_after": _ranks(p_after, ids).numpy(),
            "piece": [piece_name(model, i) for i in ids.tolist()],
            "text": [piece_text(model, i) for i in ids.tolist()],
            "probability_before": p_before[ids].numpy(),
            "probability_after": p_after[ids].numpy(),
        }
    )
    table["change"] = table["probability_after"] - table["probability_before"]
    return table[PREDICTION_COLUMNS]


def _ranks(probabilities: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """[N] long: each id's rank among all pieces, 1 for the likeliest (ties share the better rank)."""
    return (probabilities[None, :] > probabilities[ids][:, None]).sum(dim=1) + 1  # [N]


def _pooled(outputs: np.ndarray, real: np.ndarray) -> np.ndarray:
    """outputs [B, T, D], real [T] -> [B, D] float64: each row's mean over the real positions."""
    return outputs[:, real].astype(np.float64).mean(axis=1)


def _cosines(reference: np.ndarray, embeddings: np.ndarray) -> np.ndarray:
    """reference [D], embeddings [B, D] -> [B] cosines, in float64 (so 1 - cosine keeps its small values)."""
    norms = np.linalg.norm(embeddings, axis=1) * np.linalg.norm(reference)  # [B]
    if not norms.all():
        raise ConfigError("A sentence embedding is all zeros here, so it has no direction to compare.")
    return np.clip(embeddings @ reference / norms, -1.0, 1.0)


def mean_is_own_output(allowed: np.ndarray) -> bool:
    """Whether every query may attend to the same one key, or to none (`allowed` [Tq, Tk]: one token; a padding mask
    that leaves one real token): then each head writes the same vector at every position, its mean over the positions
    is that vector, and removing a head by its mean changes nothing."""
    allowed = np.asarray(allowed, dtype=bool)  # [Tq, Tk]
    return bool(allowed.sum(axis=-1).max(initial=0) <= 1 and (allowed == allowed[:1]).all())


def _allowed(stack: StackTrace) -> torch.Tensor | None:
    """The self-attention mask of the trace's run as the forward takes it: [1, T, T], or None when nothing is masked."""
    allowed = torch.from_numpy(stack.self_attention.allowed)  # [T, T] bool
    return None if bool(allowed.all()) else allowed[None]


def _decoder_output(decoder: Stack, stack: StackTrace, memory: torch.Tensor) -> torch.Tensor:
    """An encoder-decoder's decoder run on each row's encoder output memory [B, S, D] -> [B, T, D]; its own input
    (target embeddings) and masks are the trace's."""
    B = memory.shape[0]
    y = torch.from_numpy(stack.residual[0]).expand(B, -1, -1)  # [B, T, D]
    cross = torch.from_numpy(stack.cross_attention.allowed)  # [T, S]
    cross_allowed = None if bool(cross.all()) else cross[None]
    out, _ = decoder(y, _allowed(stack), memory, cross_allowed, record=False)
    return out


def _row_bytes(model: Transformer, base: Trace, layer: int) -> int:
    """About what one batch row holds at once while the stacks run without records (Stack.forward's record=False):
    one block's temporaries, about ten [T, D] streams, the feed-forward hidden units [T, F] and the query, key and
    value heads; no [H, T, S] map, which the fused attention never makes. The largest block of the first stack and of
    an encoder-decoder's decoder (whose keys are the source's S positions) decides."""

    def block(stack: Stack, T: int, S: int) -> int:
        spec = stack.spec
        return 4 * (10 * T * spec.d_model + 2 * T * spec.d_ff + 3 * max(T, S) * spec.d_model)

    S = len(base.first.tokens)
    first = model.first_stack
    sizes = [block(first, S, S)]
    if base.last is not base.first:
        sizes.append(block(model.decoder, len(base.last.tokens), S))
    return max(sizes)
