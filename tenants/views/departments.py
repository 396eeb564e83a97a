"""Department pages: the list, and one department with its teams (nested departments'
included), its admins, and what its teams hold against each ceiling; its usage is the usage
report asked for the department (``?department=``)."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from tenants import selectors
from tenants.ceilings import department_quota
from tenants.permissions import can_review_quota


def _require_viewer(request: HttpRequest) -> None:
    if not can_review_quota(request.user):
        raise PermissionDenied("Only portal admins and department admins see departments.")


@login_required
def department_list(request: HttpRequest) -> HttpResponse:
    _require_viewer(request)
    departments = (
        selectors.departments_visible_to(request.user)
        .select_related("parent")
        .prefetch_related("admins", "teams")
        .order_by("slug")
    )
    return render(request, "tenants/department_list.html", {"departments": departments})


@login_required
def department_detail(request: HttpRequest, slug: str) -> HttpResponse:
    _require_viewer(request)
    department = get_object_or_404(
        selectors.departments_visible_to(request.user).select_related("parent"), slug=slug
    )
    teams = selectors.department_teams(department).select_related("department").order_by("slug")
    return render(
        request,
        "tenants/department_detail.html",
        {
            "department": department,
            "admins": department.admins.order_by("username"),
            "children": department.children.order_by("slug"),
            "teams": teams,
            "quota": department_quota(department),
        },
    )
