from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils import timezone

from accounts.models import ApiToken


def api_tokens_of(user: User) -> QuerySet[ApiToken]:
    """The user's tokens that still work, newest first (expired ones are as good as gone)."""
    return ApiToken.objects.filter(user=user, expiry__gt=timezone.now()).order_by("-created", "-id")
