"""What ``devcluster install-portal`` applies: deploy/'s objects, the namespace first."""

from devcluster import portal_install


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
