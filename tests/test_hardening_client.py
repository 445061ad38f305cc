"""Issue 16, item 7: the HTTP model client against real (misbehaving) servers on 127.0.0.1."""

from __future__ import annotations

import email.utils
import json
import socket
import socketserver
import threading
import time

import pytest

from playground.agents.chat import LLMError, parse_completion
from playground.agents.http_model import HTTPChatModel, retry_after_seconds
from playground.testing.openai_server import Reply, ScriptedChatServer, chat_response

MESSAGES = [{"role": "user", "content": "hi"}]


class RawServer:
    """A server on 127.0.0.1 whose n-th connection is answered by the n-th handler (the last one repeats).

    A handler gets the connected socket after the request has been read.
    """

    def __init__(self, *handlers):
        self.handlers = list(handlers)
        self.connections = 0
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = self.request.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length")), 0)
                while len(body) < length:
                    body += self.request.recv(65536)
                index = min(outer.connections, len(outer.handlers) - 1)
                outer.connections += 1
                try:
                    outer.handlers[index](self.request)
                except OSError:
                    pass

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def _ok(content="Action: look"):
    body = json.dumps(chat_response(content)).encode()

    def handler(sock):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    return handler


def _trickle(sock):
    body = json.dumps(chat_response("slow")).encode()
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
    for byte in body:
        sock.sendall(bytes([byte]))
        time.sleep(0.1)  # never idle long enough for a per-read timeout


def _cut_body(sock):
    body = json.dumps(chat_response("whole")).encode()
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body[:20])
    sock.shutdown(socket.SHUT_RDWR)


def test_a_trickling_server_is_cut_off_at_the_total_deadline():
    with RawServer(_trickle) as server:
        started = time.monotonic()
        with pytest.raises(LLMError, match="gave up"):
            HTTPChatModel(server.base_url, "m", timeout=0.5, retries=1, backoff=0.01).complete(MESSAGES)
        assert time.monotonic() - started < 3.0  # two attempts of 0.5 s, not the ~20 s of trickling


def test_a_body_cut_mid_way_is_retried():
    with RawServer(_cut_body, _ok("whole")) as server:
        reply = HTTPChatModel(server.base_url, "m", retries=2, backoff=0.01).complete(MESSAGES)
    assert reply.text == "whole" and server.connections == 2


def test_retry_after_in_seconds_and_as_an_http_date():
    assert retry_after_seconds("2") == 2.0 and retry_after_seconds("0.5") == 0.5
    assert retry_after_seconds("100000") == 60.0 and retry_after_seconds("garbage") is None
    soon = email.utils.formatdate(time.time() + 5, usegmt=True)
    assert 3.0 <= retry_after_seconds(soon) <= 5.0
    assert retry_after_seconds(email.utils.formatdate(time.time() - 100, usegmt=True)) == 0.0
    past = email.utils.formatdate(time.time() - 100, usegmt=True)
    script = [Reply(status=503, raw="{}", headers={"Retry-After": past}), "Action: look"]
    with ScriptedChatServer(script) as server:
        started = time.monotonic()
        reply = HTTPChatModel(server.base_url, "m", backoff=5.0).complete(MESSAGES)
    assert reply.text == "Action: look" and time.monotonic() - started < 2.0  # the date said: now


@pytest.mark.parametrize("payload", [
    [], "text", 3, {"choices": [{"message": "hello"}]}, {"choices": [{"message": {"content": 3}}]},
    {"choices": "abc"}, {"choices": [None]},
])
def test_replies_of_the_wrong_shape_are_named_errors(payload):
    with ScriptedChatServer([Reply(raw=json.dumps(payload))]) as server:
        with pytest.raises(LLMError):
            HTTPChatModel(server.base_url, "m", retries=0).complete(MESSAGES)


def test_odd_usage_and_content_parts_are_read_leniently():
    reply = parse_completion({"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"text": "b"}]}}],
                               "usage": {"prompt_tokens": "x", "completion_tokens": -3}}, "here")
    assert reply.text == "ab" and reply.prompt_tokens == 0 and reply.completion_tokens == 0
    assert parse_completion({"choices": [{"message": {"content": None}}], "usage": []}, "here").text == ""


def test_a_non_utf8_body_is_a_named_error():
    def handler(sock):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\n\xff\xfe\xfd\xfc")
    with RawServer(handler) as server, pytest.raises(LLMError, match="not JSON"):
        HTTPChatModel(server.base_url, "m", retries=0).complete(MESSAGES)


def test_a_huge_reply_is_cut_and_marked(tmp_path):
    with ScriptedChatServer(["x" * 5000]) as server:
        model = HTTPChatModel(server.base_url, "m", max_reply_chars=1000, cache_dir=str(tmp_path))
        reply = model.complete(MESSAGES)
    assert reply.text.startswith("x" * 1000) and "cut" in reply.text and "4,000" in reply.text
    assert len(reply.text) < 1100


def test_a_body_over_the_limit_is_refused():
    with ScriptedChatServer(["x" * 5000]) as server:
        with pytest.raises(LLMError, match="larger than"):
            HTTPChatModel(server.base_url, "m", max_body_bytes=1000, retries=0).complete(MESSAGES)
