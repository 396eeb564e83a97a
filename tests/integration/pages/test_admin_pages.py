"""The Django admin of every app: for a superuser, the list, add and change pages of every
registered model render (with a row of each to show), searches and filters answer, and the
read-only admins (jobs, requests, grants, the audit trail) refuse to add or change.

Every model registered with the admin needs a row here (``ROWS``): a newly registered one fails
``test_every_registered_model_has_a_row_to_open`` until it gets one."""

import datetime

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Group, User
from django.urls import reverse
from django.utils import timezone
from django_celery_beat.models import (
    ClockedSchedule,
    CrontabSchedule,
    IntervalSchedule,
    PeriodicTask,
    SolarSchedule,
)

from accounts import services as account_services
from gpujobs.models import GpuJob
from tenants.models import AuditEvent, QuotaGrant, QuotaRequest, TeamObjectLimits
from tests import factories

pytestmark = pytest.mark.django_db

REGISTERED = sorted(admin.site._registry, key=lambda model: model._meta.label)
READ_ONLY = {
    "gpujobs.GpuJob",
    "tenants.QuotaRequest",
    "tenants.QuotaGrant",
    "tenants.AuditEvent",
    "tenants.TeamQueuePolicy",
    "accounts.ApiToken",
    "accounts.OidcIdentity",
    "serving.InferenceService",
    "serving.Revision",
}
# Rows only django-axes writes: no add page (its admin's choice); the change page shows them.
NO_ADD = {"axes.AccessAttempt", "axes.AccessFailureLog", "axes.AccessLog"}


def _token():
    token, _ = account_services.api_token_create(
        user=factories.UserFactory(username="token-holder"), name="ci"
    )
    return token


# What django-axes records of sign-ins (as it would for a client at this address).
SIGN_IN = {
    "username": "lena",
    "ip_address": "192.0.2.1",
    "user_agent": "curl/8",
    "http_accept": "*/*",
    "path_info": "/login/",
}


def _periodic_task():
    every = IntervalSchedule.objects.create(every=60, period=IntervalSchedule.SECONDS)
    return PeriodicTask.objects.create(
        name="nightly", task="reconcile.tasks.reconcile_sweep", interval=every
    )


def _cluster():
    cluster = factories.ClusterFactory(name="gpu-east")
    factories.GpuCapacityFactory(cluster=cluster)  # shown inline
    return cluster


def _team():
    team = factories.TeamFactory(slug="vision")
    factories.MembershipFactory(team=team)  # shown inline
    return team


def _queue_policy():
    factories.ClusterFactory(name="gpu-west")  # a second cluster to filter by
    return factories.TeamQueuePolicyFactory()


def _object_limits():
    factories.ClusterFactory(name="gpu-west")  # a second cluster to filter by
    return TeamObjectLimits.objects.create(
        team=factories.TeamFactory(), cluster=factories.ClusterFactory(), limits={"services": "40"}
    )


# One row of each registered model, made the way the portal would hold it.
ROWS = {
    "auth.Group": lambda: Group.objects.create(name="operators"),
    "auth.User": lambda: factories.UserFactory(username="lena"),
    "accounts.ApiToken": _token,
    "accounts.OidcIdentity": lambda: factories.OidcIdentityFactory(),
    "axes.AccessAttempt": lambda: AccessAttempt.objects.create(
        **SIGN_IN, get_data="", post_data="", failures_since_start=3
    ),
    "axes.AccessFailureLog": lambda: AccessFailureLog.objects.create(**SIGN_IN, locked_out=True),
    "axes.AccessLog": lambda: AccessLog.objects.create(**SIGN_IN),
    "django_celery_beat.PeriodicTask": _periodic_task,
    "django_celery_beat.ClockedSchedule": lambda: ClockedSchedule.objects.create(
        clocked_time=timezone.now() + datetime.timedelta(days=1)
    ),
    "django_celery_beat.CrontabSchedule": lambda: CrontabSchedule.objects.create(minute="0"),
    "django_celery_beat.SolarSchedule": lambda: SolarSchedule.objects.create(
        event="sunrise", latitude=52.52, longitude=13.40
    ),
    "django_celery_beat.IntervalSchedule": lambda: IntervalSchedule.objects.create(
        every=5, period=IntervalSchedule.MINUTES
    ),
    "clusters.Cluster": _cluster,
    "tenants.Team": _team,
    "tenants.QuotaRequest": lambda: factories.QuotaRequestFactory(),
    "tenants.QuotaGrant": lambda: factories.QuotaGrantFactory(),
    "tenants.AuditEvent": lambda: factories.AuditEventFactory(),
    "tenants.TeamCluster": lambda: factories.TeamClusterFactory(),
    "tenants.ClusterState": lambda: factories.ClusterStateFactory(),
    "tenants.TeamQueuePolicy": _queue_policy,
    "tenants.TeamObjectLimits": _object_limits,
    "monitoring.IdlePolicy": lambda: factories.IdlePolicyFactory(),
    "monitoring.IdlePod": lambda: factories.IdlePodFactory(),
    "monitoring.Notification": lambda: factories.NotificationFactory(),
    "gpujobs.GpuJob": lambda: factories.GpuJobFactory(),
    "serving.InferenceService": lambda: factories.RevisionFactory().service,
    "serving.Revision": lambda: factories.RevisionFactory(),
}


def label(model) -> str:
    return model._meta.label


def admin_url(model, view: str, *args) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


@pytest.fixture
def superuser(db):
    return factories.AdminFactory(username="root", is_superuser=True)


@pytest.fixture
def site(client_as, superuser):
    return client_as(superuser)


def test_every_registered_model_has_a_row_to_open():
    assert sorted(label(m) for m in REGISTERED if label(m) not in ROWS) == []


@pytest.mark.parametrize("model", REGISTERED, ids=label)
def test_the_list_add_and_change_pages_of_a_model_render(site, model):
    row = ROWS[label(model)]()
    model_admin = admin.site._registry[model]
    read_only = label(model) in READ_ONLY

    listing = site.get(admin_url(model, "changelist"))
    assert listing.status_code == 200
    assert listing.context["cl"].result_count >= 1
    if model_admin.list_filter:
        assert 'id="changelist-filter"' in listing.content.decode()
    if model_admin.search_fields:
        searched = site.get(admin_url(model, "changelist"), {"q": "x' OR 1=1 --"})
        assert searched.status_code == 200

    refused = read_only or label(model) in NO_ADD
    assert site.get(admin_url(model, "add")).status_code == (403 if refused else 200)

    change = site.get(admin_url(model, "change", quote(row.pk)))
    assert change.status_code == 200
    # A read-only admin shows the row, without a form to save.
    assert ('name="_save"' in change.content.decode()) is not read_only


@pytest.mark.parametrize("model", [GpuJob, QuotaRequest, QuotaGrant, AuditEvent], ids=label)
def test_a_read_only_admin_refuses_a_change_and_keeps_the_row(site, model):
    row = ROWS[label(model)]()
    before = model.objects.filter(pk=row.pk).values().get()

    change = site.post(admin_url(model, "change", quote(row.pk)), {"state": "failed", "gpus": 99})
    add = site.post(admin_url(model, "add"), {"state": "failed", "gpus": 99})

    assert (change.status_code, add.status_code) == (403, 403)
    assert model.objects.filter(pk=row.pk).values().get() == before
    assert model.objects.count() == 1


def test_staff_who_are_not_superusers_are_kept_out_of_the_models(client_as, admin):
    page = client_as(admin)  # a portal admin: staff, without Django model permissions

    assert page.get(admin_url(GpuJob, "changelist")).status_code == 403
    assert page.get(admin_url(User, "changelist")).status_code == 403
