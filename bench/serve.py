"""Start the dashboard headless and wait until it answers; the Chromium flags this machine needs (benches and tests)."""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Whether each chart on the page is drawn: a Plotly chart whose plot area plotly.js has laid out, or a matrix view
# (views/matrix_view.js) whose every canvas is marked drawn.
CHARTS_DRAWN = """(() => {
    const plotly = [...document.querySelectorAll("[data-testid='stPlotlyChart']")].map((chart) => {
        const gd = chart.querySelector(".js-plotly-plot");
        return !!(gd && gd._fullLayout && gd._fullData && gd.querySelector(".main-svg"));
    });
    const boards = [...document.querySelectorAll("[data-testid^='stBidiComponent']")].map((host) => {
        const canvases = [...(host.shadowRoot || host).querySelectorAll(".mv-board canvas")];
        return canvases.length > 0 && canvases.every((c) => c.dataset.drawn === "true");
    });
    return [...plotly, ...boards];
})()"""

RAISED = "[data-testid='stException']"  # a traceback shown on the page
RAISED_MARK = "the page raised: "


def wait_ready(page, ready: str, timeout_ms: float) -> None:
    """Wait until the JavaScript function `ready` (source text) holds on the page, or raise a RuntimeError at once
    with the exception the page shows: a page that raised is never drawn, and held a bench for its whole timeout (ten
    minutes for a first load) before. Its timing would mean nothing either. The check throws inside the page's own
    wait, so a load's timing pays no extra round trip to the browser for it."""
    from playwright.sync_api import Error

    check = (
        f"() => {{ const shown = document.querySelector({RAISED!r}); "
        f"if (shown) throw new Error({RAISED_MARK!r} + shown.innerText.slice(0, 300)); return ({ready})(); }}"
    )
    try:
        page.wait_for_function(check, timeout=timeout_ms, polling=50)
    except Error as error:
        if RAISED_MARK not in str(error):
            raise  # a timeout, or the page went away
        shown = str(error).split(RAISED_MARK, 1)[1].split("\n    at ", 1)[0]  # without the page's JavaScript stack
        raise RuntimeError(f"{page.url[:120]} raised: {shown}") from None


# The first lines of every baseline app: the project on sys.path, and the same server fix the dashboard applies
# (views/nodelay.py), so a baseline measures what Streamlit costs, not a Nagle delay the dashboard does not pay.
BASELINE_PRELUDE = f"""import sys

sys.path.insert(0, {str(ROOT)!r})  # the project's explorer/ and views/
from views.nodelay import disable_nagle_once  # noqa: E402

disable_nagle_once()
"""


def renderer_cpu() -> dict[tuple[int, int], float]:
    """CPU seconds so far of every thread of every live Chromium renderer process, by (pid, tid); the main thread
    is the one whose tid is its pid. Linux only (reads /proc): an empty dict elsewhere."""
    if not os.path.isdir("/proc"):
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    seconds: dict[tuple[int, int], float] = {}
    for pid in (int(name) for name in os.listdir("/proc") if name.isdigit()):
        try:
            if b"--type=renderer" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            for tid in (int(name) for name in os.listdir(f"/proc/{pid}/task")):
                fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
                seconds[pid, tid] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
        except OSError:  # the process or thread ended while being read
            continue
    return seconds


def renderer_cpu_since(before: dict[tuple[int, int], float]) -> tuple[float, float]:
    """CPU seconds the renderers used since `before` (renderer_cpu()): on their main threads, and in all threads.
    A renderer that started since counts from zero; one that ended since is not counted."""
    after = renderer_cpu()
    used = {key: value - before.get(key, 0.0) for key, value in after.items()}
    return sum(v for (pid, tid), v in used.items() if pid == tid), sum(used.values())


# /proc/stat's first line, in order: user nice system idle iowait irq softirq steal (then guest time, inside user)
CPU_KINDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def machine_cpu() -> list[int]:
    """The whole machine's CPU time so far, in ticks, by CPU_KINDS; empty where there is no /proc/stat."""
    try:
        return [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1 : 1 + len(CPU_KINDS)]]
    except OSError:
        return []


def machine_cpu_since(before: list[int]) -> str:
    """How the machine's CPU time went since `before` (machine_cpu()): busy, idle, waiting on the disk and stolen
    (the hypervisor ran another guest on this VM's cores): a reader can tell a run the host slowed from a slow
    page."""
    after = machine_cpu()
    if not before or len(after) != len(before):
        return "the machine's CPU time is not readable here"
    used = dict(zip(CPU_KINDS, (a - b for a, b in zip(after, before, strict=True)), strict=True))
    total = sum(used.values()) or 1
    busy = used["user"] + used["nice"] + used["system"] + used["irq"] + used["softirq"]
    shares = {"busy": busy, "idle": used["idle"], "waiting on the disk": used["iowait"], "stolen": used["steal"]}
    return ", ".join(f"{kind} {100 * ticks / total:.0f} %" for kind, ticks in shares.items())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LAUNCHED = "launch.py"  # serving(LAUNCHED): the dashboard as `make run` and `make serve` start it, warm (launch.py)
APP = "app.py"  # the dashboard as launch.py serves it (dashboard.py as an st.App, with its middleware), not warmed up


def start_server(app: str, port: int, log, root: Path = ROOT, options: tuple[str, ...] = ()) -> subprocess.Popen:
    """The app, headless on 127.0.0.1:port, run in the folder `root` (another checkout of the project, say), with
    more streamlit `options` ("--server.baseUrlPath=explorer", say); its output goes to the file `log` (a pipe nobody
    reads would fill). `app` LAUNCHED starts the dashboard through launch.py (imports done and checkpoints loading
    before the first page)."""
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    start = [sys.executable, LAUNCHED] if app == LAUNCHED else [sys.executable, "-m", "streamlit", "run", app]
    command = [
        *start, "--server.headless=true", f"--server.port={port}", "--server.address=127.0.0.1",
        "--server.fileWatcherType=none", *options,
    ]  # fmt: skip
    return subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)


def base_url(port: int, base_path: str = "") -> str:
    """The app's URL on 127.0.0.1:port under `base_path` (its server.baseUrlPath), without a final slash."""
    base_path = base_path.strip("/")
    return f"http://127.0.0.1:{port}" + (f"/{base_path}" if base_path else "")


def wait_health(port: int, server: subprocess.Popen, log, timeout: float = 60, base_path: str = "") -> None:
    """Wait until the server on `port` answers its health check (under `base_path`, its server.baseUrlPath)."""
    health = f"{base_url(port, base_path)}/_stcore/health"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            log.seek(0)
            output = log.read().decode(errors="replace")
            raise RuntimeError(f"streamlit exited early with code {server.returncode}:\n{output}")
        try:
            with urllib.request.urlopen(health, timeout=1) as answer:
                if answer.read() == b"ok":
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("streamlit did not answer /_stcore/health in time")


SERVED_FOLDERS = ("explorer", "pictures", "views", ".streamlit")  # with root's own .py files: what a server runs


def served_code(root: Path) -> dict[str, tuple[int, int]]:
    """The files a server started in `root` imports or reads, by path from root, with their modification times and
    sizes (a file system that keeps mtimes to the second could miss an edit by its time alone)."""
    files = [*root.glob("*.py"), *(f for folder in SERVED_FOLDERS for f in (root / folder).rglob("*") if f.is_file())]
    stats = {str(f.relative_to(root)): f.stat() for f in files if "__pycache__" not in f.parts}
    return {path: (stat.st_mtime_ns, stat.st_size) for path, stat in stats.items()}


def changed_code(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """The files of served_code that were changed, added or removed between two looks, in order."""
    return sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))


@contextlib.contextmanager
def serving(app: str = APP, root: Path = ROOT, base_path: str = "") -> Iterator[str]:
    """`streamlit run app` in the folder `root` on a free port for the duration of the block, under `base_path` (its
    server.baseUrlPath; "" for the root): yields its base URL (with the base path, without a final slash). Says so on
    stderr when the code it serves changed meanwhile: the server may have imported some modules before the change
    and some after, and what was measured is neither version."""
    port = free_port()
    options = (f"--server.baseUrlPath={base_path}",) if base_path.strip("/") else ()
    code = served_code(root)
    with tempfile.TemporaryFile() as log:  # a file, not a pipe: a pipe nobody reads would block the server
        server = start_server(app, port, log, root, options)
        try:
            wait_health(port, server, log, base_path=base_path)
            yield base_url(port, base_path)
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
            if changed := changed_code(code, served_code(root)):
                print(f"WARNING: {', '.join(changed)} changed in {root} while its server ran: what it served mixed "
                      "two versions of the code. Run benches from a git worktree while editing (README, Benchmarks).",
                      file=sys.stderr)  # fmt: skip


@contextlib.contextmanager
def serving_all(apps: dict[str, str]) -> Iterator[dict[str, str]]:
    """serving() for several apps at once: yields each one's base URL by the name it was given."""
    with contextlib.ExitStack() as stack:
        yield {name: stack.enter_context(serving(app)) for name, app in apps.items()}


def turns(names: list[str], rounds: int) -> Iterator[list[str]]:
    """The order to load apps in, round after round, reversed every other round: served at once and loaded in
    turn, they all feel a machine that speeds up or slows down during the run alike, so their ratios hold."""
    for round_ in range(rounds):
        yield names if round_ % 2 == 0 else names[::-1]


def keepalive_ms(base: str, requests: int = 10) -> float:
    """Median milliseconds per request for one of the page's scripts, fetched again and again over one kept-alive
    connection, as the browser fetches the page's script chunks. About 40 ms when the server leaves Nagle's
    algorithm on (views/nodelay.py), a few ms when not."""
    with urllib.request.urlopen(base + "/", timeout=10) as answer:
        script = re.search(r'src="\.?(/?static/js/[^"]+\.js)"', answer.read().decode()).group(1)
    address = urlsplit(base)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
    times = []
    try:
        for _ in range(requests + 1):  # the first request on a new connection is acknowledged at once: left out
            start = time.perf_counter()
            connection.request("GET", "/" + script.lstrip("/"))
            connection.getresponse().read()
            times.append(time.perf_counter() - start)
    finally:
        connection.close()
    return 1000 * statistics.median(times[1:])


def status_kb(field: str, proc: Path = Path("/proc/self")) -> int:
    """A memory field of a process's /proc status (VmRSS, VmHWM, RssAnon, ...), in kB; this process's by default."""
    for line in (proc / "status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(f"{field} is not in {proc / 'status'}")


def server_memory(base: str) -> tuple[float, float]:
    """(resident MB now, peak resident MB) of the streamlit server listening on base's port, from /proc."""
    port = urlsplit(base).port
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            command = (proc / "cmdline").read_bytes().decode(errors="replace")
            if f"--server.port={port}" not in command:
                continue
            return status_kb("VmRSS", proc) / 1024, status_kb("VmHWM", proc) / 1024
        except OSError:
            continue
    raise RuntimeError(f"no server on port {port}")
