from django.conf import settings

from tenants.permissions import is_portal_admin


def portal(request):
    """Values every page needs: the portal's name, whether the viewer is an admin, and the
    single sign-on provider's name when single sign-on is on (the sign-in page offers it)."""
    return {
        "portal_name": settings.PORTAL_NAME,
        "is_portal_admin": is_portal_admin(request.user),
        "sso_provider": settings.OIDC_PROVIDER_NAME if settings.OIDC_ENABLED else None,
    }
