"""Hostile and broken clients over raw sockets: the server answers each with a clear 4xx and stays up."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx

from tests.support.service_fakes import served

QUESTION = "How do I rotate the API key of a Lumen workspace?"


def raw(port: int, data: bytes, *, read_s: float = 10.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=read_s) as s:
        s.sendall(data)
        s.settimeout(read_s)
        chunks = []
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                if b"\r\n\r\n" in b"".join(chunks) and _complete(b"".join(chunks)):
                    break
        except socket.timeout:
            pass
        return b"".join(chunks)


def _complete(data: bytes) -> bool:
    head, _, body = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def status_of(reply: bytes) -> int:
    return int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/1.1 ") else -1


def post(path: str, body: bytes, headers: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{headers}Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def test_bad_content_lengths_bodies_and_json(examples_index):
    with served({"demo": examples_index}, body_timeout_s=1.0, max_body_bytes=4096) as svc:
        p = svc.port
        for length in (b"abc", b"-5"):
            reply = raw(p, b"POST /v1/ask HTTP/1.1\r\nHost: x\r\nContent-Length: " + length + b"\r\n\r\n{}")
            assert status_of(reply) == 400, reply[:200]
        started = time.monotonic()
        reply = raw(p, b'POST /v1/ask HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{"question":')  # lies
        assert status_of(reply) == 408 and time.monotonic() - started < 8
        reply = raw(p, post("/v1/ask", b"x" * 5000))
        assert status_of(reply) == 413 and b"over the limit" in reply
        reply = raw(p, post("/v1/ask", b"{not json"))
        assert status_of(reply) == 400 and json.loads(reply.partition(b"\r\n\r\n")[2])["error"]["type"]
        # a lone surrogate in the question: a clear 400, not a crash
        reply = raw(
            p, post("/v1/chat/completions", b'{"model": "demo", "messages": [{"role": "user", "content": "key \\ud800 rotate"}]}')
        )
        assert status_of(reply) == 400 and b"lone surrogate" in reply
        # chunked transfer encoding is accepted
        body = json.dumps({"question": QUESTION}).encode()
        chunked = (
            b"POST /v1/ask HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
        )
        reply = raw(p, chunked, read_s=30)
        assert status_of(reply) == 200 and b'"answer"' in reply
        assert httpx.get(svc.base_url + "/healthz").status_code == 200


def test_keep_alive_after_a_404_and_a_413(examples_index):
    with served({"demo": examples_index}, max_body_bytes=4096) as svc:
        good = json.dumps({"question": QUESTION}).encode()
        with socket.create_connection(("127.0.0.1", svc.port), timeout=30) as s:
            s.sendall(post("/nope", b'{"a": 1}') + post("/v1/ask", good))  # pipelined on one connection
            data = b""
            while data.count(b"HTTP/1.1 ") < 2 or not data.rstrip().endswith(b"}"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        statuses = [int(part.split(b" ", 1)[0]) for part in data.split(b"HTTP/1.1 ")[1:]]
        assert statuses == [404, 200]
        reply = raw(svc.port, post("/v1/ask", b"y" * 10000))
        assert status_of(reply) == 413
        assert httpx.post(svc.base_url + "/v1/ask", json={"question": QUESTION}, timeout=30).status_code == 200


def test_slowloris_connections_do_not_block_others(examples_index):
    with served({"demo": examples_index}) as svc:
        socks = []
        try:
            for _ in range(300):  # each sends half a request line and stalls
                s = socket.create_connection(("127.0.0.1", svc.port), timeout=10)
                s.sendall(b"POST /v1/ask HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                socks.append(s)
            started = time.monotonic()
            r = httpx.post(svc.base_url + "/v1/ask", json={"question": QUESTION}, timeout=30)
            assert r.status_code == 200 and time.monotonic() - started < 20
        finally:
            for s in socks:
                s.close()


def test_fifty_concurrent_clients_no_errors(examples_index):
    with served({"demo": examples_index}, max_concurrent=8, queue_limit=200) as svc:
        codes: list[int] = []
        lock = threading.Lock()

        def client():
            with httpx.Client(timeout=120) as c:
                for _ in range(3):
                    r = c.post(
                        svc.base_url + "/v1/chat/completions",
                        json={"model": "demo", "messages": [{"role": "user", "content": QUESTION}]},
                    )
                    with lock:
                        codes.append(r.status_code)

        threads = [threading.Thread(target=client) for _ in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert len(codes) == 150 and set(codes) == {200}


def test_cors_preflight_for_a_configured_origin(examples_index):
    with served({"demo": examples_index}, cors_origins=["http://localhost:3000"]) as svc:
        r = httpx.options(
            svc.base_url + "/v1/chat/completions",
            headers={
                "Origin": "http://localhost:3000",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "http://localhost:3000"
        r = httpx.options(
            svc.base_url + "/v1/chat/completions",
            headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"},
        )
        assert "access-control-allow-origin" not in r.headers
