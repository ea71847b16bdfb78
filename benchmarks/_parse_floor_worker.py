"""Child process for the parse floor: gunzip and `orjson.loads` every trace file, nothing else.

Usage::

    python _parse_floor_worker.py RESULT_JSON [--keep-gc] FILE [FILE ...]

Files are read one at a time and dropped before the next, so the peak memory
is that of the largest file (its bytes plus its Python objects): the least any
loader that goes through orjson pays. The cyclic garbage collector is off
while `orjson.loads` runs (it would otherwise rescan the growing heap of new
dicts again and again: 5x slower on a 125k-event rank file, 2x on a 216k one);
`--keep-gc` leaves it on. Writes one JSON object to RESULT_JSON.
"""

from __future__ import annotations

import gc
import gzip
import json
import sys
import time

import orjson


def main(argv: list[str]) -> int:
    out_path, paths = argv[1], argv[2:]
    keep_gc = "--keep-gc" in paths
    paths = [p for p in paths if p != "--keep-gc"]
    read_s = gunzip_s = loads_s = 0.0
    raw_bytes = events = 0
    for path in paths:
        t0 = time.perf_counter()
        with open(path, "rb") as fh:
            blob = fh.read()
        t1 = time.perf_counter()
        text = gzip.decompress(blob) if path.endswith(".gz") else blob
        if not keep_gc:
            gc.disable()
        t2 = time.perf_counter()
        doc = orjson.loads(text)
        t3 = time.perf_counter()
        gc.enable()
        read_s, gunzip_s, loads_s = read_s + t1 - t0, gunzip_s + t2 - t1, loads_s + t3 - t2
        raw_bytes += len(text)
        events += len(doc["traceEvents"]) if isinstance(doc, dict) else len(doc)
        del blob, text, doc
    result = {
        "files": len(paths),
        "gc_during_loads": keep_gc,
        "events": events,
        "raw_bytes": raw_bytes,
        "read_s": round(read_s, 4),
        "gunzip_s": round(gunzip_s, 4),
        "loads_s": round(loads_s, 4),
    }
    with open(out_path, "w") as fh:
        json.dump(result, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
