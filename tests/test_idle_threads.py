"""views.idle_threads: the app's torch threads sleep while they wait (OMP_WAIT_POLICY=PASSIVE), set before torch
loads in both ways the server starts (dashboard.py, launch.py), never over a value the environment already has."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Runs a script as Streamlit or `python launch.py` would, and stops it the moment anything imports torch, printing
# the wait policy the environment holds then: what libgomp reads when torch loads it.
AT_TORCH_IMPORT = """
import os, runpy, sys

class StopAtTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            print("policy when torch loads:", os.environ.get("OMP_WAIT_POLICY"), flush=True)
            os._exit(0)
        return None

sys.meta_path.insert(0, StopAtTorch())
sys.path.insert(0, os.getcwd())
script = sys.argv[1]
sys.argv = [script]
runpy.run_path(script, run_name="__main__")
"""


def python(code: str, *args: str, policy: str | None = None) -> str:
    """Run `code` in a new interpreter in the project's folder, with OMP_WAIT_POLICY set to `policy` (None: unset);
    its output."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    done = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("script", ["dashboard.py", "launch.py"])
def test_the_server_loads_torch_with_sleeping_threads(script):
    assert python(AT_TORCH_IMPORT, script) == "policy when torch loads: PASSIVE"


def test_a_policy_in_the_environment_is_kept():
    code = "import os, views.idle_threads as m; print(m.let_waiting_threads_sleep(), os.environ['OMP_WAIT_POLICY'])"
    assert python(code, policy="ACTIVE") == "False ACTIVE"
    assert python(code, policy="passive") == "True passive"


def test_too_late_once_torch_is_loaded():
    code = (
        "import os, torch, views.idle_threads as m; print(m.let_waiting_threads_sleep(), os.getenv('OMP_WAIT_POLICY'))"
    )
    assert python(code) == "False None"
