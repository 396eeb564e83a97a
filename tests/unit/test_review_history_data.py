"""The review queue writes each request's grant history directly (``grant_history_data``) rather
than through ``GrantHistorySerializer``, which stays its schema: the two must write the same."""

import pytest

from tenants.api.serializers.review import GrantHistorySerializer, grant_history_data
from tenants.review_history import GrantHistory, Suggestion, UseWindow


@pytest.mark.parametrize(
    ("held", "used", "error"),
    [(720.0, 300.0, ""), (None, None, "No Prometheus is configured for this cluster."), (0, 0, "")],
)
def test_the_history_is_written_as_its_serializer_writes_it(held, used, error):
    windows = tuple(
        UseWindow(
            days=days,
            granted_gpu_hours=8 * 24.0 * days,
            hours_in_force=24 * days - 0.5,
            held_gpu_hours=held,
            used_gpu_hours=used,
            jobs=20,
            jobs_waited=1,
            waited_minutes=10,
        )
        for days in (30, 90)
    )
    history = GrantHistory(
        windows=windows, suggestion=Suggestion(gpus=3, arithmetic="1.2 GPUs held +25%"), error=error
    )

    written = grant_history_data(history)

    assert written == GrantHistorySerializer(history).data
    assert list(written["windows"][0]) == list(GrantHistorySerializer(history).data["windows"][0])
