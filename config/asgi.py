"""The ASGI entry point the web server runs (gunicorn's asgi worker; see lib/asgi.py)."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from django.conf import settings

from config.wsgi import application as wsgi_application
from lib.asgi import BufferedWSGI
from lib.http_errors import refusal

application = BufferedWSGI(
    wsgi_application, max_body_bytes=settings.MNEMO_API_MAX_BODY_BYTES, refuse=refusal
)
