"""Case files: YAML that says which trace to read and what is true about it, loaded and checked.

A file holds one case (a mapping) or a list of them; every ``*.yaml``/``*.yml`` under a folder is
read. A case::

    id: dataloader_stall               # unique in the set
    kind: synth                        # synth, capture or real (default: from the recipe, else real)
    trace: ../traces/dataloader_stall  # relative to the case file
    recipe: {synth: {model: gpt2-small, dp: 2, steps: 5, injections: [dataloader_stall@3:1=40ms]}}
    questions: ["Why is step {step} slow?"]           # the default; {step} is expect.step
    expect:
      category: dataloader_stall       # the vocabulary's Bottleneck values, `none` for a clean trace
      step: 3
      ranks: [1]                       # empty: every rank (or none)
      ops: ["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"]
      edits: [{edit: fix dataloader_stall, step: 3, true_ms: 22.5, tolerance_pct: 10}]

A trace that is missing is made from the recipe when ``load_cases(..., make=True)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from bottleneck_oracle.errors import ConfigError, OracleError, one_line
from bottleneck_oracle.evals._recipes import recipe_config, run_recipe
from bottleneck_oracle.evals.types import Case, EditTruth, Expect
from bottleneck_oracle.truth import parse_edit
from bottleneck_oracle.vocabulary import Bottleneck

__all__ = ["CASE_KEYS", "CATEGORIES", "DEFAULT_QUESTION", "KINDS", "case_to_yaml", "dump_case", "load_cases"]

CASE_KEYS = ("id", "kind", "trace", "recipe", "questions", "expect")
EXPECT_KEYS = ("category", "step", "ranks", "ops", "edits")
EDIT_KEYS = ("edit", "step", "true_ms", "tolerance_pct")
KINDS = ("synth", "capture", "real")
CATEGORIES = tuple(b.value for b in Bottleneck)  # `none` included
DEFAULT_QUESTION = "Why is step {step} slow?"


class _Bad(ValueError):
    """What is wrong with one case (the loader adds the file and the case)."""


def _keys(data: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    unknown = [k for k in data if k not in allowed]
    if unknown:
        raise _Bad(f"unknown key {unknown[0]!r}{where}; use {', '.join(allowed)}")


def _int(value: Any, what: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _Bad(f"{what} must be an integer >= {minimum}, got {value!r}")
    return value


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise _Bad(f"{what} must be a list of non-empty strings, got {value!r}")
    return tuple(value)


def _edit(data: Any, step: int | None) -> EditTruth:
    if not isinstance(data, dict):
        raise _Bad(f"expect.edits: each entry is a mapping {{edit, step, true_ms, tolerance_pct}}, got {data!r}")
    _keys(data, EDIT_KEYS, " in expect.edits")
    text = data.get("edit")
    if not isinstance(text, str):
        raise _Bad(f"expect.edits: 'edit' must be an edit string, got {text!r}")
    try:
        parse_edit(text)
    except ConfigError as e:
        raise _Bad(f"expect.edits: bad edit: {one_line(e)}") from None
    true_ms, tolerance = data.get("true_ms"), data.get("tolerance_pct", 10.0)
    if isinstance(true_ms, bool) or not isinstance(true_ms, int | float) or true_ms <= 0:
        raise _Bad(f"expect.edits {text!r}: true_ms must be a positive number, got {true_ms!r}")
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or tolerance <= 0:
        raise _Bad(f"expect.edits {text!r}: tolerance_pct must be a positive number, got {tolerance!r}")
    edit_step = data.get("step", step)
    if edit_step is None:
        raise _Bad(f"expect.edits {text!r}: give its step")
    return EditTruth(text, _int(edit_step, "expect.edits step"), float(true_ms), float(tolerance))


def _expect(data: Any) -> Expect:
    if not isinstance(data, dict):
        raise _Bad(f"'expect' must be a mapping, got {data!r}")
    _keys(data, EXPECT_KEYS, " in expect")
    category = data.get("category")
    if category not in CATEGORIES:
        raise _Bad(f"unknown category {category!r}; use one of {', '.join(CATEGORIES)}")
    step = data.get("step")
    step = None if step is None else _int(step, "expect.step")
    ranks = data.get("ranks", [])
    if not isinstance(ranks, list):
        raise _Bad(f"expect.ranks must be a list of ranks, got {ranks!r}")
    ranks = tuple(_int(r, "a rank") for r in ranks)
    ops = _strings(data.get("ops", []), "expect.ops")
    if category == Bottleneck.NONE and (ranks or ops):
        raise _Bad("a clean case (category none) lists no ranks and no ops")
    if category != Bottleneck.NONE and not ops:
        raise _Bad(f"expect.ops is empty: a {category} answer must name at least one culprit op")
    edits = data.get("edits", [])
    if not isinstance(edits, list):
        raise _Bad(f"expect.edits must be a list, got {edits!r}")
    return Expect(category, step, ranks, ops, tuple(_edit(e, step) for e in edits))


def _case(data: Any, file: Path, make: bool, workers: int) -> Case:
    if not isinstance(data, dict):
        raise _Bad(f"a case is a mapping, got {type(data).__name__}")
    _keys(data, CASE_KEYS, "")
    case_id = data.get("id")
    if not isinstance(case_id, str) or not case_id.strip():
        raise _Bad(f"'id' must be a non-empty string, got {case_id!r}")
    if "expect" not in data:
        raise _Bad("no 'expect'")
    expect = _expect(data["expect"])
    recipe = data.get("recipe")
    if recipe is not None:
        try:
            recipe_config(recipe)
        except ConfigError as e:
            raise _Bad(one_line(e)) from None
    kind = data.get("kind", next(iter(recipe)) if recipe else "real")
    if kind not in KINDS:
        raise _Bad(f"unknown kind {kind!r}; use one of {', '.join(KINDS)}")
    if not isinstance(data.get("trace"), str):
        raise _Bad(f"'trace' must be a path relative to the case file, got {data.get('trace')!r}")
    trace = (file.parent / data["trace"]).resolve()
    if not trace.exists():
        if recipe is None:
            raise _Bad(f"missing trace {data['trace']} ({trace}) and no recipe to make it")
        if not make:
            raise _Bad(f"missing trace {data['trace']} ({trace}); load with make=True to run its recipe")
        try:
            run_recipe(recipe, trace, workers=workers)
        except OracleError as e:
            raise _Bad(f"its recipe failed: {one_line(e)}") from None
    questions = _strings(data.get("questions", [DEFAULT_QUESTION]), "questions")
    if expect.step is None and any("{step}" in q for q in questions):
        raise _Bad("a question says {step} but expect.step is not given")
    return Case(case_id, trace, tuple(q.replace("{step}", str(expect.step)) for q in questions), expect, kind,
                recipe, file)


def _read(file: Path) -> list[Any]:
    try:
        doc = yaml.safe_load(file.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{file}: not YAML: {one_line(e)}") from None
    if doc is None:
        return []
    return doc if isinstance(doc, list) else [doc]


def load_cases(folder: Path, *, make: bool = False, workers: int = 1,
               progress: Callable[[int, int], None] | None = None) -> list[Case]:
    """Every case under ``folder`` (each ``*.yaml``/``*.yml``, sorted by path), checked.

    Args:
        make: run the recipe of a case whose trace is missing (into its ``trace`` path).
        progress: called with (cases done, cases) as files are read.

    Raises:
        ConfigError: one line naming the file, the case and what is wrong (unknown key or category,
            missing trace, duplicate id, bad edit, bad recipe, not YAML); a folder with no case.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{folder}: not a folder of case files")
    files = sorted(p for p in folder.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    entries = [(file, i, data) for file in files for i, data in enumerate(_read(file))]
    cases: list[Case] = []
    seen: dict[str, Path] = {}
    for done, (file, i, data) in enumerate(entries, 1):
        name = data.get("id") if isinstance(data, dict) else None
        where = f"{file}: case {name!r}" if isinstance(name, str) else f"{file}: case #{i + 1}"
        try:
            case = _case(data, file, make, workers)
        except _Bad as e:
            raise ConfigError(f"{where}: {e}") from None
        if case.id in seen:
            raise ConfigError(f"{where}: duplicate id {case.id!r} (also in {seen[case.id]})")
        seen[case.id] = file
        cases.append(case)
        if progress:
            progress(done, len(entries))
    if not cases:
        raise ConfigError(f"{folder}: no case file (*.yaml) in it")
    return cases


def case_to_yaml(case: Case, path: Path) -> dict[str, Any]:
    """The mapping ``dump_case`` writes for ``case`` into the file ``path`` (trace relative to it)."""
    e = case.expect
    expect: dict[str, Any] = {"category": e.category, "step": e.step, "ranks": list(e.ranks), "ops": list(e.ops)}
    if e.edits:
        expect["edits"] = [{"edit": t.edit, "step": t.step, "true_ms": t.true_ms, "tolerance_pct": t.tolerance_pct}
                           for t in e.edits]
    out: dict[str, Any] = {"id": case.id, "kind": case.kind,
                           "trace": os.path.relpath(Path(case.trace).resolve(), Path(path).resolve().parent)}
    if case.recipe is not None:
        out["recipe"] = case.recipe
    return out | {"questions": list(case.questions), "expect": expect}


def dump_case(case: Case, path: Path) -> Path:
    """Writes ``case`` as one case file at ``path`` (its folder made); ``load_cases`` reads it back."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(case_to_yaml(case, path), sort_keys=False, width=120))
    return path
