import logging
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

application = get_wsgi_application()

# Load the tokenizer (~80 ms) and the search embedder (the local model, ~0.2 s) now, so the
# first working-memory request and the first search do not wait for them.
from lib.tokenizer import get_token_counter  # noqa: E402
from search.embedder_base import EmbeddingError  # noqa: E402
from search.embeddings import get_query_embedder  # noqa: E402

get_token_counter()
try:
    get_query_embedder()
except EmbeddingError as error:  # searches still answer by keywords; the error says why
    logging.getLogger(__name__).warning("The search embedder did not load: %s", error)
