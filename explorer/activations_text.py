"""What the Activations page says about where the residual stream's energy sits: the token with a massive
activation, or why there is none, and how much of the attention and of what the heads add lands on it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from explorer.ablation import Head, head_names
from explorer.analysis.stats import COVERED_MASS
from explorer.analysis.stream_energy import MASSIVE_RATIO, MASSIVE_VALUE, MassiveActivation
from explorer.config import PAD_TOKEN
from explorer.numbers import readable

RULE = (
    "Sun et al. 2024 (“Massive Activations in Large Language Models”) call a value massive when "
    f"|x| > {MASSIVE_VALUE:.0f} and |x| ≥ {MASSIVE_RATIO:,.0f}× the median |x| of the stream after its block"
)


PADDING_NOTE = f"{PAD_TOKEN} queries included: a padding mask hides {PAD_TOKEN} keys, not their rows"


def shares_average_text(padded: int = 0, removed: tuple[Head, ...] = (), removed_with: str = "zero") -> str:
    """What the share chart averages over (token_shares): the heads (those kept, when some were removed with zero;
    every head, a mean-replaced one with its weights averaged over the queries) and the queries that may see the
    token and another one, `padded` of them [PAD] queries."""
    if not removed:
        heads = "heads"
    elif removed_with == "zero":
        heads = f"the heads kept ({head_names(removed)} removed, adding nothing)"
    else:
        heads = f"heads ({head_names(removed)} replaced by their mean: their weights averaged over the queries)"
    queries = "the queries that may see it and another token"
    return f"mean over {heads} and over {queries}" + (f" ({PADDING_NOTE})" if padded else "")


def sublayer_outputs_text(output_norm: bool) -> str:
    """What the charts' sub-layer output points hold (attn.out, ffn.out): the update the stream receives, or, in
    res-post and peri, f(x) before the output norm, whose result is the update."""
    if output_norm:
        return (
            "sub-layer outputs: each sub-layer's f(x) before its output norm; the stream receives that norm's output "
            "(its RMS near the norm's gain: the norms chart)"
        )
    return "sub-layer outputs: what each sub-layer adds, before the residual sum"


def _blocks(blocks: tuple[int, ...]) -> str:
    """E.g. "after block 11", "after blocks 11 to 27", "after blocks 2, 5 and 9"."""
    if len(blocks) == 1:
        return f"after block {blocks[0]}"
    if list(blocks) == list(range(blocks[0], blocks[-1] + 1)):
        return f"after blocks {blocks[0]} to {blocks[-1]}"
    return "after blocks " + ", ".join(str(b) for b in blocks[:-1]) + f" and {blocks[-1]}"


def _number(value: float) -> str:
    """A magnitude as the sentence writes it: whole from 100 up (22,552), else 3 significant digits (34.8)."""
    return f"{value:,.0f}" if value >= 100 else readable(value)


def _token(position: int, piece: str) -> str:
    return f"“{piece}” (position {position})"


def massive_text(finding: MassiveActivation, shares: pd.DataFrame | None = None) -> str:
    """The token with a massive activation, from which block, how large, and (given token_shares) how much of the
    heads' weight and of what they add goes to it in the layers that read it."""
    text = (
        f"**Massive activation from block {finding.block}**: the token {_token(finding.position, finding.piece)} "
        f"carries |x| = {_number(finding.value)} in unit {finding.unit} of its residual vector, "
        f"{_number(finding.ratio)}× the median |x| of the stream; it is massive {_blocks(finding.blocks)}. {RULE}."
    )
    if finding.others:
        where = "position" if len(finding.others) == 1 else "positions"
        text += f" Other tokens with one: {where} {', '.join(str(t) for t in finding.others)}."
    if shares is None:
        return text
    return f"{text} {shares_text(finding.position, finding.piece, shares, finding.block, named=False)}"


def shares_text(position: int, piece: str, shares: pd.DataFrame, after: int | None = None, named: bool = True) -> str:
    """How much of the heads' weight one token gets on average (token_shares), over the layers after block `after`
    (every layer when None), and how much of what they add; whether the weight carries as much. The token is
    named, or called "it" (`named` False, after a sentence naming it). "" without a layer to average."""
    reading = shares if after is None else shares[shares["layer"] > after]
    who = _token(position, piece) if named else "it"
    if not reading.empty and not np.isfinite(shares["weights"]).any():  # key_share: no query with a choice sees it
        return (
            f"No query may attend to {who} and to another token: the mask blocks it, or a query that may see it "
            "sees nothing else, so its share is 1 by construction and is not measured."
        )
    if reading.empty or not np.isfinite(reading["weights"]).any():
        return ""
    weight = float(np.nanmean(reading["weights"]))
    text = f"{_over_layers(reading, after)}, the heads put {weight:.2f} of their weight on {who}"
    if not np.isfinite(reading["norms"]).any():
        return text + "."
    added = float(np.nanmean(reading["norms"]))
    ratio = added / weight if weight > 0 else 1.0
    if ratio < 0.5:
        verdict = "less than half: most of that attention parks there and carries little"
    elif ratio < 0.9:
        verdict = "less than its weight: the heads take less from it than they look at it"
    elif ratio <= 1.1:
        verdict = "about its weight: what it passes on is as large as the rest"
    else:
        verdict = "more than its weight: what it passes on is larger than the rest"
    return text + f"; of what they add (‖α·f(x)‖) it gives {added:.2f}, {verdict}."


def _over_layers(reading: pd.DataFrame, after: int | None) -> str:
    """Which layers shares_text averages: its share is their mean, not every layer's (MiniLM's [CLS] gets 0.35 to
    0.68 a layer, 0.56 on average). A layer whose heads were all removed (zero) has no share and is not counted."""
    counted = int(np.isfinite(reading["weights"]).sum())
    kept = "" if counted == len(reading) else " with a head kept"
    layers = "the one layer" if counted == 1 else f"the {counted} layers"
    reads = "" if after is None else f" that {'reads' if counted == 1 else 'read'} it (after block {after})"
    return f"{'In' if counted == 1 else 'Averaged over'} {layers}{reads}{kept}"


def no_massive_text(norm: str, value: float, ratio: float, block: int, position: int, piece: str) -> str:
    """Why no token has a massive activation: the largest |x| and its ratio to the median, and, for post-norm,
    that every block ends by re-normalising the stream."""
    largest = (
        f"the largest |x| in the residual stream is {_number(value)}, at {_token(position, piece)} after block "
        f"{block}, {_number(ratio)}× the median |x| there"
    )
    if norm == "post":
        why = (
            "post-norm ends every block with a LayerNorm, which re-normalises each token's vector, so no value can "
            "build up from block to block"
        )
    else:
        why = "no value in this stream grows that far above the rest"
    return f"**No massive activation**: {largest}. {RULE}. {why[0].upper()}{why[1:]}."


def energy_text(
    norm: str,
    finding: MassiveActivation | None,
    largest: tuple[int, int, float, float],
    tokens: list[str],
    shares: pd.DataFrame,
) -> str:
    """The Activations page's sentence: massive_text of `finding` with its shares, or, without one, no_massive_text
    of the `largest` activation (largest_activation's block, position, |x|, ratio) and that token's shares in every
    layer."""
    if finding is not None:
        return massive_text(finding, shares)
    block, position, value, ratio = largest
    text = no_massive_text(norm, value, ratio, block, position, tokens[position])
    return f"{text} {shares_text(position, tokens[position], shares)}".rstrip()


def head_stats_caption(
    kind: str, stack_name: str, uniform_entropy: float, uniform_distance: float, padded: int = 0
) -> str:
    """What the per-head grids measure, with the scores of uniform attention; when every query may see one key
    (`uniform_entropy` 0: one token, or a mask that leaves one key), that no head has a choice, rather than a scale
    whose two ends are both 0. `padded`: how many [PAD] queries the averages count (their rows attend, and were
    averaged in without a word)."""
    where = f"The {kind} of the {stack_name} stack; queries with no allowed key are left out" + (
        f"; {PADDING_NOTE}." if padded else "."
    )
    distance = "**Mean distance**: Σ weight × |query position − key position|"
    if uniform_entropy <= 0:
        far = (
            "each query's one key is itself, so it is 0"
            if uniform_distance <= 0
            else f"here the distance to each query's one key, {uniform_distance:.2f} on average"
        )
        return (
            f"{where} Every query may see only one key, so every head's **entropy** and **sparsity** are 0: no "
            f"head has a choice to spread over. {distance} ({far})."
        )
    return (
        f"{where} **Entropy**: how spread each query's weights are, averaged over queries (0 = one key; "
        f"{uniform_entropy:.2f} nats = uniform over the allowed keys). {distance} (0 = each token looks at itself; "
        f"uniform attention scores {uniform_distance:.2f}). **Sparsity**: the share of its allowed keys a query can "
        f"ignore and still keep {COVERED_MASS:.0%} of its weight (0 = it needs them all)."
    )


def pad_words(tokens: list[str]) -> str:
    """ ", 2 of them [PAD]" where a summary over every token counts [PAD] tokens too ("" where there is none)."""
    pads = tokens.count(PAD_TOKEN)
    return f", {pads} of them {PAD_TOKEN}" if pads else ""
