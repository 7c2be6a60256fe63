"""citegate's external contract (SPEC.md §2-4, §6, §9-11) over HTTP/1.1, end to end:
client (http.client / raw socket) -> build/citegate -> tests/tools/mock_upstream.py.

run:  cd tests/integration && CITEGATE_BIN=../../build/citegate python3 -m unittest -v test_http1
      (ctest -L integration runs the same)

Each test class starts its own citegate with the environment it needs; the plain and
the TLS mock upstream are shared by the whole module. Set CG_KEEP=1 to keep the
temporary directories (citegate stderr logs) for debugging.
"""
import concurrent.futures
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import sys
import unittest

sys.dont_write_bytecode = True
import harness as H  # noqa: E402
from harness import client_view  # noqa: E402
import mock_upstream  # noqa: E402

TRANSFORMED_PATHS = [
    "/v1/chat/completions",
    "/openai/deployments/gpt-4o/chat/completions?api-version=2024-02-01",
    "/openai/v1/chat/completions",
]
STREAM = H.fixture_bytes("azure_oyd_stream.sse")
RESPONSE = H.fixture_bytes("azure_oyd_response.json")
VIEW_KEYS = ("content", "sources", "ends_with_done", "ends_with_error_event")

TMP = CERT = KEY = MOCK = TLS_MOCK = None


def setUpModule():
    global TMP, CERT, KEY, MOCK, TLS_MOCK
    TMP = tempfile.mkdtemp(prefix="cg-it-")
    CERT, KEY = H.make_cert(TMP)
    MOCK = H.MockUpstream().start()
    TLS_MOCK = H.MockUpstream(tls_cert=CERT, tls_key=KEY).start()


def tearDownModule():
    for m in (MOCK, TLS_MOCK):
        if m:
            m.stop() if os.environ.get("CG_KEEP") else m.cleanup()
    if not os.environ.get("CG_KEEP"):
        shutil.rmtree(TMP, ignore_errors=True)


def last_event_json(text):
    """data of the last SSE event, parsed (None when not JSON)."""
    last = None
    for _, data in client_view.sse_events(text):
        last = data
    try:
        return json.loads(last) if last is not None else None
    except ValueError:
        return None


def request_body_for(exp):
    """The client request for an expected file; JSON fixtures are asked non-streaming."""
    body = json.loads(H.fixture_bytes(exp["request"]))
    if not exp["fixture"].endswith(".sse"):
        body["stream"] = False
    return json.dumps(body).encode()


def is_openai_error(body):
    try:
        err = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        return False
    return isinstance(err, dict) and isinstance(err.get("message"), str) and err["message"] != ""


def error_message(body):
    try:
        return json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return ""


def pipelined(port, requests, timeout=10):
    """Sends the raw requests on one connection at once and reads to EOF (the last request
    should close); returns the raw response bytes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(b"".join(requests))
        out = b""
        while True:
            d = s.recv(65536)
            if not d:
                return out
            out += d
    finally:
        s.close()


def split_responses(raw, methods):
    """Splits raw HTTP/1.1 responses by their framing (Content-Length, chunked, or none for
    HEAD); returns [(status line, headers dict (lower-case names), body)]. Raises when the
    bytes do not frame as responses."""
    out = []
    for method in methods:
        head, sep, raw = raw.partition(b"\r\n\r\n")
        if not sep or not head.startswith(b"HTTP/1.1 "):
            raise ValueError(f"not a response head: {head[:80]!r}")
        lines = head.decode("latin-1").split("\r\n")
        hdrs = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
        body = b""
        if method != "HEAD" and "content-length" in hdrs:
            n = int(hdrs["content-length"])
            body, raw = raw[:n], raw[n:]
        elif method != "HEAD" and hdrs.get("transfer-encoding") == "chunked":
            end = raw.index(b"0\r\n\r\n") + 5
            body, raw = H.dechunk(raw[:end]), raw[end:]
        out.append((lines[0], hdrs, body))
    if raw:
        raise ValueError(f"bytes after the last response: {raw[:80]!r}")
    return out


class CitegateCase(H.DaemonCase):
    """Starts one citegate for the class with `env`. upstream: 'plain' (http mock), 'tls'
    (https://127.0.0.1:PORT), 'tls-localhost' (https://localhost:PORT), 'down' (a closed port)
    or None (no CITEGATE_UPSTREAM: embedded demo). At the end of the class, every citegate it
    started must have exited 0 after SIGTERM (SPEC §9), without a sanitizer report
    (H.DaemonCase)."""

    upstream = "plain"
    env = {}

    @classmethod
    def upstream_url(cls):
        if cls.upstream == "plain":
            return MOCK.url
        if cls.upstream == "tls":
            return TLS_MOCK.url  # https://127.0.0.1:PORT (cert has IP and DNS SANs)
        if cls.upstream == "tls-localhost":
            return f"https://localhost:{TLS_MOCK.port}"
        if cls.upstream == "down":
            return f"http://127.0.0.1:{H.free_port()}"
        return None

    @classmethod
    def extra_env(cls):
        env = dict(cls.env)
        if (cls.upstream or "").startswith("tls"):
            env.setdefault("CITEGATE_UPSTREAM_CA", CERT)
        return env

    @classmethod
    def setUpClass(cls):
        cls.mock = TLS_MOCK if (cls.upstream or "").startswith("tls") else MOCK
        cls.cg = H.Citegate(upstream=cls.upstream_url(), env=cls.extra_env())
        cls.cg.start()

    def setUp(self):
        self.mock.reset()
        if self.cg.proc is not None and self.cg.proc.poll() is not None:
            # died in an earlier test (reported there, and again when the class ends):
            # start a fresh one so that one crash does not fail every later test of the class
            type(self).cg = self.cg.restarted()

    def tearDown(self):
        cg = self.cg
        if self.__class__.__name__.startswith("Drain"):
            return  # these stop citegate on purpose
        rc = cg.proc.poll() if cg.proc is not None else None
        if rc is not None:
            self.fail(f"citegate exited with {rc} ({H.describe_exit(rc)}) during this test; "
                      f"stderr tail: {cg.stderr()[-1500:]}")

    # helpers ------------------------------------------------------------------
    def post(self, path, body, headers=None, timeout=10):
        return self.cg.request("POST", path, body, headers, timeout=timeout)

    def assertView(self, text, exp, keys=VIEW_KEYS, msg=""):
        got = client_view.view(text)
        for k in keys:
            if k in exp:
                self.assertEqual(got.get(k), exp[k], f"{msg} {k}: body was {text[-800:]!r}")
        return got

    def check_fixture(self, exp_name, path="/v1/chat/completions", split=None, headers=None):
        exp = H.expected(exp_name)
        hdrs = {"X-Mock-Fixture": exp["fixture"], "Authorization": "Bearer sk-test"}
        if split:
            hdrs["X-Mock-Split"] = str(split)
        hdrs.update(headers or {})
        st, hd, body = self.post(path, request_body_for(exp), hdrs)
        self.assertEqual(st, 200, body[:500])
        if exp["fixture"].endswith(".sse"):
            self.assertTrue(hd.get("Content-Type", "").startswith("text/event-stream"), hd)
        self.assertView(body.decode("utf-8"), exp, msg=f"{exp_name} via {path} split={split}:")
        return hd, body

    def stream_raw(self, headers, body=None, path="/v1/chat/completions", timeout=10):
        """Start a streaming request on a raw socket; returns (client, response with head read)."""
        c = self.cg.raw(timeout=timeout)
        r = c.request("POST", path, body if body is not None else H.chat_body(), headers)
        return c, r

    def disconnect_mid_stream(self, rst):
        """Client goes away after the first event; the upstream request must be cancelled
        within 1 s. The upstream would need ~3 s more to finish on its own (65 pieces, 50 ms)."""
        tid = "disc-%s-%d" % (self.__class__.__name__, time.monotonic_ns())
        c, r = self.stream_raw({"X-Mock-Fixture": "azure_oyd_filters_crlf.sse", "X-Mock-Split": "64",
                                "X-Mock-Delay-Ms": "50", "X-Test-Id": tid})
        self.assertEqual(r.status, 200)
        self.assertTrue(r.read_until(lambda b: re.search(rb"\r\n\r\n|\n\n|\r\r", b) is not None, 5),
                        "no first event")
        base = self.mock.stats()["closed_by_peer"]
        c.abort() if rst else c.close()
        t0 = time.monotonic()
        ok = H.wait_for(lambda: self.mock.stats()["closed_by_peer"] > base, 1.0)
        self.assertTrue(ok, f"upstream connection not closed within 1 s: {self.mock.stats()}, "
                            f"request: {[x['outcome'] for x in self.mock.find('X-Test-Id', tid)]}")
        self.assertLess(time.monotonic() - t0, 1.05)
        recs = self.mock.find("X-Test-Id", tid)
        self.assertEqual(len(recs), 1)
        self.assertEqual(recs[0]["outcome"], "aborted")

    def mid_stream_fault(self, fault, extra=None, timeout=10):
        hdrs = {"X-Mock-Fault": fault, "X-Mock-Split": "64"}
        hdrs.update(extra or {})
        t0 = time.monotonic()
        c, r = self.stream_raw(hdrs, timeout=timeout)
        try:
            self.assertEqual(r.status, 200)
            text = r.read_all(timeout=timeout).decode()
        finally:
            c.close()
        self.assertTrue(r.done, f"{fault}: response must be ended with its terminator, body {text[-300:]!r}")
        v = client_view.view(text)
        self.assertTrue(v["ends_with_error_event"], f"{fault}: no error event at the end: {text[-300:]!r}")
        self.assertFalse(v["ends_with_done"])
        self.assertNotIn("[DONE]", text)
        err = last_event_json(text)["error"]
        self.assertEqual(err.get("type"), "upstream_error")
        self.assertEqual(err.get("code"), "upstream_closed")
        return time.monotonic() - t0


# =============================================================================== plain upstream

class StreamingPlain(CitegateCase):
    """Fixtures through the transformed endpoints, compared with tests/fixtures/expected."""

    splits = (1, 7, 64)

    def test_fixtures_all_splits(self):
        for name in H.expected_files():
            for split in self.splits:
                with self.subTest(expected=name, split=split):
                    self.check_fixture(name, split=split)

    def test_fixtures_per_event_pieces(self):
        for name in H.expected_files():
            with self.subTest(expected=name):
                self.check_fixture(name)

    def test_azure_deployment_path_keeps_query(self):
        path = TRANSFORMED_PATHS[1]
        for name in ("azure_oyd_stream.openwebui.json", "azure_oyd_filters_crlf.openwebui.json",
                     "azure_oyd_response.openwebui.json"):
            for split in (None, 7):
                with self.subTest(expected=name, split=split):
                    self.mock.reset()
                    self.check_fixture(name, path=path, split=split)
                    log = self.mock.requests()
                    self.assertEqual(len(log), 1)
                    self.assertEqual(log[0]["path"], "/openai/deployments/gpt-4o/chat/completions")
                    self.assertEqual(log[0]["query"], "api-version=2024-02-01")
                    self.assertEqual(log[0]["method"], "POST")

    def test_openai_v1_path(self):
        for name in ("azure_oyd_stream.openwebui.json", "numeric_stream.openwebui.json",
                     "perplexity_stream.openwebui.json"):
            for split in (None, 7, 64):
                with self.subTest(expected=name, split=split):
                    self.mock.reset()
                    self.check_fixture(name, path="/openai/v1/chat/completions", split=split)
                    log = self.mock.requests()
                    self.assertEqual([r["path"] for r in log], ["/openai/v1/chat/completions"])

    def test_wire_split_including_chunk_framing(self):
        for n in (1, 5, 13):
            with self.subTest(wire_split=n):
                self.check_fixture("azure_oyd_filters_crlf.openwebui.json", headers={"X-Mock-Split-Wire": str(n)})

    def test_non_streaming_json(self):
        hd, body = self.check_fixture("azure_oyd_response.openwebui.json")
        self.assertTrue(hd.get("Content-Type", "").startswith("application/json"), hd)
        obj = json.loads(body)
        self.assertEqual(obj["id"], "chatcmpl-7R1nGnsXO8n4oi9UPz2f3UHdgAYMn")
        self.assertEqual(obj["usage"], json.loads(RESPONSE)["usage"])

    def test_request_reaches_upstream_unchanged(self):
        body = H.chat_body()
        st, _, _ = self.post("/v1/chat/completions", body, {"Authorization": "Bearer sk-test"})
        self.assertEqual(st, 200)
        log = self.mock.requests()
        self.assertEqual(len(log), 1)
        self.assertEqual(log[0]["body_json"], json.loads(body))

    def test_content_free_events_forwarded_verbatim(self):
        src = H.fixture_bytes("azure_oyd_filters_crlf.sse")
        events = re.split(rb"(?<=\r\n\r\n)", src)
        verbatim = [events[0], events[1], events[4], events[5]]  # prompt filter, context, comment, filter
        self.assertTrue(verbatim[2].startswith(b": keep-alive"))
        for split in (None, 7):
            with self.subTest(split=split):
                _, body = self.check_fixture("azure_oyd_filters_crlf.openwebui.json", split=split)
                for ev in verbatim:
                    self.assertIn(ev, body, ev[:80])
                # order preserved
                idx = [body.index(ev) for ev in verbatim]
                self.assertEqual(idx, sorted(idx))

    def test_streaming_is_not_buffered(self):
        # 8 events, 150 ms apart: they must reach the client spread out over ~1 s
        c, r = self.stream_raw({"X-Mock-Delay-Ms": "150"})
        try:
            self.assertEqual(r.status, 200)
            body = r.read_all(timeout=10)
        finally:
            c.close()
        self.assertView(body.decode(), H.expected("azure_oyd_stream.openwebui.json"))
        times = [t for t, _ in r.body_reads]
        self.assertGreaterEqual(len(times), 4, "events arrived in too few reads")
        self.assertGreaterEqual(times[-1] - times[0], 0.6, "events were buffered")
        # the first content must arrive long before the upstream finishes (~1.05 s)
        acc, first_content = b"", None
        for t, d in r.body_reads:
            acc += d
            if client_view.view(acc.decode("utf-8", "ignore"))["content"].get("0"):
                first_content = t
                break
        self.assertIsNotNone(first_content)
        self.assertLess(first_content - r.t_sent, 0.7, "first content held back")

    def test_sse_response_headers(self):
        st, hd, body = self.post("/v1/chat/completions", H.chat_body())
        self.assertEqual(st, 200)
        self.assertTrue(hd.get("Content-Type", "").startswith("text/event-stream"), hd)
        self.assertEqual(hd.get("Cache-Control"), "no-cache")
        self.assertEqual(hd.get("X-Accel-Buffering"), "no")
        rid = hd.get("X-Request-Id")
        self.assertTrue(rid, "X-Request-Id missing")
        st, hd2, _ = self.post("/v1/chat/completions", H.chat_body())
        self.assertNotEqual(hd2.get("X-Request-Id"), rid, "generated X-Request-Id must differ per request")

    def test_x_request_id_forwarded(self):
        st, hd, _ = self.post("/v1/chat/completions", H.chat_body(), {"X-Request-Id": "it-req-4711"})
        self.assertEqual(st, 200)
        self.assertEqual(hd.get("X-Request-Id"), "it-req-4711")
        log = self.mock.requests()
        self.assertEqual([v for k, v in log[0]["headers"] if k.lower() == "x-request-id"], ["it-req-4711"])
        st, hd, _ = self.post("/v1/chat/completions", H.chat_body(stream=False), {"X-Request-Id": "it-req-4712"})
        self.assertEqual(hd.get("X-Request-Id"), "it-req-4712")

    def test_keep_alive_three_requests_one_connection(self):
        c = self.cg.raw(timeout=10)
        try:
            exp_s = H.expected("azure_oyd_stream.openwebui.json")
            exp_j = H.expected("azure_oyd_response.openwebui.json")
            for i, (body, exp) in enumerate([(H.chat_body(), exp_s), (H.chat_body(stream=False), exp_j),
                                             (H.chat_body(), exp_s)]):
                r = c.request("POST", "/v1/chat/completions", body, {"X-Mock-Split": "64"})
                self.assertEqual(r.status, 200)
                text = r.read_all(timeout=10).decode()
                self.assertTrue(r.done, f"response {i} not framed (must be chunked or Content-Length)")
                self.assertNotEqual((r.headers.get("Connection") or "").lower(), "close")
                self.assertView(text, exp, msg=f"request {i}:")
            r = c.request("GET", "/v1/models")
            self.assertEqual((r.status, r.read_all(5)), (200, mock_upstream.MODELS_BODY))
        finally:
            c.close()

    def test_profile_off_is_byte_identical(self):
        for fixture in ("azure_oyd_stream.sse", "azure_oyd_filters_crlf.sse", "numeric_malformed.sse",
                        "azure_oyd_response.json"):
            for split in (None, 7):
                with self.subTest(fixture=fixture, split=split):
                    hdrs = {"X-Citegate-Profile": "off", "X-Mock-Fixture": fixture}
                    if split:
                        hdrs["X-Mock-Split"] = str(split)
                    st, hd, body = self.post("/v1/chat/completions",
                                             H.chat_body(stream=fixture.endswith(".sse")), hdrs)
                    self.assertEqual(st, 200)
                    self.assertEqual(body, H.fixture_bytes(fixture))

    def test_truncated_upstream_fixture(self):
        c, r = self.stream_raw({"X-Mock-Fixture": "azure_truncated.sse"})
        text = r.read_all(timeout=10).decode()
        c.close()
        self.assertTrue(r.done, "response must be ended properly (chunked terminator)")
        self.assertView(text, H.expected("azure_truncated.openwebui.json"))
        err = last_event_json(text)["error"]
        self.assertEqual((err.get("type"), err.get("code")), ("upstream_error", "upstream_closed"))

    def test_no_done_after_finish_reason_gets_done(self):
        exp = H.expected("azure_oyd_stream.openwebui.json")
        for fault in ("no-done", "no-done,close-delimited"):
            with self.subTest(fault=fault):
                st, _, body = self.post("/v1/chat/completions", H.chat_body(), {"X-Mock-Fault": fault})
                self.assertEqual(st, 200)
                got = self.assertView(body.decode(), exp)
                self.assertTrue(got["ends_with_done"])

    def test_close_delimited_upstream(self):
        for fixture in ("azure_oyd_stream", "azure_oyd_response"):
            with self.subTest(fixture=fixture):
                exp = H.expected(fixture + ".openwebui.json")
                st, _, body = self.post("/v1/chat/completions", request_body_for(exp),
                                        {"X-Mock-Fault": "close-delimited", "X-Mock-Split": "64",
                                         "X-Mock-Fixture": exp["fixture"]})
                self.assertEqual(st, 200, body[:300])
                self.assertView(body.decode(), exp)

    def test_upstream_reset_mid_stream(self):
        self.mid_stream_fault("reset")

    def test_upstream_eof_mid_stream(self):
        self.mid_stream_fault("eof")

    def test_upstream_fault_with_content_already_sent(self):
        # a split late enough that content went out before the fault: still no [DONE]
        body = H.chat_body()
        for fault in ("reset", "eof"):
            with self.subTest(fault=fault):
                c, r = self.stream_raw({"X-Mock-Fault": fault, "X-Mock-Fixture": "azure_oyd_filters_crlf.sse"},
                                       body=body)
                text = r.read_all(timeout=10).decode()
                c.close()
                v = client_view.view(text)
                self.assertTrue(v["ends_with_error_event"], text[-300:])
                self.assertFalse(v["ends_with_done"])

    def test_upstream_error_status_forwarded(self):
        for code in (429, 500):
            for stream in (True, False):
                with self.subTest(code=code, stream=stream):
                    st, hd, body = self.post("/v1/chat/completions", H.chat_body(stream=stream),
                                             {"X-Mock-Fault": f"status:{code}"})
                    self.assertEqual(st, code)
                    self.assertEqual(body, mock_upstream.error_body(code))
                    if code == 429:
                        self.assertEqual(hd.get("Retry-After"), "1")

    def test_invalid_json_400_nothing_upstream(self):
        for path in TRANSFORMED_PATHS:
            # a raw control byte in a string, and bytes that are not UTF-8 (RFC 8259)
            for bad in (b"{not json", b'{"messages": [}', b"", b'{"a":"x\x01y"}',
                        b'{"a":"x\ny"}', b'{"a":"\xff\xfe"}', b'{"a":"\xc0\xaf"}',
                        b'{"a":"\xed\xa0\x80"}'):
                with self.subTest(path=path, body=bad):
                    st, hd, body = self.post(path, bad)
                    self.assertEqual(st, 400, body[:300])
                    self.assertTrue(is_openai_error(body), body[:300])
                    self.assertTrue(hd.get("Content-Type", "").startswith("application/json"))
        time.sleep(0.1)
        self.assertEqual(self.mock.requests(), [])

    def test_huge_headers_431(self):
        filler = b"".join(b"X-Big-%d: %s\r\n" % (i, b"a" * 8000) for i in range(32))
        status, raw = H.send_oversized(self.cg.port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n", filler[:-2])
        self.assertEqual(status, 431, raw[:300])
        one = b"X-Huge: " + b"b" * (256 * 1024)
        status, raw = H.send_oversized(self.cg.port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n", one)
        self.assertEqual(status, 431, raw[:300])
        self.assertEqual(self.mock.requests(), [])

    def test_client_disconnect_cancels_upstream(self):
        self.disconnect_mid_stream(rst=True)

    def test_client_disconnect_clean_close(self):
        self.disconnect_mid_stream(rst=False)


class PassThroughPlain(CitegateCase):
    def test_models_byte_identical(self):
        direct = self.mock.request("GET", "/v1/models")
        st, hd, body = self.cg.request("GET", "/v1/models")
        self.assertEqual(st, 200)
        self.assertEqual(body, direct[2])
        self.assertEqual(body, mock_upstream.MODELS_BODY)
        self.assertEqual(hd.get("X-Mock-Models"), "yes", "end-to-end response header not forwarded")
        self.assertNotEqual(hd.get("Keep-Alive"), "timeout=30", "upstream's hop-by-hop Keep-Alive forwarded")
        self.assertEqual(hd.get("Content-Type"), "application/json")

    def test_status_kept(self):
        st, hd, body = self.cg.request("GET", "/no/such/route?x=1")
        direct = self.mock.request("GET", "/no/such/route?x=1")
        self.assertEqual((st, body), (404, direct[2]))
        st, hd, body = self.cg.request("POST", "/v1/embeddings", b'{"input":"x"}',
                                       {"X-Mock-Fault": "status:500", "X-Mock-Fixture": "x.json"})
        self.assertEqual((st, body), (500, mock_upstream.error_body(500)))

    def echo(self, method="POST", path="/echo?a=1&b=two", body=b'{"hello":"world"}', headers=()):
        c = self.cg.raw(timeout=10)
        try:
            r = c.request(method, path, body, list(headers))
            data = r.read_all(timeout=10)
        finally:
            c.close()
        self.assertEqual(r.status, 200, data[:300])
        return r, json.loads(data)

    def test_echo_headers(self):
        r, e = self.echo(headers=[
            ("Host", "client.example:1234"),
            ("Authorization", "Bearer sk-it-secret"),
            ("api-key", "azure-key-123"),
            ("X-Custom-E2E", "kept"),
            ("Connection", "keep-alive"),
            ("Keep-Alive", "timeout=77, max=7"),
            ("TE", "trailers"),
            ("Upgrade", "mock-proto/1"),
            ("Proxy-Authorization", "Basic Zm9vOmJhcg=="),
            ("Proxy-Connection", "keep-alive"),
        ])
        self.assertEqual((e["method"], e["path"], e["query"]), ("POST", "/echo", "a=1&b=two"))
        self.assertEqual(e["body"], '{"hello":"world"}')
        h = {}
        for k, v in e["headers"]:
            h.setdefault(k.lower(), []).append(v)
        self.assertEqual(h.get("authorization"), ["Bearer sk-it-secret"])
        self.assertEqual(h.get("api-key"), ["azure-key-123"])
        self.assertEqual(h.get("x-custom-e2e"), ["kept"])
        self.assertEqual(h.get("host"), [self.mock.hostport], "Host must become the upstream's")
        for hop in ("keep-alive", "te", "upgrade", "proxy-authorization", "proxy-connection"):
            self.assertNotIn(hop, h, f"hop-by-hop header {hop} forwarded")
        for v in h.get("connection", []):
            self.assertNotIn("upgrade", v.lower())
        self.assertNotIn("transfer-encoding", h)

    def test_connection_listed_headers_not_forwarded(self):
        # RFC 9110 §7.6.1: headers named in Connection are hop-by-hop too
        r, e = self.echo(headers=[("Connection", "keep-alive, X-Hop-Only"), ("X-Hop-Only", "1"),
                                  ("X-Stays", "2")])
        names = {k.lower(): v for k, v in e["headers"]}
        self.assertNotIn("x-hop-only", names)
        self.assertEqual(names.get("x-stays"), "2")
        self.assertNotIn("x-hop-only", names.get("connection", "").lower())

    def test_methods_and_empty_body(self):
        for method in ("GET", "PUT", "DELETE", "PATCH"):
            with self.subTest(method=method):
                body = None if method in ("GET", "DELETE") else b"payload-" + method.encode()
                r, e = self.echo(method=method, path="/echo/x?q=%20z", body=body)
                self.assertEqual(e["method"], method)
                self.assertEqual(e["query"], "q=%20z")
                self.assertEqual(e["body"], (body or b"").decode())

    def test_chunked_request_body(self):
        payload = b'{"chunked": true, "n": 12345}'
        wire = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (payload[:7], payload[7:])) + b"0\r\n\r\n"
        r, e = self.echo(body=wire, headers=[("Transfer-Encoding", "chunked")])
        self.assertEqual(e["body"], payload.decode())
        te = [v for k, v in e["headers"] if k.lower() == "transfer-encoding"]
        self.assertIn(te, ([], ["chunked"]))
        # and a chunked body on a transformed path
        req = H.chat_body()
        wire = b"%x\r\n%s\r\n0\r\n\r\n" % (len(req), req)
        c = self.cg.raw(timeout=10)
        try:
            r = c.request("POST", "/v1/chat/completions", wire, [("Transfer-Encoding", "chunked")])
            text = r.read_all(10).decode()
        finally:
            c.close()
        self.assertEqual(r.status, 200)
        self.assertView(text, H.expected("azure_oyd_stream.openwebui.json"))

    def test_large_passthrough_body(self):
        big = b"x" * (300 * 1024)
        r, e = self.echo(body=big)
        self.assertEqual(len(e["body"]), len(big))

    def raw_exchange(self, data):
        """Sends one raw request (it should close) and returns (status line, body)."""
        (line, _, body), = split_responses(pipelined(self.cg.port, [data]), ["GET"])
        return line, body

    def test_absolute_form_target(self):
        """RFC 9112 §3.2.2: a server MUST accept the absolute-form; it is served as its path."""
        req = H.chat_body(stream=False)
        line, body = self.raw_exchange(
            b"POST http://x/v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(req), req))
        self.assertEqual(line, "HTTP/1.1 200 OK", body[:300])
        self.assertIn(b"choices", body)
        self.assertEqual(self.mock.requests()[-1]["path"], "/v1/chat/completions")
        for target, path, query in ((b"http://x:8080/echo/y?a=1", "/echo/y", "a=1"),
                                    (b"HTTPS://x/echo", "/echo", "")):
            with self.subTest(target=target):
                line, body = self.raw_exchange(b"GET %s HTTP/1.1\r\nHost: x\r\n"
                                               b"Connection: close\r\n\r\n" % target)
                self.assertEqual(line, "HTTP/1.1 200 OK", body[:300])
                e = json.loads(body)
                self.assertEqual((e["path"], e["query"]), (path, query))

    def test_host_must_be_host_and_port(self):
        """RFC 9112 §3.2: a Host that is not a valid host[:port] gets 400."""
        for host in (b"a b", b"a:b", b"a:80:80", b"[::1", b"a/b", b"a@b"):
            with self.subTest(host=host):
                line, body = self.raw_exchange(b"GET /echo HTTP/1.1\r\nHost: %s\r\n"
                                               b"Connection: close\r\n\r\n" % host)
                self.assertEqual(line, "HTTP/1.1 400 Bad Request", body[:300])
                self.assertIn("Host", error_message(body))
        self.assertEqual(self.mock.requests(), [])
        for host in (b"example.com:80", b"127.0.0.1", b"[::1]:8080", b"my-host_1.example", b""):
            with self.subTest(host=host):
                line, body = self.raw_exchange(b"GET /echo HTTP/1.1\r\nHost: %s\r\n"
                                               b"Connection: close\r\n\r\n" % host)
                self.assertEqual(line, "HTTP/1.1 200 OK", body[:300])

    def test_other_http_versions_505(self):
        """Only HTTP/1.0 and HTTP/1.1 are read here (RFC 9110 §15.6.6); a malformed version is a 400."""
        for version in (b"HTTP/2.0", b"HTTP/0.9", b"HTTP/1.2", b"HTTP/3.0", b"HTTP/9.9"):
            with self.subTest(version=version):
                line, body = self.raw_exchange(b"GET /echo %s\r\nHost: x\r\n\r\n" % version)
                self.assertEqual(line, "HTTP/1.1 505 HTTP Version Not Supported", body[:300])
                self.assertTrue(is_openai_error(body), body)
        # No version at all is HTTP/0.9 to llhttp, which reads headers after it all the same
        for line in (b"GET /echo", b"POST /echo", b"PRI http://x/y"):
            with self.subTest(line=line):
                got, body = self.raw_exchange(line + b"\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
                self.assertEqual(got, "HTTP/1.1 505 HTTP Version Not Supported", body[:300])
        for version in (b"HTTP/1.x", b"HTTP/11.1"):
            with self.subTest(version=version):
                line, _ = self.raw_exchange(b"GET /echo %s\r\nHost: x\r\n\r\n" % version)
                self.assertEqual(line, "HTTP/1.1 400 Bad Request")
        self.assertEqual(self.mock.requests(), [])
        # the version cut between two reads
        for minor, want in ((b"0", b"HTTP/1.1 505 "), (b"1", b"HTTP/1.1 200 ")):
            with self.subTest(minor=minor):
                s = socket.create_connection(("127.0.0.1", self.cg.port), timeout=10)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.sendall(b"GET /echo HTTP/%s." % (b"2" if minor == b"0" else b"1"))
                time.sleep(0.05)
                s.sendall(minor + b"\r\nHost: x\r\nConnection: close\r\n\r\n")
                self.assertTrue(s.recv(100).startswith(want))
                s.close()

    def test_expect_100_continue(self):
        """RFC 9110 §10.1.1: 100 Continue before the body is read, or the final status at once
        when the request is refused; the expectation is not forwarded (the body is buffered)."""
        body = b'{"hello":"expect"}'
        s = socket.create_connection(("127.0.0.1", self.cg.port), timeout=10)
        try:
            s.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nConnection: close\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(body))
            s.settimeout(0.5)
            self.assertEqual(s.recv(100), b"HTTP/1.1 100 Continue\r\n\r\n")
            s.settimeout(10)
            s.sendall(body)
            raw = b""
            while d := s.recv(65536):
                raw += d
        finally:
            s.close()
        (line, _, got), = split_responses(raw, ["POST"])
        self.assertEqual(line, "HTTP/1.1 200 OK")
        e = json.loads(got)
        self.assertEqual(e["body"], body.decode())
        self.assertNotIn("expect", [k.lower() for k, _ in e["headers"]])
        # refused before the body: the final status, no 100
        raw = pipelined(self.cg.port, [b"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                                       b"Content-Length: 999999999999\r\n\r\n"])
        self.assertTrue(raw.startswith(b"HTTP/1.1 413 "), raw[:200])
        # no body, or HTTP/1.0: no 100
        for req in (b"GET /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n",
                    b"POST /echo HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}"):
            with self.subTest(req=req[:20]):
                raw = pipelined(self.cg.port, [req])
                self.assertTrue(raw.startswith(b"HTTP/1.1 200 "), raw[:200])

    def test_head_error_has_no_body(self):
        """RFC 9110 §9.3.2: citegate's own error to a HEAD has no body, so a pipelined
        request behind it is answered in its own response."""
        raw = pipelined(self.cg.port, [b"HEAD /a/../b HTTP/1.1\r\nHost: x\r\n\r\n",
                                       b"GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"])
        (l1, h1, _), (l2, _, b2) = split_responses(raw, ["HEAD", "GET"])
        self.assertEqual(l1, "HTTP/1.1 400 Bad Request")
        self.assertEqual(h1.get("content-type"), "application/json")
        self.assertEqual(l2, "HTTP/1.1 200 OK", raw[:400])
        self.assertEqual(json.loads(b2)["path"], "/echo")


    def test_connect_refused_and_connection_stays_http(self):
        """CONNECT opens no tunnel (501, nothing upstream), whatever its target's form; a
        non-2xx answer leaves the connection HTTP/1.1 (RFC 9110 §9.3.6), so the request
        behind it is served."""
        for target in (b"upstream:443", b"http://upstream:443"):
            with self.subTest(target=target):
                self.mock.reset()
                raw = pipelined(self.cg.port, [
                    b"CONNECT %s HTTP/1.1\r\nHost: upstream:443\r\n\r\n" % target,
                    b"GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"])
                (l1, _, b1), (l2, _, b2) = split_responses(raw, ["CONNECT", "GET"])
                self.assertEqual(l1, "HTTP/1.1 501 Not Implemented", raw[:400])
                self.assertIn("CONNECT", error_message(b1))
                self.assertEqual(l2, "HTTP/1.1 200 OK", raw[:600])
                self.assertEqual(json.loads(b2)["path"], "/echo")
                self.assertEqual([r["method"] for r in self.mock.requests()], ["GET"])

    def test_upgrade_is_served_as_plain_http(self):
        """citegate switches to no other protocol: an Upgrade request is forwarded without
        Upgrade (hop-by-hop) and the connection goes on as HTTP/1.1 (RFC 9110 §7.8)."""
        raw = pipelined(self.cg.port, [
            b"GET /echo/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
            b"GET /echo/next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"])
        (l1, _, b1), (l2, _, b2) = split_responses(raw, ["GET", "GET"])
        self.assertEqual((l1, l2), ("HTTP/1.1 200 OK", "HTTP/1.1 200 OK"), raw[:600])
        e = json.loads(b1)
        self.assertEqual(e["path"], "/echo/ws")
        self.assertNotIn("upgrade", [k.lower() for k, _ in e["headers"]])
        self.assertEqual(json.loads(b2)["path"], "/echo/next")

    def test_empty_field_name_400(self):
        """RFC 9110 §5.1: a field name is a token. A line starting with ':' has an empty
        one; forwarded, another parser could read it otherwise: 400, nothing upstream."""
        line, body = self.raw_exchange(b"GET /echo HTTP/1.1\r\nHost: x\r\n: smuggled\r\n"
                                       b"Connection: close\r\n\r\n")
        self.assertEqual(line, "HTTP/1.1 400 Bad Request", body[:300])
        self.assertIn("empty name", error_message(body))
        self.assertEqual(self.mock.requests(), [])


class AdminPlain(CitegateCase):
    def test_healthz_readyz(self):
        self.assertEqual(self.cg.admin("GET", "/healthz")[0], 200)
        self.assertEqual(self.cg.admin("GET", "/readyz")[0], 200)

    def test_unknown_admin_path_404(self):
        st, hd, body = self.cg.admin("GET", "/no-such-admin-path")
        self.assertEqual(st, 404)
        self.assertTrue(is_openai_error(body), body[:300])
        self.assertTrue(hd.get("Content-Type", "").startswith("application/json"))

    def test_405_lists_allowed_methods(self):
        """RFC 9110 §15.5.6: a 405 carries Allow."""
        for method, path in (("POST", "/healthz"), ("DELETE", "/metrics"), ("PUT", "/v1/citations/stats")):
            with self.subTest(method=method, path=path):
                st, hd, body = self.cg.admin(method, path)
                self.assertEqual(st, 405)
                self.assertTrue(is_openai_error(body), body[:300])
                self.assertEqual(hd.get("Allow"), "GET, HEAD")
        st, hd, _ = self.cg.admin("GET", "/healthz")
        self.assertIsNone(hd.get("Allow"))

    def test_metrics(self):
        self.cg.request("POST", "/v1/chat/completions", H.chat_body())
        st, hd, body = self.cg.admin("GET", "/metrics")
        self.assertEqual(st, 200)
        self.assertTrue(hd.get("Content-Type", "").startswith("text/plain"), hd)
        text = body.decode()
        self.assertIn("citegate_requests_total", text)
        self.assertRegex(text, r"(?m)^citegate_requests_total\{[^}]*\} [0-9.e+]+$")

    def test_logs_are_json_lines(self):
        self.cg.request("POST", "/v1/chat/completions", H.chat_body())
        time.sleep(0.2)
        lines = [l for l in self.cg.stderr().splitlines() if l.strip()]
        self.assertTrue(lines, "no log lines on stderr")
        for l in lines:
            try:
                self.assertIsInstance(json.loads(l), dict)
            except ValueError:
                self.fail(f"stderr line is not JSON: {l!r}")


# =============================================================================== TLS upstream

class StreamingTLS(CitegateCase):
    """TLS upstream: CITEGATE_UPSTREAM=https://localhost:PORT, CITEGATE_UPSTREAM_CA=the test cert
    (DNS subjectAltName). StreamingTLSIP checks the same with the IP address."""
    upstream = "tls-localhost"

    def upstream_hostport(self):
        return f"localhost:{TLS_MOCK.port}"

    def test_fixtures(self):
        for name in H.expected_files():
            for split in (None, 7):
                with self.subTest(expected=name, split=split):
                    self.check_fixture(name, split=split)

    def test_paths_and_splits(self):
        for path in TRANSFORMED_PATHS:
            for split in (1, 64):
                with self.subTest(path=path, split=split):
                    self.mock.reset()
                    self.check_fixture("azure_oyd_stream.openwebui.json", path=path, split=split)
                    log = self.mock.requests()
                    self.assertEqual(log[0]["target"], path)

    def test_passthrough_and_host(self):
        st, hd, body = self.cg.request("GET", "/v1/models")
        self.assertEqual((st, body), (200, mock_upstream.MODELS_BODY))
        st, hd, body = self.cg.request("POST", "/echo", b"{}", {"api-key": "k-tls"})
        self.assertEqual(st, 200, body[:300])
        h = {k.lower(): v for k, v in json.loads(body)["headers"]}
        self.assertEqual(h["host"], self.upstream_hostport())
        self.assertEqual(h["api-key"], "k-tls")

    def test_reset_mid_stream(self):
        self.mid_stream_fault("reset")

    def test_eof_mid_stream(self):
        self.mid_stream_fault("eof")

    def test_keep_alive(self):
        c = self.cg.raw(timeout=10)
        try:
            for i in range(3):
                r = c.request("POST", "/v1/chat/completions", H.chat_body(), {"X-Mock-Split": "7"})
                self.assertEqual(r.status, 200)
                self.assertView(r.read_all(10).decode(), H.expected("azure_oyd_stream.openwebui.json"))
                self.assertTrue(r.done)
        finally:
            c.close()

    def test_client_disconnect_cancels_upstream(self):
        self.disconnect_mid_stream(rst=True)


class StreamingTLSIP(CitegateCase):
    """CITEGATE_UPSTREAM=https://127.0.0.1:PORT with CITEGATE_UPSTREAM_CA: the certificate names
    127.0.0.1 in an iPAddress subjectAltName, which must be accepted (RFC 6125 / 2818)."""
    upstream = "tls"

    def test_streaming(self):
        for split in (None, 7):
            with self.subTest(split=split):
                self.check_fixture("azure_oyd_stream.openwebui.json", split=split)

    def test_new_connections_resume_the_session(self):
        # Many streams opening together must not each cost a full handshake: once one
        # connection has a session, those opened after it offer it and the upstream resumes.
        self.check_fixture("azure_oyd_stream.openwebui.json")
        self.mock.reset()
        slow = {"X-Mock-Split": "512", "X-Mock-Delay-Ms": "60"}  # the three overlap
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            done = list(pool.map(lambda _: self.check_fixture("azure_oyd_stream.openwebui.json",
                                                              headers=slow), range(3)))
        self.assertEqual(len(done), 3)
        # The idle connection serves one of them, so at least two are new; the test's own
        # connections to the mock (reset, stats) never resume.
        st = self.mock.stats()
        self.assertGreaterEqual(st["tls_resumed"], 2, st)

    def test_non_streaming(self):
        self.check_fixture("azure_oyd_response.openwebui.json")

    def test_passthrough_and_host(self):
        StreamingTLS.test_passthrough_and_host(self)

    def upstream_hostport(self):
        return TLS_MOCK.hostport


class TLSUntrusted(CitegateCase):
    """https upstream whose self-signed cert is not in the trust store: 502 naming TLS."""
    upstream = "tls-localhost"

    @classmethod
    def extra_env(cls):
        return {}

    def test_502_tls(self):
        st, hd, body = self.post("/v1/chat/completions", H.chat_body())
        self.assertEqual(st, 502, body[:300])
        self.assertTrue(is_openai_error(body), body[:300])
        self.assertRegex(error_message(body), r"(?i)tls|ssl|certificate|handshake|verif")
        self.assertEqual(self.mock.requests(), [])


# =============================================================================== other configurations

class DataSourcesInjection(CitegateCase):
    env = {"AZURE_AI_DATA_SOURCES": H.fixture_bytes("azure_data_sources.json").decode()}
    want_contexts = ["intent", "citations", "all_retrieved_documents"]

    def expected_sources(self):
        ds = json.loads(H.fixture_bytes("azure_data_sources.json"))
        if isinstance(ds, dict):
            ds = [ds]
        for s in ds:
            s["parameters"]["include_contexts"] = list(self.want_contexts)
        return ds

    def test_injected(self):
        for path in TRANSFORMED_PATHS:
            with self.subTest(path=path):
                self.mock.reset()
                req = json.loads(H.chat_body())
                st, _, body = self.post(path, json.dumps(req).encode())
                self.assertEqual(st, 200, body[:300])
                got = self.mock.requests()[0]["body_json"]
                self.assertEqual(got.get("data_sources"), self.expected_sources())
                got.pop("data_sources")
                self.assertEqual(got, req, "other members of the request changed")
                self.assertView(body.decode(), H.expected("azure_oyd_stream.openwebui.json"))

    def test_existing_data_sources_untouched(self):
        req = json.loads(H.chat_body())
        req["data_sources"] = [{"type": "azure_search",
                                "parameters": {"endpoint": "https://other.search.windows.net",
                                               "index_name": "mine", "include_contexts": ["intent"]}}]
        raw = json.dumps(req).encode()
        st, _, _ = self.post("/v1/chat/completions", raw)
        self.assertEqual(st, 200)
        rec = self.mock.requests()[0]
        self.assertEqual(rec["body_json"], req)

    def test_not_injected_into_passthrough(self):
        st, _, body = self.cg.request("POST", "/echo", H.chat_body())
        self.assertNotIn("data_sources", json.loads(json.loads(body)["body"]))


class DataSourcesObject(DataSourcesInjection):
    """An object value becomes a one-element array."""
    env = {"AZURE_AI_DATA_SOURCES": json.dumps(json.loads(H.fixture_bytes("azure_data_sources.json"))[0])}


class DataSourcesNoScores(DataSourcesInjection):
    env = {"AZURE_AI_DATA_SOURCES": H.fixture_bytes("azure_data_sources.json").decode(),
           "AZURE_AI_INCLUDE_SEARCH_SCORES": "false"}
    want_contexts = ["intent"]

    def test_injected(self):
        req = json.loads(H.chat_body())
        st, _, _ = self.post("/v1/chat/completions", json.dumps(req).encode())
        self.assertEqual(st, 200)
        got = self.mock.requests()[0]["body_json"]
        self.assertEqual(got.get("data_sources"), json.loads(H.fixture_bytes("azure_data_sources.json")))


class Limits(CitegateCase):
    env = {"CITEGATE_MAX_REQUEST_BYTES": "1000", "CITEGATE_FIRST_BYTE_TIMEOUT_MS": "300",
           "CITEGATE_IDLE_TIMEOUT_MS": "500"}

    def big_body(self, size):
        req = json.loads(H.chat_body())
        req["messages"][1]["content"] = "x" * size
        return json.dumps(req).encode()

    def test_413(self):
        for path in ("/v1/chat/completions", "/echo"):
            with self.subTest(path=path):
                body = self.big_body(5000)
                st, hd, resp = self.post(path, body)
                self.assertEqual(st, 413, resp[:300])
                self.assertTrue(is_openai_error(resp), resp[:300])
        self.assertEqual(self.mock.requests(), [])

    def test_under_limit_ok(self):
        body = self.big_body(500)
        self.assertLess(len(body), 1000)
        st, _, resp = self.post("/v1/chat/completions", body)
        self.assertEqual(st, 200, resp[:300])

    def test_first_byte_timeout_504(self):
        t0 = time.monotonic()
        st, hd, body = self.post("/v1/chat/completions", H.chat_body(),
                                 {"X-Mock-Fault": "slow-headers:3000"})
        dt = time.monotonic() - t0
        self.assertEqual(st, 504, body[:300])
        self.assertTrue(is_openai_error(body), body[:300])
        self.assertGreaterEqual(dt, 0.25)
        self.assertLess(dt, 2.0)

    def test_first_byte_timeout_not_hit_when_fast_enough(self):
        st, _, body = self.post("/v1/chat/completions", H.chat_body(), {"X-Mock-Fault": "slow-headers:100"})
        self.assertEqual(st, 200)
        self.assertView(body.decode(), H.expected("azure_oyd_stream.openwebui.json"))

    def test_idle_timeout_stall(self):
        dt = self.mid_stream_fault("stall")
        self.assertLess(dt, 3.0)

    def test_idle_timeout_is_not_a_total_cap(self):
        # 8 events 300 ms apart: ~2.1 s total, each gap below the 500 ms idle timeout
        t0 = time.monotonic()
        st, _, body = self.post("/v1/chat/completions", H.chat_body(), {"X-Mock-Delay-Ms": "300"})
        self.assertEqual(st, 200)
        self.assertGreater(time.monotonic() - t0, 1.5)
        self.assertView(body.decode(), H.expected("azure_oyd_stream.openwebui.json"))


class UpstreamDown(CitegateCase):
    upstream = "down"

    def test_502_connect(self):
        for method, path, body in (("POST", "/v1/chat/completions", H.chat_body()),
                                   ("POST", "/v1/chat/completions", H.chat_body(stream=False)),
                                   ("GET", "/v1/models", None)):
            with self.subTest(method=method, path=path):
                st, hd, resp = self.cg.request(method, path, body)
                self.assertEqual(st, 502, resp[:300])
                self.assertTrue(is_openai_error(resp), resp[:300])
                self.assertIn("connect", error_message(resp).lower())

    def test_healthz_still_200(self):
        self.assertEqual(self.cg.admin("GET", "/healthz")[0], 200)

    def test_head_502_has_no_body(self):
        raw = pipelined(self.cg.port, [b"HEAD /v1/models HTTP/1.1\r\nHost: x\r\n\r\n",
                                       b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"])
        (l1, _, _), (l2, _, b2) = split_responses(raw, ["HEAD", "GET"])
        self.assertEqual((l1, l2), ("HTTP/1.1 502 Bad Gateway", "HTTP/1.1 502 Bad Gateway"), raw[:400])
        self.assertTrue(is_openai_error(b2), b2[:300])


class Workers(CitegateCase):
    env = {"CITEGATE_WORKERS": "2"}

    def test_twenty_requests(self):
        exp = H.expected("azure_oyd_stream.openwebui.json")
        for i in range(20):
            st, _, body = self.post("/v1/chat/completions", H.chat_body(), {"X-Mock-Split": "64"})
            self.assertEqual(st, 200, f"request {i}")
            self.assertView(body.decode(), exp, msg=f"request {i}:")

    def test_concurrent(self):
        exp = H.expected("azure_oyd_stream.openwebui.json")
        results = []

        def one():
            try:
                st, _, body = self.post("/v1/chat/completions", H.chat_body(),
                                        {"X-Mock-Delay-Ms": "20"}, timeout=15)
                results.append((st, client_view.view(body.decode())["content"]))
            except Exception as e:  # noqa: BLE001
                results.append((None, repr(e)))
        ts = [threading.Thread(target=one) for _ in range(12)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(20)
        self.assertEqual(len(results), 12)
        for st, content in results:
            self.assertEqual(st, 200, content)
            self.assertEqual(content, exp["content"])

    def test_request_ids_unique_across_workers_and_restarts(self):
        """A generated X-Request-Id is `cg-<a random prefix of the worker process>-<counter>`:
        the prefix is drawn in each worker after the fork (forked workers once shared one
        unseeded rand() sequence), so two workers, and a restart, never share one."""
        def ids(port, n):
            out = []
            for _ in range(n):  # a connection each: SO_REUSEPORT spreads them over the workers
                st, hd, _ = H.request(port, "GET", "/v1/models", timeout=10)
                self.assertEqual(st, 200)
                out.append(hd.get("X-Request-Id"))
            return out
        first = ids(self.cg.port, 60)
        for rid in first:
            self.assertRegex(rid, r"^cg-[0-9a-f]{16}-[0-9]+$")
        prefixes = {rid.split("-")[1] for rid in first}
        self.assertEqual(len(prefixes), 2, f"both workers answer, each with its own prefix: {first}")
        self.assertEqual(len(set(first)), len(first))
        again = H.Citegate(upstream=self.upstream_url(), env={"CITEGATE_WORKERS": "1"}).start()
        try:
            later = ids(again.port, 5)
        finally:
            again.stop()
            again.cleanup()
        self.assertEqual(len({rid.split("-")[1] for rid in later}), 1)
        self.assertFalse({rid.split("-")[1] for rid in later} & prefixes, (later, prefixes))


class Drain(CitegateCase):
    env = {"CITEGATE_SHUTDOWN_GRACE_MS": "5000"}

    def test_sigterm_drain(self):
        exp = H.expected("azure_oyd_filters_crlf.openwebui.json")
        # 65 pieces x 35 ms: about 2.3 s of streaming; the first event is complete after ~0.15 s
        c, r = self.stream_raw({"X-Mock-Fixture": "azure_oyd_filters_crlf.sse", "X-Mock-Split": "64",
                                "X-Mock-Delay-Ms": "35"}, timeout=15)
        try:
            self.assertEqual(r.status, 200)
            self.assertTrue(r.read_until(lambda b: len(b) > 0, 5))
            self.cg.signal(signal.SIGTERM)

            def readyz():
                try:
                    return self.cg.admin("GET", "/readyz", timeout=1)[0] == 503
                except OSError:
                    return False
            self.assertTrue(H.wait_for(readyz, 1.5), "/readyz did not turn 503 while draining")

            def refused():
                try:
                    socket.create_connection(("127.0.0.1", self.cg.port), timeout=0.5).close()
                    return False
                except OSError:
                    return True
            listener_closed = H.wait_for(refused, 1.5)
            text = r.read_all(timeout=10).decode()
        finally:
            c.close()
        self.assertView(text, exp, msg="in-flight stream during drain:")
        rc = self.cg.wait(timeout=10)
        self.assertEqual(rc, 0, f"exit status after SIGTERM; stderr: {self.cg.stderr()[-1000:]}")
        self.assertTrue(listener_closed, "client listener still accepting after SIGTERM")


class DrainGraceExpires(CitegateCase):
    env = {"CITEGATE_SHUTDOWN_GRACE_MS": "500"}

    def test_stream_ended_with_error_event_after_grace(self):
        c, r = self.stream_raw({"X-Mock-Fault": "stall", "X-Mock-Fixture": "azure_oyd_filters_crlf.sse"},
                               timeout=10)
        try:
            self.assertEqual(r.status, 200)
            self.assertTrue(r.read_until(lambda b: len(b) > 0, 5))
            t0 = time.monotonic()
            self.cg.signal(signal.SIGTERM)
            text = r.read_all(timeout=8).decode()
        finally:
            c.close()
        self.assertLess(time.monotonic() - t0, 4.0)
        v = client_view.view(text)
        self.assertTrue(v["ends_with_error_event"], text[-300:])
        self.assertFalse(v["ends_with_done"])
        self.assertEqual(self.cg.wait(timeout=8), 0)


class Demo(CitegateCase):
    upstream = None

    def test_demo_stream(self):
        st, hd, body = self.post("/v1/chat/completions", H.chat_body())
        self.assertEqual(st, 200, body[:300])
        self.assertTrue(hd.get("Content-Type", "").startswith("text/event-stream"), hd)
        v = client_view.view(body.decode())
        content = "".join(v["content"].values())
        self.assertIn("[[doc", content)
        self.assertTrue(v["sources"], "no source events")


class CommandLine(unittest.TestCase):
    def valid_env(self):
        return {"CITEGATE_UPSTREAM": "http://127.0.0.1:9", "CITEGATE_LISTEN": f"127.0.0.1:{H.free_port()}",
                "CITEGATE_ADMIN_LISTEN": f"127.0.0.1:{H.free_port()}"}

    def test_version(self):
        p = H.run_citegate(["--version"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout.decode(), r"citegate .*\d+\.\d+")

    def test_check_valid(self):
        p = H.run_citegate(["--check"], env=self.valid_env())
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_check_invalid(self):
        for var, val in (("CITEGATE_WORKERS", "abc"), ("AZURE_AI_INCLUDE_SEARCH_SCORES", "maybe"),
                         ("CITEGATE_PROFILE", "nope")):
            with self.subTest(var=var):
                env = self.valid_env()
                env[var] = val
                p = H.run_citegate(["--check"], env=env)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                out = (p.stdout + p.stderr).decode(errors="replace")
                self.assertTrue(any(var in line for line in out.splitlines()), out)

    def test_flag_wins_over_its_variable(self):
        """SPEC §2: a flag wins over its variable, so a bad value in the variable is
        never read; the daemon starts on the flag's address."""
        env = self.valid_env()
        listen = f"127.0.0.1:{H.free_port()}"
        env.update(CITEGATE_LISTEN="bad", CITEGATE_WORKERS="abc", CITEGATE_PROFILE="nope")
        p = H.run_citegate(["--listen", listen, "--workers=1", "--profile", "openai", "--check"],
                           env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        p = H.run_citegate(["--listen", listen, "--check"], env=env)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("CITEGATE_WORKERS", (p.stdout + p.stderr).decode(errors="replace"))
        # `citegate filter` likewise
        sse = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
        p = subprocess.run([H.citegate_bin(), "filter", "--profile", "off"], input=sse,
                           env=dict(self.valid_env(), CITEGATE_PROFILE="nope"), capture_output=True,
                           timeout=10)
        self.assertEqual((p.returncode, p.stdout), (0, sse), p.stderr)

    def test_invalid_config_at_startup_exits_2(self):
        env = self.valid_env()
        env["CITEGATE_WORKERS"] = "abc"
        p = H.run_citegate([], env=env, timeout=10)
        self.assertEqual(p.returncode, 2)
        self.assertIn("CITEGATE_WORKERS", (p.stdout + p.stderr).decode(errors="replace"))


if __name__ == "__main__":
    unittest.main()
