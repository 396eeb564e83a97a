"""The job request's shape: one pass names every bad field, values are read the way the API and
the form send them, and a stored job gives back the request it was made from. No database."""

from decimal import Decimal
from types import SimpleNamespace

import pytest
from django.core.exceptions import ValidationError

from gpujobs.specs import JobRequest, PreprocessMode, PreprocessRequest
from workloads.specs import ContainerRequest


def parse_errors(data) -> dict:
    with pytest.raises(ValidationError) as caught:
        JobRequest.parse(data)
    return caught.value.message_dict


def test_every_bad_field_is_named_in_one_pass():
    errors = parse_errors(
        {
            "name": "-bad-",
            "image": "Not An Image",
            "command": "python train.py",
            "env": [{"name": "1X", "value": "y"}],
            "gpus": 0,
            "cpu_cores": "1.234",
            "max_runtime_seconds": 0,
            "backoff_limit": 11,
            "annotations": {"not a key": "x"},
            "preprocess": {"image": "cleaner", "mode": "after"},
        }
    )

    assert set(errors) == {
        "name",
        "image",
        "command",
        "env",
        "gpus",
        "cpu_cores",
        "max_runtime_seconds",
        "backoff_limit",
        "annotations",
        "preprocess",
    }
    assert errors["cpu_cores"] == ["CPU cores takes at most two decimal places."]
    assert errors["preprocess"] == [
        "mode: Mode must be 'before' (an init container) or 'beside' (alongside)."
    ]


def test_a_missing_image_and_gpu_count_are_named():
    errors = parse_errors({"name": "x"})

    assert errors["image"] == [
        "Give the container image, e.g. registry.example.com/team/trainer:1.2."
    ]
    assert errors["gpus"] == ["GPUs must be a whole number."]


def test_whole_numbers_may_come_as_digits_but_never_as_booleans():
    assert JobRequest.parse({"name": "x", "image": "busybox", "gpus": " 2 "}).gpus == 2
    assert "gpus" in parse_errors({"name": "x", "image": "busybox", "gpus": True})
    assert "gpus" in parse_errors({"name": "x", "image": "busybox", "gpus": "2.5"})


def test_defaults_and_surrounding_spaces():
    request = JobRequest.parse({"name": " bert ", "image": " busybox:1 ", "gpus": 1})

    assert request.name == "bert"
    assert request.main == ContainerRequest(image="busybox:1")
    assert request.gpu_resource == "nvidia.com/gpu"
    assert request.backoff_limit == 0
    assert request.max_runtime_seconds == 86400


def test_unknown_preprocessing_keys_are_refused():
    errors = parse_errors(
        {"name": "x", "image": "busybox", "gpus": 1, "preprocess": {"image": "a", "env": []}}
    )

    assert errors["preprocess"][0].startswith("Unknown keys env; allowed:")


def test_a_stored_job_gives_back_its_request():
    request = JobRequest(
        name="bert",
        main=ContainerRequest(
            image="registry.example.com/vision/trainer:1.4",
            command=("python", "train.py"),
            args=("--lr", "3e-4"),
            env=(("B", "2"), ("A", "1")),
            cpu_cores=Decimal("1.5"),
            memory_gib=Decimal("8"),
        ),
        gpus=2,
        max_runtime_seconds=600,
        gpu_model="NVIDIA-H100-80GB-HBM3",
        backoff_limit=1,
        preprocess=PreprocessRequest(
            container=ContainerRequest(image="cleaner:1", cpu_cores=Decimal("0.5")),
            mode=PreprocessMode.BESIDE,
        ),
        annotations=(("example.com/a", "1"), ("example.com/b", "2")),
    )

    assert JobRequest.from_model(SimpleNamespace(**request.model_fields())) == request


def test_a_job_is_guaranteed_unless_it_asks_to_be_opportunistic():
    base = {"name": "j", "image": "registry.example.com/a:1", "gpus": 1}

    assert JobRequest.parse(base).priority == "guaranteed"
    assert JobRequest.parse({**base, "priority": "opportunistic"}).priority == "opportunistic"
    assert parse_errors({**base, "priority": "urgent"})["priority"] == [
        "Choose 'guaranteed' or 'opportunistic'. Guaranteed: runs within the team's own quota "
        "and is never preempted. Opportunistic: may also borrow GPUs other teams leave idle, and "
        "is preempted (then requeued) when they need them back."
    ]
