"""Whether a trace is a model's own run. What a head adds and what removing it does read the trace's stream through
the model's weights: with another model's run (two imported models share config None; a trained model and the random
one it started from share a config) they would give numbers of neither, with no error."""

from __future__ import annotations

import numpy as np
import torch

from explorer.ablation import HeadAblation
from explorer.config import ConfigError
from explorer.model import Transformer
from explorer.trace import Trace

# The same block on the same stream gives the same float32 numbers up to rounding (about 1e-6 of the stream's
# size); another model's block changes them by the order of the stream itself. 1e-3 sits far from both.
SAME_BLOCK_TOLERANCE = 1e-3


def check_run_of(model: Transformer, trace: Trace, who: str) -> None:
    """ConfigError unless `trace` is `model`'s run: its config, stack shapes, and one block of the first stack run
    again on the trace's own stream (a block whose heads the run left whole, else the first block without the heads
    the run removed there) must give the trace's next stream."""
    problem = _mismatch(model, trace)
    if problem:
        raise ConfigError(
            f"The trace given to {who} is not this model's run ({problem}): run this model on the text and pass "
            "that trace."
        )


def _mismatch(model: Transformer, trace: Trace) -> str | None:
    if trace.config != model.config:
        return "it was made with another configuration"
    stacks = [s for s in (model.encoder, model.decoder) if s is not None]
    shapes = [(len(s.layers), s.layers[0].self_attn.n_heads, model.d_model) for s in stacks]
    ran = [(s.n_layers, s.self_attention.n_heads, s.residual.shape[-1]) for s in trace.stacks]
    if shapes != ran:
        return f"its stacks are (layers, heads, width) {ran}, this model's {shapes}"
    return _block_differs(model, trace)


def _block_differs(model: Transformer, trace: Trace) -> str | None:
    """A sentence when one block of the first stack, run again on the trace's stream, misses the trace's next stream:
    the first block the run left whole, or, when it removed a head in every block, block 0 without those heads."""
    stack, ran = model.first_stack, trace.first
    touched = {layer for layer, _ in trace.ablated}
    layer = next((i for i in range(ran.n_layers) if i not in touched), 0)
    ablation = HeadAblation.of(trace.ablated, ran.n_layers, ran.self_attention.n_heads, trace.ablate_with)
    allowed = torch.from_numpy(np.asarray(ran.self_attention.allowed, dtype=bool))  # [T, T]
    with torch.inference_mode():
        x = torch.from_numpy(np.ascontiguousarray(ran.residual[layer]))[None]  # [1, T, D]
        out, _ = stack.layers[layer](
            x,
            None if bool(allowed.all()) else allowed[None],
            removed=ablation.layer(layer),  # [1, H] or None
            removed_with=ablation.mode,
            need_weights=False,
        )
    expected = ran.residual[layer + 1]  # [T, D]
    gap = float(np.abs(out[0].numpy() - expected).max())
    if gap > SAME_BLOCK_TOLERANCE * (1.0 + float(np.abs(expected).max())):
        return f"block {layer} of this model turns the trace's stream into another, off by up to {gap:.3g}"
    return None
