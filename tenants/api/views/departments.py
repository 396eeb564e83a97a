"""Departments, their admins and their ceilings."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action

from tenants import departments, selectors
from tenants.api.serializers.departments import (
    DepartmentAdminsSerializer,
    DepartmentCeilingSetSerializer,
    DepartmentCreateSerializer,
    DepartmentDetailSerializer,
    DepartmentSerializer,
    DepartmentWriteSerializer,
)
from tenants.api.views.base import SLUG, PortalViewSet
from tenants.models import Department


@extend_schema_view(
    list=extend_schema(summary="Departments (admins: all; department admins: theirs)"),
    retrieve=extend_schema(
        summary="A department with its ceilings and what its teams hold against them"
    ),
    create=extend_schema(
        summary="Create a department (admins)",
        request=DepartmentCreateSerializer,
        responses={201: DepartmentDetailSerializer},
    ),
    partial_update=extend_schema(
        summary="Rename a department or move it under another (admins)",
        request=DepartmentWriteSerializer,
        responses=DepartmentDetailSerializer,
    ),
)
class DepartmentViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    PortalViewSet,
):
    serializer_class = DepartmentSerializer
    action_serializers = {
        "retrieve": DepartmentDetailSerializer,
        "create": DepartmentCreateSerializer,
        "partial_update": DepartmentWriteSerializer,
        "admins": DepartmentAdminsSerializer,
        "ceilings": DepartmentCeilingSetSerializer,
    }
    lookup_field = "slug"
    lookup_value_regex = SLUG
    ordering_fields = ["slug", "name", "created_at"]
    http_method_names = ["get", "post", "patch", "put", "head", "options"]
    admin_actions = {
        "create": "create departments",
        "partial_update": "change departments",
        "admins": "set department admins",
        "ceilings": "set department ceilings",
    }

    def get_queryset(self):
        return (
            selectors.departments_visible_to(self.request.user)
            .select_related("parent")
            .prefetch_related("admins", "teams")
        )

    def create(self, request, *args, **kwargs):
        data = self.validated(DepartmentCreateSerializer)
        department = departments.department_create(actor=request.user, **data)
        return self.respond(department, DepartmentDetailSerializer, status.HTTP_201_CREATED)

    def partial_update(self, request, *args, **kwargs):
        department = self.get_object()
        data = self.validated(DepartmentWriteSerializer)
        department = departments.department_update(
            actor=request.user, department=department, **data
        )
        return self.respond(self._fresh(department), DepartmentDetailSerializer)

    def _fresh(self, department: Department) -> Department:
        return self.get_queryset().get(pk=department.pk)

    @extend_schema(
        summary="Make exactly these users the department's admins (admins)",
        request=DepartmentAdminsSerializer,
        responses=DepartmentDetailSerializer,
    )
    @action(detail=True, methods=["put"])
    def admins(self, request, slug=None):
        department = self.get_object()
        data = self.validated(DepartmentAdminsSerializer)
        departments.department_set_admins(
            actor=request.user, department=department, admins=data["admins"]
        )
        return self.respond(self._fresh(department), DepartmentDetailSerializer)

    @extend_schema(
        summary="Set or remove (gpus null) the ceiling for a GPU model on a cluster (admins)",
        request=DepartmentCeilingSetSerializer,
        responses=DepartmentDetailSerializer,
    )
    @action(detail=True, methods=["put"])
    def ceilings(self, request, slug=None):
        department = self.get_object()
        data = self.validated(DepartmentCeilingSetSerializer)
        departments.department_set_ceiling(actor=request.user, department=department, **data)
        return self.respond(self._fresh(department), DepartmentDetailSerializer)
