"""Op-level timelines of pipeline-parallel jobs: one row per Megatron operation of a recorded worker.

The table is the one the ByteDance straggler study records (``dp_rank, stage, rank, step, optype,
start_ts, duration, seq_id, mc, gmc, mb_id``; times in seconds), as parquet or CSV, with the job's
layout in a ``meta.yaml`` beside it (``dp_size, pp_size, tp_size, dsp_size, vpp_size, world_size``)
or given by the caller. Read through pyarrow into numpy columns; times become integer nanoseconds, the
clock every replay of the project runs on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from bottleneck_oracle.errors import ConfigError, TraceFormatError

__all__ = ["OPTYPES", "COMPUTE", "JobLayout", "OpTable", "op_table_from_arrow", "read_op_table", "read_layout"]

# the operations a worker records, in the study's names (index = the code stored in ``OpTable.optype``)
OPTYPES = (
    "forward-compute", "backward-compute", "forward-send", "forward-recv", "backward-send", "backward-recv",
    "params-all-gather", "grads-reduce-scatter", "separate-grads-all-reduce", "layernorm-grads-all-reduce",
    "embedding-grads-all-reduce", "optimizer-clip-main-grad", "optimizer", "gc",
)
OPCODE = {name: i for i, name in enumerate(OPTYPES)}
COMPUTE = (OPCODE["forward-compute"], OPCODE["backward-compute"])
COLUMNS = ("dp_rank", "stage", "rank", "step", "optype", "start_ts", "duration", "seq_id", "mc", "gmc", "mb_id")
_SIZES = ("dp_size", "pp_size", "tp_size", "dsp_size", "vpp_size")


@dataclass(frozen=True, slots=True)
class JobLayout:
    """How a job's workers are split: data-parallel replicas × pipeline stages × tensor × sequence ranks.

    Args:
        dp (int): data-parallel replicas.
        pp (int): pipeline stages.
        tp (int): tensor-parallel ranks (one is recorded). (default: ``1``)
        dsp (int): sequence-parallel ranks (one is recorded). (default: ``1``)
        vpp (int): model chunks per stage (interleaved schedule). (default: ``1``)
        name (str): what the job is called in reports. (default: ``""``)
    """

    dp: int
    pp: int
    tp: int = 1
    dsp: int = 1
    vpp: int = 1
    name: str = ""

    def __post_init__(self) -> None:
        for field in ("dp", "pp", "tp", "dsp", "vpp"):
            value = getattr(self, field)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"job layout: {field} must be a positive integer, got {value!r}")

    @property
    def world_size(self) -> int:
        return self.dp * self.pp * self.tp * self.dsp


@dataclass(frozen=True, slots=True)
class OpTable:
    """Columns of the op table, one entry per row (times in integer nanoseconds from the step's start).

    Shapes: every array is [R]; ``optype`` indexes ``OPTYPES``.
    """

    layout: JobLayout
    dp_rank: np.ndarray  # int32
    stage: np.ndarray  # int32
    rank: np.ndarray  # int64
    step: np.ndarray  # int64
    optype: np.ndarray  # int8
    start_ns: np.ndarray  # int64
    duration_ns: np.ndarray  # int64
    seq_id: np.ndarray  # int32
    mc: np.ndarray  # int32, -1: none
    gmc: np.ndarray  # int32
    mb_id: np.ndarray  # int32, -1: none
    source: str = ""

    def __len__(self) -> int:
        return len(self.step)

    @property
    def end_ns(self) -> np.ndarray:
        return self.start_ns + self.duration_ns

    @property
    def steps(self) -> np.ndarray:
        """The step numbers, ascending."""
        return np.unique(self.step)

    def worker_ranks(self) -> dict[tuple[int, int], int]:
        """(dp_rank, stage) -> the global rank recorded for that worker."""
        key = self.dp_rank.astype(np.int64) * self.layout.pp + self.stage
        _, first = np.unique(key, return_index=True)
        return {(int(self.dp_rank[i]), int(self.stage[i])): int(self.rank[i]) for i in first}

    def take(self, rows: np.ndarray) -> OpTable:
        """The table of the rows ``rows`` (indices or a bool mask)."""
        cols = {c: getattr(self, c)[rows] for c in ("dp_rank", "stage", "rank", "step", "optype", "start_ns",
                                                    "duration_ns", "seq_id", "mc", "gmc", "mb_id")}
        return OpTable(self.layout, **cols, source=self.source)


def read_layout(path: Path) -> JobLayout:
    """The layout in a ``meta.yaml``.

    Raises:
        TraceFormatError: unreadable YAML, a size missing or not a positive integer, or sizes that do not
            multiply to the ``world_size`` it states.
    """
    try:
        meta = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise TraceFormatError(f"{path}: not a readable YAML file ({type(e).__name__})") from None
    if not isinstance(meta, dict) or "dp_size" not in meta or "pp_size" not in meta:
        raise TraceFormatError(f"{path}: needs dp_size and pp_size (and optionally tp_size, dsp_size, vpp_size)")
    sizes = {k: meta.get(k, 1) for k in _SIZES}
    try:
        layout = JobLayout(*(sizes[k] for k in _SIZES), name=str(meta.get("trial_name", "")))
    except ConfigError as e:
        raise TraceFormatError(f"{path}: {e}") from None
    world = meta.get("world_size")
    if world is not None and world != layout.world_size:
        raise TraceFormatError(
            f"{path}: dp {layout.dp} x pp {layout.pp} x tp {layout.tp} x dsp {layout.dsp} = {layout.world_size}, "
            f"but world_size is {world}")
    return layout


def _table_file(path: Path) -> Path:
    if path.is_file():
        return path
    if not path.is_dir():
        raise ConfigError(f"{path}: no such file or folder")
    found = sorted(p for p in path.iterdir() if p.suffix in (".parquet", ".csv"))
    named = [p for p in found if p.stem == "trace"]
    if len(named) == 1 or len(found) == 1:
        return (named or found)[0]
    raise TraceFormatError(f"{path}: holds {len(found)} .parquet/.csv tables; name the file to read"
                           if found else f"{path}: no .parquet or .csv op table in it")


def _read_arrow(file: Path):  # type: ignore[no-untyped-def]
    import pyarrow as pa
    import pyarrow.csv
    import pyarrow.parquet

    try:
        if file.suffix == ".csv":
            return pyarrow.csv.read_csv(file)
        return pyarrow.parquet.read_table(file)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as e:
        kind = "CSV" if file.suffix == ".csv" else "parquet"
        raise TraceFormatError(f"{file}: not a readable {kind} table ({' '.join(str(e).split())[:120]})") from None


def _column(table, name: str, file: Path, dtype: type) -> np.ndarray:  # type: ignore[no-untyped-def]
    col = table.column(name)
    if col.null_count:
        raise TraceFormatError(f"{file}: column {name} has {col.null_count} empty values")
    values = np.asarray(col.to_numpy(zero_copy_only=False))
    if dtype is float:
        try:
            return values.astype(np.float64)
        except (TypeError, ValueError):
            raise TraceFormatError(f"{file}: column {name} is not numeric") from None
    if values.dtype.kind not in "iu":
        if values.dtype.kind != "f" or not np.all(values == np.rint(values)):
            raise TraceFormatError(f"{file}: column {name} must hold integers")
    return values.astype(np.int64)


def read_op_table(path: Path | str, layout: JobLayout | None = None) -> OpTable:
    """Reads an op table and its layout.

    Args:
        path: a ``.parquet`` or ``.csv`` file, or a folder holding one (``trace.*`` preferred).
        layout (JobLayout | None): the job's split; default: the ``meta.yaml`` beside the table.

    Raises:
        ConfigError: no such path, or no layout given and no ``meta.yaml`` beside the table.
        TraceFormatError: an unreadable table, a missing column, an unknown op type, a negative or
            non-finite time, a worker outside the layout, or a worker of the layout with no rows.
    """
    file = _table_file(Path(path))
    if layout is None:
        meta = file.parent / "meta.yaml"
        if not meta.exists():
            raise ConfigError(f"{file}: no meta.yaml beside it; give the layout (--dp and --pp)")
        layout = read_layout(meta)
    return op_table_from_arrow(_read_arrow(file), layout, str(file))


def op_table_from_arrow(table, layout: JobLayout, source: str) -> OpTable:  # type: ignore[no-untyped-def]
    """The ``OpTable`` of a pyarrow table with the op table's columns (read from a file, or derived from
    traces), checked as ``read_op_table`` checks a file; ``source`` names it in errors.

    Raises:
        TraceFormatError: a missing column, an unknown op type, a negative or non-finite time, a worker
            outside the layout, or a worker of the layout with no rows.
    """
    file = Path(source)
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise TraceFormatError(f"{file}: missing column(s) {', '.join(missing)}")
    names = np.asarray(table.column("optype").to_numpy(zero_copy_only=False)).astype(str)
    kinds, code = np.unique(names, return_inverse=True)
    unknown = [str(k) for k in kinds if k not in OPCODE]
    if unknown:
        raise TraceFormatError(f"{file}: unknown op type {unknown[0]!r}; known: {', '.join(OPTYPES)}")
    ints = {c: _column(table, c, file, int) for c in ("dp_rank", "stage", "rank", "step", "seq_id", "mc", "gmc",
                                                         "mb_id")}
    seconds = {c: _column(table, c, file, float) for c in ("start_ts", "duration")}
    for c, v in seconds.items():
        bad = np.flatnonzero(~np.isfinite(v) | ((v < 0) if c == "duration" else False))
        if len(bad):
            raise TraceFormatError(f"{file}: row {bad[0]} has {c} {v[bad[0]]} (must be finite"
                                   f"{' and >= 0' if c == 'duration' else ''})")
    _check_workers(file, layout, ints["dp_rank"], ints["stage"])
    return OpTable(
        layout, dp_rank=ints["dp_rank"].astype(np.int32), stage=ints["stage"].astype(np.int32), rank=ints["rank"],
        step=ints["step"], optype=np.array([OPCODE[k] for k in kinds], dtype=np.int8)[code],
        start_ns=np.rint(seconds["start_ts"] * 1e9).astype(np.int64),
        duration_ns=np.rint(seconds["duration"] * 1e9).astype(np.int64),
        seq_id=ints["seq_id"].astype(np.int32), mc=ints["mc"].astype(np.int32), gmc=ints["gmc"].astype(np.int32),
        mb_id=ints["mb_id"].astype(np.int32), source=source)


def _check_workers(file: Path, layout: JobLayout, dp_rank: np.ndarray, stage: np.ndarray) -> None:
    if len(dp_rank) == 0:
        raise TraceFormatError(f"{file}: the table has no rows")
    for name, values, size, flag in (("dp_rank", dp_rank, layout.dp, "dp"), ("stage", stage, layout.pp, "pp")):
        outside = values[(values < 0) | (values >= size)]
        if len(outside):
            raise TraceFormatError(f"{file}: {name} {outside[0]} is outside the layout ({flag} size {size})")
    workers = layout.dp * layout.pp
    seen = np.unique(dp_rank.astype(np.int64) * layout.pp + stage)  # no grid: a layout may claim millions
    if len(seen) < workers:
        first = int(np.flatnonzero(seen != np.arange(len(seen)))[0]) if (seen != np.arange(len(seen))).any() \
            else len(seen)
        raise TraceFormatError(f"{file}: worker dp_rank {first // layout.pp} stage {first % layout.pp} has no rows "
                               f"({workers - len(seen)} of {workers} workers of the layout have none)")
