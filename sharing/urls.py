from django.urls import path

from sharing import views

urlpatterns = [
    path("teams/<slug:slug>/", views.layout_list, name="sharing-layout-list"),
    path("teams/<slug:slug>/new/", views.layout_new, name="sharing-layout-new"),
    path("<int:pk>/cancel/", views.layout_cancel, name="sharing-layout-cancel"),
    path("<int:pk>/decide/", views.layout_decide, name="sharing-layout-decide"),
    path("review/", views.layout_review, name="sharing-review"),
]
