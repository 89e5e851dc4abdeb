"""lib/stack.py prints the address and the demo login only once the page answers."""

import http.server
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from lib.stack import page_answers, probe_url


class _LoadingThenServing(http.server.BaseHTTPRequestHandler):
    """503 for the first three requests (a web server still loading), then 200."""

    seen = 0

    def do_GET(self) -> None:
        type(self).seen += 1
        self.send_response(200 if self.seen > 3 else 503)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def loading_server() -> Iterator[http.server.HTTPServer]:
    _LoadingThenServing.seen = 0
    server = http.server.HTTPServer(("127.0.0.1", 0), _LoadingThenServing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    thread.join(timeout=10)


def test_the_page_answers_only_after_it_is_served(loading_server):
    url = f"http://127.0.0.1:{loading_server.server_port}/login/"
    assert page_answers(url, deadline=time.monotonic() + 60, interval=0.01)
    assert _LoadingThenServing.seen == 4  # three 503s were not taken for an answer


def test_a_page_that_never_answers_is_said_by_the_deadline():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    assert not page_answers(f"http://127.0.0.1:{port}/login/", deadline=started + 1, interval=0.05)
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8000/login/"),
        ("0.0.0.0", "http://127.0.0.1:8000/login/"),  # noqa: S104 - a host to ask
        ("::", "http://[::1]:8000/login/"),
        ("mnemo.local", "http://mnemo.local:8000/login/"),
    ],
)
def test_the_page_is_asked_where_a_local_client_reaches_it(host, url):
    assert probe_url(host, "8000") == url
