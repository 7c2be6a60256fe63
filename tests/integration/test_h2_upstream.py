"""HTTP/2 upstreams (CITEGATE_UPSTREAM_PROTOCOL=h2). The h2 upstream is a
second citegate with profile `off` (an h2c server in front of the mock),
so the front instance's answers must still equal the fixtures' views."""
import re
import socket
import subprocess
import tempfile
import os
import shutil
import time
import unittest

import harness as H
import client_view
from test_h2 import echo_methods

BODY = b'{"stream":true,"messages":[{"role":"user","content":"q"}]}'


class Chain(H.DaemonCase):
    """front citegate -> back citegate (h2 server) -> mock; subclasses set them up."""

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()  # the latest started first: front, then back
        finally:
            cls.mock.cleanup()
            shutil.rmtree(cls.dir, ignore_errors=True)


class H2Upstream(Chain):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="cg-h2up-")
        cls.req = os.path.join(cls.dir, "req.json")
        with open(cls.req, "wb") as f:
            f.write(BODY)
        cls.mock = H.MockUpstream().start()
        cls.back = H.Citegate(upstream=cls.mock.url,
                              env={"CITEGATE_PROFILE": "off",
                                   "CITEGATE_UPSTREAM_MAX_CONNECTIONS": "256"}).start()
        cls.front = H.Citegate(upstream=f"http://127.0.0.1:{cls.back.port}",
                               env={"CITEGATE_UPSTREAM_PROTOCOL": "h2"}).start()

    def test_fixtures_through_an_h2_upstream(self):
        for split in ("1", "7", "64"):
            for name in ("azure_oyd_stream", "azure_truncated", "numeric_malformed"):
                exp = H.expected(name + ".openwebui.json")
                body = H.chat_body(exp["request"]) if exp.get("request") else BODY
                st, _, out = H.request(self.front.port, "POST", "/v1/chat/completions", body,
                                       {"X-Mock-Fixture": exp["fixture"], "X-Mock-Split": split})
                self.assertEqual(st, 200)
                got = client_view.view(out.decode())
                for k in ("content", "sources", "ends_with_done", "ends_with_error_event"):
                    self.assertEqual(got[k], exp[k], f"{name} split {split}: {k}")

    def test_any_token_method_through_an_h2_upstream(self):
        echo_methods(self, self.front.port)  # h2 on both of the front's sides

    def test_streams_share_one_connection(self):
        p = subprocess.run(["h2load", "-n", "2000", "-c", "10", "-m", "10", "-d", self.req,
                            f"http://127.0.0.1:{self.front.port}/v1/chat/completions"],
                           capture_output=True, timeout=120)
        out = p.stdout.decode()
        self.assertIn("2000 succeeded, 0 failed", out, out[-600:])
        _, _, metrics = H.request(self.front.admin_port, "GET", "/metrics")
        m = re.search(rb'citegate_upstream_connections\{protocol="h2"\} (\d+)', metrics)
        # 100 concurrent streams, the peer allows 256 per connection.
        self.assertEqual(int(m.group(1)), 1, metrics[-800:])

    def test_upstream_stream_reset_ends_only_that_stream(self):
        # The mock resets the back instance's HTTP/1.1 connection mid-answer; the
        # back resets its h2 stream; the front ends that client with the error event.
        st, _, out = H.request(self.front.port, "POST", "/v1/chat/completions", BODY,
                               {"X-Mock-Fixture": "azure_oyd_stream.sse", "X-Mock-Fault": "reset"})
        self.assertEqual(st, 200)
        v = client_view.view(out.decode())
        self.assertTrue(v["ends_with_error_event"], out[-300:])
        self.assertFalse(v["ends_with_done"])
        # The shared connection still serves the next request.
        st, _, out = H.request(self.front.port, "POST", "/v1/chat/completions", BODY,
                               {"X-Mock-Fixture": "azure_oyd_stream.sse"})
        self.assertTrue(client_view.view(out.decode())["ends_with_done"])

    def test_client_disconnect_resets_the_upstream_stream(self):
        tid = "h2up-%d" % time.monotonic_ns()
        s = socket.create_connection(("127.0.0.1", self.front.port), timeout=10)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"X-Mock-Fixture: azure_oyd_filters_crlf.sse\r\nX-Mock-Split: 64\r\n"
                  b"X-Mock-Delay-Ms: 50\r\nX-Test-Id: " + tid.encode() + b"\r\nContent-Length: " +
                  str(len(BODY)).encode() + b"\r\n\r\n" + BODY)
        self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 200"))
        t0 = time.monotonic()
        s.close()
        # RST_STREAM(CANCEL) reaches the back instance, which closes the mock's connection.
        def aborted():
            return any(dict((k.lower(), v) for k, v in r["headers"]).get("x-test-id") == tid and
                       r.get("outcome") == "aborted" for r in self.mock.requests())
        ok = H.wait_for(aborted, 2.0)
        self.assertTrue(ok, self.mock.requests()[-2:])
        self.assertLess(time.monotonic() - t0, 2.0)


class H2UpstreamSlowClient(Chain):
    """A client that stops reading must not stall the other streams of the
    shared upstream connection: its own window stays closed, theirs do not."""

    @classmethod
    def setUpClass(cls):
        import test_backpressure
        cls.dir = cls.fixtures = tempfile.mkdtemp(prefix="cg-h2slow-")
        cls.big = test_backpressure.big_stream()
        with open(os.path.join(cls.fixtures, "big.sse"), "wb") as f:
            f.write(cls.big)
        shutil.copy(os.path.join(H.FIXTURES, "azure_oyd_stream.sse"), cls.fixtures)
        cls.mock = H.MockUpstream(fixtures=cls.fixtures).start()
        cls.back = H.Citegate(upstream=cls.mock.url, env={"CITEGATE_PROFILE": "off"}).start()
        cls.front = H.Citegate(upstream=f"http://127.0.0.1:{cls.back.port}",
                               env={"CITEGATE_UPSTREAM_PROTOCOL": "h2"}).start()

    def test_paused_stream_leaves_neighbours_flowing(self):
        slow = H.slow_reader(self.front.port)
        slow.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"X-Mock-Fixture: big.sse\r\nConnection: close\r\nContent-Length: " +
                     str(len(BODY)).encode() + b"\r\n\r\n" + BODY)
        time.sleep(1.0)  # the slow client reads nothing; its stream's window fills
        exp = H.expected("azure_oyd_stream.openwebui.json")
        for _ in range(5):
            t0 = time.monotonic()
            st, _, out = H.request(self.front.port, "POST", "/v1/chat/completions", BODY,
                                   {"X-Mock-Fixture": "azure_oyd_stream.sse"}, timeout=10)
            self.assertLess(time.monotonic() - t0, 2.0)
            self.assertEqual(client_view.view(out.decode())["content"], exp["content"])
        _, _, metrics = H.request(self.front.admin_port, "GET", "/metrics")
        self.assertRegex(metrics.decode(), r'citegate_upstream_connections\{protocol="h2"\} 1')
        body = H.read_to_eof(slow).partition(b"\r\n\r\n")[2]
        out = H.dechunk(body)
        self.assertEqual(bytes(out), self.big)


class H2UpstreamGoaway(Chain):
    """The back instance drains (GOAWAY) while a stream is in flight: that
    stream finishes, and new streams go to a new connection, here landing on
    a second back instance that shares the port (SO_REUSEPORT)."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="cg-h2goaway-")
        cls.mock = H.MockUpstream().start()
        cls.back = H.Citegate(upstream=cls.mock.url,
                              env={"CITEGATE_PROFILE": "off",
                                   "CITEGATE_SHUTDOWN_GRACE_MS": "10000"}).start()
        cls.front = H.Citegate(upstream=f"http://127.0.0.1:{cls.back.port}",
                               env={"CITEGATE_UPSTREAM_PROTOCOL": "h2"}).start()
        cls.back2 = None

    def test_goaway_moves_new_streams_to_a_new_connection(self):
        c, r = None, None
        c = self.front.raw(timeout=10)
        r = c.request("POST", "/v1/chat/completions", BODY,
                      {"X-Mock-Fixture": "azure_oyd_filters_crlf.sse", "X-Mock-Split": "64",
                       "X-Mock-Delay-Ms": "30"})
        self.assertEqual(r.status, 200)
        self.assertTrue(r.read_until(lambda b: b"\n\n" in b, 5))
        cls = type(self)
        cls.back2 = H.Citegate(upstream=self.mock.url,
                               env={"CITEGATE_PROFILE": "off",
                                    "CITEGATE_LISTEN": f"127.0.0.1:{self.back.port}"}).start()
        self.back.signal(__import__("signal").SIGTERM)
        time.sleep(0.3)  # the GOAWAY reaches the front
        st, _, out = H.request(self.front.port, "POST", "/v1/chat/completions", BODY,
                               {"X-Mock-Fixture": "azure_oyd_stream.sse"})
        self.assertEqual(st, 200, out[:300])
        self.assertTrue(client_view.view(out.decode())["ends_with_done"])
        text = r.read_all(timeout=10).decode()
        c.close()
        v = client_view.view(text)
        self.assertTrue(v["ends_with_done"], text[-300:])
        self.assertEqual(v["content"], H.expected("azure_oyd_filters_crlf.openwebui.json")["content"])


class H2UpstreamTLSAuto(Chain):
    """CITEGATE_UPSTREAM_PROTOCOL=auto (the default) on https: ALPN picks h2."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="cg-h2tls-")
        cls.cert, cls.key = H.make_cert(cls.dir)
        cls.mock = H.MockUpstream().start()
        cls.back = H.Citegate(upstream=cls.mock.url,
                              env={"CITEGATE_PROFILE": "off", "CITEGATE_TLS_CERT": cls.cert,
                                   "CITEGATE_TLS_KEY": cls.key}).start()
        cls.front = H.Citegate(upstream=f"https://localhost:{cls.back.port}",
                               env={"CITEGATE_UPSTREAM_CA": cls.cert}).start()

    def test_alpn_h2_upstream(self):
        exp = H.expected("azure_oyd_filters_crlf.openwebui.json")
        st, _, out = H.request(self.front.port, "POST", "/v1/chat/completions", BODY,
                               {"X-Mock-Fixture": exp["fixture"], "X-Mock-Split": "7"})
        self.assertEqual(st, 200)
        got = client_view.view(out.decode())
        self.assertEqual(got["content"], exp["content"])
        self.assertEqual(got["sources"], exp["sources"])
        _, _, metrics = H.request(self.front.admin_port, "GET", "/metrics")
        self.assertRegex(metrics.decode(), r'citegate_upstream_connections\{protocol="h2"\} 1')


if __name__ == "__main__":
    unittest.main()
