from django.conf import settings

from tenants.permissions import is_portal_admin


def portal(request):
    """Values every page needs: the portal's name and whether the viewer is an admin."""
    return {
        "portal_name": settings.PORTAL_NAME,
        "is_portal_admin": is_portal_admin(request.user),
    }
