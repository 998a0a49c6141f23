"""Peak resident memory of one call, for the benchmark scripts (Linux, glibc)."""

from __future__ import annotations

import ctypes


def status_mib(field: str) -> float:
    """A memory field of /proc/self/status (VmRSS: resident now, VmHWM: peak) in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not found in /proc/self/status")


def release_freed_memory_eagerly() -> None:
    """glibc: serve blocks >= 128 KiB by mmap and trim the heap, so frees shrink RSS."""
    libc = ctypes.CDLL("libc.so.6")
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    libc.mallopt(M_MMAP_THRESHOLD, 128 * 1024)
    libc.mallopt(M_TRIM_THRESHOLD, 128 * 1024)
    libc.malloc_trim(0)


def reset_peak_rss() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current resident size (Linux >= 4.0)
