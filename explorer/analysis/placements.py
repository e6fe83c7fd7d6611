"""All four norm placements on one model's very weights: residual RMS over depth, gradient norm per block and
attention entropy per layer, for each placement in turn (explorer.compare.model_for_b flips the placement)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from io import StringIO

import numpy as np
import pandas as pd
import torch

from explorer.analysis.gradients import gradient_norms, layer_gradient_totals
from explorer.analysis.stats import head_entropy
from explorer.compare import model_for_b
from explorer.config import NORMS, ConfigError
from explorer.inputs import Source
from explorer.model import Transformer
from explorer.trace import StackTrace, Trace, run

RMS, GRADIENT, ENTROPY = "residual RMS", "gradient norm", "attention entropy"
MEASURES = (RMS, GRADIENT, ENTROPY)
COLUMNS = ("placement", "stack", "layer", "measure", "value")
Progress = Callable[[float, str], None]  # (share done 0..1, what comes next)


@dataclass(frozen=True)
class PlacementRun:
    """The four placements on one model's weights and one input."""

    table: pd.DataFrame  # COLUMNS: residual RMS at layer -1 (the input) and after each block 0..L-1; gradient norm and
    # self-attention entropy (nats, mean over heads and over queries with an allowed key) of each block 0..L-1
    own: str  # the placement the weights were made with: the model's own (A's)
    new_norms: dict[str, tuple[str, ...]]  # per placement: its norm parameters the weights lacked, set to identity
    identity_norms: dict[str, bool]  # per placement: every norm of its blocks and stacks at weight 1, bias 0
    sublayers: dict[str, int]  # per stack: sub-layers per block (3 in a decoder with cross-attention, else 2)
    uniform_entropy: dict[str, float]  # per stack: the entropy of uniform attention over the allowed keys (nats)
    no_gradients: str | None  # why there are no gradient norms (e.g. a single token), or None

    def values(self, placement: str, measure: str, stack: str | None = None) -> np.ndarray:
        """[n] one placement's values of one measure over its layers, in order (the first stack unless named)."""
        stack = stack or self.stacks[0]
        rows = self.table[
            (self.table["placement"] == placement) & (self.table["measure"] == measure) & (self.table["stack"] == stack)
        ]
        return rows.sort_values("layer")["value"].to_numpy(dtype=np.float64)

    @property
    def stacks(self) -> list[str]:
        """The stacks measured, in the order they run: ["encoder"], ["decoder"] or ["encoder", "decoder"]."""
        return list(dict.fromkeys(self.table["stack"]))


def rms_over_depth(stack: StackTrace) -> np.ndarray:
    """[L + 1] the residual stream's RMS over tokens and units: index 0 the input, then after each block (before any
    final norm)."""
    # A layer at a time: the whole stream squared in float64 is 147 MB for SmolLM2 on 512 pieces
    return np.array([np.sqrt(np.square(layer, dtype=np.float64).mean()) for layer in stack.residual])  # [L + 1]


def layer_entropy(stack: StackTrace) -> np.ndarray:
    """[L] mean self-attention entropy (nats) of each layer: over its heads, and over the queries that may attend to
    at least one key (head_entropy leaves the others out, the same queries for every head)."""
    per_head = head_entropy(stack.self_attention)  # rows (layer, head)
    return per_head.groupby("layer", sort=True)["entropy"].mean().to_numpy(dtype=np.float64)  # [L]


def stack_rows(placement: str, stack: StackTrace, gradients: pd.DataFrame | None) -> list[pd.DataFrame]:
    """One stack's rows of the table for one placement."""
    rms = rms_over_depth(stack)  # [L + 1]
    entropy = layer_entropy(stack)  # [L]
    frames = [
        pd.DataFrame({"layer": np.arange(-1, len(rms) - 1), "measure": RMS, "value": rms}),
        pd.DataFrame({"layer": np.arange(len(entropy)), "measure": ENTROPY, "value": entropy}),
    ]
    if gradients is not None:
        mine = gradients[gradients["stack"] == stack.name].sort_values("layer")
        frames.append(pd.DataFrame({"layer": mine["layer"].to_numpy(int), "measure": GRADIENT, "value": mine["norm"]}))
    return [frame.assign(placement=placement, stack=stack.name) for frame in frames]


def new_norm_names(model: Transformer, flipped: Transformer) -> tuple[str, ...]:
    """The flipped model's norm parameters that the model (or what it carried aside) has no tensor for: model_for_b
    starts them at weight 1, bias 0."""
    had = set(model.state_dict()) | set(model.carried)
    return tuple(name for name, _ in flipped.named_parameters() if name not in had)


def placement_norms(model: Transformer) -> list[torch.nn.Module]:
    """Every norm the placement decides: norm1..3 and out_norm1..3 of each block, and each stack's final norm (not
    BERT's embedding norm, nor OLMo 2's query and key norms, which every placement keeps)."""
    norms = []
    for stack in (model.encoder, model.decoder):
        if stack is None:
            continue
        for block in stack.layers:
            norms += [n for i in (1, 2, 3) for n in block.norms_of(i) if n is not None]
        norms += [stack.norm] if stack.norm is not None else []
    return norms


def at_identity(norm: torch.nn.Module) -> bool:
    """True when a norm's weight is all 1 and its bias (if any) all 0: it only normalises."""
    bias = getattr(norm, "bias", None)
    return bool((norm.weight == 1).all()) and (bias is None or bool((bias == 0).all()))


def placement_run(
    model: Transformer,
    source: Source,
    target: Source | None = None,
    progress: Progress | None = None,
    built: Mapping[str, Transformer] | None = None,
    known: Mapping[str, tuple[Trace, pd.DataFrame | None]] | None = None,
) -> PlacementRun:
    """Run `model` with each of the four norm placements on its very weights (model_for_b, sharing the model's
    tensors; norms it lacks start at identity), one placement at a time: a forward for the residual stream and the
    attention, a forward and a backward for the gradient norms (layer_gradient_totals of gradient_norms, whose
    objective is objective_text(model)). `progress(share, what)` is told before each step.
    `built`: models already made by model_for_b(model, config with that placement) (Compare's B, say), used instead
    of building them again; `known`: for some placements, the trace of `source` (and `target`) and its
    layer_gradient_totals (None: not computed) already made by such a model (Compare's A and B), used instead of
    running them again."""
    cfg = model.config
    if cfg is None:
        raise ConfigError(
            "All four placements need a model built from a config (or a checkpoint): an imported torch module has "
            "no config to flip."
        )
    frames: list[pd.DataFrame] = []
    new_norms: dict[str, tuple[str, ...]] = {}
    identity: dict[str, bool] = {}
    no_gradients = None
    for i, placement in enumerate(NORMS):
        if progress is not None:
            progress(i / len(NORMS), f"{placement}-norm ({i + 1} of {len(NORMS)}): forward and backward")
        flipped = model if placement == cfg.norm else (built or {}).get(placement)
        if flipped is None:
            flipped = model_for_b(model, cfg.replace(norm=placement), share=True)  # only run: A's very tensors
        new_norms[placement] = () if flipped is model else new_norm_names(model, flipped)
        identity[placement] = all(at_identity(norm) for norm in placement_norms(flipped))
        trace, gradients = (known or {}).get(placement, (None, None))
        # The backward pass before the trace, so that the two are never held at once (SmolLM2 on 512 pieces: 0.8 GB
        # for the pass, 0.6 GB for a trace); the tables need no scores (283 MB more)
        if gradients is None and no_gradients is None:
            try:
                gradients = layer_gradient_totals(gradient_norms(flipped, source, target))
            except ConfigError as e:  # e.g. one token: nothing to predict. The same for every placement.
                no_gradients = str(e)
        if trace is None:
            trace = run(flipped, source, target, keep_scores=False)
        # In a comprehension, so that no loop variable keeps a stack of the trace once it is deleted below
        frames += [frame for stack in trace.stacks for frame in stack_rows(placement, stack, gradients)]
        sublayers = {s.name: 2 if s.cross_attention is None else 3 for s in trace.stacks}
        uniform = {s.name: float(head_entropy(s.self_attention)["max_entropy"].iloc[0]) for s in trace.stacks}
        del flipped, trace  # a checkpoint's copy and trace can be a GB each: one placement's at a time
    if progress is not None:
        progress(1.0, "done")
    table = pd.concat(frames, ignore_index=True)[list(COLUMNS)].astype({"layer": int, "value": float})
    return PlacementRun(table, cfg.norm, new_norms, identity, sublayers, uniform, no_gradients)


def table_csv(result: PlacementRun) -> str:
    """The table as CSV (COLUMNS), for the page's download."""
    return result.table.to_csv(index=False)


def read_table_csv(text: str) -> pd.DataFrame:
    """table_csv's text back as the table it wrote."""
    table = pd.read_csv(StringIO(text))
    return table.astype({"placement": str, "stack": str, "layer": int, "measure": str, "value": float})
