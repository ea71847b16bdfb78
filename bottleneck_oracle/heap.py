"""Giving the heap's freed memory back to the operating system.

glibc serves blocks below its mmap threshold from the heap, and raises that threshold to the size of
the largest mmapped block freed so far. Reading many rank files unpickles thousands of small per-rank
columns there; once merged they are freed, but the heap stays fragmented and resident. Later arrays
of the analysis are large (mmapped) and cannot reuse it: on a 256-rank job it was 400 MB, a fifth of
the driver's peak. ``malloc_trim`` returns those pages.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

__all__ = ["release_free_heap"]


@functools.cache
def _malloc_trim():  # type: ignore[no-untyped-def]
    name = ctypes.util.find_library("c")
    trim = getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None  # glibc only (not musl, macOS)
    if trim is not None:
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_free_heap() -> bool:
    """Returns the heap's free pages to the operating system; False where the C library cannot."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
