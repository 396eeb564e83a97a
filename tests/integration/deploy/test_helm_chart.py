"""The Helm chart (deploy/helm/gpu-portal) with the Helm that `devcluster build` builds from its
Go module: `helm lint` passes, `helm template` renders what the portal needs with the default
values and with overrides, its RBAC is deploy/'s rule for rule, and a value of the wrong type is
refused with an error naming it (values.schema.json). The API server's verdict on the rendered
manifests is test_chart_on_the_cluster.py's."""

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from tests.dockerfile import dockerfile_command
from tests.integration.conftest import REPO_ROOT
from tests.integration.deploy.conftest import CHART, OIDC, by_kind_and_name, sets

pytestmark = [pytest.mark.integration]

DEPLOY = REPO_ROOT / "deploy"
COMPONENTS = ("web", "worker", "webhook-worker", "beat", "watcher")


def deploy_objects(name: str) -> dict[tuple[str, str], dict]:
    return by_kind_and_name([doc for doc in yaml.safe_load_all((DEPLOY / name).read_text())])


def container(objects, name: str) -> dict:
    (found,) = by_kind_and_name(objects)[("Deployment", f"portal-gpu-portal-{name}")]["spec"][
        "template"
    ]["spec"]["containers"]
    return found


def test_lint_passes_strictly(helm):
    result = helm.run("lint", "--strict", str(CHART), *sets(None))

    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


def test_the_default_values_render_every_component(helm):
    objects = by_kind_and_name(helm.objects())

    assert set(objects) == {
        ("ConfigMap", "portal-gpu-portal"),
        ("Secret", "portal-gpu-portal"),
        ("ServiceAccount", "gpu-portal"),
        ("ClusterRole", "gpu-portal"),
        ("ClusterRoleBinding", "gpu-portal"),
        ("Role", "gpu-portal-leases"),
        ("RoleBinding", "gpu-portal-leases"),
        ("ClusterRole", "gpu-portal-viewer"),
        ("ClusterRole", "gpu-portal-member"),
        ("ClusterRole", "gpu-portal-lead"),
        ("ValidatingAdmissionPolicy", "gpu-portal-confinement"),
        ("ValidatingAdmissionPolicyBinding", "gpu-portal-confinement"),
        *(("Deployment", f"portal-gpu-portal-{name}") for name in COMPONENTS),
        ("Job", "portal-gpu-portal-migrate"),
        ("Service", "portal-gpu-portal"),
        ("PodDisruptionBudget", "portal-gpu-portal-web"),
        ("PodDisruptionBudget", "portal-gpu-portal-watcher"),
    }


def test_each_component_runs_the_images_own_command(helm):
    objects = helm.objects(values={"web.workers": 5})
    server = dockerfile_command()

    assert container(objects, "web")["command"] == [*server[:-1], "5"]
    assert server[-2] == "--workers"
    assert container(objects, "worker")["command"][:4] == ["celery", "-A", "portal", "worker"]
    assert "-Q" not in container(objects, "worker")["command"]
    assert container(objects, "webhook-worker")["command"] == [
        "celery",
        "-A",
        "portal",
        "worker",
        "-Q",
        "webhooks",
        "--loglevel=INFO",
        "--concurrency=4",
    ]
    assert container(objects, "beat")["command"][:4] == ["celery", "-A", "portal", "beat"]
    assert container(objects, "watcher")["command"] == ["python", "manage.py", "watch_jobs"]
    job = by_kind_and_name(objects)[("Job", "portal-gpu-portal-migrate")]
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "python",
        "manage.py",
        "migrate",
        "--noinput",
    ]


def test_the_web_pods_are_probed_on_healthz_and_readyz(helm):
    web = container(helm.objects(), "web")

    assert web["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert web["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert web["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert web["ports"] == [{"name": "http", "containerPort": 8000}]
    assert web["resources"]["requests"] == {"cpu": "250m", "memory": "512Mi"}


def test_every_component_reads_the_settings_and_only_some_get_a_token(helm):
    objects = helm.objects()
    tokens = {}
    for name in COMPONENTS:
        pod = by_kind_and_name(objects)[("Deployment", f"portal-gpu-portal-{name}")]["spec"][
            "template"
        ]["spec"]
        assert pod["containers"][0]["envFrom"] == [
            {"configMapRef": {"name": "portal-gpu-portal"}},
            {"secretRef": {"name": "portal-gpu-portal"}},
        ]
        assert pod["containers"][0]["resources"]["requests"]
        assert pod["serviceAccountName"] == "gpu-portal"
        tokens[name] = pod["automountServiceAccountToken"]

    assert tokens == {
        "web": True,
        "worker": True,
        "webhook-worker": False,
        "beat": False,
        "watcher": True,
    }


def test_settings_go_to_the_configmap_and_secrets_to_the_secret(helm):
    objects = by_kind_and_name(
        helm.objects(
            namespace="portal-ns",
            values={
                "config.allowedHosts": "{portal.example.com,portal.internal}",
                "config.env.GPUJOBS_CLAIM_SECONDS": "90",
                "secrets.cacheUrl": "redis://redis.db:6379/1",
                **OIDC,
            },
        )
    )
    config = objects[("ConfigMap", "portal-gpu-portal")]["data"]
    secret = objects[("Secret", "portal-gpu-portal")]["stringData"]

    assert config["PORTAL_NAMESPACE"] == "portal-ns"
    assert config["PORTAL_NAME"] == "gpu-portal"
    assert config["DJANGO_DEBUG"] == "0"
    assert config["DJANGO_ALLOWED_HOSTS"] == "portal.example.com,portal.internal"
    assert config["GPUJOBS_CLAIM_SECONDS"] == "90"
    assert {name: value for name, value in config.items() if name.startswith("OIDC_")} == {
        "OIDC_ENABLED": "1",
        "OIDC_PROVIDER_NAME": "Keycloak",
        "OIDC_RP_CLIENT_ID": "portal",
        "OIDC_OP_AUTHORIZATION_ENDPOINT": "https://sso.example.org/auth",
        "OIDC_OP_TOKEN_ENDPOINT": "https://sso.example.org/token",
        "OIDC_OP_USER_ENDPOINT": "https://sso.example.org/userinfo",
        "OIDC_OP_JWKS_ENDPOINT": "https://sso.example.org/certs",
        "OIDC_RP_SCOPES": "openid email profile",
        "OIDC_RP_SIGN_ALGO": "RS256",
        "OIDC_USERNAME_CLAIM": "preferred_username",
        "OIDC_GROUPS_CLAIM": "groups",
        "OIDC_GROUP_MAPPING": config["OIDC_GROUP_MAPPING"],
        "OIDC_SIGN_IN_MAX_AGE_HOURS": "8",
    }
    assert json.loads(config["OIDC_GROUP_MAPPING"]) == {
        "gpu-vision-leads": {"team": "vision", "role": "lead"},
        "gpu-admins": {"admin": True},
    }
    assert secret == {
        "DJANGO_SECRET_KEY": "chart-test-only-" + "k" * 40,
        "DATABASE_URL": "postgres://portal:pw@postgres.db:5432/portal?connect_timeout=3",
        "CELERY_BROKER_URL": "redis://redis.db:6379/0",
        "DJANGO_CACHE_URL": "redis://redis.db:6379/1",
        "OIDC_RP_CLIENT_SECRET": "s3cret",
    }
    assert not set(secret) & set(config)


def test_single_sign_on_is_off_by_default_and_its_settings_absent(helm):
    config = by_kind_and_name(helm.objects())[("ConfigMap", "portal-gpu-portal")]["data"]

    assert [name for name in config if name.startswith("OIDC_")] == ["OIDC_ENABLED"]
    assert config["OIDC_ENABLED"] == "0"


def test_single_sign_on_settings_are_ones_the_portal_starts_with(helm, tmp_path):
    """The rendered ConfigMap and Secret as the pods' environment: the settings load, the group
    mapping passes the portal's own check, and the backend is on."""
    objects = by_kind_and_name(helm.objects(values=OIDC))
    env = {
        **objects[("ConfigMap", "portal-gpu-portal")]["data"],
        **objects[("Secret", "portal-gpu-portal")]["stringData"],
    }
    env = {**{k: v for k, v in os.environ.items() if k in ("PATH", "LANG")}, **env}
    env["HOME"] = str(tmp_path)
    code = (
        "from django.conf import settings; import json; "
        "from tenants.group_mapping import parse_group_mapping; "
        "parse_group_mapping(settings.OIDC_GROUP_MAPPING); "
        "print(json.dumps([settings.AUTHENTICATION_BACKENDS, settings.OIDC_SIGN_IN_MAX_AGE_HOURS]))"
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    backends, hours = json.loads(result.stdout.strip().splitlines()[-1])
    assert "accounts.oidc.PortalOIDCBackend" in backends
    assert hours == 8


def test_the_migration_job_runs_before_install_and_upgrade_after_the_settings(helm):
    objects = by_kind_and_name(helm.objects())
    job = objects[("Job", "portal-gpu-portal-migrate")]["metadata"]["annotations"]
    config = objects[("ConfigMap", "portal-gpu-portal")]["metadata"]["annotations"]
    secret = objects[("Secret", "portal-gpu-portal")]["metadata"]["annotations"]

    assert job["helm.sh/hook"] == "pre-install,pre-upgrade"
    # The settings are restored by a rollback too (Helm re-creates no other hook then).
    assert (
        config["helm.sh/hook"] == secret["helm.sh/hook"] == "pre-install,pre-upgrade,pre-rollback"
    )
    assert int(config["helm.sh/hook-weight"]) < int(job["helm.sh/hook-weight"])
    assert int(secret["helm.sh/hook-weight"]) < int(job["helm.sh/hook-weight"])


def test_webhook_deliveries_go_to_the_queue_the_webhook_worker_reads(helm):
    for values, queue in [
        ({}, "webhooks"),
        ({"webhookWorker.queue": "hooks", "webhookWorker.concurrency": 8}, "hooks"),
    ]:
        objects = helm.objects(values=values)
        command = container(objects, "webhook-worker")["command"]
        config = by_kind_and_name(objects)[("ConfigMap", "portal-gpu-portal")]["data"]

        assert command[command.index("-Q") + 1] == queue
        assert config["WEBHOOKS_QUEUE"] == queue
        if values:
            assert command[-1] == "--concurrency=8"


def test_the_webhook_worker_is_small_and_apart(helm):
    objects = by_kind_and_name(helm.objects(values={"webhookWorker.replicas": 2}))
    deployment = objects[("Deployment", "portal-gpu-portal-webhook-worker")]["spec"]
    worker = objects[("Deployment", "portal-gpu-portal-worker")]["spec"]

    assert deployment["replicas"] == 2
    assert deployment["selector"]["matchLabels"]["app.kubernetes.io/component"] == "webhook-worker"
    assert deployment["selector"]["matchLabels"] != worker["selector"]["matchLabels"]
    assert deployment["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "50m", "memory": "256Mi"},
        "limits": {"memory": "512Mi"},
    }


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"config.env.WEBHOOKS_QUEUE": "other"}, "set webhookWorker.queue, not WEBHOOKS_QUEUE"),
        ({"secrets.env.WEBHOOKS_QUEUE": "other"}, "set webhookWorker.queue, not WEBHOOKS_QUEUE"),
        ({"webhookWorker.queue": "celery"}, "webhookWorker.queue must differ"),
        (
            {"config.env.CELERY_TASK_DEFAULT_QUEUE": "main", "webhookWorker.queue": "main"},
            "webhookWorker.queue must differ",
        ),
    ],
)
def test_a_webhook_queue_the_worker_would_not_read_alone_is_refused(helm, values, complaint):
    result = helm.run("template", "portal", str(CHART), *sets(values))

    assert result.returncode != 0
    assert complaint in result.stderr


def test_one_beat_two_electing_watchers_and_disruption_budgets(helm):
    objects = by_kind_and_name(helm.objects(values={"web.replicas": 3}))
    beat = objects[("Deployment", "portal-gpu-portal-beat")]["spec"]
    watcher = objects[("Deployment", "portal-gpu-portal-watcher")]["spec"]
    web = objects[("Deployment", "portal-gpu-portal-web")]["spec"]
    budget = objects[("PodDisruptionBudget", "portal-gpu-portal-web")]["spec"]
    watcher_budget = objects[("PodDisruptionBudget", "portal-gpu-portal-watcher")]["spec"]
    config = objects[("ConfigMap", "portal-gpu-portal")]["data"]

    assert (beat["replicas"], beat["strategy"]["type"]) == (1, "Recreate")
    assert (watcher["replicas"], watcher["strategy"]["type"]) == (2, "RollingUpdate")
    assert config["GPUJOBS_WATCHER_LEADER_ELECTION"] == "1"
    assert config["GPUJOBS_WATCHER_LEASE_SECONDS"] == "15"
    assert config["GPUJOBS_WATCHER_RENEW_SECONDS"] == "5"
    assert watcher_budget["minAvailable"] == 1
    assert watcher_budget["selector"]["matchLabels"] == watcher["selector"]["matchLabels"]
    assert web["replicas"] == 3
    assert budget["minAvailable"] == 1
    assert budget["selector"]["matchLabels"] == web["selector"]["matchLabels"]
    service = objects[("Service", "portal-gpu-portal")]["spec"]
    assert service["selector"] == web["selector"]["matchLabels"]


def test_more_watchers_and_other_lease_timings(helm):
    objects = by_kind_and_name(
        helm.objects(
            values={
                "watcher.replicas": 3,
                "watcher.leaderElection.leaseSeconds": 30,
                "watcher.leaderElection.renewSeconds": 3,
            }
        )
    )
    watcher = objects[("Deployment", "portal-gpu-portal-watcher")]["spec"]
    config = objects[("ConfigMap", "portal-gpu-portal")]["data"]

    assert (watcher["replicas"], watcher["strategy"]["type"]) == (3, "RollingUpdate")
    assert ("PodDisruptionBudget", "portal-gpu-portal-watcher") in objects
    assert config["GPUJOBS_WATCHER_LEASE_SECONDS"] == "30"
    assert config["GPUJOBS_WATCHER_RENEW_SECONDS"] == "3"


def test_without_leader_election_one_watcher_recreated(helm):
    objects = by_kind_and_name(
        helm.objects(values={"watcher.leaderElection.enabled": "false", "watcher.replicas": 1})
    )
    watcher = objects[("Deployment", "portal-gpu-portal-watcher")]["spec"]

    assert (watcher["replicas"], watcher["strategy"]["type"]) == (1, "Recreate")
    assert ("PodDisruptionBudget", "portal-gpu-portal-watcher") not in objects
    assert (
        objects[("ConfigMap", "portal-gpu-portal")]["data"]["GPUJOBS_WATCHER_LEADER_ELECTION"]
        == "0"
    )


def test_a_renewal_as_long_as_the_lease_is_refused(helm):
    result = helm.run(
        "template",
        "portal",
        str(CHART),
        *sets(
            {"watcher.leaderElection.leaseSeconds": 10, "watcher.leaderElection.renewSeconds": 10}
        ),
    )

    assert result.returncode != 0
    assert "watcher.leaderElection.renewSeconds must be less than leaseSeconds" in result.stderr


def test_the_rbac_is_deploys_rule_for_rule(helm):
    rendered = by_kind_and_name(helm.objects())
    expected = {
        **deploy_objects("rbac.yaml"),
        **deploy_objects("team-roles.yaml"),
        **deploy_objects("portal-confinement.yaml"),
    }

    roles = [key for key in expected if key[0] in ("ClusterRole", "Role")]
    assert ("Role", "gpu-portal-leases") in roles
    for key in roles:
        assert rendered[key]["rules"] == expected[key]["rules"], key
    for key in [("ClusterRoleBinding", "gpu-portal"), ("RoleBinding", "gpu-portal-leases")]:
        assert rendered[key]["roleRef"] == expected[key]["roleRef"], key
        assert rendered[key]["subjects"] == expected[key]["subjects"], key
    for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
        key = (kind, "gpu-portal-confinement")
        assert rendered[key]["spec"] == expected[key]["spec"], key


def test_another_portal_name_and_namespace_renames_the_roles_and_the_confinement(helm):
    objects = by_kind_and_name(helm.objects(namespace="lab", values={"portalName": "lab-portal"}))
    role = objects[("ClusterRole", "lab-portal")]
    policy = objects[("ValidatingAdmissionPolicy", "lab-portal-confinement")]["spec"]

    assert ("ClusterRole", "lab-portal-lead") in objects
    bind = [rule for rule in role["rules"] if rule["verbs"] == ["bind"]]
    assert bind[0]["resourceNames"] == ["lab-portal-lead", "lab-portal-member", "lab-portal-viewer"]
    assert "'system:serviceaccount:lab:lab-portal'" in policy["matchConditions"][0]["expression"]
    assert {"name": "portal", "expression": "'lab-portal'"} in policy["variables"]
    assert {"name": "portalNamespace", "expression": "'lab'"} in policy["variables"]
    binding = objects[("RoleBinding", "lab-portal-leases")]
    assert binding["roleRef"]["name"] == "lab-portal-leases"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "lab-portal", "namespace": "lab"}
    ]
    assert objects[("ConfigMap", "portal-gpu-portal")]["data"]["PORTAL_NAME"] == "lab-portal"


def test_an_existing_secret_an_ingress_and_no_confinement(helm):
    objects = by_kind_and_name(
        helm.objects(
            required=False,
            values={
                "secrets.existingSecret": "portal-settings",
                "ingress.enabled": "true",
                "ingress.className": "nginx",
                "ingress.host": "gpus.example.org",
                "ingress.tlsSecretName": "gpus-tls",
                "rbac.confinement": "false",
                "migrations.enabled": "false",
            },
        )
    )

    assert ("Secret", "portal-gpu-portal") not in objects
    assert ("Job", "portal-gpu-portal-migrate") not in objects
    assert ("ValidatingAdmissionPolicy", "gpu-portal-confinement") not in objects
    assert container(list(objects.values()), "web")["envFrom"][1] == {
        "secretRef": {"name": "portal-settings"}
    }
    ingress = objects[("Ingress", "portal-gpu-portal")]["spec"]
    assert ingress["ingressClassName"] == "nginx"
    assert ingress["tls"] == [{"hosts": ["gpus.example.org"], "secretName": "gpus-tls"}]
    assert ingress["rules"][0]["host"] == "gpus.example.org"


@pytest.mark.parametrize(
    ("value", "field", "complaint"),
    [
        ("web.replicas=abc", "/web/replicas", "got string, want integer"),
        ("worker.concurrency=0", "/worker/concurrency", "minimum"),
        ("webhookWorker.concurrency=0", "/webhookWorker/concurrency", "minimum"),
        ("webhookWorker.queue=a\\,b", "/webhookWorker/queue", "does not match pattern"),
        ("service.type=Public", "/service/type", "value must be one of"),
        ("config.sslRedirect=maybe", "/config/sslRedirect", "got string, want boolean"),
        ("webb.replicas=2", "", "additional properties 'webb' not allowed"),
        (
            "watcher.leaderElection.enabled=false,watcher.replicas=2",
            "/watcher/replicas",
            "maximum: got 2, want 1",
        ),
        (
            "oidc.groupMapping.gpu-vision.team=vision,oidc.groupMapping.gpu-vision.role=boss",
            "/oidc/groupMapping/gpu-vision/role",
            "value must be one of 'lead', 'member', 'viewer'",
        ),
        ("oidc.groupMapping.gpu-ops.admin=yes", "/oidc/groupMapping/gpu-ops/admin", "want boolean"),
        ("oidc.groupMapping.gpu-ops.role=lead", "/oidc/groupMapping/gpu-ops", "'team' required"),
        ("oidc.signAlgo=none", "/oidc/signAlgo", "value must be one of"),
        ("oidc.enabled=true,oidc.clientId=portal", "/oidc/endpoints/token", "minLength"),
        ("oidc.loginUrl=oidc-login", "/oidc", "additional properties 'loginUrl' not allowed"),
        (
            "watcher.leaderElection.renewSeconds=often",
            "/watcher/leaderElection/renewSeconds",
            "got string, want number",
        ),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_naming_it(helm, value, field, complaint):
    for command in ("template", "lint"):
        args = [command, *(["portal"] if command == "template" else []), str(CHART)]
        result = helm.run(*args, *sets(None), "--set", value)
        output = result.stdout + result.stderr

        assert result.returncode != 0, output
        assert "values don't meet the specifications of the schema" in output
        assert re.search(rf"at '{re.escape(field)}'", output), output
        assert complaint in output, output


def test_a_missing_secret_setting_is_named(helm):
    result = helm.run("template", "portal", str(CHART), "--set", "secrets.secretKey=k")

    assert result.returncode != 0
    assert "secrets.databaseUrl is required" in result.stderr


def test_single_sign_on_needs_the_client_secret_or_an_existing_secret(helm):
    without = {name: value for name, value in OIDC.items() if name != "oidc.clientSecret"}
    result = helm.run("template", "portal", str(CHART), *sets(without))

    assert result.returncode != 0
    assert "oidc.clientSecret is required when oidc.enabled" in result.stderr
    objects = by_kind_and_name(
        helm.objects(required=False, values={**without, "secrets.existingSecret": "mine"})
    )
    assert ("Secret", "portal-gpu-portal") not in objects
    assert objects[("ConfigMap", "portal-gpu-portal")]["data"]["OIDC_ENABLED"] == "1"


def test_the_schema_covers_every_value(helm):
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    assert set(values) <= set(schema["properties"])
    for section, value in values.items():
        if isinstance(value, dict) and "properties" in schema["properties"][section]:
            assert set(value) <= set(schema["properties"][section]["properties"]), section
