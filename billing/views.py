"""Billing pages: prices (admins), the printable monthly statement and its CSV, and a team's
budgets with their burn-down. Views are thin: ``prices``/``budgets`` write, ``statements``,
``burn_down`` and ``selectors`` read."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from billing import budgets, prices, selectors, statements
from billing.burn_down import budget_burn_down
from billing.forms import BudgetForm, PriceForm, StatementForm
from tenants.forms import add_service_errors
from tenants.permissions import is_portal_admin
from tenants.selectors import teams_visible_to


@login_required
def price_list(request: HttpRequest) -> HttpResponse:
    if not is_portal_admin(request.user):
        raise PermissionDenied("Only portal admins can see and set prices.")
    form = PriceForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            price = prices.price_set(actor=request.user, **form.cleaned_data)
        except ValidationError as error:
            add_service_errors(form, error)
        else:
            messages.success(request, f"Price set: {price}.")
            return redirect("billing-prices")
    return render(
        request, "billing/prices.html", {"form": form, "prices": list(selectors.prices())}
    )


def _statement(request: HttpRequest, form: StatementForm) -> statements.Statement:
    return selectors.statement_for(
        request.user,
        first_month=form.cleaned_data["month"],
        months=form.cleaned_data["months"],
    )


@login_required
def statement_page(request: HttpRequest) -> HttpResponse:
    form = StatementForm(request.GET)
    statement = _statement(request, form) if form.is_valid() else None
    return render(
        request,
        "billing/statement.html",
        {
            "form": form,
            "statement": statement,
            "team_lines": statement.team_totals() if statement else [],
            "query": request.GET.urlencode(),
        },
    )


@login_required
def statement_csv(request: HttpRequest) -> HttpResponse:
    form = StatementForm(request.GET)
    if not form.is_valid():
        text = " ".join(f"{k}: {v[0]}" for k, v in form.errors.items())
        return HttpResponse(text, status=400, content_type="text/plain")
    response = HttpResponse(
        statements.csv_text(_statement(request, form)), content_type="text/csv; charset=utf-8"
    )
    name = f"gpu-statement-{form.cleaned_data['month']:%Y-%m}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@login_required
def team_budgets(request: HttpRequest, slug: str) -> HttpResponse:
    team = get_object_or_404(teams_visible_to(request.user), slug=slug)
    admin = is_portal_admin(request.user)
    form = BudgetForm(request.POST or None) if admin else None
    if request.method == "POST":
        if not admin:
            raise PermissionDenied("Only portal admins can set budgets.")
        if form.is_valid():
            try:
                budgets.budget_set(actor=request.user, team=team, **form.cleaned_data)
            except ValidationError as error:
                add_service_errors(form, error)
            else:
                messages.success(request, "Budget set.")
                return redirect("billing-team-budgets", team.slug)
    burn_downs = [budget_burn_down(b) for b in selectors.budgets_of_team(team)]
    return render(
        request,
        "billing/team_budgets.html",
        {"team": team, "burn_downs": burn_downs, "form": form},
    )
