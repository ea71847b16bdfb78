"""The text helpers every human output uses: names cut in the middle, evidence cut to a clause."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bottleneck_oracle.cli._render import brief, middle, ranks_text


@given(st.text(min_size=0, max_size=200), st.integers(min_value=2, max_value=120))
def test_middle_fits_and_keeps_both_ends(text: str, width: int) -> None:
    cut = middle(text, width)
    assert len(cut) == min(len(text), width)
    if len(text) > width:
        assert cut[width // 2] == "…"
        assert text.startswith(cut[:width // 2]) and text.endswith(cut[width // 2 + 1:])
    else:
        assert cut == text


def test_middle_keeps_an_op_names_namespace_and_end() -> None:
    name = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"
    assert middle(name, 30) == "autograd::engin…AccumulateGrad"
    assert middle(name, len(name)) == name


def test_brief_takes_the_first_clause_and_drops_parentheses_then_clauses() -> None:
    evidence = ("thread 12485 (python) ran no profiled op for 150.248 ms (0.0 ms into the step), between "
                "'step start' and 'aten::select'; capped at 146.537 ms, what rank 1's step took beyond its median")
    assert brief(evidence, 200) == evidence.split("; ")[0]
    assert brief(evidence, 90) == ("thread 12485 ran no profiled op for 150.248 ms, between 'step start' and "
                                   "'aten::select'")
    assert brief(evidence, 60) == "thread 12485 ran no profiled op for 150.248 ms"
    cut = brief(evidence, 30)
    assert len(cut) <= 30 and cut.endswith("…") and cut.startswith("thread 12485 ran")


def test_brief_cuts_long_quoted_names_in_the_middle() -> None:
    name = "x" * 20 + "::" + "y" * 40
    text = brief(f"a wait between '{name}' and 'b'", 200)
    assert f"'{middle(name, 32)}'" in text


def test_ranks_text_gives_runs() -> None:
    assert ranks_text([7, 0, 1, 2, 3]) == "0-3,7"
    assert ranks_text([4]) == "4" and ranks_text([]) == "all"
