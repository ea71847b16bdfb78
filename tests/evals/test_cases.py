"""Case files: what a good one reads back as, and the one-line error for each kind of bad one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.evals.cases import dump_case, load_cases
from bottleneck_oracle.evals.types import Case, EditTruth, Expect


def _case(**changes: Any) -> dict[str, Any]:
    expect = {"category": "host_sync", "step": 3, "ranks": [1], "ops": ["aten::item"]}
    base: dict[str, Any] = {"id": "c1", "trace": "../trace", "expect": expect}
    return base | changes


def _folder(tmp_path: Path, files: dict[str, Any]) -> Path:
    (tmp_path / "trace").mkdir(exist_ok=True)
    folder = tmp_path / "cases"
    folder.mkdir(exist_ok=True)
    for name, doc in files.items():
        (folder / name).write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return folder


def _error(folder: Path) -> str:
    with pytest.raises(ConfigError) as e:
        load_cases(folder)
    return str(e.value)


def test_load_cases_reads_one_case_and_a_list(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"a.yaml": _case(), "b.yml": [_case(id="c2", questions=["Is step {step} ok?"]),
                                                               _case(id="c3", expect={"category": "none", "step": 2})]})
    cases = load_cases(folder)
    assert [c.id for c in cases] == ["c1", "c2", "c3"]
    assert cases[0].questions == ("Why is step 3 slow?",) and cases[0].kind == "real"
    assert cases[0].expect == Expect("host_sync", 3, (1,), ("aten::item",))
    assert cases[1].questions == ("Is step 3 ok?",)
    assert cases[2].expect == Expect("none", 2) and cases[0].trace == (tmp_path / "trace").resolve()


def test_dump_case_reads_back_the_same(tmp_path: Path) -> None:
    (tmp_path / "traces" / "x").mkdir(parents=True)
    case = Case("x", (tmp_path / "traces" / "x").resolve(), ("Why is step 4 slow?", "Diagnose step 4."),
                Expect("slow_compute", 4, (0,), ("aten::mm",), (EditTruth("fix slow_compute", 4, 12.5, 5.0),)),
                "synth", {"synth": {"model": "tiny", "steps": 5, "injections": ["slow_compute@4:0=3x"]}})
    path = dump_case(case, tmp_path / "cases" / "x.yaml")
    assert yaml.safe_load(path.read_text())["trace"] == "../traces/x"
    (back,) = load_cases(tmp_path / "cases")
    assert back == Case(case.id, case.trace, case.questions, case.expect, case.kind, case.recipe, path)


@pytest.mark.parametrize(("doc", "says"), [
    (_case(expect={"category": "slow_gpu", "step": 3, "ops": ["x"]}), "unknown category 'slow_gpu'"),
    (_case(trace="nowhere"), "missing trace nowhere"),
    (_case(colour="red"), "unknown key 'colour'"),
    (_case(expect={"category": "host_sync", "step": 3, "ops": ["x"], "rank": 1}), "unknown key 'rank' in expect"),
    (_case(expect={"category": "host_sync", "step": 3, "ops": ["x"], "edits": [{"edit": "faster gemm", "true_ms": 3}]}),
     "bad edit: edit 'faster gemm'"),
    (_case(expect={"category": "host_sync", "step": 3, "ops": ["x"], "edits": [{"edit": "fix host_sync"}]}),
     "true_ms must be a positive number"),
    (_case(expect={"category": "host_sync", "step": 3}), "expect.ops is empty"),
    (_case(expect={"category": "none", "step": 3, "ranks": [1]}), "lists no ranks and no ops"),
    (_case(kind="simulated"), "unknown kind 'simulated'"),
    (_case(recipe={"synth": {"model": "tiny", "colour": 1}}), "unexpected keyword argument 'colour'"),
    (_case(recipe={"synth": {"model": "tiny", "injections": ["host_sync@9=2ms"]}}), "step 9 is not recorded"),
    (_case(expect={"category": "host_sync", "step": None, "ops": ["x"]}), "expect.step is not given"),
    ("id: [unclosed", "not YAML"),
])
def test_load_cases_names_the_file_the_case_and_the_fault(tmp_path: Path, doc: Any, says: str) -> None:
    folder = _folder(tmp_path, {"bad.yaml": doc})
    message = _error(folder)
    assert says in message and str(folder / "bad.yaml") in message
    assert "\n" not in message
    if isinstance(doc, dict):
        assert "case 'c1'" in message


def test_load_cases_refuses_a_duplicate_id(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"a.yaml": _case(), "b.yaml": [_case(id="c9"), _case()]})
    message = _error(folder)
    assert message.startswith(f"{folder / 'b.yaml'}: case 'c1': duplicate id 'c1' (also in {folder / 'a.yaml'})")


def test_load_cases_names_a_case_without_id_by_position(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"a.yaml": [_case(), {"trace": "../trace"}]})
    assert _error(folder) == f"{folder / 'a.yaml'}: case #2: 'id' must be a non-empty string, got None"


def test_load_cases_makes_a_missing_trace_from_its_recipe(tmp_path: Path) -> None:
    recipe = {"synth": {"model": "tiny", "steps": 3, "injections": ["host_sync@2=5ms"]}}
    folder = _folder(tmp_path, {"a.yaml": _case(trace="../made", recipe=recipe)})
    assert "load with make=True" in _error(folder)
    (case,) = load_cases(folder, make=True)
    assert case.kind == "synth" and sorted(p.name for p in case.trace.iterdir())[0] == "manifest.json"


def test_load_cases_refuses_an_empty_folder(tmp_path: Path) -> None:
    assert _error(tmp_path) == f"{tmp_path}: no case file (*.yaml) in it"
