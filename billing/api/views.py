"""Prices, budgets and statements over REST. Admins set prices and budgets; everyone sees the
budgets and statements of the teams they may see (departments' roll-ups: admins). Bad input
is a 400 naming the field (the services' ValidationError, through the API's exception
handler)."""

from __future__ import annotations

from collections.abc import Mapping

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from billing import budgets, prices, selectors, statements
from billing.api import serializers as s
from billing.forms import StatementForm
from monitoring.api.views import CsvRenderer
from tenants.models import Department, Team
from tenants.permissions import is_portal_admin


def _body(request) -> Mapping:
    if not isinstance(request.data, Mapping):
        raise ValidationError({"non_field_errors": ["Send a JSON object."]})
    return request.data


def _text(data, name: str) -> str:
    value = data.get(name, "")
    if not isinstance(value, str):
        raise ValidationError({name: ["Must be text."]})
    return value


class PriceListView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(summary="Prices per GPU-hour of each GPU model, with their history",
                   responses=s.PriceSerializer(many=True))  # fmt: skip
    def get(self, request):
        return Response(s.PriceSerializer(selectors.prices(), many=True).data)

    @extend_schema(
        summary="Set a GPU model's price from a month on (admins)",
        request=s.PriceWriteSerializer,
        responses={201: s.PriceSerializer},
    )
    def post(self, request):
        data = _body(request)
        price = prices.price_set(
            actor=request.user,
            gpu_model=_text(data, "gpu_model"),
            effective_from=data.get("effective_from"),
            gpu_hour=data.get("gpu_hour"),
            cpu_core_hour=data.get("cpu_core_hour"),
            memory_gib_hour=data.get("memory_gib_hour"),
        )
        return Response(s.PriceSerializer(price).data, status=status.HTTP_201_CREATED)


class BudgetListView(APIView):
    permission_classes = [IsAuthenticated]
    renderer_classes = [JSONRenderer, CsvRenderer]

    @extend_schema(
        summary="Budgets you may see, with what each has spent this period",
        description="Spending is the last budget check's (every few minutes). `?format=csv` "
        "answers in CSV.",
        responses=s.BudgetSerializer(many=True),
    )
    def get(self, request):
        visible = list(selectors.budgets_visible_to(request.user))
        spends = selectors.current_spends(visible)
        data = s.BudgetSerializer(visible, many=True, context={"spends": spends}).data
        if request.accepted_renderer.format == "csv":
            response = Response(budgets.csv_text(data), content_type="text/csv")
            response["Content-Disposition"] = 'attachment; filename="gpu-budgets.csv"'
            return response
        return Response(data)

    @extend_schema(
        summary="Give a team or a department a GPU-hour budget (admins)",
        request=s.BudgetWriteSerializer,
        responses={201: s.BudgetSerializer},
    )
    def post(self, request):
        data = _body(request)
        team = department = None
        if data.get("team"):
            team = Team.objects.filter(slug=_text(data, "team")).first()
            if team is None:
                raise ValidationError({"team": [f"No team {data['team']!r}."]})
        if data.get("department"):
            department = Department.objects.filter(slug=_text(data, "department")).first()
            if department is None:
                raise ValidationError({"department": [f"No department {data['department']!r}."]})
        budget = budgets.budget_set(
            actor=request.user,
            team=team,
            department=department,
            period=data.get("period", "month"),
            gpu_model=_text(data, "gpu_model"),
            gpu_hours=data.get("gpu_hours"),
            policy=data.get("policy", "refuse"),
        )
        return Response(s.BudgetSerializer(budget).data, status=status.HTTP_201_CREATED)


class BudgetDetailView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(summary="Remove a budget (admins)", responses={204: None})
    def delete(self, request, pk: int):
        budget = get_object_or_404(selectors.budgets_visible_to(request.user), pk=pk)
        budgets.budget_delete(actor=request.user, budget=budget)
        return Response(status=status.HTTP_204_NO_CONTENT)


class StatementView(APIView):
    permission_classes = [IsAuthenticated]
    renderer_classes = [JSONRenderer, CsvRenderer]

    @extend_schema(
        summary="Monthly chargeback statements per team (and per department, for admins)",
        description="Reserved cost (granted GPU-hours, CPU and memory), used cost (held "
        "GPU-hours) and idle share (held under the idle threshold), MIG slices as their share "
        "of a GPU. `?format=csv` answers in CSV.",
        parameters=[
            OpenApiParameter("month", str, description="First month, YYYY-MM (default: this)."),
            OpenApiParameter("months", int, description="How many months (1-24, default 1)."),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        params = request.query_params.copy()
        params.pop("format", None)
        form = StatementForm(params)
        if not form.is_valid():
            raise ValidationError(form.errors.get_json_data())
        statement = selectors.statement_for(
            request.user,
            first_month=form.cleaned_data["month"],
            months=form.cleaned_data["months"],
        )
        if request.accepted_renderer.format == "csv":
            response = Response(statements.csv_text(statement), content_type="text/csv")
            response["Content-Disposition"] = 'attachment; filename="gpu-statement.csv"'
            return response
        return Response(s.statement_data(statement, departments=is_portal_admin(request.user)))
