"""The real-worker fixtures of tests/search/conftest.py (a private Valkey as the broker, a
`celery -A config worker`), and its hook that adds the worker's log to a failure report."""

from tests.search.conftest import (  # noqa: F401 - pytest finds fixtures and hooks by name
    celery_broker,
    pytest_runtest_makereport,
    start_worker,
    valkey,
    valkey_server,
)
