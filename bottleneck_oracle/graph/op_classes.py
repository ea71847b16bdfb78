"""Op classes: what an op or kernel does, from its name (gemm, attention, optimizer, ...).

The graph model's features and the what-if selectors (``op=gemm``) name these classes. Patterns
are tried in order and the first match wins, so ``aten::addmm`` is gemm and not elementwise.
"""

from __future__ import annotations

import functools
import re
import zlib

import numpy as np

from bottleneck_oracle.graph.graph import ExecGraph
from bottleneck_oracle.graph.names import collective_type

__all__ = ["COLLECTIVES", "HASH_BUCKETS", "OP_CLASSES", "classify_strings", "op_class_mask"]

OP_CLASSES: tuple[tuple[str, str], ...] = (
    ("gemm", r"gemm|matmul|aten::(mm|addmm|bmm|linear)$|cublas"),
    ("attention", r"flash|attention|sdpa"),
    ("norm", r"norm"),
    ("softmax", r"softmax"),
    ("loss", r"nll|cross_entropy|loss"),
    ("embedding", r"embedding|indexSelect|index_select"),
    ("optimizer", r"foreach|adam|optimizer|multi_tensor"),
    ("dataloader", r"(?i)dataloader|load_batch"),
    ("checkpoint", r"(?i)checkpoint|torch\.save|serialization"),
    ("memory", r"(?i)memcpy|memset|aten::(copy_|to|contiguous)$"),
    ("elementwise", r"elementwise|aten::(add|mul|sub|div|silu|gelu|fill)|add_|mul_"),
    ("backward", r"(?i)backward"),
)
COLLECTIVES = ("allreduce", "allgather", "reducescatter", "sendrecv", "send", "recv", "broadcast", "alltoall")
HASH_BUCKETS = 16


@functools.lru_cache(maxsize=8)  # the features and every op-class edit of one trace classify the same strings
def classify_strings(strings: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per interned string: op class (index into OP_CLASSES, -1 none), collective (into COLLECTIVES,
    -1 none), hash bucket."""
    patterns = [re.compile(p) for _, p in OP_CLASSES]
    op = np.full(len(strings), -1, dtype=np.int16)
    coll = np.full(len(strings), -1, dtype=np.int16)
    bucket = np.zeros(len(strings), dtype=np.int16)
    for i, s in enumerate(strings):
        op[i] = next((c for c, p in enumerate(patterns) if p.search(s)), -1)
        kind = collective_type(s)
        coll[i] = COLLECTIVES.index(kind) if kind in COLLECTIVES else -1
        bucket[i] = zlib.crc32(s.encode()) % HASH_BUCKETS
    return op, coll, bucket


def op_class_mask(g: ExecGraph, op_class: str) -> np.ndarray:
    """bool[N]: nodes whose name falls in ``op_class`` of OP_CLASSES.

    Raises:
        ValueError: an unknown class.
    """
    names = [c for c, _ in OP_CLASSES]
    if op_class not in names:
        raise ValueError(f"unknown op class {op_class!r}; known: {', '.join(names)}")
    op, _, _ = classify_strings(g.trace.strings)
    return op[g.name] == names.index(op_class)
