"""Prices, budgets and statements over the API and pages, on the portal's database (no
Prometheus: held hours are then unknown and a budget's spending is zero).

Enforcement runs as in production: the budget check records that a budget is spent, and the
submission refuses new work on that record."""

import csv
import datetime
import io
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from billing import budget_checks
from billing.models import Budget, BudgetSpend, Price
from clusters.models import QuotaMode
from monitoring.models import Notification
from serving.models import InferenceService
from tenants.models import AuditEvent, Department
from tests import factories
from tests.integration.serving.api import deploy_body

pytestmark = pytest.mark.django_db

THIS_MONTH = timezone.localdate().replace(day=1)


@pytest.fixture
def grant(team, cluster, lead, admin):
    return factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__requested_by=lead,
        request__gpus=4,
        request__gpu_model="H100",
        request__starts_on=THIS_MONTH - datetime.timedelta(days=40),
        request__ends_on=None,
        granted_by=admin,
    )


def price(**overrides):
    base = {"gpu_model": "H100", "effective_from": THIS_MONTH.isoformat(), "gpu_hour": "2.5"}
    return base | overrides


def job(**overrides):
    return {
        "team": "vision",
        "cluster": "gpu-east",
        "name": "train",
        "image": "registry.example.com/vision/trainer:1.4",
        "command": ["python", "train.py"],
        "gpus": 1,
    } | overrides


# --- prices ------------------------------------------------------------------------------------


def test_an_admin_sets_a_price_and_the_change_is_audited(api, admin):
    response = api.as_user(admin).post("/api/v1/billing/prices/", price(cpu_core_hour="0.0125"))

    assert response.status_code == 201, response.data
    assert response.data["gpu_hour"] == "2.5000"
    assert response.data["cpu_core_hour"] == "0.0125"
    event = AuditEvent.objects.get(action=AuditEvent.Action.PRICE_SET)
    assert event.after["gpu_hour"] == "2.5000"
    assert event.before is None


def test_a_new_price_for_the_same_month_replaces_it_and_keeps_the_old_in_the_audit(api, admin):
    api.as_user(admin).post("/api/v1/billing/prices/", price())
    api.as_user(admin).post("/api/v1/billing/prices/", price(gpu_hour="3"))

    assert Price.objects.get().gpu_hour == Decimal(3)
    latest = AuditEvent.objects.filter(action=AuditEvent.Action.PRICE_SET).first()
    assert (latest.before["gpu_hour"], latest.after["gpu_hour"]) == ("2.5000", "3.0000")


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"gpu_hour": "-0.01"}, "gpu_hour", "negative"),
        ({"gpu_hour": "1.23456"}, "gpu_hour", "4 decimal places"),
        ({"memory_gib_hour": "-1"}, "memory_gib_hour", "negative"),
        ({"cpu_core_hour": "x"}, "cpu_core_hour", "number"),
        ({"effective_from": "2026-11-15"}, "effective_from", "first day"),
        ({"effective_from": "soon"}, "effective_from", "YYYY-MM-DD"),
        ({"gpu_model": ["H100"]}, "gpu_model", "text"),
    ],
)
def test_a_bad_price_is_a_400_naming_the_field(api, admin, overrides, field, words):
    response = api.as_user(admin).post("/api/v1/billing/prices/", price(**overrides), format="json")

    assert response.status_code == 400, response.data
    assert words in str(response.data[field])
    assert not Price.objects.exists()


def test_only_admins_set_prices(api, lead):
    response = api.as_user(lead).post("/api/v1/billing/prices/", price())

    assert response.status_code == 403
    assert not Price.objects.exists()


# --- budgets -----------------------------------------------------------------------------------


def test_an_admin_gives_a_team_a_budget_and_it_is_audited(api, admin, team):
    response = api.as_user(admin).post(
        "/api/v1/billing/budgets/",
        {"team": team.slug, "period": "quarter", "gpu_hours": "500", "gpu_model": "H100"},
    )

    assert response.status_code == 201, response.data
    budget = Budget.objects.get()
    assert (budget.team, budget.period, budget.gpu_hours) == (team, "quarter", Decimal(500))
    event = AuditEvent.objects.get(action=AuditEvent.Action.BUDGET_SET)
    assert event.team == team
    assert event.after["gpu_hours"] == "500.0000"


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"team": "vision", "gpu_hours": "-1"}, "gpu_hours", "negative"),
        ({"team": "vision", "gpu_hours": "1.00001"}, "gpu_hours", "4 decimal places"),
        ({"team": "vision"}, "gpu_hours", "required"),
        ({"team": "vision", "gpu_hours": "5", "period": "week"}, "period", "month"),
        ({"team": "vision", "gpu_hours": "5", "policy": "pray"}, "policy", "refuse"),
        ({"team": "nobody", "gpu_hours": "5"}, "team", "No team"),
        ({"gpu_hours": "5"}, "team", "team or a department"),
        ({"department": "nowhere", "gpu_hours": "5"}, "department", "No department"),
    ],
)
def test_a_bad_budget_is_a_400_naming_the_field(api, admin, team, data, field, words):
    response = api.as_user(admin).post("/api/v1/billing/budgets/", data)

    assert response.status_code == 400, response.data
    assert words in str(response.data[field])
    assert not Budget.objects.exists()


def test_a_lead_sees_the_budgets_of_their_team_and_department_but_cannot_set_one(
    api, admin, lead, team, other_team
):
    department = Department.objects.create(slug="research", name="Research")
    team.department = department
    team.save()
    client = api.as_user(admin)
    client.post("/api/v1/billing/budgets/", {"team": team.slug, "gpu_hours": "10"})
    client.post("/api/v1/billing/budgets/", {"department": "research", "gpu_hours": "20"})
    client.post("/api/v1/billing/budgets/", {"team": other_team.slug, "gpu_hours": "30"})

    seen = api.as_user(lead).get("/api/v1/billing/budgets/").json()
    refused = api.as_user(lead).post("/api/v1/billing/budgets/", {"team": "vision", "gpu_hours": 1})

    assert sorted(b["gpu_hours"] for b in seen) == ["10.0000", "20.0000"]
    assert refused.status_code == 403


def test_budgets_and_their_spending_come_as_csv(api, admin, team, grant):
    spent_budget(admin, team)

    response = api.as_user(admin).get("/api/v1/billing/budgets/", {"format": "csv"})

    header, line = response.content.decode().splitlines()
    assert header.startswith("id,team,department,period,gpu_model,gpu_hours,policy")
    cells = dict(zip(header.split(","), line.split(","), strict=True))
    assert cells["team"] == team.slug
    assert cells["spent_gpu_hours"] == "0.0"
    assert cells["exhausted"] == "True"


# --- the 100% policy ---------------------------------------------------------------------------


def spent_budget(admin, team, **fields) -> Budget:
    """A budget of 0 GPU-hours: spent as soon as the check measures it."""
    from billing.budgets import budget_set

    budget = budget_set(actor=admin, team=team, gpu_hours="0", **fields)
    budget_checks.budgets_check()
    return budget


def test_a_spent_budget_refuses_new_jobs_naming_the_budget(api, admin, member, team, grant):
    spent_budget(admin, team)

    response = api.as_user(member).post("/api/v1/jobs/", job(), format="json")

    assert response.status_code == 400, response.data
    message = str(response.data["gpus"])
    assert "Budget spent: the monthly budget of 0 GPU-hours of team vision" in message
    assert "refused" in message


def test_a_spent_budget_refuses_new_services_naming_the_budget(api, admin, member, team, grant):
    spent_budget(admin, team)

    response = api.as_user(member).post("/api/v1/services/", deploy_body(), format="json")

    assert response.status_code == 400, response.data
    assert "Budget spent: the monthly budget of 0 GPU-hours" in str(response.data["replicas"])
    assert not InferenceService.objects.exists()


def test_a_budget_of_another_model_does_not_refuse(api, admin, member, team, grant):
    spent_budget(admin, team, gpu_model="NVIDIA-H100-80GB-HBM3")

    response = api.as_user(member).post(
        "/api/v1/jobs/", job(gpu_model="NVIDIA-A100-SXM4-80GB"), format="json"
    )

    assert response.status_code == 201, response.data


def test_a_spent_department_budget_refuses_its_nested_teams_work(api, admin, member, team, grant):
    top = Department.objects.create(slug="top", name="Top")
    team.department = Department.objects.create(slug="lab", name="Lab", parent=top)
    team.save()
    from billing.budgets import budget_set

    budget_set(actor=admin, department=top, gpu_hours="0")
    budget_checks.budgets_check()

    response = api.as_user(member).post("/api/v1/jobs/", job(), format="json")

    assert response.status_code == 400
    assert "department top" in str(response.data["gpus"])


def test_raising_a_spent_budget_admits_work_again(api, admin, member, team, grant):
    budget = spent_budget(admin, team)
    from billing.budgets import budget_set

    budget_set(actor=admin, team=team, gpu_hours="100")
    budget_checks.budgets_check(budget_ids=[budget.pk])

    response = api.as_user(member).post("/api/v1/jobs/", job(), format="json")

    assert response.status_code == 201, response.data


def test_opportunistic_policy_in_kueue_mode_takes_only_opportunistic_jobs(
    api, admin, member, team, cluster, grant
):
    cluster.quota_mode = QuotaMode.KUEUE
    cluster.save()
    spent_budget(admin, team, policy="opportunistic")
    client = api.as_user(member)

    guaranteed = client.post("/api/v1/jobs/", job(priority="guaranteed"), format="json")
    opportunistic = client.post(
        "/api/v1/jobs/", job(name="spare", priority="opportunistic"), format="json"
    )

    assert guaranteed.status_code == 400
    assert "submit it as opportunistic" in str(guaranteed.data["gpus"])
    assert opportunistic.status_code == 201, opportunistic.data


def test_opportunistic_policy_without_kueue_refuses_saying_why(api, admin, member, team, grant):
    spent_budget(admin, team, policy="opportunistic")

    response = api.as_user(member).post(
        "/api/v1/jobs/", job(priority="opportunistic"), format="json"
    )

    assert response.status_code == 400
    assert "not in Kueue mode" in str(response.data["gpus"])


def test_the_leads_hear_once_per_period_that_a_budget_is_spent(admin, lead, team, grant):
    spent_budget(admin, team)
    budget_checks.budgets_check()

    (notice,) = Notification.objects.filter(user=lead)
    assert notice.kind == Notification.Kind.BUDGET_EXHAUSTED
    assert notice.subject == "The monthly budget of 0 GPU-hours of team vision is spent"
    assert notice.link == f"/billing/teams/{team.slug}/budgets/"
    spend = BudgetSpend.objects.get()
    assert spend.period_start == THIS_MONTH


# --- statements --------------------------------------------------------------------------------


def test_the_statement_prices_the_usage_reports_granted_hours(api, admin, team, grant):
    api.as_user(admin).post("/api/v1/billing/prices/", price(gpu_hour="2"))
    api.as_user(admin).post(
        "/api/v1/billing/prices/", price(gpu_model="", gpu_hour="1", cpu_core_hour="0")
    )

    usage = api.as_user(admin).get("/api/v1/usage-report/", {"bucket": "total"}).json()
    statement = api.as_user(admin).get("/api/v1/billing/statements/").json()

    (usage_row,) = [r for r in usage["rows"] if r["team"] == team.slug]
    (line,) = statement["teams"]
    # The two calls count up to their own "now": a minute apart at most, 4 GPU-minutes.
    minute = 4 / 60
    assert line["granted_gpu_hours"] == pytest.approx(usage_row["granted_gpu_hours"], abs=minute)
    assert float(line["reserved_cost"]) == pytest.approx(
        usage_row["granted_gpu_hours"] * 2, abs=2 * minute + 0.01
    )
    assert line["held_gpu_hours"] is None  # no Prometheus: unknown, not zero
    assert statement["errors"]["gpu-east"]


def test_a_department_statement_sums_its_nested_teams(api, admin, team, other_team, cluster):
    top = Department.objects.create(slug="top", name="Top")
    lab = Department.objects.create(slug="lab", name="Lab", parent=top)
    team.department, other_team.department = lab, top
    team.save()
    other_team.save()
    for each in (team, other_team):
        factories.QuotaGrantFactory(
            request__team=each,
            request__cluster=cluster,
            request__gpus=2,
            request__starts_on=THIS_MONTH - datetime.timedelta(days=1),
            granted_by=admin,
        )
    api.as_user(admin).post("/api/v1/billing/prices/", price(gpu_model="", gpu_hour="1"))

    body = api.as_user(admin).get("/api/v1/billing/statements/").json()

    teams = {line["team"]: Decimal(line["reserved_cost"]) for line in body["teams"]}
    departments = {d["department"]: Decimal(d["reserved_cost"]) for d in body["departments"]}
    assert departments["lab"] == teams[team.slug]
    # Each figure is rounded to the cent on its own: the sum of rounded lines may differ by one.
    assert departments["top"] == pytest.approx(
        teams[team.slug] + teams[other_team.slug], abs=Decimal("0.01")
    )


def test_a_lead_gets_their_teams_statement_only_and_no_departments(
    api, admin, lead, team, other_team, grant
):
    body = api.as_user(lead).get("/api/v1/billing/statements/").json()

    assert {line["team"] for line in body["teams"]} == {team.slug}
    assert body["departments"] == []


@pytest.mark.parametrize(
    ("params", "field"),
    [({"month": "2026-13"}, "month"), ({"months": "0"}, "months"), ({"months": "99"}, "months")],
)
def test_bad_statement_months_are_a_400_naming_the_field(api, admin, params, field):
    response = api.as_user(admin).get("/api/v1/billing/statements/", params)

    assert response.status_code == 400
    assert field in response.json()


def test_the_statement_comes_as_csv_and_as_a_printable_page(api, admin, team, grant, client_as):
    csv = api.as_user(admin).get("/api/v1/billing/statements/", {"format": "csv"})
    download = client_as(admin).get("/billing/statements.csv")
    page = client_as(admin).get("/billing/statements/")

    lines = csv.content.decode().splitlines()
    assert lines[0].startswith("scope,name,department,cluster,month,granted_gpu_hours")
    assert lines[1].startswith(f"team,{team.slug},")
    assert page.status_code == 200
    assert team.name in page.content.decode()
    # The same rows; the grant's hours so far grow by 0.001 every 0.9 s between the two.
    downloaded = download.content.decode().splitlines()
    assert downloaded[0] == lines[0]
    assert [row.split(",")[:5] for row in downloaded] == [row.split(",")[:5] for row in lines]
    for got, sent in zip(downloaded[1:], lines[1:], strict=True):
        for value, expected in zip(got.split(",")[5:], sent.split(",")[5:], strict=True):
            assert value == expected or abs(float(value) - float(expected)) <= 0.01


def test_the_team_budgets_page_draws_each_budgets_burn_down(admin, team, grant, client_as):
    from billing.budgets import budget_set

    budget_set(actor=admin, team=team, gpu_hours="100")

    page = client_as(admin).get(f"/billing/teams/{team.slug}/budgets/")

    assert page.status_code == 200
    html = page.content.decode()
    assert "chart-budget-" in html
    assert "Projected at the current rate" in html


def test_a_negative_budget_on_the_page_is_a_form_error(admin, team, client_as):
    page = client_as(admin).post(
        f"/billing/teams/{team.slug}/budgets/",
        {"period": "month", "gpu_hours": "-5", "policy": "refuse", "gpu_model": ""},
    )

    assert page.status_code == 200
    assert "Must not be negative" in page.content.decode()
    assert not Budget.objects.exists()


def test_an_admin_sets_a_price_on_the_prices_page(admin, client_as):
    client = client_as(admin)

    done = client.post(
        "/billing/prices/",
        {"gpu_model": "H100", "effective_from": THIS_MONTH.isoformat(), "gpu_hour": "2.125"},
    )
    refused = client.post(
        "/billing/prices/",
        {"gpu_model": "H100", "effective_from": THIS_MONTH.isoformat(), "gpu_hour": "2.12345"},
    )

    assert done.status_code == 302
    assert Price.objects.get().gpu_hour == Decimal("2.125")
    assert refused.status_code == 200
    assert "At most 4 decimal places" in refused.content.decode()
    assert "2.1250" in client.get("/billing/prices/").content.decode()


def test_only_admins_see_the_prices_page(lead, client_as):
    assert client_as(lead).get("/billing/prices/").status_code == 403


# --- the usage CSV -----------------------------------------------------------------------------


def grant_this_month(team, cluster, lead, admin):
    return factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__requested_by=lead,
        request__starts_on=THIS_MONTH,
        request__ends_on=None,
        granted_by=admin,
    )


def usage_csv(api, user) -> list[dict]:
    response = api.as_user(user).get("/api/v1/usage-report/", {"format": "csv"})
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_the_usage_report_gives_a_team_its_budget_and_leaves_it_empty_without_one(
    api, admin, team, other_team, grant, cluster, lead
):
    grant_this_month(other_team, cluster, lead, admin)
    Budget.objects.create(team=team, period="quarter", gpu_hours=Decimal("900"))
    Budget.objects.create(team=team, period="month", gpu_hours=Decimal("300"))

    rows = {row["team"]: row for row in usage_csv(api, admin)}

    assert rows["vision"]["budget_gpu_hours"] == "300.000"  # the monthly budget first
    assert rows["vision"]["budget_spent_gpu_hours"] == ""  # no Prometheus: unknown
    assert rows["speech"]["budget_gpu_hours"] == rows["speech"]["budget_spent_gpu_hours"] == ""
    body = api.as_user(admin).get("/api/v1/usage-report/").json()
    budgets = {
        r["team"]: (r["budget_gpu_hours"], r["budget_spent_gpu_hours"]) for r in body["rows"]
    }
    assert budgets == {"vision": (300.0, None), "speech": (None, None)}


def test_the_usage_csv_reads_the_budgets_in_one_query_whatever_the_teams(api, admin, cluster, lead):
    def add_team(slug):
        team = factories.TeamFactory(slug=slug)
        grant_this_month(team, cluster, lead, admin)
        Budget.objects.create(team=team, gpu_hours=Decimal("10"))

    add_team("t-0")
    usage_csv(api, admin)  # warm: sessions, content types
    with CaptureQueriesContext(connection) as one_team:
        assert len(usage_csv(api, admin)) == 1
    for i in range(1, 6):
        add_team(f"t-{i}")
    with CaptureQueriesContext(connection) as six_teams:
        rows = usage_csv(api, admin)
    assert [row["budget_gpu_hours"] for row in rows] == ["10.000"] * 6
    assert len(six_teams) == len(one_team)
