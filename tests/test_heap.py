"""``release_free_heap``: freed small blocks below a live one stay resident until it runs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bottleneck_oracle.heap import release_free_heap

# In a fresh process (a known heap): 4,000 blocks of 64 KB (below glibc's mmap threshold, so on the
# heap, like the per-rank columns a read unpickles), then every other one freed: holes that the heap
# cannot give back from its top. Prints the resident MB at each stage.
_CHILD = """
import numpy as np
from bottleneck_oracle.heap import release_free_heap
def rss():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS")) // 1024
blocks = [np.ones(8192) for _ in range(4000)]
held = rss()
del blocks[::2]
freed = rss()
print(held, freed, rss() if release_free_heap() else -1)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_the_freed_heap_goes_back_to_the_system() -> None:
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, check=True).stdout
    held, freed, released = map(int, out.split())
    assert held - freed < 64, f"glibc gave the blocks back by itself ({held} → {freed} MB): the test shows nothing"
    assert released >= 0, "this Linux has no malloc_trim"
    assert freed - released >= 100, f"only {freed - released} of 125 MB went back ({held}, {freed}, {released} MB)"


def test_it_says_whether_it_could() -> None:
    assert release_free_heap() is sys.platform.startswith("linux")
