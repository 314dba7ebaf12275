"""Peak-memory measurement shared by the benchmarks (Linux ``/proc``).

``ru_maxrss`` is not used: Linux carries it over ``execve`` from the parent,
which would hide a worker's own peak. Instead a worker resets its peak RSS
(``VmHWM``) to its current RSS before the measured step and reads it after.
"""

from __future__ import annotations


def status(field: str) -> int:
    """A ``/proc/self/status`` field (``VmRSS``, ``VmHWM`` ...) in bytes."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> int:
    """Reset the peak RSS (``VmHWM``) to the current RSS and return it, in bytes."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
        f.write("5")
    return status("VmRSS")


def peak_since_reset(before: int) -> int:
    """Bytes the peak RSS rose above ``before`` (the value :func:`reset_peak` returned)."""
    return status("VmHWM") - before


def process_memory_mb(pid: int) -> tuple[dict[str, float], float]:
    """Another process's ``/proc/<pid>/smaps_rollup`` fields (Rss, Pss, Private_Clean ...) and its peak RSS (``VmHWM``), in MiB."""
    values: dict[str, float] = {}
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[2] == "kB":
                values[parts[0].rstrip(":")] = int(parts[1]) / 1024
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        hwm = next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:"))
    return values, hwm
