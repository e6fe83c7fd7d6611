"""Cross-entropy of next-piece logits read out through a checkpoint's embedding table, a few positions at a time.

F.cross_entropy(x @ table.T, labels) holds the logits [N, V] whole, and its backward pass three more tensors of that
size: for SmolLM2 (V = 49,152) on 512 pieces, 96 MB each, at the top of a gradient pass that already holds the
model. This computes the same loss with CHUNK positions' logits at a time and, when a gradient is wanted, the
gradients too, from the same chunk while it is at hand (as Liger Kernel's fused linear cross-entropy does): the
backward pass then only scales them, and no logits are made twice.

The table's gradient is as large as the table (108 MB for SmolLM2), and a gradient pass that wants only its norm
holds it from the read-out to the end of the pass, where the lookup's gradient is added to it.
read_out_loss_and_table_gradient gives instead what that norm needs: the squared norm of the read-out's part and its
rows at the looked-up pieces, made VOCABULARY_CHUNK rows of the table at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.autograd.function import FunctionCtx, once_differentiable

from explorer.malloc import give_back

CHUNK = 128  # positions at a time: SmolLM2's logits for 128 positions are 25 MB (64 took 0.2 s more on 512)
VOCABULARY_CHUNK = 4096  # rows of the table at a time: for 512 positions, logits of 8 MB and a gradient of 9 MB


@dataclass(frozen=True)
class TableGradient:
    """What the norm of the table's whole gradient needs of the read-out's part G [V, D] of it (d loss / d table
    through the logits), without G: ||G||^2, and G at `rows` (every row another use of the table, such as the
    lookup, gives a gradient to)."""

    squared_norm: float  # ||G||^2, summed in float64
    rows: torch.Tensor  # [R] distinct row indices
    values: torch.Tensor  # [R, D] G[rows]

    def norm_with(self, other: torch.Tensor) -> float:
        """||G + other||, other [V, D] being zero outside `rows` (the lookup's gradient): ||G||^2 with G's rows
        replaced by G's plus other's there."""
        at_rows = self.values.double() + other[self.rows].double()  # [R, D]
        kept = self.squared_norm - float(self.values.double().square().sum())
        return max(0.0, kept + float(at_rows.square().sum())) ** 0.5


def read_out_loss(x: torch.Tensor, table: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """x [N, D], table [V, D], labels [N] (ints below V) -> the mean over positions of -log softmax(x @ table.T)[label],
    equal to F.cross_entropy(x @ table.T, labels), differentiable (once) in x and table."""
    _check_positions(x)
    return _ChunkedReadOut.apply(x, table, labels, None)


def read_out_loss_and_table_gradient(
    x: torch.Tensor, table: torch.Tensor, labels: torch.Tensor, rows: torch.Tensor
) -> tuple[torch.Tensor, TableGradient]:
    """read_out_loss(x, table, labels), differentiable in x alone, and the TableGradient of the loss for `rows`
    [R] (distinct): the table's gradient through the logits, reduced to what its norm needs, as the loss is (not
    scaled by what a backward pass brings)."""
    _check_positions(x)
    log_totals: list[torch.Tensor] = []
    loss = _ChunkedReadOut.apply(x, table.detach(), labels, log_totals)
    give_back()  # the position chunks' logits, freed, before the vocabulary's chunks of another size
    with torch.no_grad():
        return loss, _table_gradient(x.detach(), table.detach(), labels, torch.cat(log_totals), rows)


def _check_positions(x: torch.Tensor) -> None:
    if x.shape[0] == 0:
        raise ValueError("read_out_loss needs at least one position")


def _table_gradient(
    x: torch.Tensor, table: torch.Tensor, labels: torch.Tensor, log_total: torch.Tensor, rows: torch.Tensor
) -> TableGradient:
    """x [N, D], table [V, D], labels [N], log_total [N] (each position's logsumexp of its logits), rows [R] ->
    the TableGradient of the mean cross-entropy: G = (softmax - one-hot of the label)^T x / N, VOCABULARY_CHUNK
    rows at a time."""
    n = x.shape[0]
    squared = 0.0
    values = x.new_zeros((len(rows), x.shape[1]))  # [R, D]
    for start in range(0, table.shape[0], VOCABULARY_CHUNK):
        block = table[start : start + VOCABULARY_CHUNK]  # [c, D]
        d_logits = (x @ block.T).sub_(log_total[:, None]).exp_()  # [N, c] softmax over the whole vocabulary
        here = ((labels >= start) & (labels < start + len(block))).nonzero()[:, 0]  # positions labelled in the block
        d_logits[here, labels[here] - start] -= 1
        d_logits /= n
        grad = d_logits.T @ x  # [c, D]
        squared += float(grad.square().sum(dtype=torch.float64))
        mine = ((rows >= start) & (rows < start + len(block))).nonzero()[:, 0]  # the rows asked for in the block
        values[mine] = grad[rows[mine] - start]
    return TableGradient(squared, rows, values)


class _ChunkedReadOut(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: FunctionCtx,
        x: torch.Tensor,
        table: torch.Tensor,
        labels: torch.Tensor,
        log_totals: list[torch.Tensor] | None,
    ) -> torch.Tensor:
        """`log_totals`, when given, receives each chunk's logsumexp [c] of its logits."""
        wants_x, wants_table, _, _ = ctx.needs_input_grad
        n = x.shape[0]
        grad_x = torch.empty_like(x) if wants_x else None  # [N, D]
        grad_table = torch.zeros_like(table) if wants_table else None  # [V, D]
        total = x.new_zeros(())
        for start in range(0, n, CHUNK):
            rows = slice(start, start + CHUNK)
            logits = x[rows] @ table.T  # [c, V]
            log_total = torch.logsumexp(logits, dim=1)  # [c]
            total += (log_total - logits.gather(1, labels[rows, None])[:, 0]).sum()
            if log_totals is not None:
                log_totals.append(log_total)
            if grad_x is None and grad_table is None:
                continue
            # d loss / d logits, in the logits' own memory: (softmax - one-hot of the label) / N
            d_logits = logits.sub_(log_total[:, None]).exp_()  # [c, V]
            d_logits[torch.arange(d_logits.shape[0]), labels[rows]] -= 1
            d_logits /= n
            if grad_x is not None:
                grad_x[rows] = d_logits @ table  # [c, D]
            if grad_table is not None:
                grad_table.addmm_(d_logits.T, x[rows])  # [V, D]
        ctx.grads = (grad_x, grad_table)
        return total / n

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None, None, None]:
        if not hasattr(ctx, "grads"):
            raise RuntimeError("read_out_loss gives its gradients once: a second backward pass through it has none")
        grad_x, grad_table = ctx.grads
        del ctx.grads  # the pass's own reference alone, so that it can add the lookup's gradient in place
        if bool(grad != 1):  # the loss was scaled after this function: scale its gradients alike
            grad_x, grad_table = (None if g is None else g * grad for g in (grad_x, grad_table))
        return grad_x, grad_table, None, None
