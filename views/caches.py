"""The app's caches: models, traces and what the pages compute from them (what they compute from one shown trace:
views/trace_caches.py, under the same rules).

The rules that keep them safe (see also DESIGN.md):
- Keyed on hashable configs, texts and numbers, never on a model or a trace: an argument named with a leading
  underscore is not hashed, and something else in the key decides it (the config, or a `key` tuple).
- A cached model is shared by every session and thread: it is only read (run() and the demonstrations never write
  to it); a change such as a norm flip makes a copy (explorer.compare.model_for_b).
- A trained model is this session's own: its results skip the shared caches (from_model), or are keyed on
  state.model_key(), unique to it, so no other session can be handed its numbers.
- Traces, norm maps and rollouts share one budget of bytes (views.shared_cache, ATTENTION_EXPLORER_MEMORY_MB), are
  never copied on a hit and are read-only; smaller results are st.cache_data's, bounded by max_entries.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import streamlit as st
from streamlit.logger import get_logger

import explorer
from explorer.ablation import Head
from explorer.analysis.gradients import gradient_change, gradient_norms, layer_gradient_totals
from explorer.analysis.norm_attention import norm_attention
from explorer.analysis.placements import PlacementRun, placement_run
from explorer.analysis.position_analysis import (
    PermutationDemo,
    encoding_table,
    permutation_demo,
    repeated_token_scores,
    similarity,
)
from explorer.anatomy import parameter_counts
from explorer.build import build_model
from explorer.compare import (
    MapPair,
    head_ranking,
    layer_values,
    model_for_b,
    per_layer_comparison,
    same_parameters,
)
from explorer.config import CheckpointConfig, ConfigError, ModelConfig
from explorer.limits import trace_bytes
from explorer.malloc import give_back
from explorer.model import Transformer
from explorer.positional import sinusoidal
from explorer.pretrained import INSTALLED, load_pretrained
from explorer.trace import AttentionMaps, Trace
from pictures.positional_charts import every_nth
from views.shared_cache import shared, taking_turns
from views.state import current_source, model_key, session_model, trained_model
from views.trace_caches import trace_key

Result = TypeVar("Result")
LOG = get_logger(__name__)  # "building model" lines: bench/bench_load.py counts them
# The app's runs: no free-memory refusal from explorer.run, whose answer would change with the moment. The app has
# limits of its own (check_app_size, the memory gate), and a page makes a trace the cache dropped again where no
# ConfigError is caught.
APP_RUN = {"check_memory": False}


def from_model(cached: Callable[..., Result], *args: object, **unkeyed: object) -> Result:
    """cached(*args, _model=the session's model, **unkeyed): `unkeyed` are more arguments named with a leading
    underscore, which the cache key leaves out (the other arguments decide them). A trained model's results skip the
    cache: they would be stored under a config that a random model of the same shape shares, and belong to this
    session only."""
    if current_source().shared:
        return cached(*args, _model=session_model(), **unkeyed)
    return cached.__wrapped__(*args, _model=session_model(), **unkeyed)


# --- Models: each config names one model, built or loaded once per server.


@functools.cache
def installed_checkpoints() -> tuple[str, ...]:
    """explorer.list_pretrained(), asked once per server: it looks for each checkpoint's package along sys.path, 40
    file checks on every page load. A package installed while the server runs is offered after a restart."""
    return tuple(explorer.list_pretrained())


_CHECKPOINTS: dict[str, Transformer] = {}  # every shipped checkpoint this server has loaded: read, never mutated
_LOCKS_LOCK = threading.Lock()
_CHECKPOINT_LOCKS: dict[str, threading.Lock] = {}


def checkpoint_lock(name: str) -> threading.Lock:
    """The lock a checkpoint's loading holds: thirty students opening one link load it once, not thirty times; a
    page asking for SmolLM2 does not wait for MiniLM's load (launch.py preloads one after the other)."""
    with _LOCKS_LOCK:
        return _CHECKPOINT_LOCKS.setdefault(name, threading.Lock())


def pretrained_model(name: str) -> Transformer:
    """A shipped checkpoint, loaded on first use in this server (with a progress bar) and shared by every session."""
    if name in _CHECKPOINTS:
        return _CHECKPOINTS[name]
    title = INSTALLED[name].title if name in INSTALLED else name
    bar = st.progress(0.0, text=f"Loading {title}: the first visitor of this server waits a few seconds…")
    try:
        with checkpoint_lock(name):  # a second session waits here while the first loads it
            if name not in _CHECKPOINTS:
                LOG.info("building model %s", name)
                _CHECKPOINTS[name] = load_pretrained(
                    name, progress=lambda done, what: bar.progress(min(1.0, done), text=f"Loading {title}: {what}")
                )
    finally:
        bar.empty()
    return _CHECKPOINTS[name]


@st.cache_resource(max_entries=8, show_spinner="Building the model…")  # at most 400 MB each (explorer.limits)
def _built_model(cfg: ModelConfig) -> Transformer:
    LOG.info("building model %s", cfg)
    return build_model(cfg)


# A changed checkpoint (a norm flip) runs on the checkpoint's own tensors: it holds only what it changes (its norms),
# not a 540 MB copy of SmolLM2. Two at most, e.g. two norm flips compared at once.
@st.cache_resource(max_entries=2, show_spinner="Building the changed model on the checkpoint's weights…")
def _checkpoint_copy(cfg: CheckpointConfig) -> Transformer:
    LOG.info("building model %s", cfg)
    return model_for_b(pretrained_model(cfg.checkpoint), cfg, share=True)  # only run: the checkpoint's own tensors


def cached_model(cfg: ModelConfig) -> Transformer:
    """The one model a config names, shared by every session and page (never mutated: run() only reads it): random
    weights for a configured model, the checkpoint itself for its own config, a copy on its weights otherwise (a
    checkpoint changed on purpose, e.g. its norm flipped)."""
    if isinstance(cfg, CheckpointConfig):
        model = pretrained_model(cfg.checkpoint)
        return model if model.config == cfg else _checkpoint_copy(cfg)
    return _built_model(cfg)


# --- The sidebar's traces (dashboard.py).


# Removed heads are an argument of the run, never a change to the model: the same cached model serves every
# removal, and the heads (sorted, checked) and their mode key the trace. No head removed: NO_REMOVAL. Every caller
# passes both (a cache key is made of the arguments given, so a default left out would be another entry).
NO_REMOVAL: tuple[tuple[Head, ...], str] = ((), "zero")


def trace_room(cfg: ModelConfig, text: str, target: str | None = None) -> int:
    """explorer.limits.trace_bytes of the trace a config makes of a text (an upper estimate: 873 MB for SmolLM2's
    628 on 512 pieces): what the shared cache makes room for before the run, so a new long trace is not made beside
    the old ones it will push out (views.shared_cache.ByteBudgetCache.get)."""
    if isinstance(cfg, CheckpointConfig):
        return trace_bytes(cfg, len(pretrained_model(cfg.checkpoint).tokenizer.encode(text).ids))
    return trace_bytes(cfg, len(text.split()), None if target is None else len(target.split()))


def pieces_room(cfg: ModelConfig, pieces: Sequence[str], target: Sequence[str] | None = None) -> int:
    """trace_room of an input already split into its pieces (a trace's tokens)."""
    return trace_bytes(cfg, len(pieces), None if target is None else len(target))


# The app's traces keep no pre-softmax scores (no page shows them): 283 of SmolLM2's 910 MB on 512 pieces.
@shared("Running the model…", room=lambda cfg, tokens, target, *_: trace_room(cfg, tokens, target))
def cached_run(
    cfg: ModelConfig, tokens: str, target: str | None, ablate: tuple[Head, ...], ablate_with: str
) -> explorer.Trace:
    """The trace for a config and input text, with the heads `ablate` removed (deterministic, so safe to cache)."""
    trace = explorer.run(
        cached_model(cfg), tokens, target, ablate=ablate, ablate_with=ablate_with, keep_scores=False, **APP_RUN
    )
    give_back()  # the forward's freed temporaries (explorer/malloc.py)
    return trace


# A real checkpoint's trace reaches 626 MB (512 pieces through SmolLM2's 270 heads): the shared budget keeps few.
@shared("Running the real model…", room=lambda cfg, text, *_: trace_room(cfg, text))
def cached_checkpoint_run(
    cfg: CheckpointConfig, text: str, ablate: tuple[Head, ...], ablate_with: str
) -> explorer.Trace:
    """The trace of a shipped checkpoint on a text, with the heads `ablate` removed (deterministic, so safe to
    cache)."""
    trace = explorer.run(cached_model(cfg), text, ablate=ablate, ablate_with=ablate_with, keep_scores=False, **APP_RUN)
    give_back()  # the forward's freed temporaries: hundreds of MB for SmolLM2 on 512 pieces (explorer/malloc.py)
    return trace


# --- Compare: B is built on A's model and cached per (A, B, model_key()); nothing cached is ever mutated.


def model_a(cfg: ModelConfig, who: str | None) -> explorer.Transformer:
    """A's model: the sidebar's shared random model, or (who = model_key()) this session's trained model, found by
    its key, so that B's run can be made again outside the script run (a download's callable)."""
    return cached_model(cfg) if who is None else trained_model(who)


@st.cache_resource(max_entries=3, show_spinner="Building B on A's weights…")
def _model_b(a: ModelConfig, b: ModelConfig, who: str | None) -> explorer.Transformer:
    return model_for_b(model_a(a, who), b, share=True)  # only run: A's own tensors, never written


def model_of(a: ModelConfig, b: ModelConfig, who: str | None) -> explorer.Transformer:
    """B's model: model_for_b(A's model, B), which carries A's very weights wherever names and shapes match;
    A's model itself when B is A (the same weights, without a second copy in memory: "A with heads removed" is
    that, run with an ablation); for a checkpoint B, the shared checkpoint or a copy of its weights (cached_model)."""
    if b == a:
        return model_a(a, who)
    return cached_model(b) if isinstance(b, CheckpointConfig) else _model_b(a, b, who)


@shared("Running B…", room=lambda a, b, text, target, *_: trace_room(b, text, target))
def trace_of(
    a: ModelConfig,
    b: ModelConfig,
    text: str,
    target: str | None,
    who: str | None,
    ablate: tuple[Head, ...],
    ablate_with: str,
) -> Trace:
    """B's trace: B's model (model_of) on B's text, with the heads `ablate` removed (NO_REMOVAL: none)."""
    return explorer.run(
        model_of(a, b, who), text, target, ablate=ablate, ablate_with=ablate_with, keep_scores=False, **APP_RUN
    )


@st.cache_data(max_entries=32, show_spinner="Computing gradient norms…")
def gradient_totals(a: ModelConfig, b: ModelConfig, text: str, target: str | None, who: str | None) -> pd.DataFrame:
    with taking_turns(trace_room(b, text, target)):  # a backward pass: about a trace's bytes at its peak
        model = model_of(a, b, who)
        totals = layer_gradient_totals(gradient_norms(model, text, target))
        if trained_elsewhere(a, b, who):  # resolved in float32? One more backward pass, and a `change` column
            return gradient_change(model, text, target, totals)
        return totals


def trained_elsewhere(a: ModelConfig, b: ModelConfig, who: str | None) -> bool:
    """Whether B runs trained weights with another placement or shape than they were made for: a checkpoint's own
    with another norm, or this session's trained model's (`who`) with any other setting."""
    if isinstance(b, CheckpointConfig):
        return isinstance(a, CheckpointConfig) and a.checkpoint == b.checkpoint and a.norm != b.norm
    return who is not None and b != a


@st.cache_data(max_entries=16, show_spinner=False)
def weight_facts(a: ModelConfig, b: ModelConfig, who: str | None) -> dict[str, Any]:
    """Checked tensor by tensor: how many parameters A and B share and whether all are identical."""
    params_a = dict(model_a(a, who).named_parameters())
    params_b = dict(model_of(a, b, who).named_parameters())
    common = [name for name in params_a if name in params_b and params_a[name].shape == params_b[name].shape]
    return {
        "shared": len(common),
        "identical": same_parameters(model_a(a, who), model_of(a, b, who)),
        "only_b": sorted(set(params_b) - set(params_a)),
        "only_a": sorted(set(params_a) - set(params_b)),
    }


def ranking_key(trace_a: Trace, trace_b: Trace, order: tuple[int, ...] | None, label: str) -> tuple:
    """What decides the pair ranking_of ranks: each run's config and tokens (and heads removed), the `order` lining
    B's tokens up with A's, the kind of maps (`label`) and whose model (model_key()). Compare's maps and its sentence
    on a norm flip rank the same pair: the key makes it one computation (2.3 s for SmolLM2's 270 heads on 512
    pieces)."""
    runs = tuple((trace.config, trace_key(trace)) for trace in (trace_a, trace_b))
    return (*runs, order, label, model_key())


@st.cache_data(max_entries=32, show_spinner=False)
def ranking_of(_pair: MapPair, key: tuple) -> pd.DataFrame:
    """head_ranking of a pair; `key` (ranking_key) decides the pair, so it keys the cache instead of hashing the
    maps."""
    assert _pair.a is not None and _pair.b is not None
    return head_ranking(_pair.a, _pair.b)


@st.cache_data(max_entries=32, show_spinner=False)
def stack_tables(
    _trace_a: Trace, _trace_b: Trace | None, _grads_a: pd.DataFrame | None, _grads_b: pd.DataFrame | None, key: tuple
) -> dict[str, pd.DataFrame]:
    """per_layer_comparison for each stack position (the stack reading the tokens, then a decoder). `key`
    (configurations, texts, model_key()) decides the traces and gradients, so it keys the cache instead of
    hashing them (the statistics of 12 layers of width 768 on 64 tokens take about 0.1 s)."""
    tables = {}
    trace_a, trace_b, grads_a, grads_b = _trace_a, _trace_b, _grads_a, _grads_b  # underscored: not hashed by the cache
    n_stacks = max(len(trace_a.stacks), len(trace_b.stacks) if trace_b is not None else 0)
    for i in range(n_stacks):
        stack_a = trace_a.stacks[i] if i < len(trace_a.stacks) else None
        stack_b = trace_b.stacks[i] if trace_b is not None and i < len(trace_b.stacks) else None
        names = list(dict.fromkeys(s.name for s in (stack_a, stack_b) if s is not None))
        label = names[0] if len(names) == 1 else f"{names[0]} (A) vs {names[1]} (B)"
        tables[label] = per_layer_comparison(
            layer_values(stack_a, grads_a) if stack_a is not None else None,
            layer_values(stack_b, grads_b) if stack_b is not None else None,
        )
    return tables


# --- Positional encodings: called through from_model, so `_model` is the session's model for `cfg`.


@st.cache_data(max_entries=16, show_spinner="Computing the encoding table…")
def cached_table(cfg: ModelConfig, n_positions: int, _model: Transformer) -> np.ndarray | None:
    """[P, D] what the model adds at positions 0..P-1 (None for rope and none); _model is the session's model."""
    if cfg.positional == "sinusoidal":  # fixed: no need to build the model to know it
        return sinusoidal(n_positions, cfg.d_model).numpy()
    if cfg.positional == "learned":
        return encoding_table(_model, n_positions)
    return None


@st.cache_data(max_entries=16, show_spinner=False)
def cached_similarity(
    cfg: ModelConfig, n_positions: int, metric: str, _model: Transformer
) -> tuple[np.ndarray, np.ndarray]:
    """(positions drawn, [P', P'] similarity between their encodings); long tables keep every n-th position."""
    table = cached_table.__wrapped__(cfg, n_positions, _model)
    positions = every_nth(n_positions)
    return positions, similarity(table[positions], metric)


# two [L, H, T, T] maps: 566 MB for SmolLM2 on 512 pieces
@shared(
    "Running the model on the reordered tokens…",
    room=lambda cfg, tokens, order, target, *_, **__: pieces_room(cfg, tokens, target),
)
def cached_permutation(
    cfg: ModelConfig,
    tokens: tuple[str, ...],
    order: tuple[int, ...],
    target: tuple | None,
    _model: Transformer,
    _typed: AttentionMaps | None = None,
) -> PermutationDemo:
    """permutation_demo of the tokens in `order`; `_typed`: the page's own maps of the tokens in their typed order
    (its trace with every head), so that only the reordered tokens are run."""
    return permutation_demo(_model, list(tokens), list(order), None if target is None else list(target), _typed)


@st.cache_data(max_entries=16, show_spinner="Running the model on a repeated token…")
def cached_repeated_scores(cfg: ModelConfig, token: str, n_positions: int, _model: Transformer) -> np.ndarray:
    """[L, H, P, P] scores of every head on the repeated token (one run for every layer and head)."""
    return repeated_token_scores(_model, token, n_positions)


# --- Activations and Anatomy: called through from_model too.


@st.cache_data(max_entries=16, show_spinner="Computing gradients (a backward pass)…")
def cached_gradients(
    cfg: ModelConfig, tokens: tuple[str, ...], target: tuple[str, ...] | None, _model: Transformer
) -> pd.DataFrame:
    """Gradient norm of every parameter tensor for objective_text(_model) on the typed tokens; _model is the
    session's model for cfg (only read: gradient_norms writes no .grad)."""
    with taking_turns(pieces_room(cfg, tokens, target)):
        return gradient_norms(_model, list(tokens), None if target is None else list(target))


@st.cache_data(max_entries=16, show_spinner="Counting parameters…")
def cached_parameter_counts(cfg: ModelConfig, _model: Transformer) -> pd.DataFrame:
    """Parameters of the session's model for cfg (a trained model adds its embedding and read-out)."""
    return parameter_counts(_model)


@shared("Measuring what each of B's heads adds…", room=lambda a, b, text, target, *_: trace_room(b, text, target))
def _compare_norms(
    a: ModelConfig,
    b: ModelConfig,
    text: str,
    target: str | None,
    who: str | None,
    kind: str,
    ablate: tuple[Head, ...],
    ablate_with: str,
) -> np.ndarray:
    trace = trace_of(a, b, text, target, who, ablate, ablate_with)
    return norm_attention(model_of(a, b, who), trace, kind)


def compare_norms(
    a: ModelConfig,
    b: ModelConfig,
    text: str,
    target: str | None,
    who: str | None,
    kind: str,
    ablate: tuple[Head, ...] = (),
    ablate_with: str = "zero",
):
    """[L, H, Tq, Tk] read-only: norm_attention of B's model (model_of) on B's trace (trace_of, same arguments): a
    removed head adds nothing (or its mean)."""
    return _compare_norms(a, b, text, target, who, kind, ablate, ablate_with)


# --- Compare's "All four placements": A's model with each placement in turn (explorer.analysis.placements). The
# result is a small table. The page has already run A and B (A's own placement, and B when B is A with another
# placement) and built B on A's weights: those are lent, so only the other placements are built and run, one copy
# at a time inside placement_run (a SmolLM2 copy is 540 MB).


@st.cache_data(max_entries=16, show_spinner=False)
def _placements(
    a: ModelConfig, text: str, target: str | None, who: str | None, _built: dict, _known: dict
) -> PlacementRun:
    bar = st.progress(0.0)  # made here, so a cache hit replays it (as an empty element) instead of failing

    def progress(share: float, what: str) -> None:
        give_back()  # what the last placement's forward and backward pass freed
        bar.progress(share, text=f"Running A's weights with every placement: {what}…")

    try:
        with taking_turns(trace_room(a, text, target)):  # each placement's run and backward pass, one at a time
            return placement_run(model_a(a, who), text, target, progress, _built, _known)
    finally:
        bar.empty()


def _totals_or_none(a: ModelConfig, b: ModelConfig, text: str, target: str | None, who: str | None):
    try:
        return gradient_totals(a, b, text, target, who)
    except ConfigError:
        return None


def placements_of(
    a: ModelConfig, b: ModelConfig | None, text: str, target: str | None, who: str | None, trace_a: Trace
) -> PlacementRun:
    """placement_run of A's model (model_a) on A's text (whose trace is `trace_a`), with a progress bar while it
    runs. A's trace and gradient totals are lent to it, and so are B's model, trace and totals when B is A with
    another placement only (all cached by the Compare page already)."""
    known = {a.norm: (trace_a, _totals_or_none(a, a, text, target, who))}
    built = {}
    if b is not None and b.norm != a.norm and b == a.replace(norm=b.norm):
        built[b.norm] = model_of(a, b, who)
        known[b.norm] = (trace_of(a, b, text, target, who, *NO_REMOVAL), _totals_or_none(a, b, text, target, who))
    return _placements(a, text, target, who, _built=built, _known=known)
