"""What the positional page shows: encoding tables, wavelengths, similarities, and why order matters."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from explorer.build import build_model
from explorer.config import ConfigError, ModelConfig
from explorer.model import Transformer
from explorer.positional import ROPE_BASE, rope_angles, sinusoidal
from explorer.tokens import split_tokens
from explorer.trace import AttentionMaps, byte_level_pieces, run, token_axis_labels

MAX_PLOTTED_POSITIONS = 4096
MAX_CURVES = 16  # dimensions drawn as curves at once
REORDERINGS = ("reversed", "rotated by one", "shuffled")
ROUNDING_TOLERANCE = 1e-5  # float32 attention weights that differ by less than this are equal up to rounding


def check_range(n_positions: int, dimensions: list[int], d_model: int, table_rows: int | None = None) -> None:
    """ConfigError unless 1 <= n_positions <= 4096 (and <= table_rows, a learned table's length, when given) and
    every dimension is in 0..d_model-1."""
    if not 1 <= n_positions <= MAX_PLOTTED_POSITIONS:
        raise ConfigError(f"Max position {n_positions:,} is out of range; use 1 to {MAX_PLOTTED_POSITIONS:,}.")
    if table_rows is not None and n_positions > table_rows:
        raise ConfigError(_too_many_rows(table_rows))
    wrong = [d for d in dimensions if not 0 <= d < d_model]
    if wrong:
        raise ConfigError(
            f"Dimension {wrong[0]} does not exist: d_model is {d_model}, so dimensions run from 0 to {d_model - 1}."
        )


def encoding_table(model: Transformer, n_positions: int) -> np.ndarray | None:
    """[P, D] what the model adds at positions 0..P-1 (sinusoidal or learned), or None (rope, none)."""
    table = model.positional.table
    if table is None:
        return None
    if n_positions > table.shape[0]:
        if model.positional.kind == "learned":
            raise ConfigError(_too_many_rows(table.shape[0]))
        return sinusoidal(n_positions, model.d_model).numpy()
    return table[:n_positions].detach().numpy().copy()


def learned_rows(model: Transformer) -> int | None:
    """How many positions a learned table has (None for the other encodings, which have any position)."""
    table = model.positional.table
    return int(table.shape[0]) if table is not None and model.positional.kind == "learned" else None


def _too_many_rows(rows: int) -> str:
    return f"The learned table has {rows:,} positions; ask for at most that many (Max position {rows:,})."


def wavelengths(d_model: int, base: float = ROPE_BASE) -> np.ndarray:
    """[ceil(D/2)] the period, in positions, of sinusoid (or rotary) pair i: 2 pi base^(2i/D)."""
    return 2 * math.pi * np.power(float(base), np.arange(0, d_model, 2) / d_model)


def similarity(table: np.ndarray, metric: str = "cosine") -> np.ndarray:
    """[P, P] dot products or cosine similarities between the encodings of every pair of positions."""
    table = table.astype(np.float64)
    if metric == "cosine":
        table = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
    elif metric != "dot":
        raise ConfigError(f"similarity metric {metric!r} is not one of 'dot' or 'cosine'.")
    return table @ table.T


def similarity_to(table: np.ndarray, reference: int, metric: str = "cosine") -> np.ndarray:
    """[P] row `reference` of similarity(table, metric), without building the [P, P] matrix."""
    table = table.astype(np.float64)
    if metric == "cosine":
        table = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
    elif metric != "dot":
        raise ConfigError(f"similarity metric {metric!r} is not one of 'dot' or 'cosine'.")
    return table @ table[reference]


def rope_angle_table(n_positions: int, d_head: int, base: float = ROPE_BASE) -> np.ndarray:
    """[P, K/2] the angle (radians) rotary encoding with this base turns pair i by at position p."""
    return rope_angles(n_positions, d_head, base=base).numpy()


@dataclass(frozen=True)
class PermutationDemo:
    tokens: list[str]
    shuffled: list[str]
    order: list[int]  # shuffled[i] = tokens[order[i]]
    attention: np.ndarray  # [L, H, T, T] on the tokens
    shuffled_attention: np.ndarray  # [L, H, T, T] on the shuffled tokens
    max_difference: float  # max |attention permuted by order - shuffled_attention|; 0 means order is invisible
    allowed: np.ndarray  # [T, T] bool: which keys each query may attend to, on the tokens
    shuffled_allowed: np.ndarray  # [T, T] bool: the same for the run on the shuffled tokens
    byte_level: bool = False  # the tokens are byte-level BPE pieces, which labels write as they read (trace.py)

    @property
    def labels(self) -> list[str]:
        """The tokens as axes label them (AttentionMaps.query_labels)."""
        return token_axis_labels(self.tokens, self.byte_level)

    @property
    def shuffled_labels(self) -> list[str]:
        """The reordered tokens as axes label them."""
        return token_axis_labels(self.shuffled, self.byte_level)

    @property
    def permuted_attention(self) -> np.ndarray:
        """[L, H, T, T] the original maps with rows and columns moved along with their tokens: what the shuffled
        run gives when the model cannot see order."""
        return self.attention[:, :, self.order][:, :, :, self.order]

    def permuted_map(self, layer: int, head: int) -> np.ndarray:
        """[T, T] one head's map of permuted_attention, without moving every other head's (two copies of every map:
        566 MB for SmolLM2 on 512 pieces)."""
        return self.attention[layer, head][self.order][:, self.order]

    @property
    def permuted_allowed(self) -> np.ndarray:
        """[T, T] the original mask with rows and columns moved along with their tokens."""
        return self.allowed[self.order][:, self.order]

    @property
    def order_invisible(self) -> bool:
        """True when the shuffled run only moved the maps (up to float32 rounding, ROUNDING_TOLERANCE)."""
        return self.max_difference < ROUNDING_TOLERANCE


def _model_and_config(model_or_config: ModelConfig | Transformer) -> tuple[Transformer, ModelConfig]:
    """A model built once for both runs of a demonstration (a given model is only read, never changed)."""
    if isinstance(model_or_config, ModelConfig):
        return build_model(model_or_config), model_or_config
    if model_or_config.config is None:
        raise ConfigError("This demonstration needs a model built from a ModelConfig.")
    return model_or_config, model_or_config.config


def permutation_demo(
    model_or_config: ModelConfig | Transformer,
    text: str | list[str],
    order: list[int] | None = None,
    target: str | list[str] | None = None,
    typed: AttentionMaps | None = None,
) -> PermutationDemo:
    """Run the tokens and a reordering of them (reversed by default); compare attention after undoing the order.
    `typed`: the first stack's self-attention of a run of this model on these tokens (and target) that the caller
    has already, used instead of running them again.
    Mathematically 0 only when nothing in the model knows positions: positional "none" and no causal mask;
    measured, it is then 0 up to float32 rounding (sums taken in another order), below ROUNDING_TOLERANCE.
    An encoder-decoder reorders the source and compares the encoder's self-attention (the target is kept)."""
    model, cfg = _model_and_config(model_or_config)
    tokens = split_tokens(text, cfg.max_tokens)
    order = list(range(len(tokens)))[::-1] if order is None else list(order)
    if sorted(order) != list(range(len(tokens))):
        raise ConfigError(f"The order must list each position 0 to {len(tokens) - 1} once.")
    if cfg.reads_target and target is None:
        raise ConfigError("An encoder-decoder needs a target sentence as well as the source; type one.")
    if not cfg.reads_target:
        target = None
    shuffled = [tokens[i] for i in order]
    if typed is not None and list(typed.query_tokens) != tokens:
        raise ConfigError("The typed run's maps are of other tokens than the ones to reorder.")
    if typed is None:
        attention, allowed = _self_attention(model, tokens, target)  # [L, H, T, T], [T, T]
    else:
        attention, allowed = typed.weights, typed.allowed
    shuffled_attention, shuffled_allowed = _self_attention(model, shuffled, target)
    # Each layer's maps with rows and columns moved with their tokens, against the shuffled run's: a layer at a time,
    # since a moved copy of every map is 283 MB for SmolLM2 on 512 pieces
    difference = max(
        float(np.abs(maps[:, order][:, :, order] - shuffled_maps).max())  # [H, T, T]
        for maps, shuffled_maps in zip(attention, shuffled_attention, strict=True)
    )
    return PermutationDemo(
        tokens,
        shuffled,
        order,
        attention,
        shuffled_attention,
        difference,
        allowed,
        shuffled_allowed,
        byte_level_pieces(model),
    )


def _self_attention(
    model: Transformer, tokens: list[str], target: str | list[str] | None
) -> tuple[np.ndarray, np.ndarray]:
    """The first stack's self-attention weights [L, H, T, T] and allowed cells [T, T] of one run; the rest of its
    trace goes as soon as they are read (SmolLM2's on 512 pieces is 627 MB, and 283 MB more with scores)."""
    maps = run(model, tokens, target, keep_scores=False).first.self_attention
    return maps.weights, maps.allowed


def reorder(n_tokens: int, how: str, seed: int = 0) -> list[int]:
    """An order for permutation_demo: "reversed", "rotated by one" (the first token moves to the end), or
    "shuffled" (a random permutation from the seed, never the identity when another one exists)."""
    positions = list(range(n_tokens))
    if how == "reversed":
        return positions[::-1]
    if how == "rotated by one":
        return positions[1:] + positions[:1]
    if how == "shuffled":
        generator = np.random.default_rng(seed)
        for _ in range(100):
            order = generator.permutation(n_tokens).tolist()
            if order != positions or n_tokens < 2:
                return order
        return positions[1:] + positions[:1]
    raise ConfigError(f"Reordering {how!r} is not one of {', '.join(REORDERINGS)}.")


def default_dimensions(d_model: int) -> list[int]:
    """A spread of sine/cosine pairs to plot: (0, 1) and up to three more pairs at 1/8, 1/4 and 1/2 of d_model."""
    dims: list[int] = []
    for fraction in (0, 1 / 8, 1 / 4, 1 / 2):
        start = 2 * int(fraction * d_model / 2)  # even: the sine of a pair
        dims += [d for d in (start, start + 1) if d < d_model and d not in dims]
    return dims


def parse_dimensions(text: str, d_model: int) -> list[int]:
    """Dimensions typed as "0, 1, 6-9" (commas or spaces; a-b is a range): sorted, unique, checked against
    d_model. Empty text gives default_dimensions. ConfigError with what to type for anything else."""
    if not text.strip():
        return default_dimensions(d_model)
    dims: set[int] = set()
    for part in text.replace(",", " ").split():
        low, dash, high = part.partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            raise ConfigError(
                f"Dimension {part[:20]!r} is not a whole number; type dimensions like 0, 1, 6-9."
            ) from None
        if last < first:
            raise ConfigError(f"The range {part} runs backwards; write it as {last}-{first}.")
        check_range(1, [first, last], d_model)
        dims.update(range(first, last + 1))
        if len(dims) > MAX_CURVES:
            raise ConfigError(f"Pick at most {MAX_CURVES} dimensions to draw as curves; the heatmap shows them all.")
    return sorted(dims)


@dataclass(frozen=True)
class OffsetScores:
    token: str
    layer: int
    head: int
    scores: np.ndarray  # [P, P] scaled q.k of one head when `token` fills every position; -inf where masked
    offsets: np.ndarray  # [2P - 1] query position minus key position, -(P - 1) .. P - 1
    by_offset: np.ndarray  # [2P - 1] mean score on each diagonal (NaN where the whole diagonal is masked)
    spread: float  # max over diagonals of (max - min) score: 0 when the score depends on the offset only


def offset_token(typed: Sequence[str], special: Collection[str] = ()) -> str:
    """The token the offset demonstration repeats: the first typed one that is a word, not padding or a special
    piece (MiniLM's text starts with [CLS]); the first that is not padding if all are special; else "a"."""
    words = [token for token in typed if token != "[PAD]"]
    return next((token for token in words if token not in special), words[0] if words else "a")


def repeated_token_scores(model_or_config: ModelConfig | Transformer, token: str, n_positions: int) -> np.ndarray:
    """[L, H, P, P] the first stack's self-attention scores when `token` fills every position 0..P-1
    (an encoder-decoder's decoder reads the same tokens); -inf where masked."""
    model, cfg = _model_and_config(model_or_config)
    tokens = split_tokens([token] * n_positions, cfg.max_tokens)
    trace = run(model, tokens, tokens if cfg.reads_target else None)
    return trace.first.self_attention.scores


def offset_scores(
    model_or_config: ModelConfig | Transformer,
    token: str,
    n_positions: int,
    layer: int = 0,
    head: int = 0,
    scores: np.ndarray | None = None,
) -> OffsetScores:
    """The attention scores of one head when the same token sits at every position 0..P-1, so that the content
    is identical and only position can make the scores differ. With rope each diagonal (fixed offset m - n) is
    constant: the score depends on the offset alone. With added positions it depends on where both sit.
    `scores` may pass repeated_token_scores computed before (all layers and heads), to skip the run."""
    if scores is None:
        scores = repeated_token_scores(model_or_config, token, n_positions)
    scores = scores[layer, head].astype(np.float64)  # [P, P]
    offsets = np.arange(-(n_positions - 1), n_positions)
    means, spreads = [], [0.0]
    for offset in offsets:
        diagonal = np.diagonal(scores, offset=-offset)  # entries with query m, key n = m - offset
        finite = diagonal[np.isfinite(diagonal)]
        means.append(finite.mean() if finite.size else np.nan)
        if finite.size:
            spreads.append(float(finite.max() - finite.min()))
    return OffsetScores(token, layer, head, scores.astype(np.float32), offsets, np.asarray(means), max(spreads))
