"""A small webhook receiver on 127.0.0.1 (or another loopback address), for tests: it records
every POST (headers and the raw body) and answers the scripted statuses in turn, then 200; a
3xx points to `redirect_to`."""

from __future__ import annotations

import socket
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes


class _Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class FakeWebhook:
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.received: list[Received] = []
        self.statuses: deque[int] = deque()
        self.redirect_to = ""
        self._lock = threading.Lock()
        server_class = _Server6 if ":" in host else ThreadingHTTPServer
        self._server = server_class((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,))

    @property
    def host(self) -> str:
        return self._server.server_address[0]

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/hooks/mnemo"

    def script(self, *statuses: int) -> None:
        self.statuses.extend(statuses)

    def __enter__(self) -> FakeWebhook:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _next_status(self, received: Received) -> int:
        with self._lock:
            self.received.append(received)
            return self.statuses.popleft() if self.statuses else 200

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 5

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                headers = {name.lower(): value for name, value in self.headers.items()}
                status = fake._next_status(Received(self.path, headers, body))
                data = b"{}"
                self.send_response(status)
                if 300 <= status < 400 and fake.redirect_to:
                    self.send_header("Location", fake.redirect_to)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
