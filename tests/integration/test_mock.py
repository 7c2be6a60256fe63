"""Self-test of tests/tools/mock_upstream.py and the harness, without citegate.

run: cd tests/integration && python3 -m unittest -v test_mock
"""
import base64
import http.client
import json
import os
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
import unittest

sys.dont_write_bytecode = True
import harness as H  # noqa: E402
import mock_upstream  # noqa: E402

STREAM = H.fixture_bytes("azure_oyd_stream.sse")
RESPONSE = H.fixture_bytes("azure_oyd_response.json")
CHAT = H.chat_body()

MOCK = TLS_MOCK = TMP = None


def setUpModule():
    global MOCK, TLS_MOCK, TMP
    TMP = tempfile.mkdtemp(prefix="cg-mocktest-")
    cert, key = H.make_cert(TMP)
    MOCK = H.MockUpstream().start()
    TLS_MOCK = H.MockUpstream(tls_cert=cert, tls_key=key).start()


def tearDownModule():
    for m in (MOCK, TLS_MOCK):
        if m:
            m.cleanup()
    shutil.rmtree(TMP, ignore_errors=True)


def raw_chunks(raw):
    """Parse a chunked body from raw bytes; returns (list of chunk payloads, terminated)."""
    chunks, i = [], 0
    while True:
        j = raw.find(b"\r\n", i)
        if j < 0:
            return chunks, False
        n = int(raw[i:j], 16)
        if n == 0:
            return chunks, raw[j + 2:j + 4] == b"\r\n"
        chunks.append(raw[j + 2:j + 2 + n])
        i = j + 2 + n + 2


def read_raw_response(mock, headers, body=CHAT, timeout=5.0, path="/v1/chat/completions"):
    """Send one request (Connection: close) and return (head, raw body, error) from the wire."""
    c = mock.raw(timeout=timeout)
    hdrs = dict(headers)
    hdrs.setdefault("Connection", "close")
    c.send_request("POST", path, body, hdrs)
    raw, err = b"", None
    try:
        while True:
            d = c.sock.recv(65536)
            if not d:
                break
            raw += d
    except (ConnectionResetError, socket.timeout) as e:
        err = e
    finally:
        c.close()
    head, _, rest = raw.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest, err


class MockTest(unittest.TestCase):
    mock = None

    def setUp(self):
        self.m = self.mock or MOCK
        self.m.reset()

    def req(self, method, path, body=None, headers=None):
        return self.m.request(method, path, body=body, headers=headers)

    def test_fixture_sse(self):
        st, hd, body = self.req("POST", "/v1/chat/completions", CHAT,
                                {"X-Mock-Fixture": "numeric_stream.sse"})
        self.assertEqual(st, 200)
        self.assertEqual(hd.get("Content-Type"), "text/event-stream")
        self.assertEqual(hd.get("Transfer-Encoding"), "chunked")
        self.assertEqual(body, H.fixture_bytes("numeric_stream.sse"))

    def test_default_by_stream_flag(self):
        st, hd, body = self.req("POST", "/openai/deployments/gpt-4o/chat/completions?api-version=2024-02-01",
                                H.chat_body(stream=True))
        self.assertEqual((st, body), (200, STREAM))
        st, hd, body = self.req("POST", "/v1/chat/completions", H.chat_body(stream=False))
        self.assertEqual((st, body), (200, RESPONSE))
        self.assertEqual(hd.get("Content-Type"), "application/json")
        self.assertEqual(hd.get("Content-Length"), str(len(RESPONSE)))
        log = self.m.requests()
        self.assertEqual(log[0]["path"], "/openai/deployments/gpt-4o/chat/completions")
        self.assertEqual(log[0]["query"], "api-version=2024-02-01")
        self.assertEqual(log[0]["body_json"]["stream"], True)
        self.assertEqual(log[1]["method"], "POST")

    def test_json_fixture_header(self):
        st, hd, body = self.req("POST", "/anything", CHAT, {"X-Mock-Fixture": "structured_response.json"})
        self.assertEqual((st, body), (200, H.fixture_bytes("structured_response.json")))

    def test_dialect_paths_by_stream_flag(self):
        for path, api in (("/v1/messages", "anthropic"), ("/base/v1/responses", "responses")):
            with self.subTest(path=path):
                st, hd, body = self.req("POST", path, H.chat_body(stream=True))
                self.assertEqual(st, 200)
                self.assertEqual(hd.get("Content-Type"), "text/event-stream")
                self.assertEqual(body, H.fixture_bytes(f"dialects/e2e/{api}_stream.sse"))
                st, hd, body = self.req("POST", path, H.chat_body(stream=False))
                self.assertEqual((st, body), (200, H.fixture_bytes(f"dialects/e2e/{api}_response.json")))
                self.assertEqual(self.m.requests()[-1]["path"], path)

    def test_fixture_in_a_subdirectory_but_not_above(self):
        name = "dialects/e2e/anthropic_error.sse"
        st, _, body = self.req("POST", "/v1/messages", CHAT, {"X-Mock-Fixture": name})
        self.assertEqual((st, body), (200, H.fixture_bytes(name)))
        st, _, _ = self.req("POST", "/v1/messages", CHAT, {"X-Mock-Fixture": "../fixtures/chat_request.json"})
        self.assertEqual(st, 404)

    def test_missing_fixture_404(self):
        st, _, body = self.req("POST", "/v1/chat/completions", CHAT, {"X-Mock-Fixture": "nope.sse"})
        self.assertEqual(st, 404)
        self.assertIn("error", json.loads(body))

    def test_split_chunks(self):
        for n in (1, 7, 64):
            with self.subTest(split=n):
                head, raw, err = read_raw_response(self.m, {"X-Mock-Split": str(n),
                                                                   "X-Mock-Fixture": "azure_oyd_stream.sse"})
                self.assertIsNone(err)
                chunks, term = raw_chunks(raw)
                self.assertTrue(term)
                self.assertEqual(b"".join(chunks), STREAM)
                self.assertTrue(all(len(c) == n for c in chunks[:-1]))
                self.assertLessEqual(len(chunks[-1]), n)

    def test_default_pieces_are_events(self):
        head, raw, err = read_raw_response(self.m, {"X-Mock-Fixture": "azure_oyd_filters_crlf.sse"})
        chunks, term = raw_chunks(raw)
        self.assertTrue(term)
        self.assertEqual(b"".join(chunks), H.fixture_bytes("azure_oyd_filters_crlf.sse"))
        self.assertEqual(len(chunks), 11)
        self.assertTrue(all(c.endswith(b"\r\n\r\n") for c in chunks))

    def test_wire_split_and_delay(self):
        c = self.m.raw(timeout=5)
        t0 = time.monotonic()
        r = c.request("POST", "/v1/chat/completions", CHAT,
                      {"X-Mock-Split-Wire": "300", "X-Mock-Delay-Ms": "30"})
        body = r.read_all(timeout=5)
        c.close()
        self.assertEqual(body, STREAM)
        self.assertGreater(len(r.body_reads), 5)
        self.assertGreaterEqual(time.monotonic() - t0, 0.3)

    def test_delay_between_pieces(self):
        c = self.m.raw(timeout=5)
        r = c.request("POST", "/v1/chat/completions", CHAT,
                      {"X-Mock-Split": "1000", "X-Mock-Delay-Ms": "150"})
        body = r.read_all(timeout=5)
        c.close()
        self.assertEqual(body, STREAM)
        times = [t for t, _ in r.body_reads]
        self.assertGreaterEqual(len(times), 3)
        self.assertGreaterEqual(times[-1] - times[0], 0.4)

    def test_fault_reset(self):
        c = self.m.raw(timeout=5)
        r = c.request("POST", "/v1/chat/completions", CHAT, {"X-Mock-Fault": "reset"})
        body = r.read_all(timeout=5)
        c.close()
        self.assertFalse(r.done)
        self.assertLessEqual(len(body), len(STREAM) // 2)
        self.assertEqual(self.m.requests()[0]["outcome"], "reset")

    def test_fault_reset_is_rst(self):
        # with nothing read, a linger-0 close must surface as ECONNRESET
        if self.m.tls:
            self.skipTest("plain only")
        c = self.m.raw(timeout=5)
        c.send_request("POST", "/v1/chat/completions", CHAT, {"X-Mock-Fault": "reset"})
        time.sleep(0.3)
        with self.assertRaises(ConnectionResetError):
            while c.sock.recv(65536):
                pass
        c.close()

    def test_fault_eof(self):
        c = self.m.raw(timeout=5)
        r = c.request("POST", "/v1/chat/completions", CHAT, {"X-Mock-Fault": "eof", "X-Mock-Split": "100"})
        body = r.read_all(timeout=5)
        c.close()
        self.assertFalse(r.done)
        self.assertEqual(body, STREAM[:len(STREAM) // 2])
        self.assertTrue(getattr(r, "truncated", False))

    def test_fault_stall_then_peer_close(self):
        c = self.m.raw(timeout=0.5)
        r = c.request("POST", "/v1/chat/completions", CHAT,
                      {"X-Mock-Fault": "stall", "X-Test-Id": "stall-1"})
        with self.assertRaises(socket.timeout):
            r.read_all(timeout=3)
        self.assertEqual(bytes(r.body), STREAM[:len(STREAM) // 2])
        before = self.m.stats()["closed_by_peer"]
        c.close()
        ok = H.wait_for(lambda: self.m.stats()["closed_by_peer"] > before, 2.0)
        self.assertTrue(ok)
        self.assertEqual(self.m.find("X-Test-Id", "stall-1")[0]["outcome"], "aborted")

    def test_fault_status(self):
        for code in (429, 500):
            with self.subTest(code=code):
                st, hd, body = self.req("POST", "/v1/chat/completions", CHAT, {"X-Mock-Fault": f"status:{code}"})
                self.assertEqual(st, code)
                self.assertEqual(body, mock_upstream.error_body(code))
                self.assertIn("message", json.loads(body)["error"])

    def test_fault_slow_headers(self):
        t0 = time.monotonic()
        st, _, body = self.req("POST", "/v1/chat/completions", CHAT, {"X-Mock-Fault": "slow-headers:400"})
        self.assertGreaterEqual(time.monotonic() - t0, 0.38)
        self.assertEqual((st, body), (200, STREAM))

    def test_fault_slow_headers_peer_gives_up(self):
        c = self.m.raw(timeout=0.2)
        c.send_request("POST", "/v1/chat/completions", CHAT,
                       {"X-Mock-Fault": "slow-headers:5000", "X-Test-Id": "slow-1"})
        with self.assertRaises(socket.timeout):
            c.sock.recv(10)
        c.close()
        ok = H.wait_for(lambda: self.m.find("X-Test-Id", "slow-1")[0]["outcome"] == "aborted", 1.0)
        self.assertTrue(ok)

    def test_fault_close_delimited(self):
        head, raw, err = read_raw_response(self.m, {"X-Mock-Fault": "close-delimited",
                                                          "Connection": "keep-alive"})
        self.assertNotIn("content-length", head.lower())
        self.assertNotIn("transfer-encoding", head.lower())
        self.assertEqual(raw, STREAM)

    def test_fault_no_done(self):
        st, _, body = self.req("POST", "/v1/chat/completions", CHAT, {"X-Mock-Fault": "no-done"})
        self.assertNotIn(b"[DONE]", body)
        self.assertEqual(body, STREAM.replace(b"data: [DONE]\n\n", b""))
        v = H.client_view.view(body.decode())
        self.assertFalse(v["ends_with_done"])
        st, _, body = self.req("POST", "/v1/chat/completions", CHAT,
                               {"X-Mock-Fault": "no-done", "X-Mock-Fixture": "azure_oyd_filters_crlf.sse"})
        self.assertNotIn(b"[DONE]", body)
        self.assertTrue(body.endswith(b"\r\n\r\n"))

    def test_keep_alive(self):
        conn = (http.client.HTTPSConnection("127.0.0.1", self.m.port, timeout=5, context=self.m.ssl_context())
                if self.m.tls else http.client.HTTPConnection("127.0.0.1", self.m.port, timeout=5))
        ids = []
        try:
            for i in range(3):
                st, hd, body = H.request(self.m.port, "POST", "/v1/chat/completions",
                                         H.chat_body(stream=bool(i % 2)), conn=conn)
                self.assertEqual(st, 200)
                self.assertEqual(body, STREAM if i % 2 else RESPONSE)
                ids.append(hd.get("X-Mock-Conn"))
            st, hd, body = H.request(self.m.port, "GET", "/v1/models", conn=conn)
            ids.append(hd.get("X-Mock-Conn"))
        finally:
            conn.close()
        self.assertEqual(len(set(ids)), 1, ids)
        self.assertEqual(len({r["conn"] for r in self.m.requests()}), 1)

    def test_models_and_echo(self):
        st, hd, body = self.req("GET", "/v1/models")
        self.assertEqual(st, 200)
        self.assertEqual(body, mock_upstream.MODELS_BODY)
        st, hd, body = self.req("POST", "/echo?x=1", b'{"a":1}',
                                {"Authorization": "Bearer sk-1", "api-key": "k1", "X-Custom": "v"})
        e = json.loads(body)
        self.assertEqual((e["method"], e["path"], e["query"], e["body"]), ("POST", "/echo", "x=1", '{"a":1}'))
        names = {k.lower(): v for k, v in e["headers"]}
        self.assertEqual(names["authorization"], "Bearer sk-1")
        self.assertEqual(names["api-key"], "k1")
        self.assertEqual(names["host"], f"127.0.0.1:{self.m.port}")

    def test_chunked_request_body(self):
        c = self.m.raw(timeout=5)
        body = b'{"stream": false}'
        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
        r = c.request("POST", "/echo", chunked, {"Transfer-Encoding": "chunked"})
        e = json.loads(r.read_all(5))
        c.close()
        self.assertEqual(e["body"], body.decode())

    def test_log_reset_stats(self):
        self.req("GET", "/v1/models")
        self.req("POST", "/echo", b"x")
        log = self.m.requests()
        self.assertEqual([r["path"] for r in log], ["/v1/models", "/echo"])
        self.assertTrue(all(r["outcome"] == "complete" for r in log))
        s = self.m.stats()
        self.assertEqual(s["requests"], 2)
        self.assertGreaterEqual(s["open"], 1)  # the stats request's own connection
        self.m.reset()
        self.assertEqual(self.m.requests(), [])
        self.assertEqual(self.m.stats()["requests"], 0)

    def test_open_connections_counted(self):
        base = self.m.stats()["open"]
        clients = [self.m.raw(timeout=5) for _ in range(3)]
        for c in clients:  # make sure the TLS handshake / accept happened
            c.send_request("GET", "/v1/models")
            H.RawResponse(c, 0).read_head().read_all(5)
        self.assertEqual(self.m.stats()["open"], base + 3)
        for c in clients:
            c.close()
        self.assertTrue(H.wait_for(lambda: self.m.stats()["open"] == base, 2.0))
        self.assertEqual(self.m.stats()["closed_by_peer"], 0)
        self.assertGreaterEqual(self.m.stats()["idle_closed_by_peer"], 3)

    def test_client_disconnect_mid_stream(self):
        c = self.m.raw(timeout=5)
        r = c.request("POST", "/v1/chat/completions", CHAT,
                      {"X-Mock-Split": "64", "X-Mock-Delay-Ms": "50", "X-Test-Id": "disc-1"})
        self.assertTrue(r.read_until(lambda b: len(b) > 0, 3))
        c.close()
        t0 = time.monotonic()
        self.assertTrue(H.wait_for(lambda: self.m.stats()["closed_by_peer"] >= 1, 1.0))
        self.assertLess(time.monotonic() - t0, 1.0)
        self.assertEqual(self.m.find("X-Test-Id", "disc-1")[0]["outcome"], "aborted")

    def test_bad_request(self):
        status, raw = H.send_oversized(self.m.port, b"GARBAGE\r\n", b"")
        self.assertEqual(status, 400)


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b))


class EmbeddingsMockTest(unittest.TestCase):
    """POST …/embeddings and its controls (POST /__mock/embeddings), on the plain mock."""

    def setUp(self):
        self.m = MOCK
        self.m.reset()

    def embed(self, text, path="/v1/embeddings", headers=None, model="text-embedding-3-small"):
        st, hd, body = self.m.request("POST", path, {"model": model, "input": text}, headers)
        return st, hd, body

    def vector(self, text):
        st, _, body = self.embed(text)
        self.assertEqual(st, 200, body)
        return json.loads(body)["data"][0]["embedding"]

    def settings(self, **change):
        st, _, body = self.m.request("POST", "/__mock/embeddings", change)
        self.assertEqual(st, 200, body)
        return json.loads(body)

    def test_answer_is_openai_shaped_unit_and_deterministic(self):
        st, hd, body = self.embed("How do I charge the X100?", headers={"Authorization": "Bearer k-1"})
        self.assertEqual(st, 200)
        self.assertEqual(hd.get("Content-Type"), "application/json")
        a = json.loads(body)
        self.assertEqual(set(a), {"object", "data", "model", "usage"})
        self.assertEqual((a["object"], a["model"]), ("list", "text-embedding-3-small"))
        self.assertEqual(a["usage"], {"prompt_tokens": 6, "total_tokens": 6})
        self.assertEqual(len(a["data"]), 1)
        d = a["data"][0]
        self.assertEqual((d["object"], d["index"]), ("embedding", 0))
        self.assertEqual(len(d["embedding"]), 64)
        self.assertTrue(all(isinstance(x, float) for x in d["embedding"]))
        self.assertAlmostEqual(cosine(d["embedding"], d["embedding"]), 1.0, places=9)
        # the same text, the same vector, also in a fresh process (no salted hash())
        self.assertEqual(self.vector("How do I charge the X100?"), d["embedding"])
        self.assertEqual(mock_upstream.embed_vector("How do I charge the X100?", 64), d["embedding"])
        # recorded like any request, headers included; the control path is not
        log = self.m.requests()
        self.assertEqual([r["path"] for r in log], ["/v1/embeddings", "/v1/embeddings"])
        self.assertIn(["Authorization", "Bearer k-1"], log[0]["headers"])
        self.assertEqual(log[0]["body_json"]["input"], "How do I charge the X100?")
        self.assertEqual(log[0]["outcome"], "complete")

    def test_paraphrases_share_a_direction(self):
        q, para, other = "How do I charge the X100?", "power up my handset", "What is the refund policy?"
        self.assertFalse(set(mock_upstream.embed_words(q)) & set(mock_upstream.embed_words(para)))
        vq, vp, vo = self.vector(q), self.vector(para), self.vector(other)
        self.assertGreater(cosine(vq, vp), 0.9)
        self.assertLess(abs(cosine(vq, vo)), 0.1)
        self.assertLess(abs(cosine(vp, vo)), 0.1)
        self.assertGreater(cosine(vo, self.vector("How can I get my money back?")), 0.5)
        # a text without a topic word, and an empty one, still get a unit vector
        for text in ("zzz qqq", ""):
            v = self.vector(text)
            self.assertAlmostEqual(cosine(v, v), 1.0, places=9)

    def test_any_path_ending_in_embeddings_and_list_input(self):
        st, _, body = self.m.request("POST", "/openai/deployments/e/embeddings?api-version=1",
                                     {"model": "m", "input": ["power up my handset", "refund"]})
        self.assertEqual(st, 200)
        data = json.loads(body)["data"]
        self.assertEqual([d["index"] for d in data], [0, 1])
        self.assertEqual(data[0]["embedding"], self.vector("power up my handset"))
        # X-Mock-Fixture still wins, and other methods are not embeddings
        st, _, body = self.m.request("POST", "/v1/embeddings", CHAT,
                                     {"X-Mock-Fixture": "azure_oyd_response.json"})
        self.assertEqual((st, body), (200, RESPONSE))
        st, _, _ = self.m.request("GET", "/v1/embeddings")
        self.assertEqual(st, 404)

    def test_bad_requests(self):
        for body in (b"not json", b"[1]", {"input": "x"}, {"model": "m"}, {"model": "m", "input": 5},
                     {"model": "m", "input": []}):
            st, _, data = self.m.request("POST", "/v1/embeddings", body)
            self.assertEqual(st, 400, (body, data))
            self.assertIn("message", json.loads(data)["error"])
        for change in ({"mode": "nope"}, {"mode": "status:99"}, {"dim": 0}, {"dim": "8"},
                       {"delay_ms": -1}, {"other": 1}):
            st, _, _ = self.m.request("POST", "/__mock/embeddings", change)
            self.assertEqual(st, 400, change)
        self.assertEqual(self.settings(), {"mode": "ok", "dim": 64, "delay_ms": 0})

    def test_modes_and_reset(self):
        ok = self.vector("power up my handset")
        self.assertEqual(self.settings(mode="status:500"), {"mode": "status:500", "dim": 64, "delay_ms": 0})
        st, _, body = self.embed("x")
        self.assertEqual((st, body), (500, mock_upstream.error_body(500)))
        self.settings(mode="malformed")
        st, _, body = self.embed("x")
        self.assertEqual(st, 200)
        self.assertRaises(ValueError, json.loads, body)
        self.assertIn(b'"embedding":[', body)
        self.settings(mode="base64")
        st, _, body = self.embed("power up my handset")
        b64 = json.loads(body)["data"][0]["embedding"]
        floats = struct.unpack("<64f", base64.b64decode(b64))
        self.assertTrue(all(abs(a - b) < 1e-6 for a, b in zip(floats, ok)))
        self.settings(mode="ok", dim=32)
        self.assertEqual(len(self.vector("power up my handset")), 32)
        self.settings(dim=9000)
        self.assertEqual(len(self.vector("power up my handset")), 9000)
        self.settings(delay_ms=300)
        t0 = time.monotonic()
        self.vector("x")
        self.assertGreaterEqual(time.monotonic() - t0, 0.29)
        self.m.reset()
        self.assertEqual(self.settings(), {"mode": "ok", "dim": 64, "delay_ms": 0})
        st, _, body = self.m.request("GET", "/__mock/embeddings")
        self.assertEqual(json.loads(body), {"mode": "ok", "dim": 64, "delay_ms": 0})
        self.assertEqual(self.vector("power up my handset"), ok)

    def test_hang_answers_nothing_until_the_peer_gives_up(self):
        self.settings(mode="hang")
        c = self.m.raw(timeout=0.5)
        c.send_request("POST", "/v1/embeddings", {"model": "m", "input": "x"})
        self.assertRaises(socket.timeout, c.sock.recv, 1)
        self.assertEqual(self.m.stats()["embeddings_in_flight"], 1)
        c.close()
        self.assertTrue(H.wait_for(lambda: self.m.stats()["embeddings_in_flight"] == 0, 2.0))
        self.assertEqual(self.m.requests()[0]["outcome"], "aborted")
        self.assertEqual(self.m.stats()["closed_by_peer"], 1)

    def test_in_flight_counted(self):
        self.settings(delay_ms=600)
        threads = [threading.Thread(target=self.embed, args=(f"question {i}",)) for i in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        s = self.m.stats()
        self.assertEqual((s["embeddings_requests"], s["embeddings_in_flight"], s["embeddings_in_flight_max"]),
                         (5, 0, 5))
        self.vector("one more, alone")
        self.assertEqual(self.m.stats()["embeddings_in_flight_max"], 5)
        self.m.reset()
        s = self.m.stats()
        self.assertEqual((s["embeddings_requests"], s["embeddings_in_flight_max"]), (0, 0))


class TLSMockTest(MockTest):
    """The same checks against the TLS mock."""

    @classmethod
    def setUpClass(cls):
        cls.mock = TLS_MOCK

    def test_alpn_http11_and_verification(self):
        ctx = self.m.ssl_context()
        ctx.set_alpn_protocols(["h2", "http/1.1"])
        with socket.create_connection(("127.0.0.1", self.m.port), timeout=5) as s:
            with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
                self.assertEqual(t.selected_alpn_protocol(), "http/1.1")
        with socket.create_connection(("127.0.0.1", self.m.port), timeout=5) as s:
            with ctx.wrap_socket(s, server_hostname="localhost") as t:
                self.assertEqual(t.version()[:3], "TLS")

    def test_bad_request(self):
        self.skipTest("raw plaintext garbage is not meaningful over TLS")


if __name__ == "__main__":
    unittest.main()
