"""A newcomer's path: the README's tour run in order on a fresh workspace, each command exiting 0 with the
output the README shows (timings, ids and ports masked). `oracle serve` runs in the background: the tour
fetches one endpoint from it and it is stopped at the end, with the workspace's database."""

from __future__ import annotations

import os
import re
import runpy
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOUR = runpy.run_path(str(REPO / "tools" / "refresh_readme_tour.py"))


@pytest.mark.slow  # 18 s on a quiet machine, 90 s under load: ingest into a FalkorDB, the agent, a web server
def test_the_readme_tour_runs_as_shown() -> None:
    readme = (REPO / "README.md").read_text()
    commands = [c.text for b in TOUR["parse"](readme) for c in b.commands]
    for verb in ("analyze", "ask", "whatif", "optimize", "serve"):
        assert any(c.startswith(f"oracle {verb} ") for c in commands), f"the tour lacks `oracle {verb}`"
    problems = TOUR["check"](readme)
    assert not problems, "\n\n".join(problems) + f"\n\nupdate the README's tour: run `{TOUR['REFRESH']}`"


def test_the_readme_is_short_and_links_every_docs_page() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < 250
    for page in sorted((REPO / "docs").glob("*.md")):
        assert f"(docs/{page.name}" in readme, f"the README does not link docs/{page.name}"


def test_shown_output_matches_with_its_wildcards() -> None:
    matches = TOUR["matches"]
    assert matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert matches(["a", "...", "d"], ["a", "d"])
    assert not matches(["a", "...", "d"], ["a", "b"])
    assert matches(["step 5: 32.9 [...]"], ["step 5: 32.947 ms"])
    assert not matches(["step 5: 33.0 [...]"], ["step 5: 32.947 ms"])
    assert not matches(["a"], ["a", "b"])


def test_timings_ids_and_ports_are_masked_results_are_not() -> None:
    got = TOUR["normalize"](["trace f825423f3e3ea2a2 in 1.1 s  ", "http://127.0.0.1:41381/", "/tmp/h/x 32.947 ms", ""],
                            home="/tmp/h")
    assert got == ["trace <id> in <s> s", "http://127.0.0.1:8765/", "$ORACLE_HOME/x 32.947 ms"]


def test_a_refreshed_block_keeps_its_line_ranges_and_cuts_long_lines() -> None:
    lines = [f"line {i}" for i in range(1, 11)] + ["x" * 30]
    assert TOUR["trim"](lines, "1-2,5-6,11-", 20) == ["line 1", "line 2", "...", "line 5", "line 6", "...",
                                                    "x" * 14 + " [...]"]
    assert TOUR["trim"](lines[:3], "1-2", 100) == ["line 1", "line 2", "..."]


def test_parse_reads_commands_options_and_background() -> None:
    blocks = TOUR["parse"]("x\n```console lines=1-3 width=90\n$ oracle a\nout\n$ oracle b &\n```\n```sh\n$ no\n```\n")
    assert len(blocks) == 1 and blocks[0].lines == "1-3" and blocks[0].width == 90
    assert [(c.text, c.shown, c.background) for c in blocks[0].commands] == [("oracle a", ["out"], False),
                                                                             ("oracle b &", [], True)]


def _readme_row(fragment: str) -> None:
    assert fragment in (REPO / "README.md").read_text(), f"the README's three first errors lack {fragment!r}"


def test_the_three_first_errors_are_what_the_tool_says(tmp_path: Path, real_traces: Path) -> None:
    """The README's table quotes the tool: a folder missing ranks, a cut gzip, a trace without ProfilerStep."""
    from tests.conftest import run_oracle

    some = tmp_path / "some_ranks"
    some.mkdir()
    for f in sorted((real_traces / "param" / "dlrm_8rank_kineto").glob("*.json.gz"))[:2]:
        (some / f.name).write_bytes(f.read_bytes())
    p = run_oracle("analyze", some)
    assert p.returncode == 2 and "are missing (pass --partial to analyze the ranks given)" in p.stderr
    _readme_row("are missing (pass --partial to analyze the ranks given)")

    cut = tmp_path / "cut"
    cut.mkdir()
    for f in sorted((REPO / "examples" / "gpt_2rank").glob("rank*.json.gz")):
        data = f.read_bytes()
        (cut / f.name).write_bytes(data[: len(data) // 2] if f.name.startswith("rank1") else data)
    p = run_oracle("analyze", cut)
    assert p.returncode == 2 and "rank1.pt.trace.json.gz: truncated or corrupt gzip" in p.stderr
    _readme_row("rank1.pt.trace.json.gz: truncated or corrupt gzip")

    p = run_oracle("analyze", real_traces / "hta" / "cp_alexnet", env={**os.environ, "COLUMNS": "200"})
    assert p.returncode == 0 and "no steps (no ProfilerStep annotation): the whole trace is one step" in p.stdout
    _readme_row("no steps (no ProfilerStep annotation): the whole trace is one step")


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    heads = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", page.read_text(), flags=re.S), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_every_link_of_the_readme_and_docs_resolves() -> None:
    broken = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for link in re.findall(r"\]\(([^)\s]+)\)", text):
            if link.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = link.partition("#")
            target = (page.parent / path).resolve() if path else page
            if not target.exists() or (anchor and target.suffix == ".md" and anchor not in _anchors(target)):
                broken.append(f"{page.relative_to(REPO)}: {link}")
    assert not broken, "broken links:\n" + "\n".join(broken)
