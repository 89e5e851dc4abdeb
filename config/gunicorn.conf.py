"""gunicorn settings for the web process, under `make run`, compose and the benchmarks.

The ASGI worker parses HTTP on an event loop, so slow clients hold a coroutine, not a
worker; lib/asgi.py then runs each complete request through Django. Environment:
MNEMO_HOST/MNEMO_PORT (where to listen), WEB_CONCURRENCY (processes).
"""

import os

bind = f"{os.environ.get('MNEMO_HOST', '127.0.0.1')}:{os.environ.get('MNEMO_PORT', '8000')}"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
# gunicorn's ASGI worker; with reuse_port (under `make run`, lib/stack.py) a worker whose
# master died serves until the next master's worker does (lib/web_worker.py).
worker_class = "lib.web_worker.Worker"
wsgi_app = "config.asgi:application"
# Long URLs reach the app, which answers 414 in the API's error shape or as a page
# (lib/asgi.py); gunicorn's own limit stays as a bound on memory.
limit_request_line = 1024 * 1024
limit_request_field_size = 64 * 1024
# A worker that stops answering its master for this long is replaced.
timeout = 30
# SIGTERM: finish what is in flight, within this many seconds (Ctrl-C stops within 10 s).
graceful_timeout = 5
keepalive = 5
accesslog = "-"
# An abandoned request is logged as 499 "client closed", not as gunicorn's "500 0".
logger_class = "lib.web_worker.AccessLog"
# gunicorn 27's control socket lives in $HOME by default, shared by every gunicorn of the
# user; several Mnemo stacks (and the tests) would fight over it. Nothing here uses it.
control_socket_disable = True
# gunicorn trusts no peer's X-Forwarded-Proto (its default trusts loopback's): Django alone
# decides, from MNEMO_TRUSTED_PROXIES only (lib/forwarded.py).
forwarded_allow_ips = ""


def pre_fork(server: object, worker: object) -> None:
    """Under `make run` the master preloads the app (lib/stack.py), and its objects are shared
    with each worker it forks: frozen, the worker's garbage collector never touches (and so
    never copies) their pages. bench/soak.py's idle stack: PSS 582 MB without, 545 MB with."""
    import gc

    gc.freeze()
