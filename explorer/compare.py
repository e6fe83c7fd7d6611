"""Two configurations on the same weights: what changed, head by head."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from explorer.analysis.activations import layer_statistics
from explorer.analysis.stats import head_entropy
from explorer.build import build_model, copy_shared_weights, empty_model, fill_new_norms
from explorer.config import ConfigError, ModelConfig
from explorer.model import Transformer
from explorer.trace import AttentionMaps, StackTrace, Trace

# Fields that change the shapes of parameters both models have. n_layers is not one: B with more (or fewer)
# layers carries A's weights in the blocks both have, and its other blocks are its own.
SHAPE_FIELDS = ("arch", "d_model", "n_heads", "d_ff", "max_tokens")
B_PREFIX = "b_"  # B's fields in the URL: ?norm=post&b_norm=pre
CONFIGURATION, INPUT = "configuration", "input"  # what B differs from A in (?compare=input: A's model, B's text)
DEFAULT_TARGET = "le chat est assis sur le tapis"  # what B's decoder reads when A has none


def default_b(a: ModelConfig) -> ModelConfig:
    """B differs from A in norm placement only, the comparison most people come for: pre-norm, the placement most
    models use, or post-norm for a pre-norm A."""
    return a.replace(norm="post" if a.norm == "pre" else "pre")


def reversed_text(text: str) -> str:
    """B's default input when B differs in its input: A's words in reverse order, so only their positions differ."""
    return " ".join(reversed(text.split()))


def target_of_b(b: ModelConfig, target_a: str | None) -> str | None:
    """What B's decoder reads: A's target, or DEFAULT_TARGET when A has none; None when B has no decoder."""
    if not b.reads_target:
        return None
    return target_a if target_a is not None else DEFAULT_TARGET


def can_share_weights(a: ModelConfig, b: ModelConfig) -> tuple[bool, str]:
    """Whether B can run on A's very weights, and if not, a sentence saying why."""
    checkpoints = [getattr(cfg, "checkpoint", None) for cfg in (a, b)]
    if any(checkpoints) and checkpoints[0] != checkpoints[1]:
        names = " and ".join(name or "a configured model" for name in checkpoints)
        return False, (
            f"A and B are two different models ({names}), with weights of their own: their attention and statistics "
            "are compared side by side, head h of A having no special relation to head h of B."
        )
    if a.arch != b.arch:
        return False, (
            f"A is {_article(a.arch)} and B {_article(b.arch)}: their blocks live in other stacks, so their weights "
            "cannot be shared. To see the causal mask alone, keep the architecture and change the mask instead."
        )
    changed = [name for name in SHAPE_FIELDS if getattr(a, name) != getattr(b, name)]
    if changed:
        fields = ", ".join(f"{n} ({getattr(a, n)} vs {getattr(b, n)})" for n in changed)
        return False, f"A and B have different parameter shapes: {fields}. Their weights cannot be shared."
    if a.seed != b.seed:
        return False, f"A and B use different seeds ({a.seed} vs {b.seed}), so their weights differ on purpose."
    return True, "A and B share the very same weights; only the settings you changed differ."


def _article(arch: str) -> str:
    return f"an {arch}" if arch[0] in "aeiou" else f"a {arch}"


def model_for_b(model_a: Transformer, b: ModelConfig, share: bool = False) -> Transformer:
    """B's model: a fresh build (with A's vocabulary, for a trained A), carrying A's parameters wherever B has a
    parameter of the same name and shape: copies, or with `share` A's very tensors, for models that are only run
    (the app's, whose cached models are never written: SmolLM2's B then costs its new norms, not 540 MB)."""
    a = model_a.config
    if a is None or not can_share_weights(a, b)[0]:
        return build_model(b, model_a.vocabulary)
    # Sharing, B's own weights would only be drawn to be dropped: SmolLM2's are 540 MB, at the top of Compare's peak
    model_b = empty_model(b, model_a.vocabulary) if share else build_model(b, model_a.vocabulary)
    copied = set(copy_shared_weights(model_a, model_b, share=share))
    if share and not fill_new_norms(model_b, copied):  # more than norms left to fill: drawn, as a fresh build's
        model_b = build_model(b, model_a.vocabulary)
        copy_shared_weights(model_a, model_b, share=True)
    model_b.tie_read_out()  # load_state_dict copied into the read-out's own tensor: tie it to the embedding again
    model_b.tokenizer = model_a.tokenizer  # a checkpoint's B reads text the way A does
    return model_b


def same_parameters(model_a: Transformer, model_b: Transformer) -> bool:
    """True when every parameter the two models both have is identical, tensor by tensor."""
    params_b = dict(model_b.named_parameters())
    common = [(p, params_b[name]) for name, p in model_a.named_parameters() if name in params_b]
    return bool(common) and all(torch.equal(p, q) for p, q in common)


def attention_difference(a: AttentionMaps, b: AttentionMaps) -> np.ndarray:
    """[L, H, Tq, Tk] A - B, for maps of the same shape."""
    _check_same_shape(a, b)
    return a.weights - b.weights


def head_ranking(a: AttentionMaps, b: AttentionMaps) -> pd.DataFrame:
    """layer, head, js_divergence (bits, 0..1; mean over queries with allowed keys in both), max_abs_difference;
    most changed head first."""
    _check_same_shape(a, b)
    rows_used = ~(a.empty_rows | b.empty_rows)  # [Tq]
    pairs = list(zip(a.weights, b.weights, strict=True))  # a layer at a time: SmolLM2's float64 [L, H, T, T] is 566 MB
    # and a head at a time for the divergence, whose five float64 temporaries were 100 MB a layer of SmolLM2 on 512
    # pieces, the top of the Compare page
    divergence = np.array(
        [[js_divergence(ha[rows_used], hb[rows_used]) for ha, hb in zip(la, lb, strict=True)] for la, lb in pairs]
    )  # [L, H, Tq']
    mean_divergence = divergence.mean(axis=-1) if rows_used.any() else np.zeros(a.weights.shape[:2])
    max_abs = np.stack([np.abs(la - lb).max(axis=(-2, -1)) for la, lb in pairs])  # [L, H]
    layers, heads = np.indices(mean_divergence.shape)
    frame = pd.DataFrame(
        {
            "layer": layers.ravel(),
            "head": heads.ravel(),
            "js_divergence": mean_divergence.ravel(),
            "max_abs_difference": max_abs.ravel(),
        }
    )
    return frame.sort_values(["js_divergence", "layer", "head"], ascending=[False, True, True], ignore_index=True)


def js_divergence(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen-Shannon divergence in bits over the last axis of two distributions; 0 for equal rows, 1 at most."""
    p, q = p.astype(np.float64), q.astype(np.float64)
    m = (p + q) / 2
    return (_kl(p, m) + _kl(q, m)) / 2


def _kl(p: np.ndarray, m: np.ndarray) -> np.ndarray:
    ratio = np.divide(p, m, out=np.ones_like(p), where=p > 0)  # m >= p / 2 > 0 wherever p > 0; log2(1) = 0 elsewhere
    return np.einsum("...k,...k->...", p, np.log2(ratio))


def _check_same_shape(a: AttentionMaps, b: AttentionMaps) -> None:
    if a.weights.shape != b.weights.shape:
        raise ConfigError(
            f"A's attention is {list(a.weights.shape)} and B's is {list(b.weights.shape)} "
            "([layers, heads, query, key]); maps can only be subtracted when they have the same shape."
        )


def to_query(b: ModelConfig, a: ModelConfig) -> dict[str, str]:
    """B's fields that differ from default_b(A), as prefixed URL parameters."""
    reference = default_b(a)
    return {
        B_PREFIX + f.name: str(getattr(b, f.name))
        for f in dataclasses.fields(b)
        if getattr(b, f.name) != getattr(reference, f.name)
    }


# --- What the Compare page needs on top: pairing maps, lining up two inputs, per-layer tables.

B_FIELDS = ("arch", "norm", "n_layers", "n_heads", "d_model", "d_ff", "positional", "mask", "activation", "seed")
PER_LAYER = ("residual RMS", "residual std", "gradient norm", "attention entropy")


def differing_fields(a: ModelConfig, b: ModelConfig) -> list[str]:
    """The names of the fields in which B differs from A, in dataclass order."""
    return [f.name for f in dataclasses.fields(a) if getattr(a, f.name) != getattr(b, f.name)]


@dataclass(frozen=True)
class MapPair:
    """One kind of attention in A and in B, paired by the stack that computes it (a side may lack it)."""

    label: str  # what the page calls the pair, e.g. "self-attention"
    stack: int  # 0: the stack that reads the typed tokens; 1: the decoder of an encoder-decoder
    a: AttentionMaps | None
    b: AttentionMaps | None

    @property
    def same_shape(self) -> bool:
        return self.a is not None and self.b is not None and self.a.weights.shape == self.b.weights.shape

    @property
    def common_layers(self) -> int:
        """How many layers (from the first) can be subtracted: those both sides have, when their heads and tokens
        match; 0 when none can."""
        if self.a is None or self.b is None or self.a.weights.shape[1:] != self.b.weights.shape[1:]:
            return 0
        return min(self.a.n_layers, self.b.n_layers)


def layers_and_heads(pair: MapPair) -> tuple[list[int], list[int]]:
    """The layers and the heads a pair offers to pick from: as many as the side that has more."""
    sides = [m for m in (pair.a, pair.b) if m is not None]
    return list(range(max(m.n_layers for m in sides))), list(range(max(m.n_heads for m in sides)))


def layer_difference(pair: MapPair, layer: int, head: int) -> np.ndarray | None:
    """[Tq, Tk] A - B of one layer and head, when it is one of the pair's common_layers; else None."""
    if layer >= pair.common_layers:
        return None
    assert pair.a is not None and pair.b is not None
    return pair.a.weights[layer, head] - pair.b.weights[layer, head]


def paired_attention(trace_a: Trace, trace_b: Trace | None) -> list[MapPair]:
    """A's and B's attention paired by role: the self-attention of the stack that reads the typed tokens (always
    in both), then the decoder self-attention and cross-attention of an encoder-decoder (None on a side
    without them). Without trace_b (B is not drawn), A's maps with None for B."""

    def role(trace: Trace | None, stack: int, cross: bool) -> AttentionMaps | None:
        if trace is None or stack >= len(trace.stacks):
            return None
        s = trace.stacks[stack]
        return s.cross_attention if cross else s.self_attention

    pairs = []
    for stack, cross in ((0, False), (1, False), (1, True)):
        a, b = role(trace_a, stack, cross), role(trace_b, stack, cross)
        if a is None and b is None:
            continue
        kinds = list(dict.fromkeys(m.kind for m in (a, b) if m is not None))
        label = kinds[0] if len(kinds) == 1 else f"{kinds[0]} (A) vs {kinds[1]} (B)"
        pairs.append(MapPair(label, stack, a, b))
    return pairs


def token_order(tokens_a: list[str], tokens_b: list[str]) -> list[int] | None:
    """For B's tokens a rearrangement of A's: the position in B of each of A's tokens (the k-th occurrence of a
    word in A goes with its k-th occurrence in B); None when B is not a rearrangement of A."""
    if sorted(tokens_a) != sorted(tokens_b):
        return None
    positions: dict[str, list[int]] = {}
    for i, token in enumerate(tokens_b):
        positions.setdefault(token, []).append(i)
    return [positions[token].pop(0) for token in tokens_a]


def reorder_maps(maps: AttentionMaps, queries: list[int] | None, keys: list[int] | None) -> AttentionMaps:
    """The same maps with queries and/or keys taken in another order (None keeps that axis as it is)."""
    q = np.arange(maps.weights.shape[-2]) if queries is None else np.asarray(queries)  # [Tq]
    k = np.arange(maps.weights.shape[-1]) if keys is None else np.asarray(keys)  # [Tk]
    return AttentionMaps(
        maps.kind,
        maps.weights[:, :, q][:, :, :, k],  # [L, H, Tq, Tk]
        None if maps.scores is None else maps.scores[:, :, q][:, :, :, k],
        maps.allowed[q][:, k],  # [Tq, Tk]
        [maps.query_tokens[i] for i in q],
        [maps.key_tokens[i] for i in k],
        maps.byte_level,
    )


def align_pair(pair: MapPair, order: list[int]) -> MapPair:
    """B's maps reordered to A's tokens (`order`, from token_order): both axes of the stack reading the tokens, the
    keys of cross-attention."""
    if pair.b is None:
        return pair
    if pair.stack == 0:
        return MapPair(pair.label, pair.stack, pair.a, reorder_maps(pair.b, order, order))
    if pair.b.kind == "cross-attention":
        return MapPair(pair.label, pair.stack, pair.a, reorder_maps(pair.b, None, order))
    return pair


def layer_values(stack: StackTrace, gradient_totals: pd.DataFrame | None = None) -> pd.DataFrame:
    """statistic, layer, value for one model's stack: residual RMS and std (layer -1 = the input, then after
    each block), the gradient norm of each block's parameters (from layer_gradient_totals; left out when None)
    and the self-attention entropy in nats (mean over heads of head_entropy)."""
    stats = layer_statistics(stack)
    residual = stats[stats["point"] == "residual"]
    frames = [
        pd.DataFrame({"statistic": "residual RMS", "layer": residual["layer"], "value": residual["rms"]}),
        pd.DataFrame({"statistic": "residual std", "layer": residual["layer"], "value": residual["std"]}),
    ]
    if gradient_totals is not None:
        mine = gradient_totals[gradient_totals["stack"] == stack.name]
        frames.append(pd.DataFrame({"statistic": "gradient norm", "layer": mine["layer"], "value": mine["norm"]}))
    entropy = head_entropy(stack.self_attention).groupby("layer", sort=True)["entropy"].mean()
    frames.append(pd.DataFrame({"statistic": "attention entropy", "layer": entropy.index, "value": entropy.values}))
    table = pd.concat(frames, ignore_index=True)
    return table.astype({"layer": int, "value": float})


def per_layer_comparison(values_a: pd.DataFrame | None, values_b: pd.DataFrame | None) -> pd.DataFrame:
    """statistic, layer, a, b, a_minus_b: layer_values of A and B side by side; NaN where one side has no such
    layer (or statistic, or no such stack: None), so A - B is only filled on what both have."""
    empty = pd.DataFrame({"statistic": pd.Series(dtype=object), "layer": pd.Series(dtype=int), "value": 0.0})
    a = values_a if values_a is not None else empty
    b = values_b if values_b is not None else empty
    merged = a.rename(columns={"value": "a"}).merge(
        b.rename(columns={"value": "b"}), on=["statistic", "layer"], how="outer"
    )
    merged["a_minus_b"] = merged["a"] - merged["b"]
    order = {name: i for i, name in enumerate(PER_LAYER)}
    merged = merged.sort_values(["statistic", "layer"], key=lambda s: s.map(order) if s.name == "statistic" else s)
    return merged.reset_index(drop=True)
