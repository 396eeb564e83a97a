from django.conf import settings

from portal.notice import read_notice
from tenants.permissions import is_portal_admin


def portal(request):
    """Values every page needs: the portal's name, whether the viewer is an admin, the
    single sign-on provider's name when single sign-on is on (the sign-in page offers it), and
    the notice of ``PORTAL_NOTICE_FILE`` ("" when there is none)."""
    return {
        "portal_name": settings.PORTAL_NAME,
        "is_portal_admin": is_portal_admin(request.user),
        "sso_provider": settings.OIDC_PROVIDER_NAME if settings.OIDC_ENABLED else None,
        "portal_notice": read_notice(),
    }
