"""What each head does in one sentence: its share of attention per role, its breadth, and a label when clear.

Follows Clark et al. 2019, "What Does BERT Look At?" (Fig. 1-2): per head, the average share of attention that
goes to the first token, to separators, to punctuation, to the previous, next or same token, and how broad
(close to uniform) the attention is.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from explorer.analysis.norm_attention import norm_shares
from explorer.config import PAD_TOKEN, ConfigError
from explorer.trace import AttentionMaps

ROLES: tuple[str, ...] = ("first", "sep", "punct", "previous", "next", "self")
BROAD = "broad"

# A head "clearly" has a role when at least half of its attention goes there: then that role gets more than all
# the others together, the same bar Clark et al. use when they call a head a previous/next-token head.
DEFAULT_THRESHOLD = 0.5
# ...and when the runner-up is at least 0.2 behind, so a head split 55/45 between two roles is called mixed.
DEFAULT_MARGIN = 0.2
# Normalised entropy of 0.9 or more means the row is within about 10% of uniform over its allowed keys (e.g.
# uniform over 10 of 12 keys scores 0.93): the "bag of words" heads Clark et al. find in BERT's lower layers.
BROAD_BREADTH = 0.9
# Comparisons with the thresholds allow this much float rounding, so a share of 0.6 - 0.4 counts as 0.2.
TOLERANCE = 1e-9

_SUBWORD_PREFIXES = ("##", "Ġ")  # WordPiece continuation marker; byte-level BPE space marker


def is_punctuation(piece: str) -> bool:
    """True if the piece, without a leading "##" or "Ġ", is only punctuation (BERT's rule: ASCII symbols or P*)."""
    if piece == "Ġ":
        return False  # a lone byte-level space marker is a space, not punctuation
    for prefix in _SUBWORD_PREFIXES:
        if piece.startswith(prefix) and len(piece) > len(prefix):
            piece = piece[len(prefix) :]
            break
    return bool(piece) and all(_is_punctuation_char(ch) for ch in piece)


def _is_punctuation_char(ch: str) -> bool:
    """BERT's BasicTokenizer definition: every non-alphanumeric printable ASCII character, or Unicode class P*."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


@dataclass(frozen=True)
class HeadRoles:
    """Per-head role shares, breadth and labels for one sentence (see head_roles for the definitions)."""

    shares: np.ndarray  # [L, H, len(ROLES)] float64 share of attention per role (NaN where no query qualifies)
    breadth: np.ndarray  # [L, H] float64 in [0, 1] (NaN only if no query has two allowed keys)
    labels: np.ndarray  # [L, H] str: the clear role, "broad", or ""

    def table(self) -> pd.DataFrame:
        """Tidy table: one row per (layer, head) with columns layer, head, each role, breadth, label."""
        n_layers, n_heads = self.breadth.shape
        layers, heads = np.meshgrid(np.arange(n_layers), np.arange(n_heads), indexing="ij")  # [L, H] each
        columns: dict[str, np.ndarray] = {"layer": layers.ravel(), "head": heads.ravel()}
        for i, role in enumerate(ROLES):
            columns[role] = self.shares[:, :, i].ravel()
        columns["breadth"] = self.breadth.ravel()
        columns["label"] = self.labels.ravel()
        return pd.DataFrame(columns)

    def share(self, role: str) -> np.ndarray:
        """[L, H] share of attention that goes to one role (one of ROLES)."""
        if role not in ROLES:
            raise ConfigError(f"Role {role!r} is not one of {', '.join(ROLES)}.")
        return self.shares[:, :, ROLES.index(role)]


def text_queries(maps: AttentionMaps) -> np.ndarray:
    """[Tq, Tk] bool: maps.allowed with the rows of [PAD] queries cleared, so head_roles skips them. A padding mask
    hides [PAD] keys but lets a [PAD] query see every real token, and its row is no part of the sentence whose heads'
    roles are measured (Clark et al. measure text): counted, 4 [PAD]s changed 12 of MiniLM's 72 labels."""
    padding = np.array([token == PAD_TOKEN for token in maps.query_tokens], dtype=bool)  # [Tq]
    return np.asarray(maps.allowed, dtype=bool) & ~padding[:, None]  # [Tq, Tk]


def head_roles(
    weights: np.ndarray,
    tokens: list[str],
    allowed: np.ndarray,
    separators: Iterable[str] = ("[SEP]",),
    threshold: float = DEFAULT_THRESHOLD,
    margin: float = DEFAULT_MARGIN,
    entropy: np.ndarray | None = None,
) -> HeadRoles:
    """Share of attention per role, breadth and a label for every head of one sentence.

    weights [L, H, T, T]: rows sum to 1 over the allowed keys; a query with no allowed key (an all-False row of
    `allowed`) is skipped everywhere. allowed [T, T] bool: True = the query may see the key; text_queries(maps)
    clears the rows of [PAD] queries, which a padding mask lets see every real token.

    A role's share is the mean, over the queries for which the role's target exists, of the weight those queries
    put on it. The target must be an allowed key: query 0 has no previous token, the last query no next token, a
    causal query cannot see the next token, a sentence without separators has no "sep" target. A query with only
    one allowed key (query 0 of a causal mask) has no choice: its weight 1 on that key says nothing of the head, so
    it qualifies for no role. Such queries are left out of that role's average rather than counted as 0 (or 1); if
    no query qualifies the share is NaN. Roles may overlap (for query 1 the previous token is the first token), so
    the shares of a head need not add up to 1.

    Breadth is the mean, over the queries with at least two allowed keys, of the row's entropy divided by
    log(number of allowed keys in the row): 1 = uniform over the allowed keys, 0 = all weight on one key. A row
    with exactly one allowed key (query 0 of a causal mask) has no choice, so it is left out like a query without
    a role's target (counting it as 0 would keep a uniform causal head on a short sentence from ever being broad);
    if no query has two allowed keys the breadth is NaN.

    Label: the role with the largest share when that share is >= threshold and at least `margin` above the
    second largest (NaN shares are ignored; a lone defined share is compared with 0); otherwise "broad" when
    breadth >= BROAD_BREADTH (0.9); otherwise "" (mixed). `separators` are the tokens that count as "sep".

    entropy [L, H, T]: the entropy of each row of `weights` (0 on blocked keys), when the caller has it already
    (stats.row_entropy, which the Attention page's entropy table needs too); breadth is then read from it instead of
    from float64 logs of every weight, which are most of this function's time.
    """
    weights = np.asarray(weights)
    allowed = np.asarray(allowed, dtype=bool)
    _check_shapes(weights, tokens, allowed)
    if entropy is not None and np.shape(entropy) != weights.shape[:3]:
        raise ConfigError(
            f"entropy has shape {np.shape(entropy)}; it must be [layers, heads, queries] = {weights.shape[:3]}."
        )
    if not 0.0 <= threshold <= 1.0:
        raise ConfigError(f"threshold is {threshold}; a share threshold must be between 0 and 1.")
    if not margin >= 0.0:
        raise ConfigError(f"margin is {margin}; the margin over the second-largest share must be a number >= 0.")

    n_layers, n_heads, n_tokens, _ = weights.shape
    n_allowed = allowed.sum(axis=-1)  # [T]
    spread = n_allowed > 1  # [T]: the queries with a choice, whose row can be more or less broad and show a role
    targets = _role_targets(tokens, allowed, separators) & spread[None, :, None]  # [R, T, T] bool, allowed keys only
    qualifies = targets.any(axis=-1)  # [R, T]: the role's target exists for this query
    counts = qualifies.sum(axis=-1)  # [R]
    log_n = np.log(n_allowed[spread])  # [T'] > 0

    sums = np.zeros((n_layers, n_heads, len(ROLES)))  # [L, H, R] summed over qualifying queries
    breadth = np.full((n_layers, n_heads), np.nan)  # [L, H]
    is_role_key = targets[:3].any(axis=1).T  # [T, 3] bool: first, sep, punct keys
    role_keys = np.flatnonzero(is_role_key.any(axis=1))  # [k]: the keys that are one of them (a few of T)
    key_roles = is_role_key[role_keys].astype(np.float64)  # [k, 3]
    log_w = None if entropy is not None else np.zeros((n_heads, n_tokens, n_tokens))  # [H, T, T] scratch for log(w)
    blocked = ~allowed  # [T, T]
    for layer in range(n_layers):
        # Only the weights the shares read become float64: the role keys' columns and three diagonals, with nothing
        # on disallowed keys, even a NaN from softmax over an empty row. A float64 copy of every [H, T, T] weight was
        # 25 MB a layer for MiniLM at 512 pieces, and most of this function's time.
        w = weights[layer]  # [H, T, T]
        per_query = np.zeros((n_heads, n_tokens, len(ROLES)))  # [H, T, R]
        per_query[:, :, :3] = _allowed_f64(w[:, :, role_keys], blocked[:, role_keys]) @ key_roles
        per_query[:, 1:, 3] = _diagonal(w, blocked, -1)  # previous: w[q, q - 1]
        per_query[:, :-1, 4] = _diagonal(w, blocked, 1)  # next: w[q, q + 1]
        per_query[:, :, 5] = _diagonal(w, blocked, 0)  # self: w[q, q]
        sums[layer] = np.einsum("htr,rt->hr", per_query, qualifies)
        if not spread.any():
            continue
        if entropy is not None:
            layer_entropy = entropy[layer]  # [H, T] nats
        else:
            w = _allowed_f64(w, blocked)  # [H, T, T]
            log_w.fill(0.0)
            np.log(w, out=log_w, where=w > 0)  # 0 log 0 = 0
            layer_entropy = -np.einsum("htk,htk->ht", w, log_w)  # [H, T] nats
        breadth[layer] = np.clip(layer_entropy[:, spread] / log_n, 0.0, 1.0).mean(axis=-1)

    with np.errstate(divide="ignore", invalid="ignore"):
        shares = np.where(counts > 0, sums / counts, np.nan)  # [L, H, R]
    shares = np.clip(shares, 0.0, 1.0)  # float32 rows may sum to 1 + 1e-7; NaN stays NaN
    labels = _labels(shares, breadth, threshold, margin)
    for array in (shares, breadth, labels):
        array.setflags(write=False)
    return HeadRoles(shares=shares, breadth=breadth, labels=labels)


def norm_head_roles(
    norms: np.ndarray, tokens: list[str], allowed: np.ndarray, separators: Iterable[str] = ("[SEP]",)
) -> HeadRoles:
    """head_roles measured by what each head adds: on the norm_shares of norms [L, H, T, T] (‖α·f(x)‖, Kobayashi et
    al. 2020), one layer at a time, so no second [L, H, T, T] array is made beside the norms."""
    layers = [
        head_roles(norm_shares(norms[layer : layer + 1]), tokens, allowed, separators) for layer in range(len(norms))
    ]
    shares, breadth, labels = (
        np.concatenate([getattr(r, name) for r in layers]) for name in ("shares", "breadth", "labels")
    )
    for array in (shares, breadth, labels):
        array.setflags(write=False)
    return HeadRoles(shares=shares, breadth=breadth, labels=labels)


def _allowed_f64(weights: np.ndarray, blocked: np.ndarray) -> np.ndarray:
    """weights [..., Tq, k] as float64, 0 where blocked [Tq, k] (True = a key the query may not see)."""
    return np.where(blocked, 0.0, weights.astype(np.float64))


def _diagonal(weights: np.ndarray, blocked: np.ndarray, offset: int) -> np.ndarray:
    """[H, T - |offset|] float64: each head's weights w[q, q + offset], 0 where that key is blocked."""
    return _allowed_f64(np.diagonal(weights, offset, axis1=1, axis2=2), np.diagonal(blocked, offset))


def _check_shapes(weights: np.ndarray, tokens: list[str], allowed: np.ndarray) -> None:
    """Raise ConfigError unless weights is [L, H, T, T], allowed is [T, T] and there are T tokens."""
    if weights.ndim != 4:
        raise ConfigError(f"weights must have 4 dimensions [layers, heads, queries, keys]; got shape {weights.shape}.")
    n_layers, n_heads, n_queries, n_keys = weights.shape
    if n_layers == 0 or n_heads == 0:
        raise ConfigError(f"weights must have at least one layer and one head; got shape {weights.shape}.")
    if n_queries != n_keys:
        raise ConfigError(
            f"weights must be self-attention (as many queries as keys); got {n_queries} queries and {n_keys} keys."
        )
    if len(tokens) != n_keys:
        raise ConfigError(f"There are {len(tokens)} tokens but the weights cover {n_keys}; they must match.")
    if allowed.shape != (n_keys, n_keys):
        raise ConfigError(
            f"allowed must be [{n_keys}, {n_keys}] (one row and column per token); got shape {allowed.shape}."
        )


def _role_targets(tokens: list[str], allowed: np.ndarray, separators: Iterable[str]) -> np.ndarray:
    """[len(ROLES), T, T] bool: for each role, which keys are its target for each query (only allowed keys)."""
    n = len(tokens)
    separator_set = {separators} if isinstance(separators, str) else set(separators)  # "[SEP]" is one token
    position = np.arange(n)
    targets = np.zeros((len(ROLES), n, n), dtype=bool)
    targets[0, :, 0] = True  # first: key 0
    targets[1] = np.array([token in separator_set for token in tokens], dtype=bool)[None, :]
    targets[2] = np.array([is_punctuation(token) for token in tokens], dtype=bool)[None, :]
    targets[3] = position[None, :] == position[:, None] - 1  # previous: key = query - 1
    targets[4] = position[None, :] == position[:, None] + 1  # next: key = query + 1
    targets[5] = position[None, :] == position[:, None]  # self: key = query
    return targets & allowed


def _labels(shares: np.ndarray, breadth: np.ndarray, threshold: float, margin: float) -> np.ndarray:
    """[L, H] str: the clear role (largest share >= threshold and >= margin above the next), "broad", or ""."""
    defined = np.where(np.isnan(shares), -np.inf, shares)  # [L, H, R]: NaN shares never win nor come second
    ranked = np.sort(defined, axis=-1)  # [L, H, R] ascending
    best = ranked[..., -1]  # [L, H]
    runner_up = np.maximum(ranked[..., -2], 0.0)  # [L, H]; 0 when only one role is defined
    clear = (best >= threshold - TOLERANCE) & (best - runner_up >= margin - TOLERANCE)  # [L, H]; -inf fails
    best_role = np.argmax(defined, axis=-1)  # [L, H]
    names = np.array(ROLES)
    broad = ~clear & (np.nan_to_num(breadth, nan=0.0) >= BROAD_BREADTH - TOLERANCE)
    return np.where(clear, names[best_role], np.where(broad, BROAD, "")).astype(str)
