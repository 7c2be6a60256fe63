"""citegate against an independent HTTP/2 mock upstream (tests/tools/h2mock.c,
written on nghttp2 directly) that allows 100 concurrent streams."""
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
import unittest

import harness as H
import client_view

BODY = b'{"stream":true,"messages":[{"role":"user","content":"q"}]}'
H2MOCK = os.environ.get("H2MOCK_BIN", os.path.join(H.ROOT, "build", "tests", "h2mock"))


class H2Mock(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="cg-h2mock-")
        ready = os.path.join(cls.dir, "ready")
        cls.stats = os.path.join(cls.dir, "stats.json")
        cls.mock = subprocess.Popen([H2MOCK, "--fixtures", H.FIXTURES, "--ready-file", ready,
                                     "--max-streams", "100", "--stats-file", cls.stats,
                                     "--delay-ms", "20"], preexec_fn=H._die_with_parent)
        H.wait_for(lambda: os.path.exists(ready) and os.path.getsize(ready) > 0, 10)
        with open(ready) as f:
            port = int(f.read())
        cls.cg = H.Citegate(upstream=f"http://127.0.0.1:{port}",
                            env={"CITEGATE_UPSTREAM_PROTOCOL": "h2"}).start()
        cls.req = os.path.join(cls.dir, "req.json")
        with open(cls.req, "wb") as f:
            f.write(BODY)

    @classmethod
    def tearDownClass(cls):
        cls.cg.stop()
        cls.cg.cleanup()
        cls.mock.terminate()
        cls.mock.wait(timeout=5)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def connections(self):
        with open(self.stats) as f:
            return json.load(f)["connections"]

    def test_fixture_through_h2_mock(self):
        for name in ("azure_oyd_stream", "perplexity_stream"):
            exp = H.expected(name + ".openwebui.json")
            st, _, out = H.request(self.cg.port, "POST", "/v1/chat/completions", BODY,
                                   {"X-Mock-Fixture": exp["fixture"]})
            self.assertEqual(st, 200)
            got = client_view.view(out.decode())
            self.assertEqual(got["content"], exp["content"])
            self.assertEqual(got["sources"], exp["sources"])
            self.assertTrue(got["ends_with_done"])

    def test_streams_fill_connections_up_to_the_peer_limit(self):
        before = self.connections()
        concurrent = 250
        p = subprocess.run(["h2load", "-n", "1000", "-c", "5", "-m", str(concurrent // 5),
                            "-d", self.req, f"http://127.0.0.1:{self.cg.port}/v1/chat/completions"],
                           capture_output=True, timeout=120)
        out = p.stdout.decode()
        self.assertIn("1000 succeeded, 0 failed", out, out[-600:])
        used = self.connections() - before
        print(f"\n{concurrent} concurrent streams used {used} upstream connection(s)")
        self.assertGreaterEqual(used, 1)
        self.assertLessEqual(used, math.ceil(concurrent / 100) + 1, out[-300:])

    def test_upstream_reset_gives_error_event(self):
        st, _, out = H.request(self.cg.port, "POST", "/v1/chat/completions", BODY,
                               {"X-Mock-Fixture": "azure_oyd_stream.sse", "X-Mock-Fault": "rst"})
        self.assertEqual(st, 200)
        v = client_view.view(out.decode())
        self.assertTrue(v["ends_with_error_event"], out[-300:])
        self.assertFalse(v["ends_with_done"])


if __name__ == "__main__":
    unittest.main()
