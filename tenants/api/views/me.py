"""The signed-in user."""

from django.contrib.auth.models import User
from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from tenants.api.serializers.me import MeSerializer
from tenants.models import Membership


class MeView(APIView):
    """The signed-in user, whether they are a portal admin, and their teams with their roles."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses=MeSerializer)
    def get(self, request):
        memberships = Membership.objects.select_related("team").order_by("team__slug")
        user = User.objects.prefetch_related(Prefetch("memberships", queryset=memberships)).get(
            pk=request.user.pk
        )
        return Response(MeSerializer(user).data)
