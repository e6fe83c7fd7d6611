"""explorer.analysis.read_out_loss: a checkpoint's next-piece loss, a few positions at a time, equal to the whole."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import explorer.analysis.read_out_loss as read_out
from explorer.analysis.read_out_loss import CHUNK, read_out_loss, read_out_loss_and_table_gradient


def whole(x: torch.Tensor, table: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(x @ table.T, labels)  # logits [N, V] at once


def leaves(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 24, generator=generator).requires_grad_()  # [N, D]
    table = torch.randn(300, 24, generator=generator).requires_grad_()  # [V, D]
    labels = torch.randint(0, 300, (n,), generator=generator)  # [N]
    return x, table, labels


# float32 sums in another order: a few units in the last place of values of order 1 (loss ~ log 300 + spread)
CLOSE = {"rtol": 1e-5, "atol": 1e-6}


@pytest.mark.parametrize("n", [1, CHUNK - 1, CHUNK, CHUNK + 3, 2 * CHUNK + 1])
def test_loss_and_gradients_equal_the_whole_logits(n):
    x, table, labels = leaves(n)
    chunked = read_out_loss(x, table, labels)
    expected = whole(x, table, labels)
    torch.testing.assert_close(chunked, expected, **CLOSE)
    for got, want in zip(
        torch.autograd.grad(chunked, [x, table]), torch.autograd.grad(expected, [x, table]), strict=True
    ):
        torch.testing.assert_close(got, want, **CLOSE)


def test_a_loss_scaled_afterwards_scales_its_gradients():
    x, table, labels = leaves(CHUNK + 5)
    got = torch.autograd.grad(-2.5 * read_out_loss(x, table, labels), [x, table])
    want = torch.autograd.grad(-2.5 * whole(x, table, labels), [x, table])
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, **CLOSE)


def test_only_the_inputs_that_need_a_gradient_get_one():
    x, table, labels = leaves(10)
    frozen = table.detach()
    loss = read_out_loss(x, frozen, labels)
    (grad_x,) = torch.autograd.grad(loss, [x])
    torch.testing.assert_close(grad_x, torch.autograd.grad(whole(x, frozen, labels), [x])[0], **CLOSE)
    with torch.no_grad():
        torch.testing.assert_close(read_out_loss(x, table, labels), whole(x, table, labels), **CLOSE)


def test_a_second_backward_pass_is_refused_not_wrong():
    x, table, labels = leaves(10)
    loss = read_out_loss(x, table, labels)
    torch.autograd.grad(loss, [x, table], retain_graph=True)
    with pytest.raises(RuntimeError, match="gives its gradients once"):
        torch.autograd.grad(loss, [x, table])


def test_no_positions_is_refused():
    x, table, labels = leaves(0)
    with pytest.raises(ValueError, match="at least one position"):
        read_out_loss(x, table, labels)


def whole_table_gradient(x, table, labels):
    return torch.autograd.grad(whole(x, table, labels), [table])[0]  # [V, D]


@pytest.mark.parametrize("vocabulary_chunk", [64, 100, 300, 512])  # 300 rows: 5 blocks with a short one, 3, 1, 1
def test_the_table_gradient_taken_apart_is_the_whole_ones(monkeypatch, vocabulary_chunk):
    monkeypatch.setattr(read_out, "VOCABULARY_CHUNK", vocabulary_chunk)
    x, table, labels = leaves(CHUNK + 7)
    rows = torch.tensor([0, 5, 63, 64, 150, 299])  # each side of the blocks' edges
    loss, part = read_out_loss_and_table_gradient(x, table, labels, rows)
    torch.testing.assert_close(loss, whole(x, table, labels), **CLOSE)
    expected = whole_table_gradient(x, table, labels)
    assert part.squared_norm == pytest.approx(float(expected.double().square().sum()), rel=1e-5)
    torch.testing.assert_close(part.values, expected[rows], **CLOSE)
    (grad_x,) = torch.autograd.grad(loss, [x])
    torch.testing.assert_close(grad_x, torch.autograd.grad(whole(x, table, labels), [x])[0], **CLOSE)


def test_the_loss_taken_apart_gives_the_table_no_gradient():
    x, table, labels = leaves(10)
    loss, _ = read_out_loss_and_table_gradient(x, table, labels, torch.tensor([1, 2]))
    assert torch.autograd.grad(loss, [table], allow_unused=True) == (None,)


def test_a_norm_with_another_gradient_on_the_rows_is_the_norm_of_the_sum():
    """The lookup's gradient, zero outside the looked-up rows, added to the read-out's: the table's whole gradient."""
    x, table, labels = leaves(40)
    rows = torch.tensor([3, 17, 42, 250])
    _, part = read_out_loss_and_table_gradient(x, table, labels, rows)
    other = torch.zeros_like(table)  # [V, D]
    other[rows] = torch.randn(len(rows), table.shape[1], generator=torch.Generator().manual_seed(1))
    want = float((whole_table_gradient(x, table, labels) + other).norm())
    assert part.norm_with(other) == pytest.approx(want, rel=1e-5)
    assert part.norm_with(torch.zeros_like(table)) == pytest.approx(part.squared_norm**0.5, rel=1e-12)
