import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

application = get_wsgi_application()

# Load the tokenizer now (~80 ms), so the first working-memory request does not wait for it.
from lib.tokenizer import get_token_counter  # noqa: E402

get_token_counter()
