"""Tokens or tensors -> what a model's forward takes: stream inputs [T, D] and attention masks."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from explorer.ablation import HeadAblation
from explorer.config import ConfigError, ModelConfig
from explorer.model import StackOnBlock, StackRun, Transformer
from explorer.tokens import embed_tokens, padding_keys, split_tokens

PACKAGE = str(Path(__file__).parent) + os.sep  # explorer's own files, skipped when a warning names the user's line

Source = str | list[str] | tuple[str, ...] | torch.Tensor | np.ndarray


@dataclass(frozen=True)
class StackInput:
    tokens: list[str]  # labels: the typed tokens, or x0, x1 ... for a tensor
    x: torch.Tensor  # [T, D] token embedding + position, or the given tensor as it is
    allowed: torch.Tensor  # [T, T] bool, True = may attend


@dataclass(frozen=True)
class Inputs:
    source: StackInput  # the encoder's, or a decoder-only model's
    target: StackInput | None  # the decoder's, for an encoder-decoder
    memory_allowed: torch.Tensor | None  # [T_target, T_source] cross-attention mask

    def forward(
        self,
        model: Transformer,
        train: bool = False,
        ablation: HeadAblation | None = None,
        keep_scores: bool = True,
        record: bool = True,
        on_block: StackOnBlock | None = None,
    ) -> tuple[StackRun, ...]:
        """The model's forward on a batch of one (`ablation` removes heads of the first stack; without `keep_scores`
        the records keep no pre-softmax scores; without `record` there are none; `on_block` is handed each block's
        record instead: Transformer.forward)."""
        if self.target is None:
            return model(
                self.source.x.unsqueeze(0),
                _batched(self.source.allowed),
                train=train,
                ablation=ablation,
                keep_scores=keep_scores,
                record=record,
                on_block=on_block,
            )
        return model(
            self.source.x.unsqueeze(0),
            _batched(self.source.allowed),
            self.target.x.unsqueeze(0),
            _batched(self.target.allowed),
            _batched(self.memory_allowed),
            train=train,
            ablation=ablation,
            keep_scores=keep_scores,
            record=record,
            on_block=on_block,
        )


def prepare_inputs(
    model: Transformer,
    source: Source,
    target: Source | None = None,
    *,
    mask: torch.Tensor | None = None,
    target_mask: torch.Tensor | None = None,
    memory_mask: torch.Tensor | None = None,
) -> Inputs:
    """Check the inputs against the model and build the masks its config asks for (see explorer.run)."""
    cfg = model.config
    encoder_decoder = model.encoder is not None and model.decoder is not None
    if encoder_decoder and target is None:
        raise ConfigError("An encoder-decoder needs a target sentence as well as the source; type one.")
    if not encoder_decoder and target is not None:
        raise ConfigError("Only an encoder-decoder takes a target; this model reads a single input.")
    if not encoder_decoder and (target_mask is not None or memory_mask is not None):
        raise ConfigError("Only an encoder-decoder takes target_mask and memory_mask; pass this model's mask as mask.")
    causal_first = model.encoder is None or (cfg is not None and "causal" in cfg.mask)  # decoder-only: causal
    x, tokens = _input(model, source, "source" if encoder_decoder else "input")
    first = StackInput(tokens, x, _allowed(mask, "mask", cfg, tokens, tokens, causal_first))
    if not encoder_decoder:
        return Inputs(first, None, None)
    y, target_tokens = _input(model, target, "target")
    y_allowed = _allowed(target_mask, "target_mask", cfg, target_tokens, target_tokens, cfg is not None)
    memory_allowed = _allowed(memory_mask, "memory_mask", cfg, target_tokens, tokens, False)
    return Inputs(first, StackInput(target_tokens, y, y_allowed), memory_allowed)


def _input(model: Transformer, source: Source, what: str) -> tuple[torch.Tensor, list[str]]:
    """-> x [T, D] (embedding + position for tokens; the tensor as it is) and the tokens' labels."""
    if isinstance(source, np.ndarray) and source.dtype.kind == "f":  # a notebook's float array: the same as a tensor
        source = torch.from_numpy(source)
    if isinstance(source, torch.Tensor) and source.device.type != "cpu":
        raise ConfigError(f"The explorer runs on the CPU: pass the {what} as x.cpu() (it is on {source.device}).")
    if isinstance(source, torch.Tensor):
        if source.dim() != 2 or source.shape[1] != model.d_model or not source.is_floating_point():
            batch = " One sequence at a time: pass x[i] of a batch (x[:, i] when not batch_first)."
            raise ConfigError(
                f"The {what} tensor must be float [T, {model.d_model}] (one row per position); "
                f"got {source.dtype} {list(source.shape)}." + (batch if source.dim() == 3 else "")
            )
        if not 1 <= source.shape[0] <= model.max_positions:
            raise ConfigError(f"The {what} must have 1 to {model.max_positions:,} rows; it has {source.shape[0]:,}.")
        bad = (~torch.isfinite(source)).any(dim=1).nonzero().flatten()  # rows holding NaN or inf
        if len(bad):
            rows = ", ".join(str(int(r)) for r in bad[:5]) + ("…" if len(bad) > 5 else "")
            raise ConfigError(f"The {what} tensor holds NaN or infinite values (row {rows}); attention needs numbers.")
        return source.detach().float(), [f"x{i}" for i in range(source.shape[0])]
    if model.tokenizer is not None:  # a real checkpoint: its own tokenizer and embeddings
        ids, tokens = _pieces(model, source, what)
        return model.embed(ids), tokens  # [T, D]
    if model.config is None and model.vocabulary is None:  # from_torch: the user's model embeds its own tokens
        raise ConfigError(
            f"A model imported with from_torch has no token embeddings of its own: pass the {what} as a float "
            f"tensor [T, {model.d_model}] of input embeddings (your model's embedding of the tokens)."
        )
    tokens = split_tokens(source, model.max_positions, what)
    if model.vocabulary is not None:
        return model.embed(token_ids(model.vocabulary, tokens)), tokens  # [T, D]
    seed = model.config.seed if model.config is not None else 0
    embedded = embed_tokens(tokens, model.d_model, seed)  # [T, D]
    return model.positional(embedded), tokens


def _pieces(model: Transformer, source: Source, what: str) -> tuple[torch.Tensor, list[str]]:
    """-> ids [T] and their pieces: text through the checkpoint's tokenizer (with its special tokens), or a list of
    pieces spelled as its vocabulary spells them ("[CLS]", "play", "##ing", "Ġthe") taken one for one."""
    tokenizer = model.tokenizer
    if isinstance(source, str):
        encoding = tokenizer.encode(source)
        ids, tokens = encoding.ids, encoding.labels
    else:
        tokens = split_tokens(source, model.max_positions, what)
        ids = [tokenizer.token_id(piece) for piece in tokens]
        unknown = [piece for piece, i in zip(tokens, ids, strict=True) if i is None]
        if unknown:
            raise ConfigError(
                f"{', '.join(map(repr, unknown[:5]))} {'is' if len(unknown) == 1 else 'are'} not a piece of this "
                "model's vocabulary; pass text to have it split into pieces."
            )
    if len(ids) > model.max_positions:
        raise ConfigError(
            f"The {what} is {len(ids):,} pieces long, more than the {model.max_positions:,} positions this model "
            "was trained on; shorten the text."
        )
    return torch.tensor(ids, dtype=torch.long), list(tokens)


def token_ids(vocabulary: tuple[str, ...], tokens: list[str]) -> torch.Tensor:
    """[T] long: each token's index in a trained model's vocabulary; unknown tokens are explained."""
    index = {token: i for i, token in enumerate(vocabulary)}
    unknown = sorted({t for t in tokens if t not in index})
    if unknown:
        raise ConfigError(
            f"{', '.join(map(repr, unknown[:5]))} {'is' if len(unknown) == 1 else 'are'} not in this model's "
            f"vocabulary; it knows only {' '.join(vocabulary)}."
        )
    return torch.tensor([index[t] for t in tokens], dtype=torch.long)


def _allowed(
    given: torch.Tensor | None, name: str, cfg: ModelConfig | None, queries: list[str], keys: list[str], causal: bool
) -> torch.Tensor:
    """[Tq, Tk] bool: the mask the caller gave, checked; else causal (query i sees keys <= i) and, when the
    config asks for padding, [PAD] keys blocked."""
    if given is not None:
        return _checked_mask(given, len(queries), len(keys), name)
    allowed = torch.ones(len(queries), len(keys), dtype=torch.bool)
    if causal:
        allowed = torch.tril(allowed)
    if cfg is not None and "padding" in cfg.mask:
        allowed = allowed & padding_keys(keys).unsqueeze(0)
    return allowed


def _checked_mask(mask: torch.Tensor | np.ndarray, n_query: int, n_key: int, name: str) -> torch.Tensor:
    if isinstance(mask, np.ndarray):  # a notebook's numpy mask, taken as a tensor would be
        mask = torch.from_numpy(mask)
    if not isinstance(mask, torch.Tensor):
        raise ConfigError(
            f"{name} must be a bool tensor [{n_query}, {n_key}] with True = may attend, not a {type(mask).__name__}."
        )
    if mask.device.type != "cpu":  # as the input tensor is told (prepare_inputs): the run's masks live on the CPU
        raise ConfigError(f"The explorer runs on the CPU: pass {name} as {name}.cpu() (it is on {mask.device}).")
    if mask.dtype != torch.bool or tuple(mask.shape) != (n_query, n_key):
        advice = _mask_advice(mask, n_query, n_key)
        raise ConfigError(
            f"{name} must be a bool tensor [{n_query}, {n_key}] with True = may attend; got {mask.dtype} "
            f"{list(mask.shape)}." + (f" {advice}" if advice else "")
        )
    if name != "memory_mask" and n_query == n_key > 1 and not bool(mask.diagonal().any()):
        warnings.warn(  # a self-attention mask that hides every token from itself: almost surely torch's convention
            f"{name} lets no token attend to itself. The explorer's masks use True = may attend, the opposite of "
            "torch's attn_mask; if you passed a torch mask, pass ~mask instead.",
            UserWarning,
            stacklevel=_user_stacklevel(),
        )
    return mask


# An additive mask's blocked keys: exp(-1e4) is 0 in float32, so softmax gives them no weight at all, as with -inf.
BLOCKING_BIAS = -1e4


def _mask_advice(mask: torch.Tensor, n_query: int, n_key: int) -> str:
    """What to pass instead of a mask of another shape or type, when its shape or values say what it meant."""
    shape = tuple(mask.shape)
    if shape in ((n_key,), (1, n_key)) and shape != (n_query, n_key):
        padding, allowed = ("True", "~kpm") if mask.dtype == torch.bool else ("-inf", "(kpm == 0)")
        return (
            f"For torch's key_padding_mask of one sequence ({padding} = padding), pass "
            f"{allowed}.reshape(1, {n_key}).expand({n_query}, {n_key})."
        )
    if len(shape) == 3 and shape[1:] == (n_query, n_key):
        return "Pass one sequence's mask, [query, key]: mask[0] (the explorer runs one sequence at a time)."
    if shape == (n_key, n_query) and n_key != n_query:
        return f"It looks transposed: rows are the {n_query} queries, columns the {n_key} keys (mask.T)."
    if shape != (n_query, n_key):
        return ""
    values = torch.unique(mask).double()
    zero_one = bool(torch.isin(values, torch.tensor([0.0, 1.0], dtype=torch.float64)).all())
    if zero_one and bool((values == 1).any()):
        return "For 1 where a key may be seen and 0 where not, pass mask.bool() (for 1 = blocked: mask == 0)."
    if mask.is_floating_point() and bool(((values == 0) | (values <= BLOCKING_BIAS)).all()):
        return (
            "For torch's additive mask (0 where a key may be seen, -inf or a large negative number where not), "
            "pass mask == 0."
        )
    if mask.is_floating_point():
        return (
            f"Its values run from {float(values.min()):.3g} to {float(values.max()):.3g}: an additive bias that "
            "weights keys, not one that only blocks them, and the explorer's masks only allow or block a key."
        )
    return ""


def _user_stacklevel() -> int:
    """warnings.warn's stacklevel, from its caller, of the first frame outside explorer (and contextlib's decorator
    frames): the line of the user's own code that passed the mask."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith((PACKAGE, contextlib.__file__)):
        frame, level = frame.f_back, level + 1
    return level


def _batched(allowed: torch.Tensor) -> torch.Tensor | None:
    """[Tq, Tk] -> [1, Tq, Tk], or None when nothing is masked (the cheaper path)."""
    return None if bool(allowed.all()) else allowed.unsqueeze(0)
