"""The API's sign-in and its tokens: ``POST auth/token/`` trades a username and password for a
new token (throttled with the sign-in page, see ``accounts.lockout``); ``tokens/`` lists the
caller's tokens and revokes one."""

from django.contrib.auth import authenticate
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import selectors, services
from accounts.api import serializers as s
from accounts.models import ApiToken

BAD_INPUT = OpenApiResponse(
    OpenApiTypes.OBJECT, description="Field name -> list of messages (non_field_errors for none)."
)
LOCKED_OUT = OpenApiResponse(
    OpenApiTypes.OBJECT,
    description="Too many failed sign-ins for this username or address: try again after "
    "the `Retry-After` header's seconds.",
)


class TokenLoginView(APIView):
    """Sign in with a username and password; the answer holds a new API token and its expiry."""

    authentication_classes = []
    permission_classes = [AllowAny]

    @extend_schema(
        summary="Trade a username and password for a new API token",
        request=s.TokenLoginSerializer,
        responses={200: s.NewTokenSerializer, 400: BAD_INPUT, 429: LOCKED_OUT},
        auth=[],
    )
    def post(self, request):
        serializer = s.TokenLoginSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        # The Django request: axes counts failures on it, and its middleware answers 429 once
        # this client is locked out.
        user = authenticate(request._request, username=data["username"], password=data["password"])
        if user is None:
            raise ValidationError(
                {"non_field_errors": ["Unable to sign in with these credentials."]}
            )
        token, secret = services.api_token_create(user=user, name=data["name"], scope=data["scope"])
        return Response(s.new_token_data(token, secret))


@extend_schema_view(
    list=extend_schema(summary="Your API tokens that have not expired, newest first"),
    destroy=extend_schema(
        summary="Revoke one of your API tokens: it stops working at once",
        responses={204: None, 404: OpenApiResponse(description="Not one of your tokens.")},
    ),
)
class ApiTokenViewSet(mixins.ListModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    serializer_class = s.ApiTokenSerializer
    permission_classes = [IsAuthenticated]
    lookup_value_regex = r"\d+"
    filter_backends = []

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no user
            return ApiToken.objects.none()
        return selectors.api_tokens_of(self.request.user)

    def perform_destroy(self, instance):
        services.api_token_revoke(token=instance)
