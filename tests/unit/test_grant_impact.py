"""The impact preview's arithmetic: the quota after a grant change against the running work,
and which work is over quota (the newest first until the team fits). No database."""

import datetime

from tenants.impact import Work, impact_of, over_quota
from tenants.models import QuotaGrant

TODAY = datetime.date(2026, 12, 1)
T0 = datetime.datetime(2026, 11, 1, tzinfo=datetime.UTC)


def at(hours: int) -> datetime.datetime:
    return T0 + datetime.timedelta(hours=hours)


def job(pk, gpus, hours, *, running=True, model="", kind="job", flavor=""):
    return Work(
        kind=kind,
        id=pk,
        name=f"{kind}-{pk}",
        gpus=gpus,
        gpu_model=model,
        since=at(hours),
        running=running,
        flavor=flavor,
    )


def grant(gpus=8, *, model="", starts_on=TODAY, ends_on=None, state="active"):
    return QuotaGrant(gpus=gpus, gpu_model=model, starts_on=starts_on, ends_on=ends_on, state=state)


def ids(work):
    return [(w.kind, w.id) for w in work]


def test_work_that_fits_the_new_quota_is_not_over():
    work = [job(1, 2, 0), job(2, 2, 1)]

    assert over_quota(work, 4) == []


def test_newest_work_goes_first_until_the_team_fits():
    # oldest first: 2 (fits 5), 2 (4 fits 5), 3 (7 > 5): the third and everything newer is over
    work = [job(3, 3, 2), job(1, 2, 0), job(4, 1, 3), job(2, 2, 1)]

    assert ids(over_quota(work, 5)) == [("job", 4), ("job", 3)]


def test_a_small_newer_job_is_over_quota_when_an_older_one_does_not_fit():
    # The rule is by age, not best fit: job 2 (1 GPU) would fit alone, but it is newer.
    work = [job(1, 4, 0), job(2, 1, 1)]

    assert ids(over_quota(work, 3)) == [("job", 2), ("job", 1)]


def test_waiting_work_is_never_over_quota():
    work = [job(1, 2, 0), job(2, 8, 1, running=False)]

    assert over_quota(work, 2) == []


def test_revoking_leaves_every_running_job_over_quota():
    work = [job(1, 2, 0), job(2, 2, 1), job(3, 4, 2, running=False)]

    impact = impact_of(
        grant=grant(4), gpus_after=0, kueue=False, quota_now=4, work=work, today=TODAY
    )

    assert (impact.quota_now, impact.quota_after, impact.held, impact.over_by) == (4, 0, 4, 4)
    assert ids(impact.over_quota) == [("job", 2), ("job", 1)]
    assert ids(impact.waiting) == [("job", 3)]
    assert "refused" in impact.consequence
    assert "keeps running until it ends" in impact.consequence


def test_shrinking_one_of_two_grants_keeps_the_others_gpus():
    # Quota 8 from two grants of 4; this one shrinks to 1: quota 5.
    work = [job(1, 3, 0), job(2, 2, 1), job(3, 2, 2)]

    impact = impact_of(
        grant=grant(4), gpus_after=1, kueue=False, quota_now=8, work=work, today=TODAY
    )

    assert impact.quota_after == 5
    assert ids(impact.over_quota) == [("job", 3)]


def test_services_and_jobs_are_ordered_together_by_age():
    work = [job(1, 2, 0), job(7, 2, 1, kind="service"), job(2, 2, 2)]

    impact = impact_of(
        grant=grant(6), gpus_after=3, kueue=False, quota_now=6, work=work, today=TODAY
    )

    assert ids(impact.over_quota) == [("job", 2), ("service", 7)]


def test_in_kueue_mode_only_work_of_the_grants_model_counts_and_new_work_waits():
    work = [job(1, 4, 0, model="H100"), job(2, 4, 1, model="A100"), job(3, 2, 2, model="H100")]

    impact = impact_of(
        grant=grant(8, model="H100"), gpus_after=4, kueue=True, quota_now=8, work=work, today=TODAY
    )

    assert impact.gpu_model == "H100"
    assert impact.held == 6
    assert ids(impact.over_quota) == [("job", 3)]
    assert "waits" in impact.consequence


def test_in_quota_only_mode_every_model_of_the_kind_counts():
    work = [job(1, 4, 0, model="H100"), job(2, 4, 1, model="A100")]

    impact = impact_of(
        grant=grant(8, model="H100"), gpus_after=4, kueue=False, quota_now=8, work=work, today=TODAY
    )

    assert impact.gpu_model is None
    assert ids(impact.over_quota) == [("job", 2)]


def test_a_grant_not_in_effect_yet_changes_nothing_today():
    future = grant(8, starts_on=TODAY + datetime.timedelta(days=3))

    impact = impact_of(
        grant=future, gpus_after=0, kueue=False, quota_now=2, work=[job(1, 2, 0)], today=TODAY
    )

    assert not impact.in_effect
    assert impact.quota_after == 2
    assert impact.over_quota == ()
    assert "still fits" in impact.consequence


def test_in_kueue_mode_work_counts_on_the_flavor_it_was_admitted_on():
    # A job that named no model, admitted on the H100 flavor, uses the H100 quota.
    work = [
        job(1, 4, 0, model="H100"),
        job(2, 2, 1, model="", flavor="gpu-portal-h100"),
        job(3, 2, 2, model="", flavor="gpu-portal-any-gpu"),
    ]

    impact = impact_of(
        grant=grant(8, model="H100"), gpus_after=4, kueue=True, quota_now=8, work=work, today=TODAY
    )

    assert impact.held == 6
    assert ids(impact.over_quota) == [("job", 2)]
