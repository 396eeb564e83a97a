"""Every image from the cluster's allowed registries, read as ``clusters.image_references``
reads it, step by step in CEL."""

from __future__ import annotations

from clusters.image_references import (
    DOCKER_HUB,
    LEGACY_DOCKER_HUB,
    MAX_NAME_LENGTH,
    OFFICIAL_PREFIX,
    REFERENCE_PATTERN,
)
from reconcile.admission_policies.cel import CONTAINER_LISTS, cel_string
from reconcile.admission_policies.rules import ClusterRules

# How each image is read, step by step, as ``clusters.image_references`` reads it. CEL has no
# local variables: each step is a policy variable holding a list of maps, whose values the next
# step reads back as strings.
_I, _N, _F, _R = "string(e.image)", "string(e.name)", "string(e.first)", "string(e.rest)"
_IMAGE_STEPS = (
    (
        "images",
        " + ".join(
            f"object.spec.{field}.map(c, c.image)"
            if field == "containers"
            else f"(has(object.spec.{field}) ? object.spec.{field}.map(c, c.image) : [])"
            for field in CONTAINER_LISTS
        ),
    ),
    # The name: the image without its digest, then without its tag (a ':' after the last '/').
    (
        "imageDigestless",
        "variables.images.map(i, {'image': i, "
        "'name': i.indexOf('@') < 0 ? i : i.substring(0, i.indexOf('@'))})",
    ),
    (
        "imageNames",
        f"variables.imageDigestless.map(e, {{'image': {_I}, "
        f"'name': {_N}.lastIndexOf(':') > {_N}.lastIndexOf('/') ? "
        f"{_N}.substring(0, {_N}.lastIndexOf(':')) : {_N}}})",
    ),
    # The first component, and the rest after it.
    (
        "imageParts",
        f"variables.imageNames.map(e, {{'image': {_I}, 'name': {_N}, "
        f"'first': {_N}.indexOf('/') < 0 ? '' : {_N}.substring(0, {_N}.indexOf('/')), "
        f"'rest': {_N}.substring({_N}.indexOf('/') + 1)}})",
    ),
    # The repository: a first component with '.', ':', upper case, or 'localhost' is a host
    # (lower-cased; index.docker.io is docker.io); otherwise the name is on Docker Hub; a Docker
    # Hub path of one component is an official image, under library/.
    (
        "imageRepositories",
        f"variables.imageParts.map(e, {{'image': {_I}, 'name': {_N}, 'repository': "
        f"({_F} != '' && ({_F}.contains('.') || {_F}.contains(':') || "
        f"{_F} == 'localhost' || {_F}.lowerAscii() != {_F})) ? "
        f"(({_F}.lowerAscii() == '{DOCKER_HUB}' || {_F}.lowerAscii() == "
        f"'{LEGACY_DOCKER_HUB}') ? ({_R}.contains('/') ? '{DOCKER_HUB}/' + {_R} : "
        f"'{DOCKER_HUB}/{OFFICIAL_PREFIX}' + {_R}) : {_F}.lowerAscii() + '/' + {_R}) : "
        f"({_N}.contains('/') ? '{DOCKER_HUB}/' + {_N} : "
        f"'{DOCKER_HUB}/{OFFICIAL_PREFIX}' + {_N})}})",
    ),
)


def _allowed_repository(entries: tuple[str, ...]) -> str:
    """Whether the repository is an entry or below one, by whole components."""
    if not entries:
        return "false"
    repository = "string(e.repository)"
    return " || ".join(
        f"{repository} == {cel_string(entry)} || {repository}.startsWith({cel_string(entry + '/')})"
        for entry in entries
    )


def _refused_images(entries: tuple[str, ...]) -> str:
    reference = f"{_I}.matches(r'{REFERENCE_PATTERN}')"
    return (
        f"variables.imageRepositories.filter(e, !({reference} && "
        f"size({_N}) <= {MAX_NAME_LENGTH} && ({_allowed_repository(entries)})))"
        f".map(e, {_I})"
    )


def registries_in_words(rules: ClusterRules) -> str:
    return ", ".join(rules.allowed_registries) or "none"


def image_rules(rules: ClusterRules) -> tuple[list[dict], list[dict]]:
    """(variables, validations) of the pods policy that refuse an image from a registry the
    cluster does not allow; none when it allows all."""
    if rules.allow_all_registries:
        return [], []
    steps = [*_IMAGE_STEPS, ("refusedImages", _refused_images(rules.allowed_registries))]
    variables = [{"name": name, "expression": expression} for name, expression in steps]
    allowed = registries_in_words(rules)
    validations = [
        {
            "expression": "size(variables.refusedImages) == 0",
            "messageExpression": cel_string(
                f"Images must come from the registries this cluster allows ({allowed}): "
            )
            + " + variables.refusedImages.join(', ')",
            "reason": "Forbidden",
        }
    ]
    return variables, validations
