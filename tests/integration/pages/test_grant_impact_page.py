"""A grant's page previews what revoking or shrinking it would do to the team's running work."""

import datetime
import re

import pytest
from django.utils import timezone

from tenants.models import QuotaGrant
from tests import factories
from tests.integration.pages.helpers import field_error_html, get_ok

pytestmark = pytest.mark.django_db


@pytest.fixture
def grant(lead, team, make_grant):
    return make_grant(lead, team, gpus=6)


def running_job(grant, gpus, hours_ago):
    return factories.GpuJobFactory(
        team=grant.team,
        cluster=grant.cluster,
        gpus=gpus,
        state="running",
        started_at=timezone.now() - datetime.timedelta(hours=hours_ago),
    )


def test_the_revoke_form_lists_the_running_jobs_it_would_leave_over_quota(client_as, admin, grant):
    jobs = [running_job(grant, 2, hours_ago=h) for h in (3, 1)]

    response = get_ok(client_as(admin), f"/grants/{grant.pk}/")

    preview = response.context["revoke_impact"]
    assert [w.id for w in preview.over_quota] == [jobs[1].pk, jobs[0].pk]
    html = response.content.decode()
    assert 'data-testid="revoke-impact"' in html
    assert f'data-testid="over-quota-job-{jobs[0].pk}"' in html
    assert "goes from 6 to 0 GPUs; its running work holds 4" in html


def test_preview_shows_the_shrink_without_making_it(client_as, admin, grant):
    old, new = running_job(grant, 3, hours_ago=3), running_job(grant, 2, hours_ago=1)

    response = client_as(admin).post(
        f"/grants/{grant.pk}/shrink/", {"shrink-gpus": "4", "preview": "1"}
    )

    assert response.status_code == 200
    preview = response.context["shrink_impact"]
    assert (preview.quota_after, [w.id for w in preview.over_quota]) == (4, [new.pk])
    html = response.content.decode()
    shrinking = re.search(r'data-testid="shrink-impact".*?</div>', html, re.S).group(0)
    assert f"over-quota-job-{new.pk}" in shrinking
    assert f"over-quota-job-{old.pk}" not in shrinking
    assert 'value="4"' in html  # the form keeps what was typed, to shrink next
    assert QuotaGrant.objects.get(pk=grant.pk).gpus == 6


def test_previewing_an_end_before_today_previews_ending_the_grant(client_as, admin, grant):
    QuotaGrant.objects.filter(pk=grant.pk).update(
        starts_on=timezone.localdate() - datetime.timedelta(days=10)
    )
    running_job(grant, 1, hours_ago=1)
    yesterday = timezone.localdate() - datetime.timedelta(days=1)

    response = client_as(admin).post(
        f"/grants/{grant.pk}/shrink/", {"shrink-ends_on": yesterday.isoformat(), "preview": "1"}
    )

    assert response.context["shrink_impact"].quota_after == 0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"shrink-gpus": "7"}, "Give 1 to 6 GPUs"),
        ({"shrink-gpus": "0"}, "Give 1 to 6 GPUs"),
        ({"shrink-gpus": "many"}, "Enter a whole number."),
    ],
)
def test_a_preview_of_bad_gpus_is_a_form_error(client_as, admin, grant, data, message):
    response = client_as(admin).post(f"/grants/{grant.pk}/shrink/", {**data, "preview": "1"})

    assert response.status_code == 200
    assert message in field_error_html(response, "id_shrink-gpus")
    assert response.context["shrink_impact"] is None


def test_a_preview_of_nothing_says_what_to_give(client_as, admin, grant):
    response = client_as(admin).post(f"/grants/{grant.pk}/shrink/", {"preview": "1"})

    assert "Give fewer GPUs or an earlier end" in response.content.decode()


def test_members_see_no_preview(client_as, member, grant):
    running_job(grant, 1, hours_ago=1)

    response = get_ok(client_as(member), f"/grants/{grant.pk}/")

    assert response.context["revoke_impact"] is None
    assert "revoke-impact" not in response.content.decode()
