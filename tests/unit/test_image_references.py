"""Image references read as the container runtime reads them (distribution/reference's
ParseNormalizedNamed), and the registry entries of an allow-list."""

import pytest

from clusters.image_references import (
    parse_image,
    parse_registry_entry,
    registry_entries,
    repository_allowed,
)


@pytest.mark.parametrize(
    ("image", "repository"),
    [
        ("busybox", "docker.io/library/busybox"),
        ("busybox:1.36", "docker.io/library/busybox"),
        ("docker.io/busybox", "docker.io/library/busybox"),
        ("index.docker.io/busybox", "docker.io/library/busybox"),
        ("library/busybox", "docker.io/library/busybox"),
        ("team/trainer", "docker.io/team/trainer"),
        ("nvidia/cuda:12.4.0-base", "docker.io/nvidia/cuda"),
        ("registry.example.com/vision/trainer:1.4", "registry.example.com/vision/trainer"),
        ("REGISTRY.Example.com/vision/trainer", "registry.example.com/vision/trainer"),
        ("Team/trainer", "team/trainer"),  # an upper-case first component is a host
        ("localhost/x", "localhost/x"),
        ("localhost:5000/x_y/z-1:tag.1", "localhost:5000/x_y/z-1"),
        ("registry.example.com:5000/x", "registry.example.com:5000/x"),
        ("[::1]:5000/x", "[::1]:5000/x"),
        ("localhost:5000", "docker.io/library/localhost"),  # a name and a tag
        ("a/b/c@sha256:" + "a" * 64, "docker.io/a/b/c"),
        ("registry.example.com/x:1@sha256:" + "b" * 64, "registry.example.com/x"),
    ],
)
def test_an_image_is_read_as_the_runtime_reads_it(image, repository):
    assert parse_image(image).repository == repository


@pytest.mark.parametrize(
    "image",
    [
        "Busybox",  # the path is lower case
        "registry.example.com/Vision/trainer",
        "busy box",
        "img:",
        "img; rm -rf /",
        "https://registry/x",
        "-x",
        "a//b",
        "registry.example.com/x@sha256:short",
        "x:" + "t" * 129,
        "registry.example.com/" + "a" * 250,  # a name longer than 255
        "",
        "régistry.example.com/x",
    ],
)
def test_what_the_runtime_would_refuse_is_no_reference(image):
    assert parse_image(image) is None


@pytest.mark.parametrize(
    ("entry", "normalised"),
    [
        ("registry.example.com", "registry.example.com"),
        ("registry.example.com/", "registry.example.com"),
        ("Registry.Example.com/vision", "registry.example.com/vision"),
        ("localhost:5000", "localhost:5000"),
        ("docker.io/library", "docker.io/library"),
        ("index.docker.io/nvidia", "docker.io/nvidia"),
        (" nvcr.io/nvidia ", "nvcr.io/nvidia"),
    ],
)
def test_a_registry_entry_is_normalised(entry, normalised):
    assert parse_registry_entry(entry) == normalised


@pytest.mark.parametrize(
    "entry", ["busybox", "nvidia/cuda", "https://x.io", "registry.example.com/Team", "", "a b.io"]
)
def test_an_entry_that_names_no_registry_host_is_refused(entry):
    assert parse_registry_entry(entry) is None


def test_entries_admit_their_repository_and_below_by_whole_components():
    entries = registry_entries(["registry.example.com/vision", "docker.io/library"])

    assert repository_allowed("registry.example.com/vision", entries)
    assert repository_allowed("registry.example.com/vision/trainer", entries)
    assert repository_allowed("docker.io/library/busybox", entries)
    assert not repository_allowed("registry.example.com/visionary/x", entries)
    assert not repository_allowed("registry.example.com/speech/x", entries)
    assert not repository_allowed("docker.io/nvidia/cuda", entries)
    assert not repository_allowed("anything", [])
