"""Start the dashboard warm: `python launch.py [--preload all|none|NAME,...] [streamlit run options]`.

`streamlit run dashboard.py` imports torch and the explorer (about 3 s on a 2-core machine) in the first visitor's
page, and loads a checkpoint in the first page that asks for it. This does both before anyone comes: it imports
what every page needs, starts loading the shipped checkpoints in a background thread (SmolLM2 in 0.3 s from the
weights cache, explorer.weights_cache; a page that asks for one meanwhile waits for it with a progress bar), then
runs Streamlit in this same process, serving app.py (dashboard.py with a middleware that lets a page opened by its
link connect 0.1 s sooner). `make run` and `make serve` use it.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import logging
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
PROJECT_PACKAGES = ("explorer", "pictures", "views")
# Modules the libraries import only when a page first uses them, each paid by a fresh server's first visitor:
# Streamlit's emoji list (every page's set_page_config checks its icon against a regex of every emoji: 0.05 s alone,
# 0.3 s of the first page while the browser shares the CPU), its material icon names (st.error's icon), its
# components' manifest scanner (the first st.components.v2 component drawn), pandas' Styler with jinja2 (a styled
# table, SmolLM2's next pieces: 0.07 s) and pyarrow's pandas bridge (the first table sent).
LAZY_IMPORTS = (
    "streamlit.emojis",
    "streamlit.material_icon_names",
    "streamlit.components.v2.manifest_scanner",
    "pandas.io.formats.style",
    "pyarrow.pandas_compat",
    "pyarrow.vendored.version",
)


def page_imports() -> list[str]:
    """The project's modules that dashboard.py and its pages (views/) import, read from their import statements:
    importing a page itself would run it."""
    found: set[str] = set()
    for script in [ROOT / "dashboard.py", *sorted((ROOT / "views").glob("*.py"))]:
        for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module)  # and a module imported from its package: from views import caches
                package = ROOT.joinpath(*node.module.split("."))
                found.update(f"{node.module}.{a.name}" for a in node.names if (package / f"{a.name}.py").is_file())
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
    return sorted(name for name in found if name.split(".")[0] in PROJECT_PACKAGES)


def preload(names: list[str]) -> None:
    """Load each checkpoint into the app's shared cache (views.caches), as the first page to ask would, and run it
    once on a short text: the first run of a checkpoint pages in its memory-mapped weights (about 1 s for SmolLM2)."""
    import explorer
    from views import caches

    for name in names:
        started = time.perf_counter()
        with caches.checkpoint_lock(name):  # a page asking for it meanwhile waits here, behind its progress bar
            if name not in caches._CHECKPOINTS:
                model = explorer.load_pretrained(name)
                explorer.run(model, "Hello, class.")  # the mapped weights paged in, as the first page would
                caches._CHECKPOINTS[name] = model
        print(f"  {name} loaded in {time.perf_counter() - started:.1f} s", flush=True)


def warm_up(preloading: list[str] | None = None) -> None:
    """Import what every page needs (torch, the explorer, the figure builders, the pages' shared code) and run the
    default model once: the first visitor's page then finds it all done. The checkpoints in `preloading` start loading
    in a background thread once the project's modules are imported (one thread importing a module while another
    imports its importer can deadlock), alongside the default run, the last imports and Streamlit's start: on the
    2-core VM they were loaded 1 s later when the thread started after warm_up, and the first SmolLM2 page of a server
    just answering waited for them."""
    # The caches' decorators run before Streamlit's runtime exists: they say so once each, and work the same. Set on
    # Streamlit's own logger: its get_logger sets a logger's level when it first makes it, after any setting here.
    from streamlit.logger import get_logger

    get_logger("streamlit.runtime.caching.cache_data_api").setLevel(logging.ERROR)
    import explorer

    for name in page_imports():  # 40-odd modules a fresh server's first page would otherwise import (and compile)
        importlib.import_module(name)
    if preloading:
        threading.Thread(target=preload, args=(preloading,), name="preload", daemon=True).start()
    explorer.run(explorer.ModelConfig(), "the cat sat on the mat")
    for name in LAZY_IMPORTS:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def checkpoints(choice: str) -> list[str]:
    """The checkpoints --preload names: all installed ones, none, or a comma-separated list."""
    from explorer.pretrained import list_pretrained

    installed = list_pretrained()
    if choice == "all":
        return installed
    if choice == "none":
        return []
    names = [name.strip() for name in choice.split(",") if name.strip()]
    if unknown := [name for name in names if name not in installed]:
        sys.exit(f"--preload: {', '.join(unknown)} is not installed; installed: {', '.join(installed) or 'none'}")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument("--preload", default="all", help="checkpoints to load at start: all (default), none, or names")
    args, streamlit_options = parser.parse_known_args()
    started = time.perf_counter()
    importlib.import_module("views.idle_threads")  # before warm_up loads torch (views/idle_threads.py)
    warm_up(checkpoints(args.preload))
    print(f"Attention Explorer: imports done in {time.perf_counter() - started:.1f} s", flush=True)
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", str(ROOT / "app.py"), *streamlit_options]  # dashboard.py, with app.py's middleware
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
