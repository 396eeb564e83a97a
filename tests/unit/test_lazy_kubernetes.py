"""The kubernetes client loads lazily (``clusters.lazy_kubernetes``): a process that uses only
what the watcher uses never imports the generated API classes and models, and one that uses more
gets the whole package, as if nothing had been deferred. Each check runs in a fresh interpreter
(this one has imported ``kubernetes`` whole already)."""

import subprocess
import sys
import textwrap
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_python(program: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_watchers_clients_import_no_model_or_api_class():
    out = run_python(
        """
        import sys
        import django
        django.setup()  # as manage.py watch_jobs: every app's models and their imports
        import clusters.kube, clusters.workloads, clusters.leases, gpujobs.watcher, serving.watcher
        from kubernetes.client import ApiClient, Configuration
        from kubernetes.client.rest import ApiException
        loaded = [m for m in sys.modules if m.startswith("kubernetes.client.")]
        print(sorted(loaded))
        print(any(m.startswith(("kubernetes.client.models.", "kubernetes.client.api."))
                  for m in sys.modules))
        print(ApiClient.__module__, Configuration.__module__, ApiException.__module__)
        """
    )
    modules, heavy, origins = out.splitlines()
    assert heavy == "False", modules
    assert origins == (
        "kubernetes.client.api_client kubernetes.client.configuration kubernetes.client.exceptions"
    )


def test_any_other_name_loads_the_whole_package_on_first_use():
    out = run_python(
        """
        import sys
        import django
        django.setup()
        import kubernetes
        from kubernetes import client, config, stream, watch
        print("kubernetes.client.models.v1_job" in sys.modules)
        print(kubernetes.__version__ != "")
        print(client.CoreV1Api.__name__, client.V1Job.__name__, client.models.V1Pod.__name__)
        print(client.ApiException is client.rest.ApiException)
        print(len(client.models.__dict__) > 500, config.ConfigException.__name__)
        """
    )
    assert out.splitlines() == [
        "False",
        "True",
        "CoreV1Api V1Job V1Pod",
        "True",
        "True ConfigException",
    ]


def test_a_missing_name_is_still_an_attribute_error():
    out = run_python(
        """
        import django
        django.setup()
        from kubernetes import client
        try:
            client.NoSuchThing
        except AttributeError as error:
            print("AttributeError", error)
        print(hasattr(client.models, "NoSuchModel"))
        """
    )
    assert out.splitlines()[0].startswith("AttributeError")
    assert out.splitlines()[1] == "False"


def test_nothing_is_deferred_when_kubernetes_was_imported_first():
    out = run_python(
        """
        import sys
        import kubernetes
        import django
        django.setup()
        print("kubernetes.client.models.v1_job" in sys.modules)
        """
    )
    assert out == "True"
