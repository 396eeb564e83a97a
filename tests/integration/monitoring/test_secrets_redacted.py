"""A Prometheus URL with credentials (``http://user:password@host/``): the password goes to
Prometheus as HTTP basic auth and nowhere else, not into a page, an API answer, the admin or a
log line (core/redaction.py)."""

import logging
import warnings

import httpx
import pytest

from clusters.models import Cluster
from tests import factories
from tests.integration.conftest import free_port

from .pages import portal_namespace
from .workloads import OwnPrometheus

pytestmark = [pytest.mark.integration]

PASSWORD = "s3cret-pr0m-pass"


@pytest.fixture
def superuser(db):
    return factories.AdminFactory(username="sam-superuser", is_superuser=True)


def cluster_at(host: str, team=None) -> Cluster:
    cluster = factories.ClusterFactory(
        name="guarded", prometheus_url=f"http://prom:{PASSWORD}@{host}/"
    )
    if team is not None:
        portal_namespace(team, cluster)  # the team's metrics are read from this cluster
    return cluster


class GuardedPrometheus(OwnPrometheus):
    """Debian's Prometheus answering only with HTTP basic auth as ``prom`` / ``PASSWORD``."""

    def __init__(self, directory):
        with warnings.catch_warnings():  # the stdlib's bcrypt, deprecated but here until 3.13
            warnings.simplefilter("ignore", DeprecationWarning)
            import crypt

            hashed = crypt.crypt(PASSWORD, crypt.mksalt(crypt.METHOD_BLOWFISH))
        web_config = directory / "web.yml"
        web_config.write_text(f"basic_auth_users:\n  prom: '{hashed}'\n")
        super().__init__(directory, flags=(f"--web.config.file={web_config}",))

    def _ready(self) -> bool:
        try:
            answer = httpx.get(f"{self.url}/-/ready", auth=("prom", PASSWORD), timeout=2)
        except httpx.HTTPError:
            return False
        return answer.status_code == 200


@pytest.fixture
def guarded_prometheus(tmp_path):
    prometheus = GuardedPrometheus(tmp_path)
    prometheus.start()
    yield prometheus
    prometheus.stop()


def test_the_credentials_reach_prometheus_as_basic_auth_and_no_log_line(
    team, lead, client_as, guarded_prometheus, caplog
):
    host = guarded_prometheus.url.removeprefix("http://")
    cluster_at(host, team)

    with caplog.at_level(logging.INFO):
        page = client_as(lead).get(f"/monitoring/teams/{team.slug}/")

    html = page.content.decode()
    assert page.status_code == 200
    assert 'data-testid="metrics-error"' not in html  # Prometheus took the credentials
    requests_logged = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert requests_logged  # httpx logs each request's URL...
    assert not any(PASSWORD in line for line in requests_logged)  # ...without the password
    assert any(host in line for line in requests_logged)


def test_without_the_credentials_that_prometheus_refuses(team, lead, client_as, guarded_prometheus):
    """The control: the guarded Prometheus does refuse a client without the password."""
    factories.ClusterFactory(name="unguarded", prometheus_url=guarded_prometheus.url)
    portal_namespace(team, Cluster.objects.get(name="unguarded"))

    html = client_as(lead).get(f"/monitoring/teams/{team.slug}/").content.decode()

    assert 'data-testid="metrics-error"' in html
    assert "HTTP 401" in html


def test_an_unreachable_prometheus_is_named_without_its_password(team, lead, api, client_as):
    port = free_port()
    cluster_at(f"127.0.0.1:{port}", team)

    page = client_as(lead).get(f"/monitoring/teams/{team.slug}/").content.decode()
    answer = api.as_user(lead).get(f"/api/v1/monitoring/teams/{team.slug}/utilisation/")

    assert f"Prometheus at http://127.0.0.1:{port} cannot be reached" in page
    assert PASSWORD not in page
    assert answer.status_code == 503
    assert PASSWORD not in answer.content.decode()
    assert f"http://127.0.0.1:{port}" in answer.json()["detail"]


def test_cluster_pages_show_the_url_masked(admin, client_as):
    cluster_at(f"127.0.0.1:{free_port()}")
    page = client_as(admin)

    listing = page.get("/monitoring/clusters/").content.decode()
    detail = page.get("/monitoring/clusters/guarded/").content.decode()

    assert "http://prom:***@127.0.0.1:" in listing
    assert PASSWORD not in listing
    assert PASSWORD not in detail


def test_the_api_never_answers_the_url(admin, api):
    cluster = cluster_at("prometheus.example.com")
    api.as_user(admin)

    for url in ("/api/v1/clusters/", f"/api/v1/clusters/{cluster.name}/"):
        response = api.get(url)
        assert response.status_code == 200
        assert PASSWORD not in response.content.decode()


def test_the_admin_shows_the_url_masked_and_keeps_the_password_on_save(superuser, client_as):
    cluster = cluster_at("prometheus.example.com")
    page = client_as(superuser)
    change = f"/django-admin/clusters/cluster/{cluster.pk}/change/"

    listing = page.get("/django-admin/clusters/cluster/").content.decode()
    form = page.get(change)
    html = form.content.decode()
    shown = form.context["adminform"].form["prometheus_url"].value()
    saved = page.post(change, {**_form_data(form), "display_name": "Guarded"})

    assert "http://prom:***@prometheus.example.com/" in listing
    assert PASSWORD not in listing
    assert PASSWORD not in html
    assert shown == "http://prom:***@prometheus.example.com/"
    assert saved.status_code == 302
    cluster.refresh_from_db()
    assert cluster.display_name == "Guarded"
    assert cluster.prometheus_url == f"http://prom:{PASSWORD}@prometheus.example.com/"


def test_the_admin_replaces_the_password_when_a_new_one_is_typed(superuser, client_as):
    cluster = cluster_at("prometheus.example.com")
    page = client_as(superuser)
    change = f"/django-admin/clusters/cluster/{cluster.pk}/change/"
    data = _form_data(page.get(change))

    moved = page.post(change, {**data, "prometheus_url": "http://prom:***@other.example.com/"})
    typed = page.post(change, {**data, "prometheus_url": "http://prom:n3w@other.example.com/"})

    assert "Type the credentials again" in moved.content.decode()
    assert typed.status_code == 302
    cluster.refresh_from_db()
    assert cluster.prometheus_url == "http://prom:n3w@other.example.com/"


def _form_data(response) -> dict:
    """What the admin's change form posts back as it is shown."""
    forms = [response.context["adminform"].form]
    for inline in response.context["inline_admin_formsets"]:
        forms += [inline.formset.management_form, *inline.formset.forms]
    return {
        bound.html_name: bound.value()
        for form in forms
        for bound in form
        if bound.value() is not None
    }
