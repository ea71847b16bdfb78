"""The evaluation report: ``report.json`` for machines, ``report.md`` for people, and PNG plots.

``report.json`` is ``{"meta": {...}, SUITE: SuiteResult.to_json(), ...}``: each suite's metrics and
its ``cases`` rows (``{"case", "passed", **details}``). The plots read these case details:

- ``rootcause`` rows: ``details["expected"]["category"]`` and ``details["got"]["category"]`` (the
  true and the answered bottleneck), drawn as ``confusion.png``;
- ``whatif`` rows: ``details["predicted_ms"]`` (a number, or predictor -> number) and
  ``details["true_ms"]``, drawn as ``whatif.png``.

Rows without these keys are left out of the plots; a suite with no usable row gets no plot.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bottleneck_oracle import __version__
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.evals.types import SuiteResult

__all__ = ["REPORT_JSON", "REPORT_MD", "read_report", "write_report"]

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
CONFUSION_PNG = "confusion.png"
WHATIF_PNG = "whatif.png"
# keys of a suite's JSON that are not metrics of the suite itself
_NOT_METRICS = frozenset({"cases", "baselines"})
# case-row keys that say, in words, why a case failed (the first present is shown)
_WHY_KEYS = ("why", "reason", "error")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fmt(value: object) -> str:
    """A metric as a table cell: integers as they are, other numbers to 3 decimals, missing as '-'."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "-" if math.isnan(value) else (str(int(value)) if value.is_integer() and abs(value) >= 1000
                                              else f"{value:.3f}")
    return str(value).replace("|", "\\|")


def _md_table(header: Iterable[str], rows: Iterable[Iterable[object]]) -> list[str]:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return lines + [""]


def _category(side: object) -> str | None:
    """The category of a case row's ``expected`` or ``got`` entry (a dict with ``category``, or a name)."""
    if isinstance(side, dict):
        side = side.get("category")
    return str(side) if isinstance(side, str) and side else None


def _said(side: object) -> str:
    """An ``expected``/``got`` entry in brief: ``category at step S on ranks R (ops)``."""
    if not isinstance(side, dict):
        return json.dumps(side, default=str)
    text = str(side.get("category", "?"))
    if side.get("step") is not None:
        text += f" at step {side['step']}"
    if side.get("ranks"):
        text += " on rank " + ",".join(map(str, side["ranks"]))
    if side.get("ops"):
        ops = list(side["ops"])
        text += f" ({', '.join(map(str, ops[:3]))}{', ...' if len(ops) > 3 else ''})"
    return text


def _why(row: dict[str, Any]) -> str:
    """What was wrong with a failed case: its own reason when it gives one (``why``, ``reason``,
    ``error``), else the parts listed in ``wrong`` with the expected and the answered cause."""
    for key in _WHY_KEYS:
        value = row.get(key)
        if value:
            return "; ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    parts = row.get("wrong")
    head = f"wrong {', '.join(map(str, parts))}: " if isinstance(parts, (list, tuple)) and parts else ""
    if "expected" in row or "got" in row:
        return f"{head}expected {_said(row.get('expected'))}, got {_said(row.get('got'))}"
    if _is_number(row.get("error_pct")):
        return f"{head}off by {row['error_pct']:+.1f}% (tolerance {row.get('tolerance_pct', '?')}%)"
    return head.rstrip(": ") or "failed (no details)"


def _scalar_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if k not in _NOT_METRICS and (_is_number(v) or v is None)}


def _dict_tables(name: str, value: dict[str, Any]) -> list[str]:
    """A dict metric as a table: key | value for numbers, a pivot (keys x inner keys) for dicts of dicts."""
    inner = [v for v in value.values() if isinstance(v, dict)]
    if not inner:
        return [f"**{name}**", ""] + _md_table(("", "value"), ((k, v) for k, v in value.items()))
    columns = list(dict.fromkeys(k for d in inner for k, v in d.items() if not isinstance(v, dict)))
    rows = [(k, *(v.get(c) if isinstance(v, dict) else (v if c == "value" else None) for c in columns))
            for k, v in value.items()]
    return [f"**{name}**", ""] + _md_table(("", *columns), rows)


def _suite_markdown(name: str, body: dict[str, Any]) -> list[str]:
    """A suite's section: its numbers (the baselines' beside them when they are per-metric dicts),
    a table per dict metric, and the failed cases with what was wrong."""
    metrics = {k: v for k, v in body.items() if k != "cases"}
    lines = [f"## {name}", ""]
    scalars = _scalar_metrics(metrics)
    raw = metrics.get("baselines")
    baselines = {k: v for k, v in raw.items() if isinstance(v, dict)} if isinstance(raw, dict) else {}
    if scalars:
        header = ("metric", "oracle" if baselines else "value", *(b.replace("_", " ") for b in baselines))
        rows = [(k, v, *(b.get(k) for b in baselines.values())) for k, v in scalars.items()]
        lines += _md_table(header, rows)
    if isinstance(raw, dict) and raw and not baselines:
        lines += _dict_tables("baselines", raw)
    for key, value in metrics.items():
        if key in _NOT_METRICS or not isinstance(value, dict) or not value:
            continue
        beside = {b: v[key] for b, v in baselines.items() if isinstance(v.get(key), dict)}
        if beside and not any(isinstance(v, dict) for v in value.values()):  # per category, with the floors
            header = ("", "oracle", *(b.replace("_", " ") for b in beside))
            rows = [(k, v, *(b.get(k) for b in beside.values())) for k, v in value.items()]
            lines += [f"**{key.replace('_', ' ')}**", ""] + _md_table(header, rows)
        else:
            lines += _dict_tables(key.replace("_", " "), value)
    rows_in = [row for row in body.get("cases") or [] if isinstance(row, dict)]
    failed = [row for row in rows_in if not row.get("passed", True)]
    if rows_in:
        lines += [f"{len(rows_in) - len(failed)} of {len(rows_in)} cases passed." + (" Failed:" if failed else ""), ""]
        lines += [f"- `{row.get('case', '?')}`: {_why(row)}" for row in failed]
        lines += [""] if failed else []
    return lines


def _markdown(data: dict[str, Any], plots: list[Path]) -> str:
    meta = data.get("meta") or {}
    lines = ["# Bottleneck Oracle evaluation", ""]
    lines += [" · ".join(f"{k}: {v}" for k, v in meta.items() if v is not None and not isinstance(v, (dict, list))), ""]
    for name, body in data.items():
        if name != "meta" and isinstance(body, dict):
            lines += _suite_markdown(name, body)
    if plots:
        lines += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots] + [""]
    return "\n".join(lines).rstrip() + "\n"


def _confusion_pairs(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    pairs = []
    for row in rows:
        expected, got = _category(row.get("expected")), _category(row.get("got"))
        if expected is not None:
            pairs.append((expected, got or "no answer"))
    return pairs


def _whatif_points(rows: list[dict[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """predictor -> (true ms, predicted ms) points; a bare number is the ``predicted`` series."""
    points: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        true_ms, predicted = row.get("true_ms"), row.get("predicted_ms")
        if not _is_number(true_ms):
            continue
        series = predicted if isinstance(predicted, dict) else {"predicted": predicted}
        for name, ms in series.items():
            if _is_number(ms):
                points.setdefault(str(name), []).append((float(true_ms), float(ms)))  # type: ignore[arg-type]
    return points


def _plot_confusion(pairs: list[tuple[str, str]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    truth = sorted({e for e, _ in pairs})
    answers = truth + sorted({g for _, g in pairs} - set(truth))
    counts = [[sum(1 for e, g in pairs if e == t and g == a) for a in answers] for t in truth]
    fig, ax = plt.subplots(figsize=(max(5.0, 2.0 + 0.6 * len(answers)), max(4.0, 2.0 + 0.5 * len(truth))))
    ax.imshow(counts, cmap="Blues")
    peak = max(max(row) for row in counts)
    for i, row in enumerate(counts):
        for j, n in enumerate(row):
            if n:
                ax.text(j, i, str(n), ha="center", va="center", fontsize=8, color="white" if 2 * n > peak else "black")
    ax.set_xticks(range(len(answers)), answers, rotation=45, ha="right", fontsize=7)
    ax.set_yticks(range(len(truth)), truth, fontsize=7)
    ax.set(xlabel="answered category", ylabel="expected category")
    ax.set_title("root cause: expected against answered", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_whatif(points: dict[str, list[tuple[float, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4.5))
    for name, pairs in points.items():
        t, p = zip(*pairs)
        ax.scatter(t, p, s=14, label=name, alpha=0.75)
    values = [v for pairs in points.values() for pair in pairs for v in pair if v > 0]
    lo, hi = (min(values), max(values)) if values else (0.1, 1.0)
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
    ax.set(xlabel="true step ms", ylabel="predicted step ms", title="what-if: predicted against true")
    if values and hi / lo > 20:
        ax.set(xscale="log", yscale="log")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plots(data: dict[str, Any], out_dir: Path) -> list[Path]:
    written = []
    pairs = _confusion_pairs((data.get("rootcause") or {}).get("cases") or [])
    if pairs:
        _plot_confusion(pairs, out_dir / CONFUSION_PNG)
        written.append(out_dir / CONFUSION_PNG)
    points = _whatif_points((data.get("whatif") or {}).get("cases") or [])
    if points:
        _plot_whatif(points, out_dir / WHATIF_PNG)
        written.append(out_dir / WHATIF_PNG)
    return written


def _json_default(value: object) -> object:
    """Paths, numpy scalars and arrays, sets and other stragglers in case details, as JSON can hold them."""
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return value.tolist()  # type: ignore[no-any-return]
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return str(value)


def report_data(results: dict[str, SuiteResult], *, meta: dict[str, Any]) -> dict[str, Any]:
    """The report's JSON document: ``meta`` (with ``date`` and ``version`` filled in when absent)
    and each suite's ``SuiteResult.to_json()`` under its name."""
    head = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "version": __version__, **meta}
    head.setdefault("suites", list(results))
    return {"meta": head, **{name: r.to_json() for name, r in results.items()}}


def write_report(results: dict[str, SuiteResult], out_dir: Path, *, meta: dict[str, Any]) -> Path:
    """Writes ``report.json``, ``report.md`` and the plots (``confusion.png``, ``whatif.png``) into ``out_dir``.

    Args:
        results: suite name -> its result, in the order the report shows them.
        out_dir: the report folder (made if absent; files of an earlier report are replaced).
        meta: what the run was, e.g. ``llm``, ``cases`` (the case folder), ``n_cases``, ``seconds``;
            ``date`` (UTC, ISO 8601) and ``version`` are added unless given.

    Returns:
        ``out_dir``, the folder ``read_report`` and ``oracle eval compare`` read.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = report_data(results, meta=meta)
    (out_dir / REPORT_JSON).write_text(json.dumps(data, indent=2, default=_json_default) + "\n")
    for stale in (CONFUSION_PNG, WHATIF_PNG):
        (out_dir / stale).unlink(missing_ok=True)
    plots = _plots(data, out_dir)
    (out_dir / REPORT_MD).write_text(_markdown(data, plots))
    return out_dir


def read_report(folder: Path) -> dict[str, Any]:
    """The JSON document of a report folder written by ``write_report`` (or a ``report.json`` path).

    Raises:
        ConfigError: the folder or its ``report.json`` is missing, unreadable, or not a report.
    """
    path = Path(folder)
    if path.is_dir():
        path = path / REPORT_JSON
    if not path.is_file():
        where = "no such folder" if not Path(folder).exists() else f"no {REPORT_JSON}"
        raise ConfigError(f"{folder}: {where} (write one with `oracle eval --report DIR`)")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: not a readable report: {' '.join(str(e).split())}") from e
    if not isinstance(data, dict) or not isinstance(data.get("meta"), dict):
        raise ConfigError(f"{path}: not an evaluation report (no 'meta' object)")
    bad = [name for name, body in data.items() if name != "meta" and not isinstance(body, dict)]
    if bad:
        raise ConfigError(f"{path}: suite {bad[0]!r} is not an object")
    return data
