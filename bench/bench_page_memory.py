"""How much memory does each page take on the largest input? Every page of SmolLM2 on 512 pieces, with the sections a
user opens on request, each in a fresh process, against the server budget of issue 25 (2.5 GB).

bench_pretrained.py reads a real server's peak after the Attention page of each checkpoint. The other pages compute
more from the same trace (a second run with heads removed, a reordered run, a backward pass, four placements), and
one of them past the budget takes the server down for the whole class. Here each case runs the dashboard in-process
(streamlit.testing's AppTest, the pages' own code without a browser or a websocket) in a process of its own: first
the Attention page on the text (the model loaded and its weights paged in, as a server that has shown it), then the
case's page with its URL parameters. The figure is the process's peak resident memory (VmHWM). A thread samples the
resident memory every 2 ms and records where the page's script was at the highest sample: the "where" column.

Usage: python bench/bench_page_memory.py [--model smollm2-135m] [--pieces 512] [--cases heads,compare_grads]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from urllib.parse import parse_qsl

# bench/ is on sys.path when a script here runs
from bench_pretrained import LONG, text_of, tokenizers
from serve import ROOT, status_kb

BUDGET_MB = 2500  # issue 25: a server that fits in 2.5 GB
ACTIVATIONS = "&".join(f"act_open_{s}=true" for s in ("norms", "tokens", "histogram", "zeros", "heads", "gradients"))
POSITIONAL = "&".join(f"pos_open_{s}=true" for s in ("table", "wavelengths", "similarity", "offset", "order"))
CASES = {  # name: (page, URL parameters beyond the model and the text, what a user did)
    "attention": ("views/attention.py", "", "opened the link"),
    "attention_norms": ("views/attention.py", "measure=norms", "showed norms"),
    "mixing": ("views/mixing.py", "", "opened Mixing"),
    "heads": ("views/heads.py", "", "opened What heads do"),
    "heads_removed": ("views/heads.py", "ablate=L0H1", "... with a head removed"),
    "compare": ("views/compare.py", "", "opened Compare (B: the norm flipped)"),
    "compare_grads": ("views/compare.py", "grads=true", "... and asked for gradient norms"),
    "compare_placements": ("views/compare.py", "placements=true", "... and opened all four placements"),
    "positional": ("views/positional.py", POSITIONAL, "opened Positional, every section"),
    "activations": ("views/activations.py", ACTIVATIONS, "opened Activations, every section"),
    "anatomy": ("views/anatomy.py", "", "opened Anatomy"),
}


def _page_code(filename: str) -> bool:
    """A file of the project's app or engine: not of its virtual environment, and not this bench (whose main thread
    waits in AppTest while the page's script runs in a thread of its own)."""
    inside = filename.startswith(str(ROOT)) and not filename.startswith(str(ROOT / "bench"))
    return inside and f"{os.sep}.venv{os.sep}" not in filename


def resident_mb() -> float:
    return status_kb("VmRSS") / 1024


class PeakWatcher:
    """Samples this process's resident memory every 2 ms; at each new high, where the page's script is (its frames
    in the app's and engine's files)."""

    def __init__(self) -> None:
        self.peak, self.where, self.running = 0.0, [], True
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        me = threading.get_ident()
        while self.running:
            now = resident_mb()
            if now > self.peak + 5:
                self.peak, self.where = now, self._script_frames(me) or self.where
            time.sleep(0.002)

    @staticmethod
    def _script_frames(me: int) -> list[str]:
        for thread, frame in sys._current_frames().items():
            frames = [f for f in traceback.extract_stack(frame) if _page_code(f.filename)]
            if thread != me and frames:
                return [f"{Path(f.filename).relative_to(ROOT)}:{f.lineno} {f.name}" for f in frames]
        return []

    def stop(self) -> None:
        self.running = False
        self.thread.join()


def one_case(page: str, query: str, model: str, pieces: int) -> dict:
    """Run the case in this process: its peak and resident memory in MB, and where the script was at the peak."""
    from streamlit.testing.v1 import AppTest

    text = text_of(tokenizers()[model], pieces)
    app = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=1200)
    app.query_params.update({"model": model, "tokens": text, **dict(parse_qsl(query))})
    watcher = PeakWatcher()
    app.run()
    if page != "views/attention.py":
        app.switch_page(page).run()
    watcher.stop()
    problems = [e.value[:300] for e in app.exception]
    where = watcher.where[-1] if watcher.where else ""
    return {"peak": status_kb("VmHWM") / 1024, "resident": resident_mb(), "where": where, "problems": problems}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m", help="an installed checkpoint")
    parser.add_argument("--pieces", type=int, default=LONG, help="pieces of the text")
    parser.add_argument("--cases", default=",".join(CASES), help=f"of {', '.join(CASES)}")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a case, in the child process
    args = parser.parse_args()
    if args.one:
        page, query, _ = CASES[args.one]
        print(json.dumps(one_case(page, query, args.model, args.pieces)))
        return 0
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    if unknown := [c for c in cases if c not in CASES]:
        parser.error(f"no case {', '.join(unknown)}: cases are {', '.join(CASES)}")
    print(f"{args.model} on {args.pieces} pieces, each case in a fresh process (AppTest): peak resident memory")
    print("\n| case | what the user did | peak | target | met | resident after | where the peak was |")
    print("|---|---|---|---|---|---|---|")
    met = True
    for name in cases:
        command = [sys.executable, __file__, "--one", name, "--model", args.model, "--pieces", str(args.pieces)]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            print(f"| {name} | failed: {done.stderr.strip().splitlines()[-1:]} | | | NO | | |")
            met = False
            continue
        result = json.loads(lines[-1])
        ok = result["peak"] <= BUDGET_MB and not result["problems"]
        met &= ok
        print(
            f"| {name} | {CASES[name][2]} | {result['peak']:,.0f} MB | <= {BUDGET_MB:,} MB | {'yes' if ok else 'NO'} "
            f"| {result['resident']:,.0f} MB | `{result['where']}` |",
            flush=True,
        )
        for problem in result["problems"]:
            print(f"  problem in {name}: {problem}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
