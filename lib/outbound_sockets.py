"""Sockets for lib/outbound.py's one POST: every read and write bounded by what is left of the
request's deadline, and the answer by a byte budget. No Django.
"""

from __future__ import annotations

import math
import socket
import ssl
import time
from typing import Any


class TooLarge(Exception):
    pass


class _Bounded:
    """A socket that gives every read and write only what is left until `deadline` and
    reads at most `budget` bytes in all."""

    deadline: float = math.inf
    budget: float = math.inf

    def _arm(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        self.settimeout(left)  # type: ignore[attr-defined]

    def _count(self, received: int) -> None:
        self.budget -= received
        if self.budget < 0:
            raise TooLarge

    def recv_into(self, *args: Any, **kwargs: Any) -> int:
        self._arm()
        received = super().recv_into(*args, **kwargs)  # type: ignore[misc]
        self._count(received)
        return received

    def recv(self, *args: Any, **kwargs: Any) -> bytes:
        self._arm()
        data = super().recv(*args, **kwargs)  # type: ignore[misc]
        self._count(len(data))
        return data

    def send(self, *args: Any, **kwargs: Any) -> int:
        self._arm()
        return super().send(*args, **kwargs)  # type: ignore[misc]

    def sendall(self, *args: Any, **kwargs: Any) -> None:
        self._arm()
        super().sendall(*args, **kwargs)  # type: ignore[misc]


class BoundedSocket(_Bounded, socket.socket):
    pass


class BoundedSSLSocket(_Bounded, ssl.SSLSocket):
    pass


def tls_context() -> ssl.SSLContext:
    return ssl.create_default_context()
