"""How long load_pretrained takes in a fresh process, with the GGUF weights cache cold, warm and off, and the memory the
loaded model holds.

Each row is a new `python` process (imports not counted) loading one checkpoint: SmolLM2 with an empty cache directory
(the first start on a machine: parse, dequantize, write the cache), again with that directory (every later start), and
with the cache off; MiniLM (a safetensors folder, no cache). A load is split into hash (the GGUF's SHA-256), read (the
cache entry, parsing and dequantizing the GGUF, or reading the folder), write (the cache entry), tokenizer, and the
rest (building the model on the meta device and handing it the tensors). Memory after the load and after one run of a
sentence: RssAnon is the process's own, RssFile the file pages it maps (the cache entry's, shared with every other
process that maps it). The cache directory is a temporary one: the user's own cache is neither read nor written.

Usage: python bench/bench_weights_cache.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_WARM_S = 1.0  # issue 25: the first SmolLM2 page (load + run + draw) in 2 s from the second start on

CHILD = r"""
import json, sys, time
import torch
import explorer
from explorer import folder_files, gguf_files, pretrained, weights_cache

spent = {}

def timed(owner, name, part):
    inner = getattr(owner, name)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[part] = spent.get(part, 0.0) + time.perf_counter() - start
    setattr(owner, name, wrapper)

timed(weights_cache, "key_for", "hash")
timed(weights_cache, "load", "read")
timed(gguf_files, "dequantize_gguf", "read")
timed(folder_files, "read_folder", "read")
timed(weights_cache, "save", "write")
timed(pretrained, "_tokenizer", "tokenizer")

def memory():
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return {key: int(fields[key].split()[0]) // 1024 for key in ("RssAnon", "RssFile", "VmHWM")}

start = time.perf_counter()
model = explorer.load_pretrained(sys.argv[1])
spent["total"] = time.perf_counter() - start
spent["build"] = spent["total"] - sum(spent.get(p, 0.0) for p in ("hash", "read", "write", "tokenizer"))
loaded = memory()
start = time.perf_counter()
explorer.run(model, "The cat sat on the mat because it was tired, and the dog watched it from the door.")
spent["run"] = time.perf_counter() - start
print(json.dumps({"seconds": spent, "loaded": loaded, "ran": memory()}))
"""


def load_in_fresh_process(name: str, cache: str) -> dict:
    """One load_pretrained in a new interpreter with ATTENTION_EXPLORER_CACHE=cache; its figures."""
    env = os.environ | {"ATTENTION_EXPLORER_CACHE": cache, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, name], env=env, capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def row(label: str, runs: list[dict]) -> None:
    """One table row: median seconds of each part, and the memory of the median run."""
    parts = ("hash", "read", "write", "tokenizer", "build", "total", "run")
    medians = {p: statistics.median(r["seconds"].get(p, 0.0) for r in runs) for p in parts}
    memory = sorted(runs, key=lambda r: r["seconds"]["total"])[len(runs) // 2]
    cells = " ".join(f"{medians[p]:>9.2f}" for p in parts)
    mb = " ".join(f"{memory[when][key]:>7}" for when in ("loaded", "ran") for key in ("RssAnon", "RssFile"))
    print(f"{label:<28} {cells} {mb} {memory['ran']['VmHWM']:>7}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per row (median shown)")
    args = parser.parse_args()
    print("seconds per part of load_pretrained (median of fresh processes); memory in MB (RssAnon/RssFile after the")
    print("load, then after one run; VmHWM the peak). The machine may be shared: compare rows of one run.\n")
    head = " ".join(f"{p:>9}" for p in ("hash", "read", "write", "tokenizer", "build", "total", "run"))
    print(f"{'load':<28} {head} {'anon':>7} {'file':>7} {'anon+run':>8} {'file':>6} {'peak':>7}")
    rows: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="weights-cache-") as scratch:
        for round_ in range(args.rounds):  # the rows take turns, so a busy spell on a shared machine hits them alike
            directory = str(Path(scratch) / f"round{round_}")  # empty: the first start on a machine
            for label, name, cache in (
                ("smollm2-135m, cache cold", "smollm2-135m", directory),
                ("smollm2-135m, cache warm", "smollm2-135m", directory),
                ("smollm2-135m, cache off", "smollm2-135m", "off"),
                ("minilm-l6 (folder)", "minilm-l6", "off"),
            ):
                rows.setdefault(label, []).append(load_in_fresh_process(name, cache))
    for label, runs in rows.items():
        row(label, runs)
    cold, warm = rows["smollm2-135m, cache cold"], rows["smollm2-135m, cache warm"]
    median_warm = statistics.median(r["seconds"]["total"] for r in warm)
    median_cold = statistics.median(r["seconds"]["total"] for r in cold)
    print(
        f"\nSmolLM2 warm load {median_warm:.2f} s (target < {TARGET_WARM_S:.0f} s: "
        f"{'met' if median_warm < TARGET_WARM_S else 'NOT met'}); cold {median_cold:.2f} s, "
        f"{median_cold / median_warm:.1f}x the warm load"
    )


if __name__ == "__main__":
    main()
