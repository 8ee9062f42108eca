"""The ``memory`` section of /stats (and statsd's ``mem.*``): the Python process's memory
under Go nsqd's key names, each with the closest number the process can honestly know.

==========================  ==============================================================
heap_objects                memory blocks the interpreter has handed out and not freed
                            (``sys.getallocatedblocks``): live objects and their buffers
heap_idle_bytes             bytes glibc's malloc holds free for reuse, obtained from the OS
                            and not in use (``mallinfo2().fordblks``), like Go's idle spans.
                            Free pools inside pymalloc's arenas are not counted: CPython
                            exposes no number for them. 0 without glibc (musl, macOS)
heap_in_use_bytes           resident anonymous memory (``RssAnon`` in /proc/self/status):
                            where the interpreter's objects, pymalloc's arenas and malloc's
                            heap live, without mapped code and files. 0 off Linux
heap_released_bytes         always 0: Go counts heap memory handed back to the OS yet still
                            reserved; pymalloc and glibc unmap or shrink what they give back,
                            and neither counts it, so the process cannot know the number
gc_pause_usec_100/_99/_95   percentiles of the last 256 collection pauses in microseconds,
                            timed with ``gc.callbacks`` (gc_pauses.PROCESS_PAUSES)
next_gc_bytes               always 0: CPython's collector runs after a count of container
                            allocations, never at a heap size, so there is no byte target
next_gc_objects             (ours) that count: container objects still to be allocated, net
                            of those freed, before the next automatic collection; 0 when the
                            collector is disabled
gc_total_runs               collections run, all generations (``gc.get_stats``)
max_rss_bytes               (ours) the peak resident set size (``getrusage``)
==========================  ==============================================================
"""
from __future__ import annotations

import ctypes
import gc
import resource
import sys
from typing import Callable

from .gc_pauses import PROCESS_PAUSES

# pauses are timed from the first import of this module, which nsqd does at start-up
PROCESS_PAUSES.install()


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
        "keepcost")]


def _load_mallinfo2() -> Callable[[], _MallInfo2] | None:
    try:
        function = ctypes.CDLL(None).mallinfo2  # glibc 2.33 and later
    except (OSError, AttributeError):
        return None
    function.argtypes = []
    function.restype = _MallInfo2
    return function


_MALLINFO2 = _load_mallinfo2()


def malloc_free_bytes() -> int:
    return int(_MALLINFO2().fordblks) if _MALLINFO2 is not None else 0


def resident_anonymous_bytes() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024  # the kernel writes kB
    except OSError:
        pass
    return 0


def objects_until_next_gc() -> int:
    if not gc.isenabled():
        return 0
    return max(0, gc.get_threshold()[0] - gc.get_count()[0])


def memory_stats() -> dict[str, int]:
    return {
        "heap_objects": sys.getallocatedblocks(),
        "heap_idle_bytes": malloc_free_bytes(),
        "heap_in_use_bytes": resident_anonymous_bytes(),
        "heap_released_bytes": 0,
        **PROCESS_PAUSES.percentiles_usec(),
        "next_gc_bytes": 0,
        "next_gc_objects": objects_until_next_gc(),
        "gc_total_runs": sum(s["collections"] for s in gc.get_stats()),
        "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
