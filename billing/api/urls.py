"""Billing's part of the REST API under /api/v1/ (included by portal/urls.py)."""

from django.urls import path

from billing.api import views

urlpatterns = [
    path("billing/prices/", views.PriceListView.as_view(), name="api-prices"),
    path("billing/budgets/", views.BudgetListView.as_view(), name="api-budgets"),
    path("billing/budgets/<int:pk>/", views.BudgetDetailView.as_view(), name="api-budget"),
    path("billing/statements/", views.StatementView.as_view(), name="api-statements"),
]
