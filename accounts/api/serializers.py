from rest_framework import serializers

from accounts.models import ApiToken


class TokenLoginSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150, trim_whitespace=False)
    password = serializers.CharField(
        max_length=4096, trim_whitespace=False, style={"input_type": "password"}
    )
    name = serializers.CharField(
        max_length=100, required=False, default="", help_text="What the token is for."
    )
    scope = serializers.ChoiceField(
        choices=ApiToken.Scope.choices,
        default=ApiToken.Scope.READ_WRITE,
        help_text="read-only: the token may only read (GET, HEAD, OPTIONS).",
    )


class NewTokenSerializer(serializers.Serializer):
    """A token as it is made: the only time its secret is shown."""

    id = serializers.IntegerField()
    token = serializers.CharField(help_text="Send as `Authorization: Token <token>`.")
    prefix = serializers.CharField()
    expiry = serializers.DateTimeField()
    scope = serializers.CharField()


class ApiTokenSerializer(serializers.ModelSerializer):
    prefix = serializers.CharField(source="token_key", help_text="The token's first characters.")
    current = serializers.SerializerMethodField(help_text="Whether this request used this token.")

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "scope", "created", "expiry", "last_used_at", "current"]
        read_only_fields = fields

    def get_current(self, token: ApiToken) -> bool:
        return getattr(self.context["request"].auth, "pk", None) == token.pk


def new_token_data(token: ApiToken, secret: str) -> dict:
    return NewTokenSerializer(
        {
            "id": token.pk,
            "token": secret,
            "prefix": token.token_key,
            "expiry": token.expiry,
            "scope": token.scope,
        }
    ).data
