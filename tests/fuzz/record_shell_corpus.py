#!/usr/bin/env python3
"""Seeds for the shell's fuzz drivers, recorded from real traffic: the integration
tests' mock upstreams (tests/tools/mock_upstream.py, the h2c mock h2mock.c) and real
clients (raw HTTP/1.1 requests, nghttp for h2) talk to build/citegate through relays
that write down every byte each side sent. Each connection becomes one seed in the
driver's input format (see the top of each fuzz_*.c):

  corpus/h1_server/rec_*  what an HTTP/1.1 client sent
  corpus/h2_server/rec_*  what nghttp sent, as RAW ops (no automatic preface)
  corpus/up_h1/rec_*      what the HTTP/1.1 mock answered
  corpus/up_h2/rec_*      what h2mock answered, as RAW ops (no automatic SETTINGS)

usage: python3 tests/fuzz/record_shell_corpus.py [--citegate build/citegate]
Run it again after changing the mocks or the fixtures; review what it adds with git.
"""
import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.dont_write_bytecode = True
import harness as H  # noqa: E402

DIALECTS = {"openai": 0, "anthropic": 1, "responses": 2}
PROFILES = ["openwebui", "openai", "webchat", "markdown", "structured", "off"]


class Relay:
    """A TCP relay to `target`; conns[i] = [bytes from the client side, bytes from the
    target], one list of recv() pieces each, in order."""

    def __init__(self, target_port):
        self.target = target_port
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.threads = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                a, _ = self.sock.accept()
            except OSError:
                return
            b = socket.create_connection(("127.0.0.1", self.target))
            rec = [[], []]
            self.conns.append(rec)
            for src, dst, log in ((a, b, rec[0]), (b, a, rec[1])):
                t = threading.Thread(target=self._pump, args=(src, dst, log), daemon=True)
                t.start()
                self.threads.append(t)

    @staticmethod
    def _pump(src, dst, log):
        try:
            while data := src.recv(65536):
                log.append(data)
                dst.sendall(data)
        except OSError:
            pass
        for s in (dst,):
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def settle(self):
        for t in self.threads:
            t.join(timeout=10)

    def close(self):
        self.sock.close()


def raw_request(port, data, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    try:
        while s.recv(65536):
            pass
    except OSError:
        pass
    s.close()


def chat(path="/v1/chat/completions", stream=True, headers=(), body=None):
    body = body or H.chat_body(stream=stream)
    head = b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in headers)
    return (b"POST %s HTTP/1.1\r\nHost: citegate\r\nContent-Type: application/json\r\n%s"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (path.encode(), head, len(body), body))


# (name, dialect, profile, stream, extra headers): each one request over HTTP/1.1.
H1_CASES = [
    ("azure_stream", "openai", "openwebui", True, [("X-Mock-Fixture", "azure_oyd_stream.sse")]),
    ("azure_crlf", "openai", "openai", True, [("X-Mock-Fixture", "azure_oyd_filters_crlf.sse")]),
    ("azure_body", "openai", "webchat", False, [("X-Mock-Fixture", "azure_oyd_response.json")]),
    ("numeric", "openai", "markdown", True, [("X-Mock-Fixture", "numeric_stream.sse")]),
    ("perplexity", "openai", "openwebui", True, [("X-Mock-Fixture", "perplexity_stream.sse")]),
    ("structured", "openai", "structured", True, [("X-Mock-Fixture", "structured_stream.sse")]),
    ("split_wire", "openai", "openwebui", True, [("X-Mock-Split-Wire", "7")]),
    ("eof_half", "openai", "openwebui", True, [("X-Mock-Fault", "eof")]),
    ("interim_103", "openai", "openai", True, [("X-Mock-Fault", "interim:103")]),
    ("close_delimited", "openai", "openwebui", True, [("X-Mock-Fault", "close-delimited")]),
    ("no_done", "openai", "openwebui", True, [("X-Mock-Fault", "no-done")]),
    ("status_500", "openai", "openwebui", True, [("X-Mock-Fault", "status:500")]),
    ("gzip", "openai", "openwebui", True, [("X-Mock-Fault", "gzip")]),
    ("anthropic", "anthropic", "openwebui", True, []),
    ("anthropic_body", "anthropic", "openai", False, []),
    ("anthropic_docs", "anthropic", "webchat", True,
     [("X-Mock-Fixture", "dialects/answers/anthropic_documents.sse")]),
    ("responses", "responses", "openwebui", True, []),
    ("responses_body", "responses", "markdown", False, []),
    ("responses_foundry", "responses", "openai", True,
     [("X-Mock-Fixture", "dialects/answers/responses_foundry.sse")]),
]

# (name, dialect, profile, stream, fixture): one request over h2 each, h2 upstream.
H2_CASES = [
    ("azure_stream", "openai", "openwebui", True, "azure_oyd_stream.sse"),
    ("azure_body", "openai", "openai", False, "azure_oyd_response.json"),
    ("numeric", "openai", "webchat", True, "numeric_stream.sse"),
    ("anthropic", "anthropic", "markdown", True, "dialects/e2e/anthropic_stream.sse"),
    ("responses", "responses", "openwebui", True, "dialects/e2e/responses_stream.sse"),
]


def write(corpus, name, data):
    d = os.path.join(HERE, "corpus", corpus)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "rec_" + name), "wb") as f:
        f.write(data)


def raw_ops(pieces):
    """RAW ops of at most 255 bytes, and a FLUSH after each recorded piece."""
    out = bytearray()
    for p in pieces:
        for i in range(0, len(p), 255):
            c = p[i:i + 255]
            out += bytes([9, len(c)]) + c
        out.append(10)
    return bytes(out)


def client_flags(profile, stream):
    return PROFILES.index(profile) | (0x08 if stream else 0)


def one_case(binary, mock_port, env, client):
    """Runs client(port) against a citegate of its own behind two relays; returns the
    (client side, upstream side) relays once every connection has ended."""
    up = Relay(mock_port)
    cg = H.Citegate(upstream=f"http://127.0.0.1:{up.port}", binary=binary, env=env).start()
    front = Relay(cg.port)
    try:
        client(front.port)
    finally:
        cg.stop()  # its upstream connections end with it
        front.settle()
        up.settle()
        front.close()
        up.close()
    return front, up


def record_h1(binary):
    mock = H.MockUpstream().start()
    try:
        for name, dialect, profile, stream, hdrs in H1_CASES:
            req = chat(stream=stream, headers=hdrs + [("X-Citegate-Profile", profile)])
            front, up = one_case(binary, mock.port, {"CITEGATE_UPSTREAM_DIALECT": dialect},
                                 lambda port: raw_request(port, req))
            flags = DIALECTS[dialect] << 2
            write("h1_server", name, bytes([0x80, flags, 0]) + b"".join(front.conns[0][0]))
            if up.conns:
                answer = b"".join(up.conns[0][1])
                write("up_h1", name, bytes([0x80, flags, client_flags(profile, stream)]) + answer)
            print("h1", name, len(front.conns), len(up.conns))
    finally:
        mock.cleanup()


def nghttp(body, fixture, profile):
    def run(port):
        subprocess.run(["nghttp", "-n", "--no-dep", "-d", body,
                        "-H", "content-type: application/json",
                        "-H", f"x-mock-fixture: {fixture}",
                        "-H", f"x-citegate-profile: {profile}",
                        f"http://127.0.0.1:{port}/v1/chat/completions"],
                       check=True, timeout=20, capture_output=True)
    return run


def record_h2(binary):
    mock = H.H2MockUpstream().start()
    body_dir = tempfile.mkdtemp(prefix="cg-rec-")
    try:
        for name, dialect, profile, stream, fixture in H2_CASES:
            body = os.path.join(body_dir, name + ".json")
            with open(body, "wb") as f:
                f.write(H.chat_body(stream=stream))
            env = {"CITEGATE_UPSTREAM_DIALECT": dialect, "CITEGATE_UPSTREAM_PROTOCOL": "h2"}
            front, up = one_case(binary, mock.port, env, nghttp(body, fixture, profile))
            flags = DIALECTS[dialect] << 2
            write("h2_server", name, bytes([0, flags, 3]) + raw_ops(front.conns[0][0]))
            write("up_h2", name, bytes([1, flags, client_flags(profile, stream)]) + raw_ops(up.conns[0][1]))
            print("h2", name, len(front.conns), len(up.conns))
    finally:
        mock.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--citegate", default=os.path.join(ROOT, "build", "citegate"))
    a = ap.parse_args()
    record_h1(a.citegate)
    record_h2(a.citegate)


if __name__ == "__main__":
    main()
