"""One PyTorch execution trace per recorded window, stored in the flat layout ``read_trace`` reads.

``ExecutionTraceWindow`` is the ``execution_trace_observer`` that ``StepProfiler`` hands to
``torch.profiler.profile``: it registers a fresh ``ExecutionTraceObserver`` when a window starts
recording and finishes it when the window stops, so other steps pay nothing for it.

torch 2.13 writes schema ``1.1.1-chakra.0.0.4``: a node's ``rf_id``, ``tid`` and the other scalars sit
in an ``attrs`` list of ``{name, type, value}``, its parent is ``ctrl_deps``, and ``inputs`` /
``outputs`` are objects of ``values``, ``shapes``, ``types``, ``strides``. ``read_trace`` reads the
1.0.x layout (scalars as node fields, ``parent``, ``inputs`` / ``input_shapes`` / ``input_types``
lists), so ``write_flat_execution_trace`` stores the window in that layout. Nothing is dropped:
strides become ``input_strides`` / ``output_strides``, the original schema is kept as ``source_schema``.

One repair: torch 2.13 records ops of other threads (``gloo:all_reduce`` on a gloo worker) under
the main thread and, racing with it, sometimes gives them a parent that started after them (a
larger id), which ``read_trace`` refuses. Such a node is moved up to the nearest ancestor of that
parent that started before it; the count is kept as ``reparented_nodes``.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import msgspec
from torch.profiler import ExecutionTraceObserver

__all__ = ["ExecutionTraceWindow", "write_flat_execution_trace"]

FLAT_SCHEMA = "1.0.1"
_SIDES = ("inputs", "outputs")


def _flatten_node(node: dict[str, Any]) -> dict[str, Any]:
    """One node in the 1.0.x layout; a node already flat is returned as it is."""
    if "attrs" not in node and not isinstance(node.get("inputs"), dict):
        return node
    flat: dict[str, Any] = {"name": node.get("name", ""), "id": node["id"]}
    flat["parent"] = node.get("ctrl_deps", node.get("parent", -1))
    for attr in node.get("attrs", ()):
        flat[attr["name"]] = attr["value"]
    for side in _SIDES:
        part = node.get(side) or {}
        if not isinstance(part, dict):
            flat[side] = part
            continue
        singular = side[:-1]
        flat[side] = part.get("values", [])
        flat[f"{singular}_shapes"] = part.get("shapes", [])
        flat[f"{singular}_types"] = part.get("types", [])
        flat[f"{singular}_strides"] = part.get("strides", [])
    return flat


def _reparent_late_parents(nodes: list[dict[str, Any]]) -> int:
    """Give every node whose parent has a larger id the parent's nearest earlier ancestor."""
    parent_of = {node["id"]: node.get("parent", -1) for node in nodes}
    roots = [node_id for node_id, parent in parent_of.items() if node_id == parent]
    moved = 0
    for node in nodes:
        node_id, parent = node["id"], node.get("parent", -1)
        if parent == node_id or parent not in parent_of or parent < node_id:
            continue
        while parent in parent_of and parent > node_id and parent_of[parent] != parent:
            parent = parent_of[parent]
        if not (parent in parent_of and parent < node_id):
            parent = min(roots, default=parent)
        node["parent"] = parent_of[node_id] = parent
        moved += 1
    return moved


def write_flat_execution_trace(source: Path, target: Path) -> None:
    """Read the execution trace ``source`` (plain JSON), write it flat and gzipped to ``target``.

    Args:
        source: an ExecutionTraceObserver output file.
        target: the ``.json.gz`` file to write.

    Raises:
        msgspec.DecodeError: ``source`` is not JSON (an observer that did not finish).
    """
    doc = msgspec.json.decode(source.read_bytes())
    if isinstance(doc.get("nodes"), list):
        schema = doc.get("schema", "")
        if not str(schema).startswith("1.0"):
            doc["source_schema"] = schema
            doc["schema"] = FLAT_SCHEMA
        doc["nodes"] = [_flatten_node(node) for node in doc["nodes"]]
        doc["reparented_nodes"] = _reparent_late_parents(doc["nodes"])
    with gzip.open(target, "wb", compresslevel=6) as packed:
        packed.write(msgspec.json.encode(doc))


class ExecutionTraceWindow:
    """The profiler's execution-trace observer: a fresh ``ExecutionTraceObserver`` per recorded window.

    ``torch.profiler.profile`` calls ``start()`` where a window starts recording and ``stop()``
    where it ends, before its ``on_trace_ready``, which then calls ``save()``.

    Args:
        scratch (Path): where the observer writes the window's plain JSON meanwhile.
    """

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self._observer: ExecutionTraceObserver | None = None

    def start(self) -> None:
        """Register and start an observer for the window that begins."""
        self._observer = ExecutionTraceObserver().register_callback(str(self.scratch))
        self._observer.start()

    def stop(self) -> None:
        """Stop the observer and finish its file."""
        if self._observer is not None:
            self._observer.unregister_callback()
            self._observer = None

    def cleanup(self) -> None:
        """Stop, and drop a file no window saved."""
        self.stop()
        self.scratch.unlink(missing_ok=True)

    def save(self, target: Path) -> bool:
        """Write the window just stopped to ``target`` (flat, gzipped); False if none was recorded."""
        self.stop()
        if not self.scratch.exists():
            return False
        write_flat_execution_trace(self.scratch, target)
        self.scratch.unlink()
        return True
