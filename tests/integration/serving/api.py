"""Shared by the service API and page tests without a cluster: grants, a deploy body, and
deploying through the API."""

import datetime

from django.utils import timezone

from tests import factories


def grant_gpus(team, cluster, *, gpus: int, lead, admin):
    today = timezone.localdate()
    return factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__requested_by=lead,
        request__gpus=gpus,
        request__starts_on=today,
        request__ends_on=today + datetime.timedelta(days=30),
        granted_by=admin,
    )


def deploy_body(**overrides) -> dict:
    data = {
        "team": "vision",
        "cluster": "gpu-east",
        "name": "llm",
        "image": "registry.example.com/vision/llm-server:2.1",
        "command": ["python", "-m", "serve"],
        "env": [{"name": "MODEL", "value": "llama-3-8b"}],
        "gpus": 1,
        "replicas": 2,
        "port": 8000,
        "probe": "http",
        "probe_path": "/healthz",
        "sidecar": {
            "image": "registry.example.com/vision/tokenizer:1.0",
            "cpu_cores": "1",
            "memory_gib": "0.5",
        },
    }
    data.update(overrides)
    return data


def deploy(api, user, **overrides) -> dict:
    response = api.as_user(user).post("/api/v1/services/", deploy_body(**overrides))
    assert response.status_code == 201, response.data
    return response.data
