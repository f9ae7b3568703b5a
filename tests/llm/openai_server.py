"""A real OpenAI-compatible HTTP server for the LLM tests: POST /v1/chat/completions on 127.0.0.1.

It answers from a script (valid kernels, malformed replies, 429 with Retry-After, 5xx, replies
slower than the client's timeout) or, when the script is empty, from an optional responder
function; it records every request body and header and the most requests it saw in flight at
once. The openai SDK talks to it over real HTTP; nothing of the client is mocked.
"""

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kernelarc.config import LLMConfig


@dataclass(frozen=True)
class Scripted:
    """One scripted answer."""

    text: str = ""
    """Reply content (status 200)."""
    status: int = 200
    """HTTP status; not 200 answers with an OpenAI-style error body."""
    delay_s: float = 0.0
    """Wait this long before answering (a slow reply)."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra response headers (e.g. Retry-After)."""


def reply(text: str) -> Scripted:
    return Scripted(text=text)


def status(code: int, retry_after: str | None = None) -> Scripted:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Scripted(status=code, headers=headers)


def slow(text: str, delay_s: float) -> Scripted:
    return Scripted(text=text, delay_s=delay_s)


def tokens(text: str) -> int:
    """The server's deterministic token count: one per 4 characters, at least one."""
    return max(len(text) // 4, 1)


class ChatServer:
    """The server; use as a context manager or call start()/stop()."""

    def __init__(self, responder: Callable[[dict[str, Any]], Scripted] | None = None) -> None:
        self.script: deque[Scripted] = deque()
        self.responder = responder
        self.bodies: list[dict[str, Any]] = []
        self.auth_headers: list[str] = []
        self.usage: list[tuple[int, int]] = []
        """(prompt, completion) tokens of every 200 answer."""
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def hits(self) -> int:
        return len(self.bodies)

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def push(self, *items: Scripted) -> None:
        self.script.extend(items)

    def start(self) -> "ChatServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                server._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    def __enter__(self) -> "ChatServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next(self, body: dict[str, Any]) -> Scripted:
        with self._lock:
            if self.script:
                return self.script.popleft()
        if self.responder is not None:
            return self.responder(body)
        return Scripted(status=400, text="test script exhausted")

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length", "0"))
        body = json.loads(handler.rfile.read(length) or b"{}")
        with self._lock:
            self.bodies.append(body)
            self.auth_headers.append(handler.headers.get("Authorization", ""))
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            code, payload, headers = self._answer(handler.path, body)
        finally:
            # The request stops counting as in flight before its answer is written: once the
            # client has the bytes it may release its slot and send the next request, which
            # must not find this one still counted.
            with self._lock:
                self._in_flight -= 1
        self._send(handler, code, payload, headers)

    def _answer(
        self, path: str, body: dict[str, Any]
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        if path != "/v1/chat/completions":
            return 404, {"error": {"message": f"no route {path}"}}, {}
        answer = self._next(body)
        if answer.delay_s:
            time.sleep(answer.delay_s)
        if answer.status != 200:
            error = {"message": answer.text or f"scripted {answer.status}", "type": "test"}
            return answer.status, {"error": error}, answer.headers
        prompt = sum(tokens(m.get("content", "")) for m in body.get("messages", []))
        completion = tokens(answer.text)
        with self._lock:
            self.usage.append((prompt, completion))
        payload = {
            "id": f"chatcmpl-{len(self.bodies)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer.text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }
        return 200, payload, answer.headers

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler, code: int, payload: dict[str, Any], headers: dict[str, str]
    ) -> None:
        data = json.dumps(payload).encode()
        try:
            handler.send_response(code)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                handler.send_header(key, value)
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout): what a slow reply is for


def kernel_reply(
    source: str,
    *,
    language: str = "pytorch",
    rationale: str = "a test kernel",
    conclusions: list[dict[str, Any]] | None = None,
    dps: bool = False,
) -> str:
    """A reply in the layout of prompts/system.md: a json block, then the source block."""
    payload: dict[str, Any] = {
        "rationale": rationale,
        "solution": {
            "name": "test-kernel",
            "spec": {
                "languages": [language],
                "target_hardware": ["LOCAL"],
                "entry_point": "kernel.py::run",
                "destination_passing_style": dps,
            },
            "sources": [{"path": "kernel.py"}],
        },
    }
    if conclusions is not None:
        payload["conclusions"] = conclusions
    return (
        "Here is the candidate.\n\n```json\n"
        + json.dumps(payload, indent=2)
        + "\n```\n\n```python path=kernel.py\n"
        + source
        + "```\n"
    )


def add_kernel(variant: int, *, wrong: bool = False) -> str:
    """A pytorch kernel for the vector_add sample problem; each variant has distinct source."""
    op = "torch.sub" if wrong else "torch.add"
    return f"import torch\n\n\ndef run(x, y):\n    # variant {variant}\n    return {op}(x, y)\n"


KEY_ENV = "KERNELARC_TEST_LLM_KEY"
"""The variable the test configs name as api_key_env."""


def config_for(server: ChatServer, **overrides: Any) -> LLMConfig:
    """An `llm=openai` config for the test server (short timeout, no prices unless given)."""
    settings: dict[str, Any] = {
        "kind": "openai",
        "base_url": server.base_url,
        "model": "test-model",
        "api_key_env": KEY_ENV,
        "timeout_s": 5.0,
        "max_retries": 3,
        "max_parse_retries": 2,
        "concurrency": 4,
    }
    settings.update(overrides)
    return LLMConfig(**settings)
