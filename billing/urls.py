from django.urls import path

from billing import views

urlpatterns = [
    path("prices/", views.price_list, name="billing-prices"),
    path("statements/", views.statement_page, name="billing-statement"),
    path("statements.csv", views.statement_csv, name="billing-statement-csv"),
    path("teams/<slug:slug>/budgets/", views.team_budgets, name="billing-team-budgets"),
]
