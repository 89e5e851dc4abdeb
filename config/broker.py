"""Settings of the Valkey (or Redis) server beside Mnemo: Celery's broker and the cache every
process shares. Imported by config/settings.py.
"""

from config.env import DATA_DIR, EMBEDDED, env
from lib.beat_schedule import beat_schedule, embedded_broker_url
from lib.stack import Layout

# Celery: Redis (or any kombu URL) in production. In embedded mode, the Valkey server that
# `make run` supervises in the data dir (lib/stack.py) is the broker and the shared cache.
VALKEY_SOCKET = Layout(DATA_DIR).valkey_socket
CELERY_BROKER_URL = env.str(
    "CELERY_BROKER_URL",
    default=embedded_broker_url(DATA_DIR) if EMBEDDED else "redis://localhost:6379/0",
)
# A task is acknowledged when it ends, not when it starts: a worker killed mid-task leaves
# it unacknowledged, and the broker hands it out again once the visibility timeout passes.
# The tasks are idempotent, so running one twice does no harm.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 300}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE = beat_schedule()  # each app's schedule.py (lib/beat_schedule.py)

# The cache holds the API's per-token throttle counters and the embedding requests
# (search/indexing.py), so every web process and worker must share it: the supervised
# Valkey in embedded mode, Redis in compose (CACHE_URL).
if "CACHE_URL" in env:
    CACHES = {"default": env.cache_url("CACHE_URL")}
elif EMBEDDED:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"unix://{VALKEY_SOCKET}?db=1",
        }
    }
else:  # one process only: with several, set CACHE_URL (compose does)
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
