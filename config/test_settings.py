"""Settings for the test suite: a throwaway embedded PostgreSQL per test session.

Set DATABASE_URL to run the suite against another server instead.
"""

import atexit
import os
import shutil
import tempfile

if "MNEMO_DATA_DIR" not in os.environ:
    _data_dir = tempfile.mkdtemp(prefix="mnemo-test-")
    os.environ["MNEMO_DATA_DIR"] = _data_dir
    os.environ["MNEMO_EMBEDDED_THROWAWAY"] = "1"
    atexit.register(shutil.rmtree, _data_dir, ignore_errors=True)

from config.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # noqa: F405 - quiets WhiteNoise's missing-dir warning

# No Valkey runs beside the test database: tasks go to kombu's in-memory transport (tests
# that run a real worker give it a real broker), counters to a per-process cache.
CELERY_BROKER_URL = "memory://"
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# The suite embeds with WordLlama (~170,000 words/s; e5 makes ~56 short texts/s) unless a
# test picks another provider; tests/search/test_e5.py runs the e5 model itself, and
# tests/search/test_embeddings.py checks the defaults outside the tests (e5 for memories).
MNEMO_EMBEDDING_PROVIDER = "wordllama"
MNEMO_DOCUMENT_EMBEDDING_PROVIDER = "auto"  # wordllama, or openai when memories use openai
