"""The pieces of offline answers: templates, deltas, and how sure a prediction is."""

from bottleneck_oracle.agent.answer_text import confidence_of, moved, rank_list, signed, template, whatif_check


def test_deltas_are_signed_and_small_ones_left_out() -> None:
    assert signed(1.5) == "+1.5 ms" and signed(-2.0) == "-2.0 ms"
    assert moved({"idle": 153.454, "cpu": -2.207, "io": 0.0001}) == "idle +153.454 ms; cpu -2.207 ms"
    assert moved({}) == "nothing" and rank_list([]) == "all" and rank_list([0, 3]) == "0, 3"
    assert rank_list([8, 0, 1, 2, 3, 9, 10, 11, 12, 13, 14, 15]) == "8, 0-3, 9-15"  # in the order given


def test_confidence_is_high_only_when_the_predictors_agree() -> None:
    assert confidence_of({"replay": 32.947, "gnn_replay": 33.1}, "replay").startswith("high: the predictors agree")
    assert confidence_of({"replay": 32.9, "gnn": 60.0}, "gnn") == "medium: trusted gnn; replay 32.9 ms, gnn 60.0 ms"
    assert confidence_of({"replay": 41.25}, "replay") == "medium: only replay predicted it"


def test_the_check_is_a_whatif_command_then_a_reprofile() -> None:
    check = whatif_check("gpt_2rank", "fix host_pause", 5)
    assert check.startswith("oracle whatif gpt_2rank --edit 'fix host_pause' --step 5")
    assert whatif_check("t", "fix host_pause step=5", 5).startswith("oracle whatif t --edit 'fix host_pause' --step 5;")
    assert "re-profile and run oracle diff gpt_2rank" in check and "--step" not in whatif_check(None, "fix x", None)
    assert template("error", error="boom") == "I cannot answer this: boom"
