"""
ASGI config for portal project.

It exposes the ASGI callable as a module-level variable named ``application``.

For more information on this file, see
https://docs.djangoproject.com/en/5.2/howto/deployment/asgi/
"""

import os

from django.core.asgi import get_asgi_application

from portal.heap import freeze_startup_objects

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

django_application = get_asgi_application()

# Imported once Django is set up (get_asgi_application does it): the proxy loads models.
from interactive.proxy import SessionProxy  # noqa: E402

# /sessions/<id>/... (HTTP and websockets) goes to the session's notebook server, for its owner
# (interactive/proxy.py); everything else to the portal.
application = SessionProxy(django_application)

freeze_startup_objects()  # the last thing a worker does before serving
