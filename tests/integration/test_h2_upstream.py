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

BODY = b'{"stream":true,"messages":[{"role":"user","content":"q"}]}'


class H2Upstream(unittest.TestCase):
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

    @classmethod
    def tearDownClass(cls):
        for p in (cls.front, cls.back):
            p.stop()
            p.cleanup()
        cls.mock.stop()
        cls.mock.cleanup()
        shutil.rmtree(cls.dir, ignore_errors=True)

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


if __name__ == "__main__":
    unittest.main()
