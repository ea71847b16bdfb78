"""The edit language: what a what-if changes, as short strings and as JSON, and the ``whatif.json``
that holds the true step times under each edit beside a captured or simulated job.

One language for every caller: ``oracle whatif`` and ``oracle optimize`` compile an edit onto a
trace's DAG (``whatif/``), ``oracle synth --whatif`` re-simulates the job with it, ``oracle capture
--whatif`` re-captures it, and the corpus builder records its truth. Strings::

    scale SELECTOR xK          the selected nodes K times faster
    remove SELECTOR            the selected nodes gone
    set SELECTOR MS            each selected node takes MS milliseconds
    fix CATEGORY [step=N]      what the step's finding of that category attributes, gone
    overlap                    communication overlapped with the compute it waits behind
    data_parallel=D [global_batch]     D data-parallel replicas (per-rank batch kept, or the global one)
    microbatches=K [same_microbatch]   K micro-batches a step (global batch kept, or each micro-batch's)
    remove_injection=I         injected fault I gone (a recorded job's truth)
    move_layer A->B layers=L[,M]  a layer moved from stage A (holding L) to B (holding M, default L) (op tables)
    even_microbatches          every micro-batch of equal work (op tables of pipeline jobs)

A SELECTOR is ``key=value`` tokens: ``kind=kernel``, ``name=REGEX``, ``op=gemm`` (an op class or a
collective kind), ``rank=0,1``, ``stream=7``, ``step=3``; a bare word is ``op=``. The older forms
``collective_faster:allreduce=2`` and ``kernel_faster:gemm=2`` still read as ``scale op=... x2``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum
from pathlib import Path

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.truth.injection import Injection
from bottleneck_oracle.vocabulary import Bottleneck, KernelClass

__all__ = ["COLLECTIVES", "NODE_KINDS", "OP_CLASS_NAMES", "WHATIF_NAME", "Edit", "EditKind", "Selector",
           "edit_from_json", "edit_to_json", "edit_type", "fixed_injections", "format_edit", "parse_edit", "step_rows",
           "write_whatif"]

COLLECTIVES = ("allreduce", "reducescatter", "allgather", "sendrecv", "alltoall", "broadcast")
# The op classes of graph/op_classes.py, named here so an edit is checked where it is parsed.
OP_CLASS_NAMES = ("gemm", "attention", "norm", "softmax", "loss", "embedding", "optimizer", "dataloader",
                  "checkpoint", "memory", "elementwise", "backward")
_OP_ALIASES = {"dataload": "dataloader"}
NODE_KINDS = ("cpu_op", "annotation", "python", "runtime", "kernel", "memcpy", "memset", "comm")
WHATIF_NAME = "whatif.json"  # beside a job's traces: the true step times under each edit


class EditKind(StrEnum):
    """The changes a what-if can make."""

    SCALE = "scale"
    REMOVE = "remove"
    SET = "set"
    FIX = "fix"
    OVERLAP = "overlap"
    DATA_PARALLEL = "data_parallel"
    MICROBATCHES = "microbatches"
    REMOVE_INJECTION = "remove_injection"
    MOVE_LAYER = "move_layer"
    EVEN_MICROBATCHES = "even_microbatches"


@dataclass(frozen=True, slots=True)
class Selector:
    """Which nodes an edit touches: all of these that are given must hold (nothing given: every node).

    Attributes:
        kind: a node kind (``NODE_KINDS``).
        name: a regular expression the node's name must match.
        op: an op class (``OP_CLASS_NAMES``) or a collective kind (``COLLECTIVES``).
        ranks, streams, steps: where the node runs (streams are GPU stream ids) and its ProfilerStep.
    """

    kind: str = ""
    name: str = ""
    op: str = ""
    ranks: tuple[int, ...] = ()
    streams: tuple[int, ...] = ()
    steps: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        op = _OP_ALIASES.get(self.op, self.op)
        object.__setattr__(self, "op", op)
        if op and op not in OP_CLASS_NAMES and op not in COLLECTIVES:
            raise ConfigError(f"selector op={op!r}: unknown op class; use one of "
                              f"{', '.join(OP_CLASS_NAMES + COLLECTIVES)}")
        if self.kind and self.kind not in NODE_KINDS:
            raise ConfigError(f"selector kind={self.kind!r}: unknown node kind; use one of {', '.join(NODE_KINDS)}")
        if self.name:
            try:
                re.compile(self.name)
            except re.error as e:
                raise ConfigError(f"selector name={self.name!r}: not a regular expression ({e})") from None

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))

    def to_json(self) -> dict[str, object]:
        """The fields that are set."""
        return {f.name: list(v) if isinstance(v, tuple) else v for f in fields(self) if (v := getattr(self, f.name))}

    def __str__(self) -> str:
        parts = []
        for key, value in self.to_json().items():
            key = key.rstrip("s") if key in ("ranks", "streams", "steps") else key
            parts.append(f"{key}={','.join(map(str, value)) if isinstance(value, list) else value}")
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Edit:
    """One change to a job.

    Attributes:
        kind: what to change.
        select: the nodes of SCALE, REMOVE and SET (FIX: only ``steps`` and ``ranks`` are read).
        factor, ms: SCALE: how many times faster (> 0); SET: the time each selected node takes.
        category: FIX: a bottleneck category.
        value: the data-parallel degree, the micro-batch count, the injection index, or layers per stage.
        stages: MOVE_LAYER's (from, to[, layers the target holds]).
        keep_global_batch: DATA_PARALLEL: divide the per-rank batch so the global batch stays
            (default: keep the per-rank batch); MICROBATCHES: keep the global batch by shrinking
            each micro-batch (the default) or keep each micro-batch's size.
    """

    kind: EditKind
    select: Selector = field(default_factory=Selector)
    factor: float = 1.0
    ms: float = 0.0
    category: str = ""
    value: int = 0
    keep_global_batch: bool | None = None
    stages: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", EditKind(self.kind))
        kind = self.kind
        if kind == EditKind.SCALE and not (self.factor > 0 and math.isfinite(self.factor)):
            raise ConfigError(f"edit {kind}: the factor must be a positive number, got {self.factor:g}")
        if kind == EditKind.SET and not self.ms >= 0:
            raise ConfigError(f"edit {kind}: the time must be >= 0 ms, got {self.ms:g}")
        if kind in (EditKind.SCALE, EditKind.REMOVE, EditKind.SET) and not self.select:
            raise ConfigError(f"edit {kind}: give a selector, e.g. op=allreduce or name=^aten::mm$")
        if kind == EditKind.FIX:
            try:
                Bottleneck(self.category)
            except ValueError:
                raise ConfigError(f"edit fix: unknown category {self.category!r}; use one of "
                                  f"{', '.join(b for b in Bottleneck if b != Bottleneck.NONE)}") from None
            if self.category == Bottleneck.NONE:
                raise ConfigError("edit fix: 'none' is not a bottleneck")
        if kind in (EditKind.DATA_PARALLEL, EditKind.MICROBATCHES) and self.value < 1:
            raise ConfigError(f"edit {kind}: give a whole number >= 1, got {self.value}")
        if kind == EditKind.REMOVE_INJECTION and self.value < 0:
            raise ConfigError(f"edit {kind}: the injection index must be >= 0, got {self.value}")
        object.__setattr__(self, "stages", tuple(self.stages))
        if kind == EditKind.MOVE_LAYER and (len(self.stages) not in (2, 3) or self.stages[0] == self.stages[1]
                                            or self.value < 2 or min(self.stages[2:] or (1,)) < 1):
            raise ConfigError(f"edit {kind}: give two different stages and the layers each holds (>= 2), "
                              f"e.g. move_layer 3->0 layers=8")

    @property
    def global_batch_kept(self) -> bool:
        """Whether the job keeps its global batch (see ``keep_global_batch``)."""
        if self.keep_global_batch is not None:
            return self.keep_global_batch
        return self.kind == EditKind.MICROBATCHES

    @classmethod
    def scale(cls, factor: float, **select: object) -> Edit:
        """The nodes ``select`` picks ``factor`` times faster, e.g. ``Edit.scale(2, op="allreduce")``."""
        return cls(EditKind.SCALE, Selector(**select), factor=factor)  # type: ignore[arg-type]

    @classmethod
    def fix(cls, category: str, step: int | None = None) -> Edit:
        """What the finding of ``category`` attributes, gone (in ``step``, or wherever it is found)."""
        return cls(EditKind.FIX, Selector(steps=() if step is None else (step,)), category=category)

    @classmethod
    def data_parallel(cls, dp: int, keep_global_batch: bool | None = None) -> Edit:
        """Data-parallel degree ``dp``."""
        return cls(EditKind.DATA_PARALLEL, value=dp, keep_global_batch=keep_global_batch)

    @classmethod
    def microbatches(cls, count: int, keep_global_batch: bool | None = None) -> Edit:
        """``count`` micro-batches a step."""
        return cls(EditKind.MICROBATCHES, value=count, keep_global_batch=keep_global_batch)

    @classmethod
    def remove_injection(cls, index: int) -> Edit:
        """Drop injection ``index`` of the recorded job."""
        return cls(EditKind.REMOVE_INJECTION, value=index)

    def __str__(self) -> str:
        return format_edit(self)


_SYNTAX = ("scale SELECTOR xK | remove SELECTOR | set SELECTOR MS | fix CATEGORY [step=N] | overlap | "
           "data_parallel=D [global_batch] | microbatches=K [same_microbatch] | remove_injection=I | "
           "move_layer A->B layers=L | even_microbatches "
           "(SELECTOR: kind=, name=, op=, rank=, stream=, step=)")
_LEGACY = re.compile(r"(?P<kind>collective_faster|kernel_faster):(?P<target>[a-z]+)(?:=(?P<k>[0-9.]+)x?)?")
_NUMBERED = re.compile(r"(?P<kind>data_parallel|microbatches|remove_injection)(?:=(?P<n>\S+))?")


def parse_edit(text: str) -> Edit:
    """Parse an edit as written on the command line (see the module's docstring).

    Raises:
        ConfigError: bad syntax, an unknown kind, selector key, op class or category, or a bad number.
    """
    source = " ".join(text.split())
    if not source:
        raise ConfigError(f"edit {text!r}: empty; expected {_SYNTAX}")
    if legacy := _LEGACY.fullmatch(source):
        target = legacy["target"]
        if legacy["kind"] == "collective_faster" and target not in COLLECTIVES:
            raise ConfigError(f"edit {text!r}: unknown collective {target!r}; use one of {', '.join(COLLECTIVES)}")
        if legacy["kind"] == "kernel_faster" and target not in tuple(KernelClass):
            raise ConfigError(f"edit {text!r}: unknown kernel class {target!r}; use one of {', '.join(KernelClass)}")
        return Edit.scale(_number(text, legacy["k"] or "2"), op=target)
    head, *rest = source.split(" ")
    if numbered := _NUMBERED.fullmatch(head):
        kind = EditKind(numbered["kind"])
        if numbered["n"] is None and kind != EditKind.REMOVE_INJECTION:
            raise ConfigError(f"edit {text!r}: give the number, e.g. {kind}=4")
        value = _whole(text, numbered["n"] or "0")
        flags = {"global_batch": True, "same_microbatch": False}
        if any(f not in flags for f in rest):
            raise ConfigError(f"edit {text!r}: unexpected {' '.join(rest)!r}; expected {_SYNTAX}")
        keep = flags[rest[0]] if rest else None
        return Edit(kind, value=value, keep_global_batch=keep)
    if head in ("move_layer", "even_microbatches"):
        if head == "even_microbatches" and not rest:
            return Edit(EditKind.EVEN_MICROBATCHES)
        if not (move := re.fullmatch(r"move_layer (\d+)->(\d+) layers=(\d+)(?:,(\d+))?", source)):
            raise ConfigError(f"edit {text!r}: expected move_layer A->B layers=L (the layers each stage holds) "
                              f"or even_microbatches")
        return Edit(EditKind.MOVE_LAYER, value=int(move[3]), stages=tuple(int(m) for m in move.group(1, 2, 4) if m))
    if head == "overlap":
        if rest not in ([], ["comm", "with", "compute"]):
            raise ConfigError(f"edit {text!r}: expected 'overlap' or 'overlap comm with compute'")
        return Edit(EditKind.OVERLAP)
    if head == "fix":
        if not rest:
            raise ConfigError(f"edit {text!r}: give a category, e.g. fix straggler_rank")
        select = _selector(text, rest[1:])
        if select.kind or select.name or select.op or select.streams:
            raise ConfigError(f"edit {text!r}: fix takes only step= and rank=")
        return Edit(EditKind.FIX, select, category=rest[0])
    if head not in ("scale", "remove", "set"):
        raise ConfigError(f"edit {text!r}: unknown kind {head!r}; expected {_SYNTAX}")
    kind = EditKind(head)
    if kind == EditKind.REMOVE:
        return Edit(kind, _selector(text, rest))
    if not rest or "=" in rest[-1]:
        what = "the speed-up, e.g. x2" if kind == EditKind.SCALE else "the time in ms, e.g. 5"
        raise ConfigError(f"edit {text!r}: end with {what}")
    number = rest[-1].removeprefix("x") if kind == EditKind.SCALE else rest[-1].removesuffix("ms")
    if kind == EditKind.SCALE:
        return Edit(kind, _selector(text, rest[:-1]), factor=_number(text, number))
    return Edit(kind, _selector(text, rest[:-1]), ms=_number(text, number))


def _selector(text: str, tokens: Sequence[str]) -> Selector:
    values: dict[str, object] = {}
    for token in tokens:
        key, eq, value = token.partition("=")
        if not eq:
            key, value = "op", token
        if key in ("rank", "stream", "step"):
            values[key + "s"] = tuple(_whole(text, v) for v in value.split(","))
        elif key in ("kind", "name", "op"):
            values[key] = value
        else:
            raise ConfigError(f"edit {text!r}: unknown selector key {key!r}; use kind, name, op, rank, stream, step")
    try:
        return Selector(**values)  # type: ignore[arg-type]
    except ConfigError as e:
        raise ConfigError(f"edit {text!r}: {e}") from None


def _number(text: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"edit {text!r}: {value!r} is not a number") from None
    if not (number > 0 and math.isfinite(number)):
        raise ConfigError(f"edit {text!r}: the number must be positive, got {value}")
    return number


def _whole(text: str, value: str) -> int:
    if not re.fullmatch(r"\d+", value):
        raise ConfigError(f"edit {text!r}: {value!r} is not a whole number")
    return int(value)


def format_edit(edit: Edit) -> str:
    """The edit as a string ``parse_edit`` reads back."""
    select = str(edit.select)
    if edit.kind == EditKind.SCALE:
        return f"scale {select} x{edit.factor:g}"
    if edit.kind == EditKind.REMOVE:
        return f"remove {select}"
    if edit.kind == EditKind.SET:
        return f"set {select} {edit.ms:g}"
    if edit.kind == EditKind.FIX:
        return f"fix {edit.category}" + (f" {select}" if select else "")
    if edit.kind in (EditKind.OVERLAP, EditKind.EVEN_MICROBATCHES):
        return str(edit.kind)
    if edit.kind == EditKind.MOVE_LAYER:
        layers = ",".join(map(str, (edit.value, *edit.stages[2:])))
        return f"move_layer {edit.stages[0]}->{edit.stages[1]} layers={layers}"
    flag = {(EditKind.DATA_PARALLEL, True): " global_batch", (EditKind.MICROBATCHES, False): " same_microbatch"}
    return f"{edit.kind}={edit.value}" + flag.get((edit.kind, edit.keep_global_batch), "")


def edit_type(edit: Edit) -> str:
    """What kind of edit this is, as the graph model's recorded scores name it: ``kernel_faster:gemm``,
    ``collective_faster:allreduce`` (a scaled op class alone), ``fix:host_pause``, ``data_parallel``..."""
    select = edit.select
    if edit.kind == EditKind.SCALE and select.op and select == Selector(op=select.op):
        return f"{'collective' if select.op in COLLECTIVES else 'kernel'}_faster:{select.op}"
    if edit.kind == EditKind.FIX:
        return f"fix:{edit.category}"
    return str(edit.kind)


def edit_to_json(edit: Edit) -> dict[str, object]:
    """The edit as JSON-ready data, as ``whatif.json`` files and ``--json`` outputs hold it."""
    out: dict[str, object] = {"kind": str(edit.kind), "text": format_edit(edit)}
    if edit.select:
        out["select"] = edit.select.to_json()
    if edit.kind == EditKind.SCALE:
        out["factor"] = edit.factor
    if edit.kind == EditKind.SET:
        out["ms"] = edit.ms
    if edit.kind == EditKind.FIX:
        out["category"] = edit.category
    if edit.kind in (EditKind.DATA_PARALLEL, EditKind.MICROBATCHES, EditKind.REMOVE_INJECTION, EditKind.MOVE_LAYER):
        out["value"] = edit.value
    if edit.stages:
        out["stages"] = list(edit.stages)
    if edit.kind in (EditKind.DATA_PARALLEL, EditKind.MICROBATCHES):
        out["keep_global_batch"] = edit.global_batch_kept
    return out


def edit_from_json(data: Mapping[str, object]) -> Edit:
    """The edit ``edit_to_json`` wrote, or one of the older ``{"kind": "kernel_faster", "target": ...}``.

    Raises:
        ConfigError: not an edit.
    """
    kind = str(data.get("kind", ""))
    if kind in ("kernel_faster", "collective_faster"):
        return Edit.scale(float(data.get("factor", 2.0)), op=str(data.get("target", "")))  # type: ignore[arg-type]
    try:
        edit_kind = EditKind(kind)
    except ValueError:
        raise ConfigError(f"edit {dict(data)!r}: unknown kind {kind!r}") from None
    raw = data.get("select") or {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"edit {dict(data)!r}: select must be an object")
    select = Selector(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})  # type: ignore[arg-type]
    keep, get = data.get("keep_global_batch"), data.get
    return Edit(edit_kind, select, factor=float(get("factor", 1.0)), ms=float(get("ms", 0.0)),  # type: ignore[arg-type]
                category=str(get("category", "")), value=int(get("value", 0)),  # type: ignore[call-overload]
                keep_global_batch=None if keep is None else bool(keep),
                stages=tuple(get("stages") or ()))  # type: ignore[arg-type]


def fixed_injections(injections: Sequence[Injection], edit: Edit) -> tuple[Injection, ...]:
    """The injections a recorded job keeps once ``edit`` (a FIX) is made: those of its category in its
    steps (every step when none is given) are gone.

    Raises:
        ConfigError: the job has no injection the fix removes.
    """
    steps = edit.select.steps
    gone = [i for i in injections if i.category == edit.category and (not steps or i.step in steps)]
    if not gone:
        where = f" in step {', '.join(map(str, steps))}" if steps else ""
        raise ConfigError(f"edit {edit}: the job has no {edit.category} injection{where} to fix")
    return tuple(i for i in injections if i not in gone)


def step_rows(before: Mapping[tuple[int, int], float],
              after: Mapping[tuple[int, int], float]) -> list[list[float | int | None]]:
    """``[step, rank, before_ms, after_ms]`` per (step, rank) of either side (null where a side lacks it)."""
    return [[s, r, before.get((s, r)), after.get((s, r))] for s, r in sorted(before.keys() | after.keys())]


def write_whatif(folder: Path, entries: Sequence[Mapping[str, object]]) -> None:
    """Writes ``folder/whatif.json``: ``{"edits": entries}``."""
    (Path(folder) / WHATIF_NAME).write_text(json.dumps({"edits": list(entries)}) + "\n")
