"""Cross-entropy of next-piece logits read out through a checkpoint's embedding table, a few positions at a time.

F.cross_entropy(x @ table.T, labels) holds the logits [N, V] whole, and its backward pass three more tensors of that
size: for SmolLM2 (V = 49,152) on 512 pieces, 96 MB each, at the top of a gradient pass that already holds the
model. This computes the same loss with CHUNK positions' logits at a time and, when a gradient is wanted, the
gradients too, from the same chunk while it is at hand (as Liger Kernel's fused linear cross-entropy does): the
backward pass then only scales them, and no logits are made twice.
"""

from __future__ import annotations

import torch
from torch.autograd.function import FunctionCtx, once_differentiable

CHUNK = 128  # positions at a time: SmolLM2's logits for 128 positions are 25 MB (64 took 0.2 s more on 512)


def read_out_loss(x: torch.Tensor, table: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """x [N, D], table [V, D], labels [N] (ints below V) -> the mean over positions of -log softmax(x @ table.T)[label],
    equal to F.cross_entropy(x @ table.T, labels), differentiable (once) in x and table."""
    if x.shape[0] == 0:
        raise ValueError("read_out_loss needs at least one position")
    return _ChunkedReadOut.apply(x, table, labels)


class _ChunkedReadOut(torch.autograd.Function):
    @staticmethod
    def forward(ctx: FunctionCtx, x: torch.Tensor, table: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        wants_x, wants_table, _ = ctx.needs_input_grad
        n = x.shape[0]
        grad_x = torch.empty_like(x) if wants_x else None  # [N, D]
        grad_table = torch.zeros_like(table) if wants_table else None  # [V, D]
        total = x.new_zeros(())
        for start in range(0, n, CHUNK):
            rows = slice(start, start + CHUNK)
            logits = x[rows] @ table.T  # [c, V]
            log_total = torch.logsumexp(logits, dim=1)  # [c]
            total += (log_total - logits.gather(1, labels[rows, None])[:, 0]).sum()
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
    def backward(ctx: FunctionCtx, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
        if not hasattr(ctx, "grads"):
            raise RuntimeError("read_out_loss gives its gradients once: a second backward pass through it has none")
        grad_x, grad_table = ctx.grads
        del ctx.grads  # the pass's own reference alone, so that it can add the lookup's gradient in place
        if bool(grad != 1):  # the loss was scaled after this function: scale its gradients alike
            grad_x, grad_table = (None if g is None else g * grad for g in (grad_x, grad_table))
        return grad_x, grad_table, None
