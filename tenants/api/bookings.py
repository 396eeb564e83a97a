"""The booking calendar over REST: a cluster's GPUs of a model (or of any model of a kind) day
by day, and the earliest window with N GPUs free for K days. Booking a window is a normal quota
request (``POST /api/v1/quota-requests/`` with ``starts_on`` and ``ends_on``): it goes to
review like any other.

Every signed-in user may read them: capacity and what is granted in all are what leads plan
with (no team is named). Bad input is a 400 naming the field."""

from django.conf import settings
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.models import Cluster
from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from tenants import bookings

CLUSTER_NAME = OpenApiParameter("name", str, OpenApiParameter.PATH, description="Cluster name.")


class PoolQuerySerializer(serializers.Serializer):
    gpu_resource = serializers.CharField(default=DEFAULT_GPU_RESOURCE, max_length=253)
    gpu_model = serializers.CharField(
        default="",
        allow_blank=True,
        max_length=200,
        help_text="A GPU model of the cluster (GET /api/v1/clusters/ lists them); empty: any "
        "model of the kind.",
    )


class CalendarQuerySerializer(PoolQuerySerializer):
    start = serializers.DateField(required=False, help_text="First day; default today.")
    end = serializers.DateField(
        required=False,
        help_text=f"Last day, included; default {bookings.DEFAULT_DAYS} days from the start, "
        f"at most {bookings.MAX_DAYS}.",
    )
    pending = serializers.BooleanField(
        default=True, help_text="Count pending requests (shown apart, not taken from free)."
    )


class EarliestWindowQuerySerializer(PoolQuerySerializer):
    gpus = serializers.IntegerField(
        min_value=1,
        max_value=settings.PORTAL_MAX_GPUS_PER_REQUEST,
        help_text="GPUs wanted for the whole window.",
    )
    days = serializers.IntegerField(
        min_value=1, max_value=bookings.MAX_DAYS, help_text="Length of the window in days."
    )
    not_before = serializers.DateField(required=False, help_text="Earliest start; default today.")


class CalendarDaySerializer(serializers.Serializer):
    day = serializers.DateField()
    granted = serializers.IntegerField(help_text="GPUs active grants hold that day.")
    pending = serializers.IntegerField(help_text="GPUs pending requests ask for that day.")
    free = serializers.IntegerField(help_text="GPUs left to grant that day.")


class CalendarSerializer(serializers.Serializer):
    cluster = serializers.CharField(source="pool.cluster.name")
    gpu_resource = serializers.CharField(source="pool.gpu_resource")
    gpu_model = serializers.CharField(source="pool.gpu_model")
    capacity = serializers.IntegerField(source="pool.capacity", help_text="GPUs to plan with.")
    plannable = serializers.IntegerField(
        source="pool.plannable", help_text="Capacity times the cluster's overcommit ratio."
    )
    start = serializers.DateField(source="first")
    end = serializers.DateField(source="last")
    days = CalendarDaySerializer(many=True)


class BookingWindowSerializer(serializers.Serializer):
    starts_on = serializers.DateField()
    ends_on = serializers.DateField()
    gpus = serializers.IntegerField()
    free = serializers.IntegerField(help_text="The fewest GPUs free over the window.")


class EarliestWindowSerializer(serializers.Serializer):
    found = serializers.BooleanField()
    window = BookingWindowSerializer(allow_null=True, help_text="Null: none within the horizon.")
    detail = serializers.CharField(help_text="The answer in words.")


def _query(request, serializer_class) -> dict:
    serializer = serializer_class(data=request.query_params)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class ClusterCalendarView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        summary="A cluster's GPUs of a model day by day: capacity, granted, pending and free",
        parameters=[CLUSTER_NAME, CalendarQuerySerializer],
        responses=CalendarSerializer,
    )
    def get(self, request, name: str):
        cluster = get_object_or_404(Cluster, name=name)
        query = _query(request, CalendarQuerySerializer)
        calendar = bookings.booking_calendar(
            cluster=cluster,
            today=timezone.localdate(),
            gpu_resource=query["gpu_resource"],
            gpu_model=query["gpu_model"],
            first=query.get("start"),
            last=query.get("end"),
            with_pending=query["pending"],
        )
        return Response(CalendarSerializer(calendar).data)


class EarliestWindowView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        summary="The earliest window in which N GPUs of a model are free for K days",
        description="Counts every grant that meets the window, as approval's capacity check "
        f"does; searches starts within {bookings.MAX_DAYS} days of today.",
        parameters=[CLUSTER_NAME, EarliestWindowQuerySerializer],
        responses=EarliestWindowSerializer,
    )
    def get(self, request, name: str):
        cluster = get_object_or_404(Cluster, name=name)
        query = _query(request, EarliestWindowQuerySerializer)
        window = bookings.earliest_window(
            cluster=cluster,
            gpus=query["gpus"],
            days=query["days"],
            today=timezone.localdate(),
            gpu_resource=query["gpu_resource"],
            gpu_model=query["gpu_model"],
            not_before=query.get("not_before"),
        )
        answer = {
            "found": window is not None,
            "window": window,
            "detail": bookings.window_words(window, gpus=query["gpus"], days=query["days"]),
        }
        return Response(EarliestWindowSerializer(answer).data)
