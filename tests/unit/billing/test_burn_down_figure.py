"""The burn-down figure: spent, the budget over the whole period, the projection from now."""

from monitoring import figures


def test_the_burn_down_draws_spent_budget_and_projection_to_the_periods_end():
    day = 86400
    figure = figures.budget_burn_down(
        days=[0, day, 2 * day],
        spent=[0.0, 10.0, 20.0],
        budget=300.0,
        period=(0, 30 * day),
        projection=(2 * day, 20.0, 300.0),
        title="Burn-down",
    )

    spent, budget, projected = figure["data"]
    assert spent["y"] == [0, 10, 20]
    assert budget["y"] == [300.0, 300.0]
    assert budget["x"] == [0, 30 * day * 1000]
    assert projected["x"] == [2 * day * 1000, 30 * day * 1000]
    assert projected["y"] == [20, 300]


def test_daily_utilisation_leaves_days_without_gpus_empty():
    figure = figures.daily_utilisation(days=[0, 86400], percent=[41.26, None], title="U")

    assert figure["data"][0]["y"] == [41.3, None]
