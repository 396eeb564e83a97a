"""A new session's fields: defaults for what is left out, and every bad field named."""

from decimal import Decimal

from interactive.specs import SessionRequest


def test_left_out_fields_take_the_portals_defaults(settings):
    settings.SESSIONS_DEFAULT_IMAGE = "registry.example.com/nb:1"
    request, errors = SessionRequest.read({"name": "explore"})
    assert errors == {}
    assert request.main.image == "registry.example.com/nb:1"
    assert request.gpus == 0
    assert request.main.cpu_cores == Decimal(settings.SESSIONS_DEFAULT_CPU_CORES)
    assert request.max_lifetime_hours == settings.SESSIONS_DEFAULT_LIFETIME_HOURS
    assert request.home_gib == settings.SESSIONS_DEFAULT_HOME_GIB


def test_every_bad_field_is_named():
    _, errors = SessionRequest.read(
        {
            "name": "",
            "image": "UPPER CASE!",
            "gpus": -1,
            "cpu_cores": "lots",
            "max_lifetime_hours": 100000,
            "home_gib": 0,
            "colour": "blue",
        }
    )
    assert set(errors) == {
        "name",
        "image",
        "gpus",
        "cpu_cores",
        "max_lifetime_hours",
        "home_gib",
        "non_field_errors",
    }
    assert "colour" in errors["non_field_errors"]


def test_a_gpu_session_keeps_its_kind_and_model():
    request, errors = SessionRequest.read(
        {"name": "train", "gpus": "2", "gpu_model": "A100", "max_lifetime_hours": 4}
    )
    assert errors == {}
    assert (request.gpus, request.gpu_model, request.max_lifetime_seconds) == (2, "A100", 14400)
