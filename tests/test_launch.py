"""launch.py, which `make run` and `make serve` start the dashboard with: which checkpoints it preloads, and where."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

import launch
from explorer.pretrained import list_pretrained
from views import caches

ROOT = Path(__file__).resolve().parent.parent


def in_a_new_process(code: str, timeout: float) -> subprocess.CompletedProcess:
    """`code` run by a new interpreter in the project's folder, as `make run` starts one; it must succeed."""
    shown = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert shown.returncode == 0, shown.stderr
    return shown


def test_preload_names_all_none_or_installed_checkpoints_and_refuses_others():
    assert launch.checkpoints("all") == list_pretrained()
    assert launch.checkpoints("none") == []
    assert launch.checkpoints(" minilm-l6 ,") == ["minilm-l6"]
    with pytest.raises(SystemExit, match="gpt-9 is not installed; installed: minilm-l6"):
        launch.checkpoints("minilm-l6,gpt-9")


def test_preload_puts_a_checkpoint_where_the_pages_look_for_it_and_loads_it_once(minilm_model, capsys):
    """The pages take checkpoints from views.caches._CHECKPOINTS (pretrained_model): a preloaded one is the very
    model they get, and one already there is not loaded again."""
    assert caches._CHECKPOINTS["minilm-l6"] is minilm_model  # the session fixture put it there, as a page would
    launch.preload(["minilm-l6"])
    assert caches.pretrained_model("minilm-l6") is minilm_model
    assert "minilm-l6 loaded" in capsys.readouterr().out


def test_a_page_asking_for_one_checkpoint_does_not_wait_for_anothers_load(monkeypatch):
    """launch.py preloads MiniLM, then SmolLM2: a first visitor asking for SmolLM2 meanwhile had waited for both."""
    loaded = object()
    monkeypatch.setattr(caches, "_CHECKPOINTS", {})
    monkeypatch.setattr(caches, "load_pretrained", lambda name, progress: loaded)
    got = []
    with caches.checkpoint_lock("minilm-l6"):  # the preload, busy loading MiniLM
        page = threading.Thread(target=lambda: got.append(caches.pretrained_model("smollm2-135m")), daemon=True)
        page.start()
        page.join(timeout=30)  # a stub load takes microseconds; 30 s is any machine's scheduling
    assert got == [loaded]
    assert caches.pretrained_model("smollm2-135m") is loaded  # and only once


GIVE_BACK = """
import numpy as np
from explorer.malloc import give_back

def resident_mb():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 1e6

freed = np.ones(4 * 1024 * 1024, dtype=np.float32)  # 16 MB: glibc's threshold grows to it
del freed
before = resident_mb()
arrays, kept = [], []
for _ in range(25):
    arrays.append(np.ones(2 * 1024 * 1024, dtype=np.float32))  # 8 MB, touched
    kept.append(np.ones(16 * 1024, dtype=np.float32))  # 64 KB after each, kept: the 8 MB ones are not the top
during = resident_mb()
del arrays
after_free = resident_mb()
given = give_back()
print(during - before, during - after_free, given, during - resident_mb(), len(kept))
"""


def test_give_back_returns_the_pages_of_arrays_freed_between_arrays_that_stay():
    """explorer.malloc.give_back, which the app calls after each run and page. glibc, having freed a 16 MB block, serves
    8 MB arrays from its heap, and freeing them between arrays that stay leaves holes the process keeps: measured 0
    of 210 MB given back without it. In a new process: in pytest's, the heap may already hold free pages that earlier
    tests left resident, which the 8 MB arrays then reuse without growing the process (118 of 210 MB, once, in CI)."""
    shown = in_a_new_process(GIVE_BACK, timeout=60)
    made, kept_after_free, given, returned, kept = shown.stdout.split()
    assert float(made) > 150  # 210 MB made resident
    assert float(kept_after_free) < 50  # freeing them alone gives back little: holes between the kept 64 KB arrays
    assert given == "True"  # Linux with glibc: the machines this runs on (CI included)
    assert float(returned) > 150  # and give_back returns them
    assert kept == "25"


def test_warm_up_leaves_what_the_first_page_would_import_imported(warmed_up):
    # In a new process, as `make run` starts one: the first page's set_page_config then finds Streamlit's emoji list
    # compiled, the explorer imported, and every project module a page imports; no page itself (it would run).
    assert WARMED_UP in warmed_up.stdout, warmed_up.stderr[-2000:]
    after_warm_up = warmed_up.stdout.split(WARMED_UP + "\n", 1)[1].split("\n")[:3]
    assert after_warm_up == ["['explorer', 'streamlit.emojis', 'torch']", "[]", "[]"]
    logged = warmed_up.stderr.split(WARMED_UP, 1)[0]
    assert "No runtime found" not in logged  # the caches' warnings before the runtime exists are quieted


PRELOAD_DURING_WARM_UP = """
import sys, threading, launch
seen = []
launch.preload = lambda names: seen.append((names, [n for n in launch.page_imports() if n not in sys.modules]))
launch.warm_up(["minilm-l6"])
for thread in threading.enumerate():
    if thread.name == "preload":
        thread.join(60)
print(seen)
"""


def test_warm_up_starts_the_preload_once_the_project_modules_are_imported():
    # Started in warm_up, it loads while the default model runs and Streamlit starts, not after; started before the
    # project's modules are imported, its imports could deadlock with the main thread's.
    shown = in_a_new_process(PRELOAD_DURING_WARM_UP, timeout=120)
    assert shown.stdout.strip().split("\n")[-1] == "[(['minilm-l6'], [])]"


# One new process for two checks: what warm_up() leaves imported and logs (the three lines after WARMED_UP on stdout,
# stderr up to it), then what the first page of each model imports on top (the last line). Reading sys.modules and the
# pages' source imports nothing, so the second check starts from what warm_up() left, as in a process of its own.
WARMED_UP = "warm_up() returned"
FIRST_PAGES = f"""
import sys, launch
launch.warm_up()
print({WARMED_UP!r}, flush=True)
print({WARMED_UP!r}, file=sys.stderr, flush=True)
print(sorted({{'streamlit.emojis', 'torch', 'explorer'}} & set(sys.modules)))
print([n for n in launch.page_imports() if n not in sys.modules])
print(sorted(n for n in sys.modules if n in ('views.attention', 'views.positional', 'dashboard')))
launch.preload(launch.checkpoints("all"))
from streamlit.testing.v1 import AppTest
before = set(sys.modules)
for model in ["configured", *launch.checkpoints("all")]:
    page = AppTest.from_file("dashboard.py", default_timeout=120)
    page.query_params["model"] = model
    page.run()
    assert not page.exception, [e.value for e in page.exception]
print(sorted(n for n in set(sys.modules) - before if not n.startswith("streamlit.testing")))
"""


@pytest.fixture(scope="module")
def warmed_up() -> subprocess.CompletedProcess:
    """FIRST_PAGES run once in a new process, for both tests that read it (each checks its own part: a failure of
    the pages' part leaves the warm-up's lines to read)."""
    return subprocess.run([sys.executable, "-c", FIRST_PAGES], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_after_warm_up_the_attention_page_of_each_model_imports_nothing_more(warmed_up):
    # A module a page imports for the first time is paid by a fresh server's first visitor (pandas' Styler with
    # jinja2 took 0.07 s of SmolLM2's first page): launch.LAZY_IMPORTS lists them, and this finds any it misses.
    assert warmed_up.returncode == 0, warmed_up.stderr
    assert warmed_up.stdout.strip().split("\n")[-1] == "[]"


def test_page_imports_reads_the_project_modules_the_pages_import_and_not_the_pages():
    names = launch.page_imports()
    assert {"views.query_params", "views.lazy_sections", "explorer.positional_text"} <= set(names)  # page imports
    assert "pictures.notebook_figures" in names  # imported as `from pictures import notebook_figures`
    assert not {"views.attention", "views.positional", "dashboard"} & set(names)  # pages run when imported
    assert all(name.split(".")[0] in ("explorer", "pictures", "views") for name in names)  # not torch, not streamlit
