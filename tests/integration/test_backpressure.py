"""A client that stops reading must not make citegate buffer its answer:
the upstream is paused at the client's high-water mark, memory stays
bounded, and when the client reads again every byte arrives in order."""
import json
import os
import shutil
import tempfile
import time
import unittest

import harness as H

EVENTS = 40000  # ~8 MB of SSE


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def big_stream():
    out = []
    for i in range(EVENTS):
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                 "choices": [{"index": 0, "delta": {"content": f"word{i:06d} " + "x" * 150},
                              "finish_reason": None}]}
        out.append("data: " + json.dumps(chunk) + "\n\n")
    out.append('data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
    return "".join(out).encode()


class SlowClient(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fixtures = tempfile.mkdtemp(prefix="cg-big-")
        cls.body = big_stream()
        with open(os.path.join(cls.fixtures, "big.sse"), "wb") as f:
            f.write(cls.body)
        cls.mock = H.MockUpstream(fixtures=cls.fixtures).start()
        cls.cg = H.Citegate(upstream=cls.mock.url).start()

    @classmethod
    def tearDownClass(cls):
        cls.cg.stop()
        cls.cg.cleanup()
        cls.mock.stop()
        cls.mock.cleanup()
        shutil.rmtree(cls.fixtures, ignore_errors=True)

    def test_paused_client_bounds_memory_and_loses_nothing(self):
        base = rss_kib(self.cg.proc.pid)
        sock = H.slow_reader(self.cg.port)
        body = json.dumps({"stream": True, "messages": [{"role": "user", "content": "hi"}]})
        sock.sendall(("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      "X-Mock-Fixture: big.sse\r\nConnection: close\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
        time.sleep(2.0)  # the client reads nothing
        paused = rss_kib(self.cg.proc.pid)
        self.assertLess(paused - base, 4096,
                        f"citegate grew {paused - base} KiB while its client was not reading")
        head, _, rest = H.read_to_eof(sock).partition(b"\r\n\r\n")
        self.assertIn(b"200 OK", head.split(b"\r\n")[0])
        out = H.dechunk(rest)
        # No reference in the answer: every upstream byte comes through unchanged.
        self.assertEqual(bytes(out), self.body)


if __name__ == "__main__":
    unittest.main()
