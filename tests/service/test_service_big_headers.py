"""A request head over the limit gets a status line the client reads (431), not a reset connection; the server
goes on answering."""

from __future__ import annotations

import socket
import threading

import httpx

from tests.support.service_fakes import served


def _raw(port: int, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sender = threading.Thread(target=lambda: _send(sock, head), daemon=True)
        sender.start()
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
        sender.join(30)
        return got


def _send(sock: socket.socket, data: bytes) -> None:
    try:
        sock.sendall(data)
    except OSError:
        pass  # the server may stop reading once it has answered


def test_a_one_megabyte_header_gets_431(examples_index):
    with served({"demo": examples_index}) as svc:
        big = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1024 * 1024) + b"\r\n\r\n"
        reply = _raw(svc.port, big)
        assert reply.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"), reply[:200]
        bad = _raw(svc.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
        assert bad.startswith(b"HTTP/1.1 400 "), bad[:200]
        assert httpx.get(svc.base_url + "/healthz").status_code == 200
