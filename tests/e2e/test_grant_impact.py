"""An admin sees, in a real browser, what a shrink would do to the team's running jobs before
shrinking the grant."""

import datetime
import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from gpujobs.models import GpuJob
from tenants import quota
from tenants.models import QuotaGrant
from tests import factories

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_admin_previews_the_impact_of_a_shrink_then_shrinks(
    sign_in, screenshot, cluster, team, lead, admin
):
    quota_request = quota.quota_request_create(
        requested_by=lead, team=team, cluster=cluster, gpus=8, justification="Training."
    )
    grant = quota.quota_request_approve(reviewer=admin, quota_request=quota_request)
    now = timezone.now()
    oldest, middle, newest = (
        factories.GpuJobFactory(
            team=team,
            cluster=cluster,
            name=name,
            gpus=gpus,
            state="running",
            started_at=now - datetime.timedelta(hours=hours),
        )
        for name, gpus, hours in (("pretrain", 4, 5), ("finetune", 2, 3), ("eval-sweep", 2, 1))
    )

    page = sign_in(admin)
    page.goto(f"/grants/{grant.pk}/")
    # Revoking would leave all three over quota: the revoke form says so before anything else.
    revoke_impact = page.get_by_test_id("revoke-impact")
    expect(revoke_impact).to_contain_text("goes from 8 to 0 GPUs; its running work holds 8")
    expect(revoke_impact.locator("tbody tr")).to_have_count(3)

    shrink = page.get_by_role("form", name=f"Shrink grant #{grant.pk}")
    shrink.get_by_label("GPUs").fill("5")
    shrink.get_by_role("button", name="Preview impact").click()

    preview = page.get_by_test_id("shrink-impact")
    expect(preview).to_contain_text("goes from 8 to 5 GPUs; its running work holds 8")
    expect(preview.locator("tbody tr")).to_have_text(
        [re.compile(r"eval-sweep\s*2"), re.compile(r"finetune\s*2")]
    )
    expect(preview).to_contain_text("keeps running until it ends")
    expect(preview).to_contain_text("refused")
    expect(preview.get_by_role("link", name="eval-sweep")).to_have_attribute(
        "href", f"/jobs/{newest.pk}/"
    )
    expect(preview).not_to_contain_text("pretrain")
    screenshot(page, "grant-shrink-impact")
    # Previewing changed nothing; the form kept what was typed.
    assert QuotaGrant.objects.get(pk=grant.pk).gpus == 8
    shrink = page.get_by_role("form", name=f"Shrink grant #{grant.pk}")
    expect(shrink.get_by_label("GPUs")).to_have_value("5")

    shrink.get_by_role("button", name="Shrink grant").click()

    expect(page.get_by_role("status")).to_contain_text(
        f"Grant #{grant.pk} is now 5 × nvidia.com/gpu"
    )
    assert QuotaGrant.objects.get(pk=grant.pk).gpus == 5
    # Nothing is stopped: the jobs over quota keep running.
    running = GpuJob.objects.filter(state="running").values_list("pk", flat=True)
    assert set(running) == {oldest.pk, middle.pk, newest.pk}
