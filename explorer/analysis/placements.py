"""All four norm placements on one model's very weights: residual RMS over depth, gradient norm per block and
attention entropy per layer, for each placement in turn (explorer.compare.model_for_b flips the placement)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from io import StringIO

import numpy as np
import pandas as pd
import torch

from explorer.analysis.gradients import gradient_change, gradient_norms, layer_gradient_totals, unresolved_change
from explorer.analysis.stats import head_entropy
from explorer.compare import model_for_b
from explorer.config import NORMS, ConfigError
from explorer.inputs import Source, prepare_inputs
from explorer.model import Record, Transformer, float32_default
from explorer.trace import AttentionMaps, StackTrace, Trace

RMS, GRADIENT, ENTROPY = "residual RMS", "gradient norm", "attention entropy"
MEASURES = (RMS, GRADIENT, ENTROPY)
COLUMNS = ("placement", "stack", "layer", "measure", "value")
# The CSV's columns: the table's, and whether float32 resolves the value (False: a gradient norm of a placement in
# PlacementRun.unresolved, which the chart draws faint and the sentences leave out)
CSV_COLUMNS = (*COLUMNS, "resolved")
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
    # per placement whose gradient norms float32 does not resolve (gradient_change above UNRESOLVED in some block of
    # some stack): the largest change. Checked where trained weights run with another placement than their own.
    unresolved: dict[str, float] = field(default_factory=dict)

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


@dataclass(frozen=True)
class StackMeasures:
    """What the table reads of one stack's run with one placement."""

    name: str  # "encoder" or "decoder"
    rms: np.ndarray  # [L + 1] the residual stream's RMS: the input, then after each block (rms_over_depth)
    entropy: np.ndarray  # [L] mean self-attention entropy of each layer (layer_entropy)
    uniform_entropy: float  # uniform attention over the allowed keys, over the same queries (nats)
    sublayers: int  # per block: 3 in a decoder with cross-attention, else 2

    @classmethod
    def of(cls, name: str, rms: np.ndarray, per_head: pd.DataFrame, sublayers: int) -> StackMeasures:
        """A stack's measures from its residual RMS [L + 1] and head_entropy's rows (layer, head) of its maps."""
        return cls(name, rms, layer_entropy(per_head), float(per_head["max_entropy"].iloc[0]), sublayers)


def stream_rms(stream: np.ndarray) -> float:
    """The RMS of one layer's stream [T, D] over tokens and units, summed in float64."""
    return float(np.sqrt(np.square(stream, dtype=np.float64).mean()))


def rms_over_depth(stack: StackTrace) -> np.ndarray:
    """[L + 1] the residual stream's RMS over tokens and units: index 0 the input, then after each block (before any
    final norm)."""
    # A layer at a time: the whole stream squared in float64 is 147 MB for SmolLM2 on 512 pieces
    return np.array([stream_rms(layer) for layer in stack.residual])  # [L + 1]


def layer_entropy(per_head: pd.DataFrame) -> np.ndarray:
    """[L] mean self-attention entropy (nats) of each layer of head_entropy's rows: over its heads, and over the
    queries that may attend to at least one key (head_entropy leaves the others out, the same queries for every
    head)."""
    return per_head.groupby("layer", sort=True)["entropy"].mean().to_numpy(dtype=np.float64)  # [L]


def trace_measures(stack: StackTrace) -> StackMeasures:
    """The table's measures of a stack of a trace."""
    sublayers = 2 if stack.cross_attention is None else 3
    return StackMeasures.of(stack.name, rms_over_depth(stack), head_entropy(stack.self_attention), sublayers)


@float32_default()
def measured_run(model: Transformer, source: Source, target: Source | None = None) -> list[StackMeasures]:
    """trace_measures of every stack of run(model, source, target), taken as each block runs: no trace is kept
    (for SmolLM2 on 512 pieces it would be 0.6 GB, beside the Compare page's two)."""
    with torch.inference_mode():
        inputs = prepare_inputs(model, source, target)
        stacks = dict(zip(model.stack_names, [s for s in (inputs.source, inputs.target) if s is not None], strict=True))
        rms = {name: [stream_rms(stack.x.numpy())] for name, stack in stacks.items()}  # the input: the embeddings
        heads: dict[str, list[pd.DataFrame]] = {name: [] for name in stacks}

        def measure(name: str, layer: int, record: Record) -> None:
            rms[name].append(stream_rms(record["resid_post"][0].numpy()))
            stack = stacks[name]
            weights = record["attn.pattern"][0][None].numpy()  # [1, H, T, T]
            maps = AttentionMaps(name, weights, None, stack.allowed.numpy(), stack.tokens, stack.tokens)
            heads[name].append(head_entropy(maps).assign(layer=layer))

        inputs.forward(model, keep_scores=False, on_block=measure)
    return [
        StackMeasures.of(
            name,
            np.array(rms[name]),
            pd.concat(heads[name], ignore_index=True),
            3 if getattr(model, name).spec.cross_attention else 2,
        )
        for name in stacks
    ]


def stack_rows(placement: str, measures: StackMeasures, gradients: pd.DataFrame | None) -> list[pd.DataFrame]:
    """One stack's rows of the table for one placement."""
    rms, entropy = measures.rms, measures.entropy  # [L + 1], [L]
    frames = [
        pd.DataFrame({"layer": np.arange(-1, len(rms) - 1), "measure": RMS, "value": rms}),
        pd.DataFrame({"layer": np.arange(len(entropy)), "measure": ENTROPY, "value": entropy}),
    ]
    if gradients is not None:
        mine = gradients[gradients["stack"] == measures.name].sort_values("layer")
        frames.append(pd.DataFrame({"layer": mine["layer"].to_numpy(int), "measure": GRADIENT, "value": mine["norm"]}))
    return [frame.assign(placement=placement, stack=measures.name) for frame in frames]


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
    unresolved: dict[str, float] = {}
    trained = model.tokenizer is not None or model.head is not None  # a checkpoint's or the Train page's weights
    for i, placement in enumerate(NORMS):
        if progress is not None:
            progress(i / len(NORMS), f"{placement}-norm ({i + 1} of {len(NORMS)}): forward and backward")
        flipped = model if placement == cfg.norm else (built or {}).get(placement)
        if flipped is None:
            flipped = model_for_b(model, cfg.replace(norm=placement), share=True)  # only run: A's very tensors
        new_norms[placement] = () if flipped is model else new_norm_names(model, flipped)
        identity[placement] = all(at_identity(norm) for norm in placement_norms(flipped))
        trace, gradients = (known or {}).get(placement, (None, None))
        if gradients is None and no_gradients is None:
            try:
                gradients = layer_gradient_totals(gradient_norms(flipped, source, target))
            except ConfigError as e:  # e.g. one token: nothing to predict. The same for every placement.
                no_gradients = str(e)
        if gradients is not None and trained and placement != cfg.norm:  # weights made for another placement
            # Compare's B, lent in `known`, was checked already (views.caches.gradient_totals): its `change` is there
            checked = gradients if "change" in gradients else gradient_change(flipped, source, target, gradients)
            if (change := unresolved_change(checked)) is not None:
                unresolved[placement] = change
        if trace is None:
            measures = measured_run(flipped, source, target)
        else:  # in a comprehension, so that no loop variable keeps a stack of the trace once it is deleted below
            measures = [trace_measures(stack) for stack in trace.stacks]
        frames += [frame for m in measures for frame in stack_rows(placement, m, gradients)]
        sublayers = {m.name: m.sublayers for m in measures}
        uniform = {m.name: m.uniform_entropy for m in measures}
        del flipped, trace  # a checkpoint's copy can be a GB: one placement's at a time
    if progress is not None:
        progress(1.0, "done")
    table = pd.concat(frames, ignore_index=True)[list(COLUMNS)].astype({"layer": int, "value": float})
    return PlacementRun(table, cfg.norm, new_norms, identity, sublayers, uniform, no_gradients, unresolved)


def table_csv(result: PlacementRun) -> str:
    """The table as CSV (CSV_COLUMNS), for the page's download: each value with whether float32 resolves it."""
    table = result.table
    unresolved = (table["measure"] == GRADIENT) & table["placement"].isin(list(result.unresolved))
    return table.assign(resolved=~unresolved).to_csv(index=False)


def read_table_csv(text: str) -> pd.DataFrame:
    """table_csv's text back as the table it wrote (CSV_COLUMNS)."""
    table = pd.read_csv(StringIO(text))
    types = {"placement": str, "stack": str, "layer": int, "measure": str, "value": float, "resolved": bool}
    return table.astype(types)
