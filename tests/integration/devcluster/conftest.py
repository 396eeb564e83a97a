"""Helpers for the devcluster's own integration tests: a throwaway namespace per test; the
admin clients (``k8s``, ``core``) and GPU pods come from tests/integration."""

import pytest

from tests.integration.kube import create_namespace, delete_namespace


@pytest.fixture
def namespace(core):
    """A fresh namespace for one test, deleted afterwards."""
    name = create_namespace(core, "dc-test")
    yield name
    delete_namespace(core, name)


@pytest.fixture
def other_namespace(core):
    name = create_namespace(core, "dc-test")
    yield name
    delete_namespace(core, name)
