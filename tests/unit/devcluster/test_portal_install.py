"""What ``devcluster install-portal`` applies: deploy/'s objects, the namespace first."""

import yaml

from devcluster import bootstrap, builder, cli, portal_install
from devcluster.settings import Settings


def test_deploys_objects_are_applied_namespace_first_confinement_last():
    objects = portal_install.deploy_objects()
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objects]

    assert kinds[0] == ("Namespace", "gpu-portal")
    assert ("ServiceAccount", "gpu-portal") in kinds
    assert ("ClusterRole", "gpu-portal-member") in kinds
    assert kinds[-2:] == [
        ("ValidatingAdmissionPolicy", "gpu-portal-confinement"),
        ("ValidatingAdmissionPolicyBinding", "gpu-portal-confinement"),
    ]


def test_the_portals_name_is_its_service_accounts():
    assert portal_install.PORTAL_USER == "system:serviceaccount:gpu-portal:gpu-portal"


def test_the_portals_credentials_come_before_the_cluster_and_stay_valid_once_it_is_up(
    tmp_path, monkeypatch
):
    """The demo serves the portal while its cluster is built: the portal's kubeconfig is
    minted first (the CA made for it), and starting the cluster keeps that CA."""
    monkeypatch.delenv("DEVCLUSTER_INSTANCE", raising=False)
    monkeypatch.setenv("DEVCLUSTER_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("DEVCLUSTER_APISERVER_PORT", "31443")
    output = tmp_path / "portal.kubeconfig"

    assert cli.main(["install-portal", "--credentials-only", "--output", str(output)]) == 0

    settings = Settings.from_env()
    ca = (settings.pki_dir / "ca.crt").read_bytes()
    config = yaml.safe_load(output.read_text())
    assert config["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:31443"
    assert config["users"][0]["name"] == portal_install.PORTAL_USER
    bootstrap.prepare_credentials(settings)  # what `up` does first
    assert (settings.pki_dir / "ca.crt").read_bytes() == ca


def test_env_planned_names_the_cluster_up_would_start(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("DEVCLUSTER_INSTANCE", raising=False)
    monkeypatch.setenv("DEVCLUSTER_STATE", str(tmp_path))
    monkeypatch.setenv("DEVCLUSTER_PROMETHEUS_PORT", "31090")

    assert cli.main(["env"]) == 1  # not up
    assert cli.main(["env", "--planned"]) == 0

    assert capsys.readouterr().out.splitlines() == [
        f"export KUBECONFIG={tmp_path}/admin.kubeconfig",
        "export PROMETHEUS_URL=http://127.0.0.1:31090",
    ]


def test_build_check_says_whether_a_build_has_work_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("DEVCLUSTER_CACHE", str(tmp_path))

    assert cli.main(["build", "--check"]) == 1
    assert not builder.nothing_to_build()
