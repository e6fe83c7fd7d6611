"""Is one version of the app's pages faster than another? Serve both at once and load them in turn.

Each version is a git revision (checked out with `git worktree` into a temporary folder, removed afterwards) or "."
(this working tree as it is, uncommitted edits included). Every version's dashboard is served at the same time, and
each --pages page of each version is loaded in turn (serve.turns: the order reversed every other round), in a new
browser context each time (empty browser cache, new session), --rounds times after one warming round, and timed
from goto to every chart drawn (bench_page_load.READY). Loaded in turn, the versions feel a machine that speeds up
or slows down alike, so their ratio holds where each one's seconds drift (on the 2-core VM the same page took
1.5 s in one run and 2.1 s in another). Printed: each page's median and spread per version, and its ratio to the
first version, with the interval it could move within by chance (bench/spread.py, rounds resampled): a version whose
interval holds 1 cannot be told from the first with these rounds.

Usage: python bench/bench_ab.py REV [REV ...] [--pages positional,attention] [--rounds 8] [--query "n_layers=6"]
  e.g. python bench/bench_ab.py HEAD~1 .      (the last commit's parent against this working tree)
Needs Chromium at /usr/bin/chromium (apt-get install -y chromium) or at $CHROMIUM.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

# bench/ is on sys.path when a script here runs
from bench_page_load import PAGES, SMALL, interleaved_loads
from serve import APP, CHROMIUM, CHROMIUM_ARGS, ROOT, serving
from spread import LEVEL, ratio_interval

TIMEOUT_MS = 120_000
WORKING_TREE = "."


@contextlib.contextmanager
def checked_out(revision: str) -> Iterator[Path]:
    """The project at `revision`, in a temporary git worktree removed afterwards; "." is this working tree."""
    if revision == WORKING_TREE:
        yield ROOT
        return
    with tempfile.TemporaryDirectory() as folder:
        tree = Path(folder) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), revision], cwd=ROOT, check=True)
        try:
            yield tree
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)


@contextlib.contextmanager
def serving_revision(revision: str) -> Iterator[str]:
    """The dashboard as `revision` serves it (checked_out, served), for the duration of the block: its base URL."""
    with checked_out(revision) as tree:
        app = APP if (tree / APP).is_file() else "dashboard.py"  # a revision from before app.py
        with serving(app, root=tree) as base:
            yield base


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("revisions", nargs="+", help="git revisions, or . for this working tree; the first is the base")
    parser.add_argument("--pages", default="attention", help=f"pages to load, of {', '.join(PAGES)}")
    parser.add_argument("--rounds", type=int, default=8, help="loads of each page and version after a warming round")
    parser.add_argument("--query", default=urlencode(SMALL), help="query string with the configuration")
    args = parser.parse_args()
    pages = [p.strip() for p in args.pages.split(",") if p.strip()]
    if unknown := [p for p in pages if p not in PAGES]:
        parser.error(f"no page {', '.join(unknown)}: pages are {', '.join(PAGES)}")
    if len(set(args.revisions)) != len(args.revisions):
        parser.error("name each revision once")
    if args.rounds < 1:
        parser.error("--rounds takes 1 or more")
    from playwright.sync_api import sync_playwright

    with contextlib.ExitStack() as stack:
        bases = {}
        for revision in args.revisions:
            bases[revision] = stack.enter_context(serving_revision(revision))
        links = {
            (revision, page): f"{base}/{PAGES[page]}?{args.query}" for revision, base in bases.items() for page in pages
        }
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            times, problems = interleaved_loads(browser, links, args.rounds + 1, TIMEOUT_MS)
            browser.close()
    print(f"URL -> every chart drawn, new browser context each, median of {args.rounds} loads in turn; ?{args.query}")
    print(f"{'page':12} {'version':16} {'median':>7} {'range':>11} {'ratio':>6} {f'{LEVEL:.0%} interval':>13}")
    for page in pages:
        first = times[(args.revisions[0], page)][1:]  # round 0 warms the server's caches
        for revision in args.revisions:
            seconds = times[(revision, page)][1:]
            median = statistics.median(seconds)
            spread = f"{min(seconds):.2f}-{max(seconds):.2f}"
            low, high = ratio_interval(seconds, first)
            ratio = f"{median / statistics.median(first):5.2f}x {low:6.2f}-{high:.2f}x"
            print(f"{page:12} {revision[:16]:16} {median:6.2f}s {spread:>11} {ratio}")
    for problem in dict.fromkeys(problems):
        print("problem:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
