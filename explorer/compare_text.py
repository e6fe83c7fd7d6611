"""What the Compare page says about A and B, as Markdown sentences: pure text, computed from the configurations,
the weights both models have and the maps."""

from __future__ import annotations

import re
from typing import Any

from explorer.analysis.gradients import change_words, objective_text
from explorer.anatomy import norm_name
from explorer.compare import MapPair, can_share_weights, differing_fields
from explorer.config import CheckpointConfig, ModelConfig
from explorer.config_words import count, mask_text, positions_text
from explorer.model import Transformer
from explorer.pretrained import pretrained_title
from explorer.trace import AttentionMaps, Trace

# B beside a trained A whose weights it cannot share is built fresh (explorer.compare.model_for_b), with a read-out
# over A's vocabulary drawn from B's seed like the rest of it: objective_text would call it trained
FRESH_READ_OUT_OBJECTIVE = (
    "Dummy objective: every position predicts the next typed token, as a language model does, through B's own "
    "read-out (its logits over A's vocabulary); the loss is their cross-entropy averaged over positions (the last "
    "position is left out). B cannot run on A's trained weights, so it is a fresh model drawn from B's seed, its "
    "read-out too: these gradients show how an untrained model of B's shape passes this signal back through its "
    "layers, not what A learned."
)


TITLE_PLACEMENT = re.compile(r"\b(post|pre|res-post|peri)-norm\)$")  # the end of a title: "(BERT, post-norm)"


def describe(cfg: ModelConfig, other: ModelConfig) -> str:
    """One line for a configuration; the values that differ from `other` in bold."""
    if isinstance(cfg, CheckpointConfig):
        title = checkpoint_title(cfg)
        if not isinstance(other, CheckpointConfig) or other.checkpoint != cfg.checkpoint:
            title = f"**{title}**"
        parts = {
            "n_layers": count(cfg.n_layers, "layer"),
            "n_heads": count(cfg.n_heads, "head"),
            "d_model": f"d_model {cfg.d_model}",
            "norm": f"{cfg.norm}-norm",
            "positional": positions_text(cfg.positional),
            "mask": mask_text(cfg),
        }
        marked = [f"**{text}**" if getattr(cfg, f) != getattr(other, f) else text for f, text in parts.items()]
        return " · ".join([title, *marked])
    parts = {
        "arch": cfg.arch,
        "n_layers": count(cfg.n_layers, "layer"),
        "n_heads": count(cfg.n_heads, "head"),
        "d_model": f"d_model {cfg.d_model}",
        "d_ff": f"d_ff {cfg.d_ff}",
        "norm": f"{cfg.norm}-norm",
        "positional": positions_text(cfg.positional),
        "mask": mask_text(cfg),
        "activation": cfg.activation,
        "seed": f"seed {cfg.seed}",
    }
    return " · ".join(f"**{text}**" if getattr(cfg, f) != getattr(other, f) else text for f, text in parts.items())


def checkpoint_title(cfg: CheckpointConfig) -> str:
    """The checkpoint's title (pretrained_title), its placement named as the one it was trained with when `cfg` runs
    another: MiniLM run pre-norm is "all-MiniLM-L6-v2 (BERT, trained post-norm)", not a post-norm model beside
    "pre-norm"."""
    title = pretrained_title(cfg.checkpoint)
    found = TITLE_PLACEMENT.search(title)
    if found is None or found[1] == cfg.norm:
        return title
    return f"{title[: found.start()]}trained {title[found.start() :]}"


def changes(a: ModelConfig, b: ModelConfig) -> str:
    """The fields B changes, with both values: "norm (post → pre), seed (0 → 1)"."""
    return ", ".join(f"{f} ({getattr(a, f)} → {getattr(b, f)})" for f in differing_fields(a, b))


def shared_weights_text(a: ModelConfig, b: ModelConfig, facts: dict[str, Any], a_trained_by: str | None = None) -> str:
    """The sentence for a B that runs on A's very weights. `facts`: "shared" (how many parameter tensors both
    have), "only_a" and "only_b" (the names of the parameters one model has and the other has not); `a_trained_by`:
    where A's weights come from (trained_by), None for an untrained A whose norms are at identity. B's own norms are a
    fresh build's, at identity."""
    n_changed = len(differing_fields(a, b))
    kind = norm_name(a)
    return (
        f"B runs on A's very weights: the {facts['shared']} parameter tensors the two models share are identical "
        f"(checked tensor by tensor). Only {changes(a, b)} differ{'s' if n_changed == 1 else ''}."
        + unshared(facts["only_a"], "A", "B", kind, a_trained_by)
        + unshared(facts["only_b"], "B", "A", kind)
    )


def trained_by(cfg: ModelConfig, session_trained: bool) -> str | None:
    """Where a model's weights come from, as in "weights from the checkpoint"; None for an untrained configured model
    (its norms start at identity)."""
    if isinstance(cfg, CheckpointConfig):
        return "the checkpoint"
    return "this session's training" if session_trained else None


def identity_values(kind: str) -> str:
    """A norm's parameters at identity: an RMSNorm has a weight only, a LayerNorm a weight and a bias."""
    return "weight 1" if kind == "RMSNorm" else "weight 1, bias 0"


def norm_state(kind: str, owner: str, trained: str | None, many: bool = False) -> str:
    """What the norms only `owner` has hold, in brackets: trained (and from where), or at identity (and why);
    `many`: more than one norm."""
    kinds = kind + ("s" if many else "")
    if trained is not None:
        return f" (trained {kinds}, weights from {trained})"
    why = "a norm B adds starts as the identity" if owner == "B" else "an untrained model's norms start so"
    return f" ({kinds} at identity, {identity_values(kind)}: {why})"


def unshared(names: list[str], owner: str, other: str, kind: str = "LayerNorm", trained: str | None = None) -> str:
    """A sentence on the parameters only one model has, e.g. the final norm only pre-norm has, or the norms on each
    sub-layer's output only res-post and peri have. `kind`: the norms' kind (explorer.anatomy.norm_name); `trained`:
    where the owner's weights come from (trained_by), None for an untrained owner (norms at identity, the rest drawn
    from its seed)."""
    if not names:
        return ""
    blocks: dict[str, list[int]] = {}  # a stack's blocks only one model has: named once, not parameter by parameter
    block_norms: dict[tuple[str, int], list[str]] = {}  # (stack, block) -> its norms only one model has: norm1 ...
    modules = []
    for name in names:
        if (block := re.match(r"(\w+)\.layers\.(\d+)\.(.+)$", name)) is not None:
            if (norm := re.match(r"((?:out_)?norm\d)\.", block[3])) is not None:
                block_norms.setdefault((block[1], int(block[2])), []).append(norm[1])
            else:
                blocks.setdefault(block[1], []).append(int(block[2]))
        else:
            modules.append(name.rsplit(".", 1)[0] if name.endswith((".weight", ".bias")) else name)
    kept = [norm for (stack, i), found in block_norms.items() if i not in blocks.get(stack, []) for norm in found]
    modules = list(dict.fromkeys(modules))
    norms = [m for m in modules if m.endswith(".norm")]
    others = [m for m in modules if m not in norms]
    others += [stack_blocks(stack, sorted(set(numbers))) for stack, numbers in blocks.items()]
    described = []
    if norms:
        described.append(f"{' and '.join(norms)}, the final norm every placement but post-norm has")
    if kept:  # norms a placement has in blocks both models have
        described.append(f"{' and '.join(sorted(set(kept)))} in its blocks")
    many = len(norms) + len(set(kept)) > 1
    parts = [", plus ".join(described) + norm_state(kind, owner, trained, many)] if described else []
    if others:
        parts.append(f"{', '.join(others)}{origin(owner, trained)}")
    return f" {owner} also has {'; '.join(parts)}, which {other} has not."


def origin(owner: str, trained: str | None) -> str:
    """Where the weights only `owner` has (other than norms) come from: its training, or its seed."""
    if trained is not None:
        return f" (trained, weights from {trained})"
    return f", drawn from {owner}'s seed"


def stack_blocks(stack: str, numbers: list[int]) -> str:
    """Sorted block numbers of a stack: "encoder block 2", "encoder blocks 2 and 3"."""
    return f"{stack} block{'s' if len(numbers) > 1 else ''} {block_range(numbers)}"


def block_range(numbers: list[int]) -> str:
    """Sorted block numbers as "2", "2 and 3" or "2 to 23"."""
    if len(numbers) == 1:
        return str(numbers[0])
    if len(numbers) == 2:
        return f"{numbers[0]} and {numbers[1]}"
    return f"{numbers[0]} to {numbers[-1]}"


def missing_side(name: str, maps: AttentionMaps | None, label: str, layer: int, head: int) -> str | None:
    """Why side `name` ("A" or "B") has no map of `label` at this layer and head; None when it has one."""
    if maps is None:
        return f"{name} has no {label}"
    if layer >= maps.n_layers:
        return f"{name} has no layer {layer} (it has {maps.n_layers})"
    if head >= maps.n_heads:
        return f"{name} has no head {head} (it has {maps.n_heads})"
    return None


def why_not_subtracted(pair: MapPair, ranked_only: bool = False) -> str:
    """Why this pair has no A − B map here (or, `ranked_only`, no head ranking)."""
    assert pair.a is not None and pair.b is not None
    (la, ha, qa, ka), (lb, hb, qb, kb) = pair.a.weights.shape, pair.b.weights.shape  # [L, H, Tq, Tk] each
    reasons = []
    if (qa, ka) != (qb, kb):
        reasons.append(f"A's map is {qa} × {ka} tokens and B's {qb} × {kb}")
    if la != lb:
        reasons.append(f"A has {la} layers and B {lb}")
    if ha != hb:
        reasons.append(f"A has {ha} heads and B {hb}")
    if ranked_only:
        return f"No head ranking: {'; '.join(reasons)}. Heads are ranked when A and B have the same layers and heads."
    return (
        "No A − B map: " + "; ".join(reasons) + ". A layer and head can be subtracted when both models have it "
        "and their maps have the same tokens; heads are ranked when A and B have the same layers and heads."
    )


def unequal_depth_note(trace_a: Trace, trace_b: Trace | None, stack: int) -> str | None:
    """What the per-layer lines of stack number `stack` show when A and B both have it with different numbers of
    blocks; None otherwise."""
    la = trace_a.stacks[stack].n_layers if stack < len(trace_a.stacks) else 0
    lb = trace_b.stacks[stack].n_layers if trace_b is not None and stack < len(trace_b.stacks) else 0
    if not la or not lb or la == lb:
        return None
    return (
        f"A has {la} layers and B {lb}: each line covers its own model's blocks, and the shaded blocks exist in "
        f"one model only. Like for like means blocks 0 to {min(la, lb) - 1}, which both have (A − B in the "
        "per-layer CSV is filled for those only)."
    )


def unresolved_b_note(change: float) -> str:
    """Why B's gradient panel is not a measurement: its block norms move by `change` (gradient_change) when the input
    moves by one part in a million."""
    return (
        f"B's gradient norms are float32 rounding, not a measurement: moving the input by one part in a million "
        f"changes a block's by up to {change_words(change)}. float32 carries about 7 digits, and this pass through "
        "weights made for another placement loses them (a float64 pass gives other numbers). Read B's gradient panel "
        "as noise."
    )


def b_objective_text(model_a: Transformer, model_b: Transformer) -> str:
    """The objective of B's gradient norms in words: objective_text(model_b), except for a B built fresh beside a
    trained A, whose read-out is as untrained as the rest of it (FRESH_READ_OUT_OBJECTIVE)."""
    a, b = model_a.config, model_b.config
    carries_a = a is not None and b is not None and can_share_weights(a, b)[0]  # model_for_b's test
    if model_b.head is not None and model_b.tokenizer is None and not carries_a:
        return FRESH_READ_OUT_OBJECTIVE
    return objective_text(model_b)


def objectives_text(a_text: str, b_text: str) -> str:
    """What A's and B's gradient norms measure: one paragraph for both when their objectives are the same, else one
    for each."""
    if a_text == b_text:
        return f"A and B: {a_text}"
    return f"A: {a_text}\n\nB: {b_text}"
