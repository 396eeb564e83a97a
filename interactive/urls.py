from django.urls import path

from interactive import views

urlpatterns = [
    path("", views.session_list, name="session-list"),
    path("new/", views.session_new, name="session-new"),
    path("<int:pk>/", views.session_detail, name="session-detail"),
    path("<int:pk>/live/", views.session_live, name="session-live"),
    path("<int:pk>/stop/", views.session_stop, name="session-stop"),
    path("<int:pk>/resume/", views.session_resume, name="session-resume"),
    path("policy/<slug:slug>/", views.session_policy, name="session-policy"),
]
