"""What the four-placement view says: each sentence computed from this run's numbers (PlacementRun), including where
a placement does not do what the literature reports."""

from __future__ import annotations

import re

import numpy as np

from explorer.analysis.gradients import change_words
from explorer.analysis.placements import ENTROPY, GRADIENT, RMS, PlacementRun
from explorer.compare_text import identity_values
from explorer.config import NORM_ON_OUTPUT, NORMS
from explorer.numbers import readable
from explorer.word_lists import listed

# Post-norm is called flat when its RMS after every block stays within this factor: each block's last norm sets the
# stream anew, so only the norms' own gains move it (exactly 1 with norms at identity); pre-norm's growth on a trained
# model is far larger (x11 on MiniLM, x900 on SmolLM2).
FLAT = 1.5
# Pre-norm is said to grow when it ends more than 5 % above its input: less is within what one block's rounding and a
# sentence's few tokens move.
GROWS = 1.05
# Pre-norm's gradients are called level when every block's is within this factor of every other's (Xiong et al.
# 2020, Fig. 3: post-norm's grow several-fold toward the output at initialisation).
LEVEL = 2.0
COLLAPSED = 0.1  # nats: a head's mean entropy below this puts nearly all its weight on one key (a 0.98 / 0.02 split)
SAME = 1e-6  # nats: two placements' block-0 attention computed from the same numbers agree to float rounding


def name(placement: str) -> str:
    return f"{placement}-norm"


def _range(numbers: set[int]) -> str:
    low, high = min(numbers), max(numbers)
    return str(low) if low == high else f"{low}–{high}"


def new_norm_words(names: tuple[str, ...]) -> str:
    """A placement's new norms in words: "output norms (out_norm1–2 of each block) and final norm"."""
    kinds: dict[str, set[int]] = {}
    final = False
    for parameter in names:
        if match := re.search(r"\.layers\.\d+\.(out_norm|norm)(\d)\.", parameter):
            kinds.setdefault(match[1], set()).add(int(match[2]))
        elif re.match(r"^(encoder|decoder)\.norm\.", parameter):
            final = True
    parts = [
        f"{'output' if kind == 'out_norm' else 'input'} norms ({kind}{_range(numbers)} of each block)"
        for kind, numbers in sorted(kinds.items(), key=lambda item: item[0] != "norm")
    ]
    parts += ["final norm"] if final else []
    return " and ".join(parts)


def setup_words(result: PlacementRun, weights: str, kind: str = "LayerNorm") -> str:
    """Which weights, made for which placement, and which norms had to start at identity; `kind`: the model's norm
    (explorer.anatomy.norm_name)."""
    own = result.own
    new = [f"{name(p)}'s {new_norm_words(result.new_norms[p])}" for p in NORMS if result.new_norms[p]]
    text = (
        f"All four placements run on the same {weights}, made for {name(own)}: every weight is the same, only where "
        "the norms sit changes."
    )
    if new:
        text += (
            f" The norms these {name(own)} weights have no tensor for start at identity ({kind}s with "
            f"{identity_values(kind)}): "
            f"{'; '.join(new)}."
        )
    if result.identity_norms[own]:
        text += f" {name(own).capitalize()}'s own norms are at identity too: every norm here only normalises."
    else:
        text += f" Norms a placement shares by name with {name(own)} keep their values, in that placement's own spot"
        text += (
            " (norm1 sits after the sum in post-norm, before the sub-layer in pre- and peri-norm)."
            if own != "res-post"
            else "."
        )
    return text


def _updates_at_identity(result: PlacementRun, placement: str) -> bool:
    """True when the norms on the placement's sub-layer outputs start at identity (new on these weights, or all of
    its norms at identity)."""
    return result.identity_norms[placement] or any("out_norm" in n for n in result.new_norms[placement])


def rms_words(result: PlacementRun, stack: str, kind: str = "LayerNorm") -> str:
    """Residual RMS: each placement from the input to the last block, and whether each does what is reported;
    `kind`: the model's norm (an RMSNorm has a gain and no bias)."""
    rms = {p: result.values(p, RMS, stack) for p in NORMS}  # [L + 1] each
    start, last_block = rms["post"][0], len(rms["post"]) - 2
    ends = ", ".join(f"{name(p)} {readable(rms[p][-1])} (×{readable(rms[p][-1] / start)})" for p in NORMS)
    sentences = [
        f"Residual RMS from the input ({readable(start)}) to after the last block (block {last_block}): {ends}."
    ]
    post = rms["post"][1:]
    low, high = float(post.min()), float(post.max())
    if high <= FLAT * low:
        where = (
            f"at {readable(low)}"
            if readable(low) == readable(high)
            else f"between {readable(low)} and {readable(high)}"
        )
        sentences.append(
            f"Post-norm stays flat, {where} after every block, as expected: each block ends with a norm, which sets "
            "the stream anew."
        )
    else:
        gain = "gain (and bias)" if kind == "LayerNorm" else "gain"
        sentences.append(
            f"Post-norm does not pile up (each block's last norm sets the stream anew), but it is not flat here: from "
            f"{readable(low)} to {readable(high)}, set by the {gain} of each block's last norm."
        )
    pre = rms["pre"]
    peak = int(np.argmax(pre))
    peak_words = f", after peaking at {readable(pre[peak])} after block {peak - 1}" if pre[peak] > 1.2 * pre[-1] else ""
    if pre[-1] > GROWS * start:
        sentences.append(
            f"Pre-norm grows ×{readable(pre[-1] / start)}{peak_words}, as expected: nothing normalises the stream "
            "itself, so what each sub-layer adds piles up."
        )
    else:
        sentences.append(
            f"Pre-norm does not grow here (×{readable(pre[-1] / start)}), unlike what is reported for it (Xiong et al. "
            "2020, Kim et al. 2025)."
        )
    sentences.append(_bounded_words(result, rms, stack))
    return " ".join(sentences)


def _bounded_words(result: PlacementRun, rms: dict[str, np.ndarray], stack: str) -> str:
    """Res-post and peri against pre: Kim et al. 2025 (peri) and Swin Transformer V2 / OLMo 2 (res-post) report a
    stream that stays far smaller than pre-norm's."""
    pre_end = rms["pre"][-1]
    updates = (len(rms["pre"]) - 1) * result.sublayers[stack]  # sub-layers, each adding one update to the stream
    below = [p for p in NORM_ON_OUTPUT if rms[p][-1] < pre_end]
    above = [p for p in NORM_ON_OUTPUT if p not in below]
    parts = []
    if below:
        parts.append(
            f"{' and '.join(name(p).capitalize() if i == 0 else name(p) for i, p in enumerate(below))} "
            f"{'end' if len(below) > 1 else 'ends'} below pre-norm's {readable(pre_end)}, as reported (Kim et al. 2025 "
            "for peri-norm; Swin Transformer V2 and OLMo 2 for res-post-norm): what a sub-layer adds is normalised, "
            "so each block can add only so much."
        )
    if above:
        parts.append(
            f"{' and '.join(name(p).capitalize() if i == 0 else name(p) for i, p in enumerate(above))} "
            f"{'end' if len(above) > 1 else 'ends'} above pre-norm's {readable(pre_end)}, unlike what is reported for "
            f"trained deep models (Kim et al. 2025; Swin Transformer V2, OLMo 2): here pre-norm's stream gains "
            f"{readable(float((pre_end**2 - rms['pre'][0] ** 2) / updates))} of mean square per sub-layer on average, "
            "less than the normalised updates add."
        )
    at_identity = [p for p in NORM_ON_OUTPUT if _updates_at_identity(result, p)]
    if at_identity:
        expected = float(np.sqrt(rms["pre"][0] ** 2 + updates))
        reached = " and ".join(f"{name(p)} {readable(rms[p][-1])}" for p in at_identity)
        parts.append(
            f"With output norms at identity each update has RMS 1 per token: {updates} such updates at right angles "
            f"to the stream would give √({readable(rms['pre'][0])}² + {updates}) = {readable(expected)}; {reached}."
        )
    return " ".join(parts)


def gradient_words(result: PlacementRun, stack: str, untrained: bool) -> str:
    """Gradient norm per block, first to last, and Xiong et al.'s prediction where it applies (at initialisation)."""
    if result.no_gradients is not None:  # a whole sentence that names them: "Gradient norms need at least two ..."
        return result.no_gradients
    grads = {p: result.values(p, GRADIENT, stack) for p in NORMS}  # [L] each
    if any(len(g) == 0 for g in grads.values()):
        return "No gradient norms for this stack."
    not_numbers = [p for p in NORMS if p not in result.unresolved and not np.isfinite(grads[p]).all()]
    shown = [p for p in NORMS if p not in result.unresolved and p not in not_numbers]
    last = len(grads["post"]) - 1
    # one block: no first and last to go from and to
    span = "the one block's parameters (block 0)" if last == 0 else f"each block's parameters, block 0 → block {last}"
    ends = ", ".join(
        f"{name(p)} {readable(grads[p][0])}" + ("" if last == 0 else f" → {readable(grads[p][-1])}") for p in shown
    )
    text = f"Gradient norm of {span}: {ends}." if shown else ""
    if result.unresolved:
        text += " " + _unresolved_words(result.unresolved)
    if not_numbers:
        text += f" {listed([name(p) for p in not_numbers]).capitalize()}: gradients that are not numbers."
    text = text.strip()
    if not untrained:
        return (
            text + " (Xiong et al. 2020 predict these for freshly initialised weights, so they are not checked here.)"
        )
    return f"{text} {_xiong_words(grads, stack, result.stacks)}".rstrip()


def _unresolved_words(unresolved: dict[str, float]) -> str:
    """Why some placements' gradient norms are left out of the sentence (PlacementRun.unresolved)."""
    names = listed([name(p) for p in unresolved])
    by = change_words(float(np.max(list(unresolved.values()))))  # np.max: a NaN is said, not skipped
    return (
        f"Not given for {names}: moving the input by one part in a million changes a block's by up to {by}, so "
        "float32 (about 7 digits) does not resolve them on weights made for another placement; the chart draws them "
        "all the same."
    )


def _xiong_words(grads: dict[str, np.ndarray], stack: str, stacks: list[str]) -> str:
    """Xiong et al.'s prediction at initialisation, checked where it means something: at least two blocks, every norm
    above 0 and finite, and a stack whose last block is near the output (not an encoder-decoder's encoder)."""
    values = np.concatenate([grads["post"], grads["pre"]])  # [2L]
    if len(grads["post"]) < 2 or not (np.isfinite(values).all() and (values > 0).all()):
        return ""
    if stack != stacks[-1]:
        return "(Xiong et al. 2020's prediction is about the blocks nearest the output: see the decoder's for it.)"
    rise = grads["post"][-1] / grads["post"][0]
    spread = grads["pre"].max() / grads["pre"].min()
    post = "as predicted" if rise >= LEVEL else "not as predicted" if rise <= 1 else f"barely: under ×{LEVEL:g}"
    pre = "as predicted" if spread <= LEVEL else "not as level as predicted"
    return (
        "At initialisation Xiong et al. (2020) predict post-norm's gradients largest near the output and pre-norm's "
        f"about the same in every block: post-norm's last block's is {readable(rise)} times its first's ({post}); "
        f"pre-norm's blocks are within ×{readable(spread)} of each other ({pre})."
    )


def entropy_words(result: PlacementRun, stack: str) -> str:
    """Attention entropy per placement (mean over heads and layers), collapse onto single keys, and block 0."""
    entropy = {p: result.values(p, ENTROPY, stack) for p in NORMS}  # [L] each
    means = ", ".join(f"{name(p)} {readable(float(e.mean()))}" for p, e in entropy.items())
    text = (
        f"Attention entropy, mean over heads and layers (nats; uniform over the allowed keys would be "
        f"{readable(result.uniform_entropy[stack])}): {means}."
    )
    # Every layer after block 0 below COLLAPSED, and only where spreading out was possible: uniform attention over one
    # key (a single token) also has entropy 0
    if result.uniform_entropy[stack] >= COLLAPSED:
        collapsed = [p for p, e in entropy.items() if float((e[1:] if len(e) > 1 else e).max()) < COLLAPSED]
        where = "in every layer after block 0" if len(entropy["post"]) > 1 else "in its one layer (block 0)"
        if collapsed:
            text += (
                f" {listed([name(p) for p in collapsed]).capitalize()}: {where} the heads put "
                f"nearly all their weight on a single key (mean entropy under {COLLAPSED} nats)."
            )
    same = [
        (a, b, why)
        for a, b, why in (("post", "res-post", "the raw stream"), ("pre", "peri", "the stream through the same norm1"))
        if abs(entropy[a][0] - entropy[b][0]) <= SAME
    ]
    if same:
        pairs = " and ".join(f"{name(a)} and {name(b)} (both read {why})" for a, b, why in same)
        text += f" In block 0 the attention is the same for {pairs}."
    return text


def placements_paragraphs(
    result: PlacementRun, weights: str, untrained: bool, stack: str | None = None, kind: str = "LayerNorm"
) -> list[str]:
    """What the class should see, one paragraph per topic: the set-up, the residual stream, the gradients, the
    attention. `weights`: whose weights, e.g. "untrained weights"; `untrained`: freshly initialised (Xiong et al.'s
    predictions apply); `stack`: the stack described (the first unless named); `kind`: the model's norm."""
    stack = stack or result.stacks[0]
    keyless = not np.isfinite(result.uniform_entropy[stack])  # no query may attend to any key: no entropy anywhere
    measures = (RMS,) if keyless else (RMS, ENTROPY)
    broken = [p for p in NORMS if not _finite(result, p, stack, measures)]
    if broken:  # a sentence comparing them would print "nan" or compare what is not a number
        return [setup_words(result, weights, kind), _not_finite_words(broken)]
    return [
        setup_words(result, weights, kind),
        rms_words(result, stack, kind),
        gradient_words(result, stack, untrained),
        NO_KEY_WORDS if keyless else entropy_words(result, stack),
    ]


NO_KEY_WORDS = (
    "No attention entropy: no query of this stack has a key it may attend to (every token is [PAD] and the mask hides "
    "padding), so there is no distribution to measure in any placement."
)


def _finite(result: PlacementRun, placement: str, stack: str, measures: tuple[str, ...]) -> bool:
    """Whether the `measures` (the stream's RMS, the attention entropy) of one placement are numbers (the gradient
    norms that are not are said so by gradient_words, through PlacementRun.unresolved)."""
    return all(np.isfinite(result.values(placement, measure, stack)).all() for measure in measures)


def _not_finite_words(broken: list[str]) -> str:
    return (
        f"{listed([name(p) for p in broken]).capitalize()} gave values that are not numbers (float32 overflowed "
        "somewhere in the run), so the four placements are not compared in words here; the chart and the CSV hold "
        "what was measured."
    )
