"""A scripted OpenAI-compatible LLM on 127.0.0.1 for `benchmarks/service/frontends.py --scripted`: the front end's
behaviour without a model's whims, and in seconds.

It answers ragsieve's prompts by what they are: a follow-up rewrite gets the user's latest message back
unchanged; an answer prompt gets a reply that cites the listed passages out of order and one of them twice
(so ragsieve renumbers the markers while it streams), except a question naming `UNCITED_TOPIC`, which gets
an answer that cites nothing (so the reply must say it is not grounded in the documents). Anything else
gets "OK". Streamed (`stream: true`) replies come word by word as server-sent events.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

UNCITED_TOPIC = "Moby-Dick"
UNCITED_ANSWER = "Herman Melville wrote Moby-Dick; it was published in 1851."
_SOURCE = re.compile(r" SOURCE \[(\d+)\] from ")
_LATEST = re.compile(r"(\S+) LATEST\n(.*?)\n\1 END", re.S)


def reply_to(prompt: str) -> str:
    """The scripted reply to the last message of a chat request."""
    latest = _LATEST.search(prompt)
    if "stand-alone question" in prompt and latest:
        return latest.group(2).strip()
    numbers = list(dict.fromkeys(_SOURCE.findall(prompt)))
    if not numbers:
        return "OK"
    if UNCITED_TOPIC in prompt:
        return UNCITED_ANSWER
    last, first = numbers[-1], numbers[0]
    return (
        f"Rotate the key with the rotate endpoint [{last}]. The old secret stays valid for 24 hours "
        f"and is then revoked [{first}][{last}]."
    )


class ScriptedLLM:
    """`with ScriptedLLM() as llm:` serves at `llm.base_url` (ends in /v1) until the block ends."""

    def __init__(self, reply: Callable[[str], str] = reply_to) -> None:
        self.reply = reply
        self.requests = 0
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> "ScriptedLLM":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        llm = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def _json(self, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._json({"object": "list", "data": [{"id": "scripted", "object": "model", "owned_by": "bench"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                llm.requests += 1
                text = llm.reply(str((body.get("messages") or [{}])[-1].get("content", "")))
                usage = {"prompt_tokens": 100, "completion_tokens": len(text.split()), "total_tokens": 100 + len(text.split())}
                base = {"id": "chatcmpl-scripted", "created": int(time.time()), "model": "scripted"}
                if not body.get("stream"):
                    self._json(
                        base
                        | {
                            "object": "chat.completion",
                            "usage": usage,
                            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                        }
                    )
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                pieces = re.findall(r"\S+\s*|\s+", text)
                for i, piece in enumerate(pieces):
                    last = i == len(pieces) - 1
                    chunk = base | {
                        "object": "chat.completion.chunk",
                        "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": "stop" if last else None}],
                    }
                    if last:
                        chunk["usage"] = usage
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(0.02)
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler
