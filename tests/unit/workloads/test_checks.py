"""The pure parts of the submission checks: image registries, environment variables and lists."""

import pytest

from clusters.image_references import parse_image
from workloads import images, specs


@pytest.mark.parametrize(
    ("image", "registry", "qualified"),
    [
        ("busybox", "docker.io", "docker.io/library/busybox"),
        ("busybox:1.36", "docker.io", "docker.io/library/busybox:1.36"),
        ("nvidia/cuda:12.4.0-base", "docker.io", "docker.io/nvidia/cuda:12.4.0-base"),
        ("docker.io/library/python:3", "docker.io", "docker.io/library/python:3"),
        (
            "registry.example.com/vision/trainer:1.4",
            "registry.example.com",
            "registry.example.com/vision/trainer:1.4",
        ),
        ("localhost:5000/x", "localhost:5000", "localhost:5000/x"),
        ("localhost/x", "localhost", "localhost/x"),
        ("nvcr.io/nvidia/pytorch:24.01-py3", "nvcr.io", "nvcr.io/nvidia/pytorch:24.01-py3"),
    ],
)
def test_registry_of_an_image(image, registry, qualified):
    assert images.image_registry(image) == registry
    assert images.qualified_image(image) == qualified


ALLOWED = ["registry.example.com/", "nvcr.io/nvidia"]


@pytest.mark.parametrize(
    ("image", "allowed"),
    [
        ("registry.example.com/vision/trainer:1.4", True),
        ("nvcr.io/nvidia/pytorch:24.01-py3", True),
        ("nvcr.io/other/thing", False),
        ("nvcr.io/nvidia-evil/thing", False),
        ("registry.example.com.evil.net/x", False),
        ("busybox", False),
        ("evil.io/registry.example.com/x", False),
    ],
)
def test_image_must_come_from_an_allowed_registry(image, allowed):
    assert images.image_allowed(image, ALLOWED) is allowed


def test_docker_hub_can_be_allowed_by_name():
    assert images.image_allowed("busybox", ["docker.io"])
    assert images.image_allowed("nvidia/cuda:12", ["docker.io/nvidia/"])
    assert not images.image_allowed("busybox", ["docker.io/nvidia/"])


def test_empty_allow_list_allows_no_image_unless_all_are_allowed():
    assert not images.image_allowed("anything.example/x:1", [])
    assert not images.image_allowed("anything.example/x:1", ["", "  "])
    assert images.image_allowed("anything.example/x:1", [], allow_all=True)


@pytest.mark.parametrize(
    "image",
    [
        "registry.example.com/team/img:1.0",
        "busybox",
        "a/b/c@sha256:" + "a" * 64,
        "ubuntu:22.04",
        "localhost:5000/x_y/z-1:tag.1",
    ],
)
def test_image_reference_shapes_accepted(image):
    assert parse_image(image) is not None


@pytest.mark.parametrize(
    "image", ["Busybox", "busy box", "img:", "img; rm -rf /", "https://registry/x", "-x", "a//b"]
)
def test_image_reference_shapes_refused(image):
    assert parse_image(image) is None


def test_env_from_a_list_of_name_value_pairs():
    errors = {}
    env = specs.read_env([{"name": "A", "value": "1"}, {"name": "B"}], errors=errors)

    assert errors == {}
    assert env == (("A", "1"), ("B", ""))


def test_env_from_a_mapping():
    errors = {}

    assert specs.read_env({"LR": "3e-4"}, errors=errors) == (("LR", "3e-4"),)
    assert errors == {}


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ([{"name": "1BAD", "value": "x"}], "not a valid variable name"),
        ([{"name": "A=B", "value": "x"}], "not a valid variable name"),
        ([{"name": "A"}, {"name": "A"}], "given twice"),
        ([{"name": "A", "value": 3}], "must be a string"),
        ([{"value": "x"}], "must be"),
        ("A=1", "Give environment variables"),
        ([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}], "NVIDIA_* variables decide"),
        ([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}], "NVIDIA_* variables decide"),
        ({"NVIDIA_DRIVER_CAPABILITIES": "all"}, "NVIDIA_* variables decide"),
    ],
)
def test_bad_env_is_refused_with_a_reason(env, fragment):
    errors = {}

    specs.read_env(env, errors=errors)

    assert fragment in errors["env"]


def test_command_as_one_shell_string_is_refused():
    errors = {}

    specs.read_strings("python train.py", errors=errors, key="command", what="command")

    assert "list of strings" in errors["command"]
    assert "never as one shell string" in errors["command"]


def test_command_items_must_be_strings():
    errors = {}

    specs.read_strings(["python", 3], errors=errors, key="command", what="command")

    assert errors["command"] == "Item 1 is not a string."


def test_command_list_is_kept_as_it_is():
    errors = {}
    items = ["sh", "-c", "echo $HOME && ls"]

    assert specs.read_strings(items, errors=errors, key="args", what="arguments") == tuple(items)
    assert errors == {}
