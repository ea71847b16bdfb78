"""A modern Kineto document rewritten as PyTorch 1.8-1.9 wrote it, for twin tests of the reader."""

from __future__ import annotations

_OLD_CAT = {"cpu_op": "Operator", "cuda_runtime": "Runtime", "cuda_driver": "Runtime", "kernel": "Kernel",
            "gpu_memcpy": "Memcpy", "gpu_memset": "Memset", "ac2g": "async"}
_GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def to_pytorch19(doc: dict) -> dict:
    """Old categories, ``async`` launch flows, lowercase ``external id`` on runtime and GPU events,
    GPU rows named ``stream N``, and no ``cuda_sync`` events (Kineto had none then)."""
    events = []
    for e in doc["traceEvents"]:
        if not isinstance(e, dict) or e.get("cat") == "cuda_sync":
            continue
        e = dict(e)
        cat = e.get("cat")
        args = e.get("args")
        if cat in ("cuda_runtime", "cuda_driver", *_GPU_CATS) and isinstance(args, dict) and "External id" in args:
            args = dict(args)
            args["external id"] = args.pop("External id")
            e["args"] = args
        if cat in _GPU_CATS or (cat == "ac2g" and e.get("ph") == "f"):
            e["tid"] = f"stream {e.get('tid')}"
        e["cat"] = _OLD_CAT.get(cat, cat)
        events.append(e)
    return {**doc, "traceEvents": events}
