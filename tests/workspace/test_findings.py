"""The findings list of the shipped example: the host pause of step 5 first, with its summary and the
playbook's remedy."""

from __future__ import annotations

from pathlib import Path

from bottleneck_oracle.config import Settings
from bottleneck_oracle.graphdb.playbook import read_playbook
from bottleneck_oracle.workspace.findings import finding_rows, trace_findings
from bottleneck_oracle.workspace.traces import open_trace
from tests.conftest import REPO

GPT = REPO / "examples" / "gpt_2rank"


def test_the_host_pause_comes_first_with_a_summary_and_the_playbooks_remedy(tmp_path: Path) -> None:
    rows = trace_findings([GPT], Settings(home=tmp_path, workers=2))
    first = rows[0]
    assert (first["category"], first["step"], first["ranks"], first["severity"]) == ("host_pause", 5, [1], "major")
    assert first["summary"] == f"host pause in step 5 on rank 1: {first['impact_ms']:.3f} ms at stake"
    assert first["impact_ms"] > 100 and "150.248 ms" in first["evidence"]
    remedy = next(e for e in read_playbook() if e.category.value == "host_pause")
    assert first["remedy"] == f"{remedy.title}: {remedy.remedy}"
    assert [r["impact_ms"] for r in rows] == sorted((r["impact_ms"] for r in rows), reverse=True)


def test_a_category_the_playbook_lacks_has_no_remedy(tmp_path: Path) -> None:
    a = open_trace([GPT], Settings(home=tmp_path, workers=2)).analysis
    rows = finding_rows(a, [e for e in read_playbook() if e.category.value != "host_pause"])
    assert rows and all(r["remedy"] is None for r in rows if r["category"] == "host_pause")
    assert any(r["remedy"] for r in rows if r["category"] != "host_pause")
