"""HTTP/2 clients (nghttp, h2load from Debian's nghttp2-client): h2c with
prior knowledge on the HTTP/1.1 port, h2 over TLS by ALPN, many streams on
one connection, and HTTP/1.1 still served on the same port."""
import os
import shutil
import subprocess
import tempfile
import unittest

import harness as H
import client_view

BODY = b'{"stream":true,"messages":[{"role":"user","content":"q"}]}'

# Methods llhttp has no name for (QUERY, a made-up token) and some it has, forwarded as is
# over h2 as over HTTP/1.1 (SPEC §4).
METHODS = ("TRACE", "PROPFIND", "MKCOL", "QUERY", "X-Custom_1.v2")


def echo_methods(test, port):
    import json
    import h2frames as F
    with F.H2Client(port) as c:
        c.wait_settings()
        for method in METHODS:
            with test.subTest(method=method):
                body = b"payload-" + method.encode() if method in ("PROPFIND", "QUERY") else None
                st = c.response(c.request(method, "/echo/m?x=1", body))
                test.assertEqual(st.status, 200, bytes(st.body[:200]))
                e = json.loads(bytes(st.body))
                test.assertEqual((e["method"], e["path"], e["query"]), (method, "/echo/m", "x=1"))
                test.assertEqual(e["body"], (body or b"").decode())


class H2Clients(H.DaemonCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="cg-h2-")
        cls.cert, cls.key = H.make_cert(cls.dir)
        cls.req = os.path.join(cls.dir, "req.json")
        with open(cls.req, "wb") as f:
            f.write(BODY)
        cls.mock = H.MockUpstream().start()
        cls.plain = H.Citegate(upstream=cls.mock.url,
                               env={"CITEGATE_UPSTREAM_MAX_CONNECTIONS": "128"}).start()
        cls.tls = H.Citegate(upstream=cls.mock.url,
                             env={"CITEGATE_TLS_CERT": cls.cert, "CITEGATE_TLS_KEY": cls.key,
                                  "CITEGATE_UPSTREAM_MAX_CONNECTIONS": "128"}).start()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.mock.cleanup()
            shutil.rmtree(cls.dir, ignore_errors=True)

    def nghttp(self, url, *headers):
        cmd = ["nghttp", "-d", self.req]
        for h in headers:
            cmd += ["-H", h]
        p = subprocess.run(cmd + [url], capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr.decode()[-500:])
        return p.stdout.decode()

    def check(self, text, expected):
        want = H.expected(expected)
        got = client_view.view(text)
        self.assertEqual(got["content"], want["content"])
        self.assertEqual(got["sources"], want["sources"])
        self.assertEqual(got["ends_with_done"], want["ends_with_done"])

    def test_h2c_prior_knowledge_fixtures(self):
        for split in ("1", "7", "64"):
            for fixture in ("azure_oyd_stream", "perplexity_stream"):
                text = self.nghttp(f"http://127.0.0.1:{self.plain.port}/v1/chat/completions",
                                   f"X-Mock-Fixture: {fixture}.sse", f"X-Mock-Split: {split}")
                self.check(text, f"{fixture}.openwebui.json")

    def test_h2_over_tls_alpn(self):
        text = self.nghttp(f"https://localhost:{self.tls.port}/v1/chat/completions",
                           "X-Mock-Fixture: azure_oyd_filters_crlf.sse", "X-Mock-Split: 7")
        self.check(text, "azure_oyd_filters_crlf.openwebui.json")

    def test_http1_still_served_on_the_h2c_port(self):
        st, hd, body = H.request(self.plain.port, "POST", "/v1/chat/completions", BODY,
                                 {"X-Mock-Fixture": "azure_oyd_stream.sse"})
        self.assertEqual(st, 200)
        self.check(body.decode(), "azure_oyd_stream.openwebui.json")

    def test_any_token_method_is_forwarded(self):
        echo_methods(self, self.plain.port)

    def test_declared_body_too_large_gets_413_at_once(self):
        # SPEC §5/§11: CITEGATE_MAX_REQUEST_BYTES is 8388608; the 413 comes when the head
        # arrives, as over HTTP/1.1, not after a body the client need not send.
        import h2frames as F
        with F.H2Client(self.plain.port) as c:
            c.wait_settings()
            sid = c.next_sid
            c.next_sid += 2
            c.streams[sid] = F.Stream(sid)
            c.send(F.headers(sid, [(":method", "POST"), (":scheme", "http"),
                                   (":path", "/v1/chat/completions"), (":authority", c.authority),
                                   ("content-type", "application/json"),
                                   ("content-length", "8388609")]))
            st = c.response(sid, timeout=3)
            self.assertEqual(st.status, 413)
            self.assertIn(b"request_too_large", bytes(st.body))

    def test_path_must_be_visible_ascii_and_connect_refused(self):
        """A :path byte outside visible ASCII (nghttp2 lets obs-text through) would make an
        HTTP/1.1 upstream's request line invalid: 400, nothing upstream. CONNECT opens no
        tunnel: 501. The connection serves the next request."""
        import h2frames as F
        self.mock.reset()
        with F.H2Client(self.plain.port) as c:
            c.wait_settings()
            st = c.response(c.request("GET", "/echo/caf\xe9"), timeout=5)
            self.assertEqual(st.status, 400, bytes(st.body[:200]))
            self.assertIn(b"visible ASCII", bytes(st.body))
            for path in ("/echo/a b", "/echo/\x7f"):  # nghttp2 resets these itself
                with self.subTest(path=path):
                    st = c.response(c.request("GET", path), timeout=5)
                    self.assertTrue(st.status == 400 or st.reset is not None, st.status)
            sid = c.next_sid
            c.next_sid += 2
            c.streams[sid] = F.Stream(sid)
            c.send(F.headers(sid, [(":method", "CONNECT"), (":authority", "upstream:443")],
                             end_stream=True))
            st = c.response(sid, timeout=5)
            self.assertEqual(st.status, 501, bytes(st.body[:200]))
            st = c.response(c.request("GET", "/echo/ok"), timeout=5)
            self.assertEqual(st.status, 200)
        self.assertEqual([r["path"] for r in self.mock.requests()], ["/echo/ok"])

    def test_small_windows_answer_byte_for_byte(self):
        """A client that opens 100 bytes of window at a time: every answer waits on flow
        control with bytes queued, leaves in frames the window cuts, and arrives byte for
        byte as a client with wide windows gets it, three streams side by side."""
        import h2frames as F

        def fetch(window):
            with F.H2Client(self.plain.port, handshake=False) as c:
                c.send(F.PREFACE + F.settings([(F.SETTINGS_HEADER_TABLE_SIZE, 0),
                                               (F.SETTINGS_ENABLE_PUSH, 0),
                                               (F.SETTINGS_INITIAL_WINDOW_SIZE, window)]))
                c.wait_settings()
                sids = [c.request("POST", "/v1/chat/completions", BODY,
                                  {"x-mock-fixture": f"{fixture}.sse", "x-mock-split": split})
                        for fixture, split in (("azure_oyd_stream", "7"), ("perplexity_stream", "1"),
                                               ("azure_oyd_stream", "64"))]
                streams = [c.response(sid, timeout=30) for sid in sids]
                for st in streams:
                    self.assertEqual((st.status, st.ended, st.reset), (200, True, None))
                return [bytes(st.body) for st in streams]

        wide, narrow = fetch(1 << 24), fetch(100)
        for w, n in zip(wide, narrow):
            self.assertGreater(len(w), 1000)
            self.assertEqual(n, w)

    def test_h2load_many_streams_none_fail(self):
        for scheme, port in (("http", self.plain.port), ("https", self.tls.port)):
            host = "127.0.0.1" if scheme == "http" else "localhost"
            p = subprocess.run(["h2load", "-n", "2000", "-c", "10", "-m", "10", "-d", self.req,
                                f"{scheme}://{host}:{port}/v1/chat/completions"],
                               capture_output=True, timeout=120)
            out = p.stdout.decode()
            self.assertIn("2000 succeeded, 0 failed, 0 errored, 0 timeout", out, out[-800:])
            self.assertIn("status codes: 2000 2xx", out, out[-800:])


if __name__ == "__main__":
    unittest.main()
