"""Which teams the cluster page's rankings draw: all of them on a lab's cluster, the ends that
matter on a company's. Pure; ``tests/integration/monitoring/test_cluster_rankings.py`` builds
the charts with the teams' names from the database."""

from monitoring import charts


def test_up_to_the_limit_every_team_is_ranked():
    values = {f"team-{i}": float(i) for i in range(20)}

    assert charts.ranking_ends(values, highest=10, lowest=10) == values
    assert charts.ranking_ends(values, highest=20, lowest=0) == values


def test_beyond_it_the_highest_and_the_lowest_are_kept_ties_by_name():
    values = {f"team-{i:03d}": float(i % 100) for i in range(500)}

    ends = charts.ranking_ends(values, highest=3, lowest=2)

    # 99 is reached by team-099, -199, -299, -399, -499; 0 by team-000, -100, ... -400.
    assert list(ends) == ["team-099", "team-199", "team-299", "team-300", "team-400"]
    assert [ends[name] for name in ends] == [99, 99, 99, 0, 0]
    assert list(charts.ranking_ends(values, highest=2, lowest=0)) == ["team-099", "team-199"]
