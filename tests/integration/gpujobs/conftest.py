"""GPU job tests: see ``fixtures.py`` for the devcluster, worker and watcher fixtures."""

import pytest

from tests.integration.gpujobs.fixtures import (  # noqa: F401 (fixtures)
    gpu_cluster,
    make_gpu_team,
    portal_kubeconfig,
    running_services,
    watcher_process,
)


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    # Factories hash a password per user; the default hasher is deliberately slow.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _plain_static_storage(settings):
    # Pages reference static files by name; the manifest storage used with DEBUG off needs
    # collectstatic first, which these tests have no reason to run.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
