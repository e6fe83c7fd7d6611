"""How much does a full explorer trace cost next to a stock torch forward that also returns per-head weights?

For each size and norm placement, one stack of stock nn.TransformerEncoderLayer modules is timed two ways:
  explorer  explorer.run(explorer.from_torch(stack), x): the full Trace (every layer's weights, scores,
            residuals and sub-layer outputs, as numpy float32);
  torch     the same layers' own modules, called as a forward would, except that each self_attn is asked for
            need_weights=True, average_attn_weights=False, so both sides compute per-head weights.
A "native" row times explorer.run(build_model(cfg), tokens) on a model of the same size (its own weights,
plus token embeddings and sinusoidal positions) against the same torch reference.

Usage: python bench/bench_run.py [--sizes small,large] [--repeats N] [--strict]
Prints the median of N interleaved repeats after a warm-up, and for the from_torch rows the largest difference
from torch in the attention weights (max|dw|) and the output (max|dy|); --strict exits 1 when a ratio is over
the target.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere: `import explorer`

from sentences import words  # noqa: E402  (bench/ is on sys.path when a script here runs)

import explorer  # noqa: E402

TARGET = 1.5  # explorer.run may take at most this many times the stock torch forward


@dataclass(frozen=True)
class Size:
    name: str
    T: int  # tokens
    L: int  # layers
    H: int  # heads
    D: int  # d_model
    repeats: int  # default number of timed repeats

    @property
    def F(self) -> int:  # d_ff
        return 4 * self.D


SIZES = {
    "small": Size("small", T=16, L=4, H=8, D=256, repeats=50),
    "large": Size("large", T=256, L=12, H=12, D=768, repeats=10),
}


def stock_stack(size: Size, norm_first: bool, seed: int = 0) -> nn.TransformerEncoder:
    """L independently initialised stock layers; a pre-norm stack ends with a LayerNorm, as it should."""
    torch.manual_seed(seed)

    def layer() -> nn.TransformerEncoderLayer:
        return nn.TransformerEncoderLayer(
            size.D, size.H, size.F, dropout=0.0, activation="relu", batch_first=True, norm_first=norm_first
        )

    final = nn.LayerNorm(size.D) if norm_first else None
    stack = nn.TransformerEncoder(layer(), size.L, norm=final, enable_nested_tensor=False)
    stack.layers = nn.ModuleList(layer() for _ in range(size.L))  # distinct weights per layer, not L copies
    return stack.eval()


def torch_forward(stack: nn.TransformerEncoder, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [1, T, D] -> output [1, T, D], weights [L, H, T, T]: TransformerEncoderLayer's own forward, per-head."""
    weights = []
    for layer in stack.layers:

        def attend(h: torch.Tensor, layer: nn.TransformerEncoderLayer = layer) -> torch.Tensor:
            out, w = layer.self_attn(h, h, h, need_weights=True, average_attn_weights=False)  # w [1, H, T, T]
            weights.append(w[0])
            return layer.dropout1(out)

        def feed_forward(h: torch.Tensor, layer: nn.TransformerEncoderLayer = layer) -> torch.Tensor:
            return layer.dropout2(layer.linear2(layer.dropout(layer.activation(layer.linear1(h)))))

        if layer.norm_first:
            x = x + attend(layer.norm1(x))
            x = x + feed_forward(layer.norm2(x))
        else:
            x = layer.norm1(x + attend(x))
            x = layer.norm2(x + feed_forward(x))
    if stack.norm is not None:
        x = stack.norm(x)
    return x, torch.stack(weights)  # [L, H, T, T]


def interleaved_medians(fns: dict[str, Callable[[], object]], warmup: int, repeats: int) -> dict[str, float]:
    """Median seconds per call; the candidates alternate so that drift (thermal, other load) hits both alike."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def bench_size(size: Size, repeats: int, warmup: int) -> list[dict]:
    rows = []
    x = torch.randn(size.T, size.D, generator=torch.Generator().manual_seed(1))  # [T, D] input embeddings
    for norm in ("post", "pre"):
        stack = stock_stack(size, norm_first=norm == "pre")
        imported = explorer.from_torch(stack)
        cfg = explorer.ModelConfig(d_model=size.D, n_heads=size.H, n_layers=size.L, d_ff=size.F, norm=norm)
        native = explorer.build_model(cfg)
        tokens = words(size.T)
        with torch.inference_mode():
            trace = explorer.run(imported, x)
            output, weights = torch_forward(stack, x[None])
            errors = (
                (torch.from_numpy(trace.attention) - weights).abs().max().item(),
                (torch.from_numpy(trace.output) - output[0]).abs().max().item(),
            )
            medians = interleaved_medians(
                {
                    "torch": lambda stack=stack: torch_forward(stack, x[None]),
                    "explorer": lambda imported=imported: explorer.run(imported, x),
                    "native": lambda native=native, tokens=tokens: explorer.run(native, tokens),
                },
                warmup,
                repeats,
            )
        for path in ("explorer", "native"):
            rows.append(
                {
                    "size": size,
                    "norm": norm,
                    "path": "from_torch" if path == "explorer" else "build_model",
                    "run": medians[path],
                    "torch": medians["torch"],
                    "errors": errors if path == "explorer" else None,
                }
            )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="small,large", help="comma-separated: " + ", ".join(SIZES))
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats (default: 50 small, 10 large)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--strict", action="store_true", help="exit 1 when a ratio is over the target")
    args = ap.parse_args()
    sizes = [SIZES[name.strip()] for name in args.sizes.split(",") if name.strip()]

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} cpus, load average {load}")
    print("explorer = explorer.run(model, x), full Trace; torch = stock layers, need_weights=True per head; medians")
    header = (
        f"{'size':6} {'T':>4} {'L':>3} {'H':>3} {'D':>4} {'norm':5} {'model':12} "
        f"{'explorer':>10} {'torch':>10} {'ratio':>7}  {'target':8} {'max|dw|':>8} {'max|dy|':>8}"
    )
    print(header)
    print("-" * len(header))
    over = 0
    for size in sizes:
        for row in bench_size(size, args.repeats or size.repeats, args.warmup):
            ratio = row["run"] / row["torch"]
            ok = ratio <= TARGET
            over += not ok
            errors = "" if row["errors"] is None else " ".join(f"{e:>8.1e}" for e in row["errors"])
            print(
                f"{size.name:6} {size.T:>4} {size.L:>3} {size.H:>3} {size.D:>4} {row['norm']:5} {row['path']:12} "
                f"{row['run'] * 1e3:>8.2f}ms {row['torch'] * 1e3:>8.2f}ms {ratio:>6.2f}x  "
                f"{'ok' if ok else 'OVER':4}<={TARGET}x {errors}",
                flush=True,
            )
    print(f"target: explorer.run <= {TARGET}x the stock torch forward; {over} row(s) over")
    return 1 if over and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
