"""A small OpenAI-compatible server on 127.0.0.1, for tests and benchmarks.

Embeddings: it answers ``POST /v1/embeddings`` with deterministic vectors
(``fake_vector``), records every request (path, headers, JSON body) and plays a script of
replies first: a status with headers, a delay, vectors of a forced length, data in
shuffled order, floats where base64 was asked for, or a raw body. With the script empty it
answers normally, except that a request with an input containing ``refuse_containing``
gets a 400, as a server refuses an input over its model's length.

Chat: ``POST /v1/chat/completions`` plays its own script (``script_chat``): each
``ChatReply`` gives the answer's text (or a function of the request that makes it), a
status, a delay or usage counts. With that script empty it answers ``chat_default``
(a text, or a function of the request), "NOOP" unless set.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import random
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

NATIVE_DIMENSIONS = 1536  # what the server returns when a request has no `dimensions`
CHAT_PATH = "/v1/chat/completions"


def fake_vector(text: str, dimensions: int) -> list[float]:
    """The server's vector for a text: deterministic, not unit length (length 3 or so)."""
    values: list[float] = []
    counter = 0
    while len(values) < dimensions:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        values.extend(byte / 42.5 - 3.0 for byte in digest)  # in [-3, 3]
        counter += 1
    return values[:dimensions]


def stored_vector(text: str, dimensions: int) -> list[float]:
    """The server's vector for a text as Mnemo stores it: scaled to unit length."""
    vector = fake_vector(text, dimensions)
    norm = math.sqrt(math.fsum(value * value for value in vector))
    return [value / norm for value in vector]


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering (a stop of the server cuts it short)
    dimensions: int | None = None  # vector length regardless of the request
    shuffle: bool = False  # `data` in another order than the inputs (by `index` still)
    floats: bool = False  # answer floats even when base64 was asked for
    body: Any = None  # this JSON instead of embeddings (or an error object for a 4xx/5xx)


@dataclass
class ChatReply:
    content: str | Callable[[dict[str, Any]], str] = "NOOP"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    usage: dict[str, int] | None = None  # None: counted as words; {} : no usage at all


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    json: Any


class FakeOpenAI:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.replies: deque[Reply] = deque()
        self.chat_replies: deque[ChatReply] = deque()
        self.chat_default: str | Callable[[dict[str, Any]], str] = "NOOP"
        self.refuse_containing: str | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,))

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def script_chat(self, *replies: ChatReply) -> None:
        self.chat_replies.extend(replies)

    @property
    def chat_requests(self) -> list[Recorded]:
        return [recorded for recorded in self.requests if recorded.path == CHAT_PATH]

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers that are still delaying
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def refused(self, payload: Any) -> bool:
        marker = self.refuse_containing
        inputs = payload.get("input", []) if isinstance(payload, dict) else []
        inputs = [inputs] if isinstance(inputs, str) else inputs
        return bool(marker) and any(marker in text for text in inputs)

    def _next_reply(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            return self.replies.popleft() if self.replies else Reply()

    def _next_chat_reply(self, recorded: Recorded) -> ChatReply:
        with self._lock:
            self.requests.append(recorded)
            if self.chat_replies:
                return self.chat_replies.popleft()
            return ChatReply(content=self.chat_default)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 5  # idle keep-alive connections end instead of holding a thread

            def setup(self) -> None:
                super().setup()
                # The headers and the body go out in two writes; without this, Nagle holds
                # the body until the client's delayed ACK (~40 ms a request).
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    payload = json.loads(raw)
                except ValueError:
                    payload = raw.decode(errors="replace")
                recorded = Recorded(
                    "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, payload
                )
                if self.path == CHAT_PATH:
                    self._chat(recorded, fake._next_chat_reply(recorded))
                    return
                reply = fake._next_reply(recorded)
                if reply.delay and fake._stopping.wait(reply.delay):
                    return
                if self.path != "/v1/embeddings":
                    self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
                elif fake.refused(payload):
                    refusal = {"error": {"message": "input is too long for this model"}}
                    self._send(400, refusal, {})
                elif reply.status != 200:
                    body = reply.body or {"error": {"message": f"scripted {reply.status}"}}
                    self._send(reply.status, body, reply.headers)
                elif reply.body is not None:
                    self._send(200, reply.body, reply.headers)
                else:
                    self._send(200, embeddings_body(payload, reply), reply.headers)

            def _chat(self, recorded: Recorded, reply: ChatReply) -> None:
                if reply.delay and fake._stopping.wait(reply.delay):
                    return
                if reply.status != 200:
                    body = {"error": {"message": f"scripted {reply.status}"}}
                    self._send(reply.status, body, reply.headers)
                    return
                self._send(200, chat_body(recorded.json, reply), reply.headers)

            def _send(self, status: int, body: Any, headers: dict[str, str]) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (a timeout test): nothing to answer
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def embeddings_body(payload: dict[str, Any], reply: Reply) -> dict[str, Any]:
    inputs = payload["input"]
    inputs = [inputs] if isinstance(inputs, str) else inputs
    dimensions = reply.dimensions or payload.get("dimensions") or NATIVE_DIMENSIONS
    as_base64 = payload.get("encoding_format") == "base64" and not reply.floats
    data = []
    for index, text in enumerate(inputs):
        vector = fake_vector(text, dimensions)
        if as_base64:
            packed = struct.pack(f"<{len(vector)}f", *vector)
            embedding: Any = base64.b64encode(packed).decode()
        else:
            embedding = vector
        data.append({"object": "embedding", "index": index, "embedding": embedding})
    if reply.shuffle:
        random.Random(len(data)).shuffle(data)
        if len(data) > 1 and data[0]["index"] == 0:  # make sure it is out of order
            data.append(data.pop(0))
    tokens = sum(len(text.split()) for text in inputs)
    return {
        "object": "list",
        "data": data,
        "model": payload.get("model"),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def chat_body(payload: Any, reply: ChatReply) -> dict[str, Any]:
    content = reply.content(payload) if callable(reply.content) else reply.content
    messages = payload.get("messages", []) if isinstance(payload, dict) else []
    prompt_words = sum(len(str(message.get("content", "")).split()) for message in messages)
    body: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": payload.get("model") if isinstance(payload, dict) else None,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
    }
    if reply.usage is None:
        completion = len(content.split())
        body["usage"] = {
            "prompt_tokens": prompt_words,
            "completion_tokens": completion,
            "total_tokens": prompt_words + completion,
        }
    elif reply.usage:
        body["usage"] = reply.usage
    return body
