"""What the Mixing page says about attention rollout and flow (explorer.analysis.mixing): plain sentences from
numbers, no Streamlit here."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from explorer.config_words import count
from explorer.numbers import readable, readable_share

# What the page solves while the reader waits: max-flow problems x edges each (flow_work). bench/bench_mixing.py
# measures 20 to 430 ns per unit on 2 cores, the most for every row of a small graph (scipy's cost per call) and with
# other work running, when the default 2-layer model's every row at 47 tokens (9.8 million) took 3.0 s and MiniLM's
# at 32 pieces (6.3 million) 2.7 s: 8 million keeps the page's flow near 3 s on a busy machine, 1.5 s on a quiet one.
# The count grows with the layers, the time barely does (most paths die out in a few layers): on a deep model the
# limit refuses work that would finish well within that, which is why the page states the limit, not a time.
FLOW_PAGE_MAX_WORK = 8_000_000
SHOWN = 0.005  # a value that rounds to 0.00 in a sentence is not named there


def explanation(residual: float) -> str:
    """What rollout and flow are and why they differ from one layer's weights, for a teacher to read aloud."""
    own = f"{residual:g}"
    rest = f"{1 - residual:g}"
    return (
        "An attention map says where one layer's heads look. But from the second layer on, every position already "
        "holds a mix of tokens, so a high weight on *cat* in the last layer does not mean the input token *cat*: it "
        "means whatever the layers before mixed into the position where *cat* started. To ask **which input tokens "
        "an output is made of**, follow the mixing through every layer (Abnar & Zuidema 2020, “Quantifying "
        "Attention Flow in Transformers”).\n\n"
        f"Both methods below first add the **residual connection**: a block's output is its input *plus* what "
        f"attention added, so each token also carries itself on. They model that as a share of **{own}** of each "
        f"position kept for the token itself and **{rest}** spread as the average of the layer's heads: "
        f"Ã = {own}·I + {rest}·A. **Rollout** multiplies these matrices, first layer first: how much of each input "
        "token reaches each position, if mixing simply compounds. **Flow** treats the layers as a network of pipes "
        "whose widths are Ã, and asks how much can reach each input token at most through all paths at once (a "
        "max-flow problem, slower to solve). Each flow value is its own max-flow problem, not a share: several input "
        "tokens can each reach a position fully, so a row of flow can sum to more than 1. Both use the weights alone: "
        "they leave out the feed-forward layers and the size of what each head adds."
    )


def removal_note(heads: str, mode: str, residual: float, hidden: bool) -> str:
    """For a run with heads removed (explorer.ablation): what A is then, in rollout and flow and in the raw maps.
    `hidden`: whether a head removed by its mean weighs a key the mask hides from some position (mean_reaches_hidden
    in explorer.analysis.mixing: later tokens under a causal mask, never [PAD] under a padding mask alone)."""
    if mode == "zero":
        acted = "zero weight, its output having been set to zero"
        after = _zeroed_rows(residual)
    else:
        acted = "its mean weight on each key over the queries, its output having been set to its mean"
        after = (
            "That mean is the same for every position, so through a removed head a position receives tokens its mask "
            "hides from it (with a causal mask, later tokens): those cells are drawn with their values, not grey."
            if hidden and residual < 1
            else ""
        )
    return (
        f"**{heads} removed.** In A each removed head counts as it acted: {acted}. The raw maps on this page average "
        f"the heads the same way. {after}"
    ).strip()


def _zeroed_rows(residual: float) -> str:
    """What a zeroed head does to Ã's rows at this residual share: a token keeps more than the share of itself, but
    not past a share of 1 (nothing mixes) and not at 0 (no share of its own: the heads kept count for more)."""
    if residual >= 1:
        return "With a residual share of 1 nothing mixes, so the removal changes neither rollout nor flow."
    where = "Where a removed head's weights became zero, A's rows sum to less than 1 in its layer, and each row of Ã is"
    if residual <= 0:
        return f"{where} divided by its sum, so there the heads kept count for more."
    return f"{where} divided by its sum, so there a token keeps more than {residual:g} of itself."


def residual_help() -> str:
    """The help of the residual-share slider."""
    return (
        "The share of each position's mixing kept for the token itself, standing for the residual connection "
        "(Abnar & Zuidema use 0.5). 0: attention alone, as if there were no residual connection; 1: no mixing at all "
        "(rollout is the identity)."
    )


def first_stack_note(stack_names: list[str]) -> str | None:
    """For an encoder-decoder: which attention rollout and flow follow (None for a single stack)."""
    if len(stack_names) < 2:
        return None
    return (
        f"This model has two stacks: rollout and flow follow the **{stack_names[0]}'s self-attention** (the first "
        f"stack, over the source tokens). The {stack_names[1]}'s self-attention and its cross-attention are not part "
        "of them: the Attention page shows those maps."
    )


def flow_work(n_layers: int, n_tokens: int, rows: int | None) -> int:
    """What flow costs: `rows` query rows (None: every row) each solve n_tokens max-flow problems on a graph of
    n_layers x n_tokens x n_tokens edges; the time grows with problems x edges."""
    rows = n_tokens if rows is None else rows
    return rows * n_tokens * n_layers * n_tokens * n_tokens


def flow_offered(n_layers: int, n_tokens: int, rows: int | None) -> bool:
    """Whether the page computes flow for `rows` query rows (None: every row): its work is within FLOW_PAGE_MAX_WORK."""
    return flow_work(n_layers, n_tokens, rows) <= FLOW_PAGE_MAX_WORK


def flow_max_tokens(n_layers: int, every_row: bool) -> int:
    """The most tokens for which the page computes flow of every row (or of one row) on n_layers layers."""
    n = 1
    while flow_offered(n_layers, n + 1, None if every_row else 1):
        n += 1
    return n


def flow_too_big(n_layers: int, n_tokens: int, unit: str, every_row: bool) -> str:
    """Why the page does not compute flow (of every row, or of one query's row) here, and how to get it (one row below
    only when the page computes that row)."""
    rows = n_tokens if every_row else 1
    edges = n_layers * n_tokens * n_tokens
    what = "flow for every position" if every_row else "this position's flow"
    return (
        f"{what[0].upper()}{what[1:]} is not computed here: it means solving {rows * n_tokens:,} max-flow problems, "
        f"each on a graph of {edges:,} edges ({count(n_layers, 'layer')} × {n_tokens} × {n_tokens} {unit}s), "
        f"{rows * n_tokens * edges:,} units of work (problems × edges), more than the page's limit of "
        f"{FLOW_PAGE_MAX_WORK:,}, set so that flow stays within a few seconds on a 2-core machine at any depth. "
        f"With at most {flow_max_tokens(n_layers, every_row)} {unit}s it is drawn here"
        + ("; below, one position's row is cheaper" if every_row and flow_offered(n_layers, n_tokens, 1) else "")
        + "; or compute it in a notebook with explorer.attention_flow."
    )


def reach_title(token: str, query: int, n_tokens: int, predicts: bool) -> str:
    """The title of one query's row of rollout and flow (`predicts`: predicts_next)."""
    if predicts and query == n_tokens - 1:
        return f"Which input tokens reach the prediction (after “{token}”, the last position)"
    return f"Which input tokens reach position {query} (“{token}”) after the last block"


def top_tokens(tokens: list[str], row: np.ndarray, most: int = 3) -> str:
    """The `most` largest entries of a row as "`mat` (0.42), `the` (0.21)", largest first, leaving out those that
    round to 0.00 ("" when every entry does); when tokens not named print as the last one named does, how many ("and 3
    more tokens at 1.00"): three of six flows of 1.00 are not the largest."""
    values = np.asarray(row, dtype=np.float64)  # [T]
    named = [int(i) for i in np.argsort(-values, kind="stable")[:most] if values[i] >= SHOWN]
    text = ", ".join(f"`{tokens[i]}` ({values[i]:.2f})" for i in named)
    if not named:
        return text
    last = f"{values[named[-1]]:.2f}"
    tied = sum(f"{v:.2f}" == last for v in values) - sum(f"{values[i]:.2f}" == last for i in named)
    return text + (f" and {count(tied, 'more token')} at {last}" if tied else "")


def largest_token(tokens: list[str], row: np.ndarray) -> str:
    """The largest entry of a row with its value as it reads: "`w31` at 0.0035" (for a row that top_tokens leaves
    empty although it is not all zeros)."""
    values = np.asarray(row, dtype=np.float64)  # [T]
    i = int(values.argmax())
    return f"`{tokens[i]}` at {readable(float(values[i]), 2)}"


def reach_sentence(
    tokens: list[str], query: int, raw_row: np.ndarray, rollout_row: np.ndarray, flow_row: np.ndarray | None
) -> str:
    """What one query's rows say: the keys the last layer's raw average weights most, the input tokens rollout
    estimates that position is made of, and those the most flow can pass to (or that nothing reaches). A row spread
    so thin that every entry rounds to 0.00 (the raw average over 512 tokens) is said so, with its largest entry."""
    raw, rollout = top_tokens(tokens, raw_row), top_tokens(tokens, rollout_row)
    thin = f", none as much as {SHOWN:g} (the most:"
    if raw:
        raw_part = f"weights most {raw}"
    elif np.max(raw_row) > 0:
        raw_part = f"spreads its weight thinly over the keys{thin} {largest_token(tokens, raw_row)})"
    else:
        raw_part = "puts no weight on any key"
    if rollout:
        rollout_part = f"rollout estimates that it is made most of {rollout}"
    elif np.max(rollout_row) > 0:
        rollout_part = (
            f"rollout estimates that it is made of many input tokens in small shares{thin} "
            f"{largest_token(tokens, rollout_row)})"
        )
    else:
        rollout_part = "by rollout's estimate nothing reaches it"
    parts = [f"At position {query} (`{tokens[query]}`), the last layer's average of heads {raw_part}", rollout_part]
    if flow_row is not None:
        flow = top_tokens(tokens, flow_row)
        said = (
            "flow, the most that can pass from it to each input token on its own (each its own max-flow problem, not "
            "a share: a row can sum to more than 1), is "
        )
        if flow:
            parts.append(f"{said}largest for {flow}")
        elif np.max(flow_row) > 0:
            parts.append(f"{said}small for every input token{thin} {largest_token(tokens, flow_row)})")
        else:
            parts.append("no flow can pass from it to any input token")
    return "; ".join(parts) + "."


def rows_note(rollout: np.ndarray) -> str:
    """What the rows of a rollout map ([Q, T]) sum to: 1, or 0 where nothing reaches the position."""
    empty = (np.asarray(rollout, dtype=np.float64).sum(axis=-1) < 0.5).any()  # [Q] -> one bool
    return "rows sum to 1 (0 where nothing reaches)" if empty else "rows sum to 1"


def board_caption(flow_shown: bool) -> str:
    """The caption of the last block's board: what each of its two or three maps holds, each by its title (beside or
    under each other as the window's width lays them out: a phone stacks all three, a projector puts flow below)."""
    rollout = (
        "Rollout: by this estimate, which input tokens (across) each position (down) is made of after every block "
        "(rows sum to 1, or 0 where nothing reaches)"
    )
    flow = (
        "Flow: the most that can pass from each position to each input token through the attention graph, each "
        "cell its own max-flow problem, not a share (a row can sum to more than 1)"
    )
    maps = f"{rollout}. {flow}." if flow_shown else f"{rollout}."
    return (
        f"Raw: where the last layer's heads look (their average). {maps} Click a cell to see its position's row below."
    )


def predicts_next(stack_names: Sequence[str]) -> bool:
    """Whether the first stack's last position predicts the next token: only a decoder-only model's does (a causal
    mask alone does not say so: one token, a padded encoder or an encoder-decoder's encoder can have one)."""
    return tuple(stack_names) == ("decoder",)


def opening_query(n_tokens: int, predicts: bool) -> int:
    """The position whose row the page opens on: the last where it predicts the next token, else the first."""
    return n_tokens - 1 if predicts else 0


PILED = 0.9  # rollout "piles up" on one token when it holds at least this share of every position


def one_token_note(token: str, value: float) -> str:
    """Rollout and flow of a single token (`value`: its one rollout entry): nothing to mix, so all of its one row is
    that token, whatever the heads do (piled_up_note would say rollout piles up on it), unless no attention reaches
    it at residual share 0 (its key masked, or its heads removed), where the row is 0."""
    if value < 0.5:
        return (
            f"With one token there is nothing to mix; here no attention reaches `{token}` and the residual share is 0, "
            "so rollout and flow are 0."
        )
    return (
        f"With one token there is nothing to mix: rollout and flow give all of its one row to `{token}` (1), whatever "
        "the heads do."
    )


def piled_up_note(
    tokens: list[str], last_rollout: np.ndarray, n_layers: int, flow: np.ndarray | None = None
) -> str | None:
    """When rollout after the last block ([T, T], two tokens or more) puts at least PILED of every position on one input
    token: say so, and why, and, when flow of every position ([T, T]) was computed and spreads more, by how much (None
    otherwise)."""
    rollout = np.asarray(last_rollout, dtype=np.float64)  # [T, T]
    if len(rollout) < 2:  # one token holds all of its one row by definition: nothing piles up
        return None
    column = int(rollout.mean(axis=0).argmax())
    least = float(rollout[:, column].min())
    if least < PILED:
        return None
    text = (
        f"Rollout after {count(n_layers, 'block')} finds almost all of every position in `{tokens[column]}` (at "
        f"least {readable_share(least)} of each row). Multiplying {n_layers} mixing matrices compounds the share "
        "each block gives that token, so rollout piles up on the token attention rests on."
    )
    if flow is None:
        return text
    flow_part, rollout_part = (
        float(m[:, column].sum() / m.sum()) for m in (np.asarray(flow, dtype=np.float64), rollout)
    )
    if flow_part >= rollout_part:
        return text
    return text + (
        " Flow, capped by the width of each pipe, does not compound, and spreads more: "
        f"`{tokens[column]}` holds {readable_share(flow_part)} of this map's flow values summed, against "
        f"{readable_share(rollout_part)} of rollout's."
    )
