"""Who gets the next idle GPU, in words (``gpujobs.fair_share``): pure, no database."""

import datetime
from decimal import Decimal

from gpujobs.fair_share import Borrower, next_gpu_sentence, rank_of, ranked, short_model

A100 = "NVIDIA-A100-SXM4-80GB"
T0 = datetime.datetime(2026, 12, 6, 12, 0, tzinfo=datetime.UTC)


def borrower(team_id, name, *, use=0, weight="1", borrowed=0, waiting=1, minute=0, scale=100):
    weight = Decimal(weight)
    effective = (weight / (1 + Decimal(use) / scale)).quantize(Decimal("0.001"))
    return Borrower(
        team_id=team_id,
        name=name,
        weight=weight,
        borrowing_weight=effective,
        decayed_use=use,
        borrowed=borrowed,
        waiting=waiting,
        first_waiting_at=T0 + datetime.timedelta(minutes=minute) if waiting else None,
        first_waiting_gpus=1 if waiting else 0,
        first_waiting_model=A100 if waiting else "",
    )


def test_of_equal_weights_the_lowest_decayed_use_is_next_in_line_whoever_asked_first():
    teams = [
        borrower(1, "nlp", use=900, minute=0),
        borrower(2, "vision", use=310, minute=5),
        borrower(3, "speech", use=450, minute=1),
        borrower(4, "robotics", use=1200, minute=2),
    ]

    assert [b.name for b in ranked(teams)] == ["vision", "speech", "nlp", "robotics"]
    assert rank_of(2, teams) == 1
    assert next_gpu_sentence(2, teams) == (
        "vision is next in line for a borrowed A100: its decayed use 310 GPU-h is the lowest "
        "of 4 waiting teams."
    )


def test_level_shares_go_to_the_job_that_waited_longer():
    teams = [borrower(1, "late", minute=9), borrower(2, "early", minute=1)]

    assert rank_of(2, teams) == 1
    assert "ties with late's, and its job waited longer" in next_gpu_sentence(2, teams)
    assert next_gpu_sentence(1, teams) == (
        "late is 2nd of 2 waiting teams for a borrowed A100: early goes first (level shares, and "
        "its job has waited longer)."
    )


def test_a_team_behind_is_told_who_goes_first_and_by_how_much_use():
    teams = [borrower(1, "heavy", use=66), borrower(2, "another team", use=0, minute=3)]

    sentence = next_gpu_sentence(1, teams)

    assert sentence.startswith("heavy is 2nd of 2 waiting teams for a borrowed A100: another team")
    assert "decayed use 0 GPU-h is lower than heavy's 66 GPU-h" in sentence
    assert "weight 1.000 against 0.602" in sentence


def test_what_a_team_borrows_already_counts_against_it():
    # Twice the weight, but three GPUs borrowed already: (3 + 1) / 2 > (0 + 1) / 1.
    teams = [borrower(1, "big", weight="2", borrowed=3), borrower(2, "small", minute=5)]

    assert [b.name for b in ranked(teams)] == ["small", "big"]
    assert "share after one more 1.00" in next_gpu_sentence(1, teams)


def test_a_team_with_nothing_waiting_is_told_who_is_next_and_is_not_ranked():
    teams = [borrower(1, "idle", waiting=0), borrower(2, "another team", use=12)]

    assert rank_of(1, teams) is None
    assert next_gpu_sentence(1, teams).startswith(
        "idle has no opportunistic job waiting; the next borrowed A100 goes to another team"
    )


def test_the_only_team_waiting_is_next():
    teams = [borrower(1, "solo"), borrower(2, "another team", waiting=0)]

    assert next_gpu_sentence(1, teams) == (
        "solo is next in line for a borrowed A100: it is the only team waiting."
    )
    assert next_gpu_sentence(2, [borrower(2, "x", waiting=0)]).endswith(
        "no other team does either."
    )


def test_models_are_named_short():
    assert short_model(A100) == "A100"
    assert short_model("") == "GPU"
