"""Let torch's waiting threads sleep in the app server instead of spinning: imported before anything loads torch.

torch runs each operation on its OpenMP threads (libgomp), which by default spin for a while at every barrier before
they sleep. The server shares two cores with the browsers it serves and with its other sessions, so while a page's
model runs, a spinning thread holds a core that the browser, or the other torch thread it waits for, needs: on the
2-core VM, MiniLM's run on 512 pieces took 0.56-0.61 s inside the server while the browser drew the sidebar, against
0.12 s in a process of its own. With OMP_WAIT_POLICY=PASSIVE a thread sleeps as soon as it waits: the same run took
0.3 s in the server, MiniLM's 512-piece page went from 1.64 to 1.30 s and SmolLM2's from 3.32 to 2.71 s
(bench/bench_pretrained.py), while runs in an otherwise idle process stayed within a few percent (MiniLM's 512-piece
ablation effects: 5.23 s spinning, 5.21 s passive). One thread instead of two did as well for MiniLM (1.42 s) but
lost SmolLM2's second core (3.57 s).

libgomp reads the variable once, when torch loads it, so this must run before the first `import torch` of the
process: dashboard.py imports this module first, launch.py before it warms up. A value already in the environment
is kept: whoever set it meant it.
"""

from __future__ import annotations

import os
import sys

WAIT_POLICY = "OMP_WAIT_POLICY"


def let_waiting_threads_sleep() -> bool:
    """Set OMP_WAIT_POLICY=PASSIVE unless the environment has a value. True when torch will load with the passive
    policy; False when torch is loaded already (too late to change it) or the environment asks for another one."""
    if "torch" in sys.modules:
        return False
    os.environ.setdefault(WAIT_POLICY, "PASSIVE")
    return os.environ[WAIT_POLICY].strip().upper() == "PASSIVE"


let_waiting_threads_sleep()
