"""A real HTTP server in front of a real `mlflow server`: a slow or failing tracking backend.

While its gate is closed, every request waits at the server unanswered (a slow server); a
`fail` rule answers chosen requests with HTTP 500 instead of forwarding them (a failing one).
It records what arrived, in order, and how many requests were in flight at once, so a test can
assert on ordering and queueing rather than on wall-clock time.
"""

import http.client
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import urlsplit

HANG_GUARD_S = 60.0
"""A closed gate opens by itself after this long, so a broken test fails instead of hanging."""

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


@dataclass(frozen=True)
class Request:
    """One request as it reached the proxy."""

    method: str
    path: str
    body: bytes

    def json(self) -> dict[str, object]:
        """The body as JSON (MLflow's REST calls); {} if it is not."""
        try:
            data = json.loads(self.body or b"{}")
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}


FailRule = Callable[[Request], bool]
"""Which requests the proxy answers with HTTP 500 instead of forwarding."""


class GatedProxy:
    """A ThreadingHTTPServer on 127.0.0.1 forwarding to `upstream`; use as a context manager."""

    def __init__(self, upstream: str) -> None:
        """Forward to `upstream` (e.g. `http://127.0.0.1:5000`); the gate starts open."""
        split = urlsplit(upstream)
        self._host, self._port = split.hostname or "127.0.0.1", split.port or 80
        self._cond = threading.Condition()
        self._open = threading.Event()
        self._open.set()
        self.fail: FailRule | None = None
        self.arrived: list[Request] = []
        """Every request, in arrival order."""
        self.answered = 0
        """Requests answered so far."""
        self.in_flight = 0
        self.max_in_flight = 0
        """The most requests the proxy held at once."""
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def uri(self) -> str:
        """The tracking URI to give MLflow clients."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def close_gate(self) -> None:
        """Hold every request from now on until `open_gate`."""
        self._open.clear()

    def open_gate(self) -> None:
        """Let the held requests and all later ones through."""
        self._open.set()

    def wait_for_held(self, count: int = 1) -> None:
        """Wait until `count` requests are held at the closed gate (hang guard: HANG_GUARD_S)."""
        with self._cond:
            self._cond.wait_for(lambda: self.in_flight >= count, HANG_GUARD_S)

    def __enter__(self) -> "GatedProxy":
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._open.set()
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                """Quiet: the test reads `arrived`, not a log."""

            def do_GET(self) -> None:
                proxy._serve(self)

            do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

        return Handler

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        request = Request(handler.command, handler.path, handler.rfile.read(length))
        with self._cond:
            self.arrived.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._cond.notify_all()
        try:
            if not self._open.wait(HANG_GUARD_S):
                self._open.set()  # the hang guard: everything goes through from now on
            if self.fail is not None and self.fail(request):
                status, headers = 500, [("Content-Type", "application/json")]
                body = b'{"error_code": "INTERNAL_ERROR", "message": "injected by the test"}'
            else:
                status, headers, body = self._forward(handler, request)
        finally:
            # Counted out before the answer is written: once the client has it, its next
            # request may arrive before this thread runs again, and must not count as a second
            # request in flight (a race that made max_in_flight 2 on a loaded machine).
            with self._cond:
                self.in_flight -= 1
                self.answered += 1
                self._cond.notify_all()
        handler.send_response(status)
        for name, value in headers:
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def _forward(
        self, handler: BaseHTTPRequestHandler, request: Request
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP_BY_HOP}
        connection = http.client.HTTPConnection(self._host, self._port, timeout=HANG_GUARD_S)
        try:
            connection.request(request.method, request.path, body=request.body, headers=headers)
            response = connection.getresponse()
            body = response.read()
            kept = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP]
            return response.status, kept, body
        finally:
            connection.close()
