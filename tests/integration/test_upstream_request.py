"""What citegate sends upstream and relays back when a side sits at a limit.

- An upstream answer whose head is over the 64 KiB citegate keeps (70 fields of 1 KiB) is a
  clean 502 over HTTP/1.1 and h2 alike: no field of it reaches the client, none merged with
  another, and the connection serves the next request.
- A client whose header fields fill the 64 KiB a request may carry still has its upstream
  request carry citegate's own fields (X-Request-Id, Accept-Encoding) and the dialect's key
  field, beside every field of its own.
- A data_sources member that counts as none ([], null, an object) is replaced by
  AZURE_AI_DATA_SOURCES, never sent twice.
"""
import json
import os
import unittest

import harness as H

CHAT = b'{"messages":[{"role":"user","content":"q"}]}'
SOURCES = [{"type": "azure_search", "parameters": {"endpoint": "https://s.example",
                                                   "index_name": "i"}}]


class _Daemons(H.DaemonCase):
    """Starts an upstream mock and citegate in front of it; on teardown requires exit 0
    after SIGTERM and no sanitizer report (H.DaemonCase)."""
    env = {}
    h2 = False

    @classmethod
    def setUpClass(cls):
        cls.mock = (H.H2MockUpstream() if cls.h2 else H.MockUpstream()).start()
        env = dict(cls.env)
        if cls.h2:
            env["CITEGATE_UPSTREAM_PROTOCOL"] = "h2"
        cls.cg = H.Citegate(upstream=cls.mock.url, env=env).start()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.mock.cleanup()


class _BigUpstreamHead:
    """Shared by the HTTP/1.1 and h2 upstream classes below."""
    fault = {"X-Mock-Fault": "bighead"}

    def check_refused(self, st, hd, body):
        self.assertEqual(st, 502, body[:300])
        names = [k.lower() for k, _ in hd]
        self.assertFalse([n for n in names if n.startswith("x-p") or "vvvv" in n], names)
        self.assertFalse(any("vvvv" in v for _, v in hd), "a field of the refused head leaked")
        self.assertEqual(json.loads(body)["error"]["type"], "upstream_error")

    def test_chat_answer_with_oversized_head_is_502(self):
        for stream in (True, False):
            body = json.dumps({"stream": stream,
                               "messages": [{"role": "user", "content": "q"}]}).encode()
            st, hd, out = self.cg.request("POST", "/v1/chat/completions", body, self.fault)
            self.check_refused(st, hd, out)

    def test_forwarded_answer_with_oversized_head_is_502(self):
        fixture = {"X-Mock-Fixture": "azure_oyd_response.json"}
        st, hd, out = self.cg.request("GET", "/v1/models", None, {**self.fault, **fixture})
        self.check_refused(st, hd, out)
        st, _, out = self.cg.request("GET", "/v1/models", None, fixture)
        self.assertEqual(st, 200, out[:300])


class Http1UpstreamHead(_BigUpstreamHead, _Daemons):
    pass


class H2UpstreamHead(_BigUpstreamHead, _Daemons):
    h2 = True


def fill_headers(total, reserved):
    """Header fields whose names and values come to `total` bytes with `reserved` taken."""
    fields, left, i = [], total - reserved, 0
    while left > 0:
        name = "X-Fill-%03d" % i
        n = min(1000, left - len(name))
        if n <= 0:
            break
        fields.append((name, "f" * n))
        left -= len(name) + n
        i += 1
    return fields


class ClientHeadersAtTheLimit(_Daemons):
    """The client's fields, just within 64 KiB, leave room for citegate's own."""
    env = {"CITEGATE_UPSTREAM_DIALECT": "anthropic"}
    LIMIT = 64 * 1024

    def send(self, slack):
        base = [("Host", "127.0.0.1"), ("Authorization", "Bearer sk-limit"),
                ("Content-Type", "application/json"), ("Content-Length", str(len(CHAT)))]
        reserved = sum(len(k) + len(v) for k, v in base)
        fill = fill_headers(self.LIMIT - slack, reserved)
        raw = self.cg.raw(timeout=10)
        self.addCleanup(raw.close)
        r = raw.request("POST", "/v1/chat/completions", CHAT, base + fill)
        r.read_until(lambda b: False, timeout=10)  # to the end of the body
        return r, fill

    def test_own_fields_and_key_reach_the_upstream(self):
        self.mock.reset()
        r, fill = self.send(slack=16)
        self.assertEqual(r.status, 200, r.body[:300])
        rid = r.headers.get("x-request-id")
        self.assertTrue(rid)
        reqs = self.mock.requests()
        self.assertEqual(len(reqs), 1)
        got = {}
        for k, v in reqs[0]["headers"]:
            got.setdefault(k.lower(), v)
        self.assertEqual(got.get("x-request-id"), rid)
        self.assertEqual(got.get("x-api-key"), "sk-limit")
        self.assertEqual(got.get("accept-encoding"), "identity")
        for k, v in fill:
            self.assertEqual(got.get(k.lower()), v, k)

    def test_over_the_limit_is_431(self):
        r, _ = self.send(slack=-64)
        self.assertEqual(r.status, 431, r.body[:300])


class DataSourcesReplaced(_Daemons):
    env = {"AZURE_AI_DATA_SOURCES": json.dumps(SOURCES), "AZURE_AI_INCLUDE_SEARCH_SCORES": "false"}

    def test_member_that_counts_as_none_is_replaced(self):
        for value in ("[]", "null", '{"type":"azure_search"}', '"x"'):
            with self.subTest(value=value):
                self.mock.reset()
                body = ('{"data_sources":%s,"messages":[{"role":"user","content":"q"}]}'
                        % value).encode()
                st, _, out = self.cg.request("POST", "/v1/chat/completions", body)
                self.assertEqual(st, 200, out[:300])
                sent = self.mock.requests()[0]
                self.assertEqual(sent["body"].count('"data_sources"'), 1, sent["body"][:300])
                self.assertEqual(sent["body_json"]["data_sources"], SOURCES)
                self.assertEqual(sent["body_json"]["messages"],
                                 [{"role": "user", "content": "q"}])


if __name__ == "__main__":
    unittest.main()
