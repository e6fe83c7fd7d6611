"""How much memory this machine (or its container) can still give a process, where the system says."""

from __future__ import annotations

from pathlib import Path

MEMINFO = Path("/proc/meminfo")
CGROUP = Path("/sys/fs/cgroup")  # cgroup v2: a container's limit and what it uses now


def available_bytes() -> int | None:
    """Bytes a new allocation can take without swapping: Linux's MemAvailable, or less when a cgroup's limit leaves
    less; None where neither can be read (macOS, Windows), and then nothing is refused for it."""
    found = [n for n in (_meminfo_available(), _cgroup_room()) if n is not None]
    return min(found) if found else None


def _meminfo_available() -> int | None:
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_room() -> int | None:
    """A cgroup v2 limit less what the group uses, not counting the file cache the kernel can drop (inactive_file,
    as Docker counts it): memory.current includes that cache, which fills a long-running container."""
    try:
        limit = (CGROUP / "memory.max").read_text().strip()
        if limit == "max":
            return None
        used = int((CGROUP / "memory.current").read_text())
        for line in (CGROUP / "memory.stat").read_text().splitlines():
            if line.startswith("inactive_file "):
                used -= int(line.split()[1])
        return max(int(limit) - used, 0)
    except (OSError, ValueError, IndexError):
        return None
