"""Test helpers for model calls: an OpenAI-compatible stub server and a network guard.

``StubLLM`` serves ``POST /v1/chat/completions`` on 127.0.0.1 from a thread
and records every request body, so tests can drive real litellm calls and
pin what was sent. ``block_network`` makes any connection or name lookup for
a non-loopback address fail, so a test that would reach the internet fails
instead.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})

Reply = str | dict[str, Any]
"""A reply: its text, or ``{"tool_calls": [(name, arguments_dict), ...], "content": ...}``
or ``{"status": 500}`` for an HTTP error."""


class NetworkBlockedError(OSError):
    """A test tried to reach a non-loopback address."""


@contextmanager
def block_network() -> Iterator[None]:
    """Within the block, sockets may only connect to loopback (or Unix) addresses."""
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def check(address: Any) -> None:
        if isinstance(address, tuple) and address and address[0] not in LOOPBACK:
            raise NetworkBlockedError(f"test tried to connect to {address!r}: no network in tests")

    def connect(self: socket.socket, address: Any) -> None:
        check(address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(address)
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name is not None and name not in LOOPBACK:
            raise socket.gaierror(f"test tried to resolve {name!r}: no network in tests")
        return real_getaddrinfo(host, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", connect)
        patch.setattr(socket.socket, "connect_ex", connect_ex)
        patch.setattr(socket, "getaddrinfo", getaddrinfo)
        yield


def _completion(model: str, reply: dict[str, Any], number: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
    calls = reply.get("tool_calls") or []
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{number}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for i, (name, arguments) in enumerate(calls)
        ]
    return {
        "id": f"chatcmpl-stub-{number}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class StubLLM:
    """An OpenAI-compatible chat-completions endpoint on 127.0.0.1.

    Replies come from :meth:`queue` in order, then from ``responder`` (a
    function of the request body), then ``default``.
    """

    def __init__(self, default: str = "stub reply") -> None:
        self.default = default
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.responder: Callable[[dict[str, Any]], Reply] | None = None
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with stub._lock:
                    stub.requests.append(body)
                    stub.paths.append(self.path)
                    number = len(stub.requests)
                    reply = stub._next(body)
                if isinstance(reply, str):
                    reply = {"content": reply}
                status = int(reply.get("status", 200))
                payload = (
                    _completion(str(body.get("model")), reply, number)
                    if status == 200
                    else {"error": {"message": "stub failure", "type": "server_error"}}
                )
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def _next(self, body: dict[str, Any]) -> Reply:
        if self._queue:
            return self._queue.popleft()
        if self.responder is not None:
            return self.responder(body)
        return self.default

    def queue(self, *replies: Reply) -> None:
        """Replies for the next requests, in order."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def url(self) -> str:
        """The ``api_base`` to give litellm."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> StubLLM:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
