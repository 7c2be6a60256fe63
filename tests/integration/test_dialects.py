"""Upstream dialects (SPEC §6a) end to end: citegate with CITEGATE_UPSTREAM_DIALECT
anthropic or responses, in front of the HTTP/1.1 mock (tests/tools/mock_upstream.py),
the h2c mock (tests/tools/h2mock.c) and its embedded demo, with HTTP/1.1 and h2c
clients (h2frames.py).

Request side (classes *Requests, DemoRefusal): the translated upstream request
(path, anthropic-version, x-api-key, which credentials are forwarded, the body as
tests/fixtures/dialects/ has it), refusals that reach nothing upstream, routes
that are forwarded as they are, upstream error statuses passed through.

Answer side (classes *Answers, DemoAnswers): the client's chat-completion view of
the fixtures in tests/fixtures/dialects/e2e/ (NAME.openwebui.json beside each:
content, sources, how the stream ends, the error event, usage), and of the demo.
"""
import json
import os
import unittest

import harness as H  # first: it puts tests/tools on the path
import client_view
import h2frames
import mock_upstream

DIALECTS = ("anthropic", "responses")
API_PATH = {"anthropic": "/v1/messages", "responses": "/v1/responses"}
E2E = os.path.join(H.FIXTURES, "dialects", "e2e")
DEPLOYMENT = "/openai/deployments/my-deployment/chat/completions?api-version=2024-10-21"
# Set for every citegate here: bodies compared with tests/fixtures/dialects/ show that a
# dialect body never gets it.
DATA_SOURCES = '{"type":"azure_search","parameters":{"endpoint":"https://s.example","index_name":"i"}}'


def request_fixture(name):
    return H.fixture_bytes(f"dialects/{name}.request.json")


def translated(name, dialect):
    return json.loads(H.fixture_bytes(f"dialects/{name}.{dialect}.json"))


def answer_expected(fixture):
    with open(os.path.join(E2E, fixture.rsplit(".", 1)[0] + ".openwebui.json"), encoding="utf-8") as f:
        return json.load(f)


def answer_request(exp, stream, **extra):
    body = json.loads(H.fixture_bytes(exp["request"]))
    body["stream"] = stream
    body.update(extra)
    return json.dumps(body).encode()


def values(headers, name):
    return [v for k, v in headers if k.lower() == name.lower()]


def data_events(text):
    """The JSON data of every SSE event but [DONE]."""
    out = []
    for _, data in client_view.sse_events(text):
        if data != "[DONE]":
            out.append(json.loads(data))
    return out


def token_counts(usage):
    return {k: usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}


def stop_clean(cgs):
    """Stops every citegate; each must exit 0 with no sanitizer report (ASan builds)."""
    problems = []
    for cg in cgs:
        rc = cg.stop()
        reports = cg.sanitizer_reports()
        cg.cleanup()
        if rc != 0 or reports:
            problems.append(f"citegate exited with {rc}: {reports}")
    assert not problems, problems


def h2_post(port, path, body, hdrs, timeout=15):
    """(status, body) of one POST over h2c with prior knowledge."""
    with h2frames.H2Client(port, timeout=timeout) as c:
        sid = c.request("POST", path, body, hdrs)
        st = c.response(sid, timeout=timeout)
        return st.status, bytes(st.body)


class DialectCase(unittest.TestCase):
    """One citegate per dialect in front of one upstream (set up by subclasses)."""

    @classmethod
    def start_citegates(cls, upstream, env=None):
        cls.cg = {}
        for d in DIALECTS:
            e = {"CITEGATE_UPSTREAM_DIALECT": d, "AZURE_AI_DATA_SOURCES": DATA_SOURCES}
            e.update(env or {})
            cls.cg[d] = H.Citegate(upstream=upstream, env=e).start()

    @classmethod
    def tearDownClass(cls):
        try:
            stop_clean(getattr(cls, "cg", {}).values())
        finally:
            cls.up.cleanup()


# --------------------------------------------------------------------------- HTTP/1.1

class Http1Requests(DialectCase):
    @classmethod
    def setUpClass(cls):
        cls.up = H.MockUpstream().start()
        cls.start_citegates(cls.up.url + "/base")

    def setUp(self):
        self.up.reset()

    def sent(self, dialect, path, body, headers=None):
        """POSTs through the citegate of `dialect`; returns the request the mock got."""
        st, _, out = self.cg[dialect].request("POST", path, body, headers)
        self.assertEqual(st, 200, out[:300])
        reqs = self.up.requests()
        self.assertEqual(len(reqs), 1, reqs)
        return reqs[0]

    def test_path_and_body(self):
        for d in DIALECTS:
            for route in ("/v1/chat/completions", "/openai/v1/chat/completions?x=1"):
                with self.subTest(dialect=d, route=route):
                    self.up.reset()
                    r = self.sent(d, route, request_fixture("basic"))
                    self.assertEqual(r["path"], "/base" + API_PATH[d])
                    self.assertEqual(r["query"], "")
                    self.assertEqual(r["body_json"], translated("basic", d))
                    self.assertEqual(values(r["headers"], "content-length"), [str(len(r["body"].encode()))])

    def test_deployment_names_the_model(self):
        for d in DIALECTS:
            with self.subTest(dialect=d):
                self.up.reset()
                r = self.sent(d, DEPLOYMENT, request_fixture("azure_deployment"))
                self.assertEqual(r["path"], "/base" + API_PATH[d])
                self.assertEqual(r["query"], "")
                self.assertEqual(r["body_json"], translated("azure_deployment", d))

    def test_request_sources_become_documents(self):
        for d in DIALECTS:
            with self.subTest(dialect=d):
                self.up.reset()
                r = self.sent(d, "/v1/chat/completions", request_fixture("rag_sources"))
                self.assertEqual(r["body_json"], translated("rag_sources", d))

    def test_anthropic_key_from_api_key_then_bearer(self):
        cases = [
            ({"api-key": "k-azure", "Authorization": "Bearer k-bearer"}, ["k-azure"]),
            ({"Authorization": "bearer   k-bearer "}, ["k-bearer"]),
            ({"Authorization": "Basic dXNlcjpwdw=="}, []),
            ({}, []),
        ]
        for given, key in cases:
            with self.subTest(headers=given):
                self.up.reset()
                hdrs = dict(given, **{"X-Api-Key": "client-own", "Anthropic-Version": "1999-01-01",
                                      "X-Trace": "t-1"})
                r = self.sent("anthropic", "/v1/chat/completions", request_fixture("basic"), hdrs)
                self.assertEqual(values(r["headers"], "x-api-key"), key)
                self.assertEqual(values(r["headers"], "anthropic-version"), ["2023-06-01"])
                self.assertEqual(values(r["headers"], "api-key"), [])
                self.assertEqual(values(r["headers"], "authorization"), [])
                self.assertEqual(values(r["headers"], "x-trace"), ["t-1"])

    def test_responses_forwards_credentials(self):
        hdrs = {"api-key": "k-azure", "Authorization": "Bearer k-bearer", "X-Trace": "t-1"}
        r = self.sent("responses", "/v1/chat/completions", request_fixture("basic"), hdrs)
        self.assertEqual(values(r["headers"], "api-key"), ["k-azure"])
        self.assertEqual(values(r["headers"], "authorization"), ["Bearer k-bearer"])
        self.assertEqual(values(r["headers"], "x-trace"), ["t-1"])
        self.assertEqual(values(r["headers"], "anthropic-version"), [])
        self.assertEqual(values(r["headers"], "x-api-key"), [])

    def test_refused_requests_reach_nothing(self):
        for d in DIALECTS:
            for name in ("refuse_tools", "refuse_n", "refuse_image", "refuse_tool_message"):
                with self.subTest(dialect=d, request=name):
                    st, hd, out = self.cg[d].request("POST", "/v1/chat/completions",
                                                     request_fixture(name), {"api-key": "k"})
                    self.assertEqual(st, 400)
                    self.assertTrue(hd.get("Content-Type", "").startswith("application/json"), hd)
                    err = json.loads(out)
                    self.assertEqual(err, translated(name, d))
                    self.assertEqual(err["error"]["code"], "unsupported_parameter")
                    self.assertTrue(err["error"]["param"])
                    self.assertTrue(hd.get("X-Request-Id"))
        self.assertEqual(self.up.requests(), [])

    def test_refusals_are_counted_as_400(self):
        def count():
            _, _, m = self.cg["anthropic"].admin("GET", "/metrics")
            for line in m.decode().splitlines():
                if line.startswith('citegate_requests_total{path="/v1/chat/completions",status="400"}'):
                    return int(float(line.rsplit(" ", 1)[1]))
            return 0
        before = count()
        st, _, _ = self.cg["anthropic"].request("POST", "/v1/chat/completions", request_fixture("refuse_tools"))
        self.assertEqual(st, 400)
        self.assertEqual(count(), before + 1)

    def test_invalid_json_is_400_before_translation(self):
        for d in DIALECTS:
            with self.subTest(dialect=d):
                st, _, out = self.cg[d].request("POST", "/v1/chat/completions", b'{"messages": [')
                self.assertEqual(st, 400)
                self.assertEqual(json.loads(out)["error"]["code"], "invalid_json")
        self.assertEqual(self.up.requests(), [])

    def test_other_routes_are_forwarded_as_they_are(self):
        for d in DIALECTS:
            with self.subTest(dialect=d):
                self.up.reset()
                st, _, _ = self.cg[d].request("POST", "/v1/moderations?api-version=1", b'{"input":"x"}',
                                              {"api-key": "k-azure", "Authorization": "Bearer b"})
                self.assertEqual(st, 404)  # the mock has no such route: its 404 passes
                r = self.up.requests()[-1]
                self.assertEqual((r["path"], r["query"], r["body"]),
                                 ("/base/v1/moderations", "api-version=1", '{"input":"x"}'))
                self.assertEqual(values(r["headers"], "api-key"), ["k-azure"])
                self.assertEqual(values(r["headers"], "authorization"), ["Bearer b"])
                self.assertEqual(values(r["headers"], "anthropic-version"), [])
                # a GET on a chat route is no chat request either
                st, _, _ = self.cg[d].request("GET", "/v1/chat/completions?x=1")
                self.assertEqual(st, 200)
                r = self.up.requests()[-1]
                self.assertEqual((r["method"], r["path"], r["query"]), ("GET", "/base/v1/chat/completions", "x=1"))

    def test_upstream_error_status_passes_unchanged(self):
        for d in DIALECTS:
            with self.subTest(dialect=d):
                st, hd, out = self.cg[d].request("POST", "/v1/chat/completions", request_fixture("basic"),
                                                 {"X-Mock-Fault": "status:429"})
                self.assertEqual(st, 429)
                self.assertEqual(out, mock_upstream.error_body(429))
                self.assertEqual(hd.get("Retry-After"), "1")


class AnswerChecks:
    """Comparisons of a client view with a dialects/e2e/*.openwebui.json file."""

    def check_stream(self, exp, text):
        v = client_view.view(text)
        self.assertEqual(v["content"], exp["content"], text[-600:])
        self.assertEqual(v["ends_with_done"], exp["ends_with_done"], text[-300:])
        self.assertEqual(v["ends_with_error_event"], exp["ends_with_error_event"], text[-300:])
        if "sources" in exp:
            self.assertEqual(v["sources"], exp["sources"])
        if "source_heads" in exp:
            self.assertEqual([s["source"] for s in v["sources"]], exp["source_heads"])
        events = data_events(text)
        for e in events:
            # chat-completion chunks only: no event of the upstream's API gets through
            self.assertNotIn("type", e, e)
            if "error" not in e:
                self.assertEqual(e.get("object"), "chat.completion.chunk", e)
        if "error" in exp:
            err = events[-1]["error"]
            self.assertEqual((err["message"], err["code"]), (exp["error"]["message"], exp["error"]["code"]))
        if "finish_reason" in exp:
            finishes = [c.get("finish_reason") for e in events for c in e.get("choices", [])
                        if c.get("finish_reason")]
            self.assertEqual(finishes, [exp["finish_reason"]])

    def check_body(self, exp, out):
        body = json.loads(out)
        self.assertEqual(body.get("object"), "chat.completion", body)
        v = client_view.view(out.decode())
        self.assertEqual(v["content"], exp["content"])
        # A body has no order of arrival: where an annotation that covers no
        # marker counts as referenced is left open, so compare by number.
        def by_id(sources):
            return sorted(sources, key=lambda s: int(s["id"] if "id" in s else s["source"]["id"]))
        if "sources" in exp:
            self.assertEqual(by_id(v["sources"]), by_id(exp["sources"]))
        if "source_heads" in exp:
            self.assertEqual(by_id([s["source"] for s in v["sources"]]), by_id(exp["source_heads"]))
        self.assertEqual(body["choices"][0]["finish_reason"], exp["finish_reason"])
        self.assertEqual(token_counts(body["usage"]), exp["usage"])

    def check_usage(self, exp, text):
        usage = [token_counts(e["usage"]) for e in data_events(text) if e.get("usage")]
        self.assertEqual(usage, [exp["usage"]])


class Http1Answers(DialectCase, AnswerChecks):
    @classmethod
    def setUpClass(cls):
        cls.up = H.MockUpstream().start()
        cls.start_citegates(cls.up.url)

    def post(self, exp, body, hdrs=None):
        h = {"X-Mock-Fixture": "dialects/e2e/" + exp["fixture"]}
        h.update(hdrs or {})
        return self.cg[exp["dialect"]].request("POST", "/v1/chat/completions", body, h)

    def test_streams_in_every_split(self):
        for fixture in ("anthropic_stream.sse", "responses_stream.sse"):
            exp = answer_expected(fixture)
            for split in ("1", "7", "64", "100000"):
                with self.subTest(fixture=fixture, split=split):
                    st, hd, out = self.post(exp, answer_request(exp, True), {"X-Mock-Split": split})
                    self.assertEqual(st, 200)
                    self.assertTrue(hd.get("Content-Type", "").startswith("text/event-stream"), hd)
                    self.check_stream(exp, out.decode())

    def test_usage_chunk_when_asked(self):
        for fixture in ("anthropic_stream.sse", "responses_stream.sse"):
            with self.subTest(fixture=fixture):
                exp = answer_expected(fixture)
                body = answer_request(exp, True, stream_options={"include_usage": True})
                st, _, out = self.post(exp, body)
                self.assertEqual(st, 200)
                self.check_usage(exp, out.decode())
                st, _, out = self.post(exp, answer_request(exp, True))
                self.assertEqual([e for e in data_events(out.decode()) if e.get("usage")], [])

    def test_bodies(self):
        for fixture in ("anthropic_response.json", "responses_response.json"):
            with self.subTest(fixture=fixture):
                exp = answer_expected(fixture)
                st, hd, out = self.post(exp, answer_request(exp, False))
                self.assertEqual(st, 200)
                self.assertEqual(hd.get("Content-Length"), str(len(out)))
                self.check_body(exp, out)

    def test_upstream_error_event(self):
        for fixture in ("anthropic_error.sse", "responses_failed.sse"):
            with self.subTest(fixture=fixture):
                exp = answer_expected(fixture)
                st, _, out = self.post(exp, answer_request(exp, True))
                self.assertEqual(st, 200)
                self.check_stream(exp, out.decode())

    def test_truncated_stream_has_no_done(self):
        for fixture in ("anthropic_stream.sse", "responses_stream.sse"):
            with self.subTest(fixture=fixture):
                exp = answer_expected(fixture)
                st, _, out = self.post(exp, answer_request(exp, True), {"X-Mock-Fault": "eof"})
                self.assertEqual(st, 200)
                v = client_view.view(out.decode())
                self.assertFalse(v["ends_with_done"], out[-300:])
                self.assertTrue(v["ends_with_error_event"], out[-300:])
                err = data_events(out.decode())[-1]["error"]
                self.assertEqual(err["code"], "upstream_closed")
                content = v["content"].get("0", "")
                self.assertTrue(content and exp["content"]["0"].startswith(content[:10]), content)

    def test_every_profile_gets_chat_chunks(self):
        for fixture in ("anthropic_stream.sse", "responses_stream.sse"):
            exp = answer_expected(fixture)
            for profile in ("openai", "webchat", "off"):
                with self.subTest(fixture=fixture, profile=profile):
                    st, _, out = self.post(exp, answer_request(exp, True), {"X-Citegate-Profile": profile})
                    self.assertEqual(st, 200)
                    text = out.decode()
                    self.assertTrue(client_view.view(text)["ends_with_done"], text[-300:])
                    for e in data_events(text):
                        self.assertNotIn("type", e, e)
                        self.assertEqual(e.get("object"), "chat.completion.chunk", e)


# --------------------------------------------------------------------------- HTTP/2

class H2Requests(DialectCase):
    """h2c clients, an h2 upstream (CITEGATE_UPSTREAM_PROTOCOL=h2)."""

    @classmethod
    def setUpClass(cls):
        cls.up = H.H2MockUpstream().start()
        cls.start_citegates(cls.up.url + "/base", {"CITEGATE_UPSTREAM_PROTOCOL": "h2"})

    def setUp(self):
        self.up.reset()

    def sent(self, dialect, path, body, hdrs):
        """(header fields, body) of the request the h2 mock got."""
        st, out = h2_post(self.cg[dialect].port, path, body,
                          dict(hdrs, **{"x-mock-fixture": "dialects/e2e/" + dialect + "_stream.sse"}))
        self.assertEqual(st, 200, out[:300])
        reqs = self.up.requests()
        self.assertEqual(len(reqs), 1, reqs)
        raw = reqs[0]["body"]
        self.assertEqual(values(reqs[0]["headers"], "content-length"), [str(len(raw.encode()))])
        return reqs[0]["headers"], json.loads(raw)

    def test_anthropic_request(self):
        hdrs, body = self.sent("anthropic", DEPLOYMENT, request_fixture("azure_deployment"),
                               {"api-key": "k-azure", "authorization": "Bearer k-bearer"})
        self.assertEqual(values(hdrs, ":path"), ["/base/v1/messages"])
        self.assertEqual(values(hdrs, "anthropic-version"), ["2023-06-01"])
        self.assertEqual(values(hdrs, "x-api-key"), ["k-azure"])
        self.assertEqual(values(hdrs, "api-key") + values(hdrs, "authorization"), [])
        self.assertEqual(body, translated("azure_deployment", "anthropic"))

        self.up.reset()
        hdrs, _ = self.sent("anthropic", "/v1/chat/completions", request_fixture("basic"),
                            {"authorization": "Bearer k-bearer"})
        self.assertEqual(values(hdrs, "x-api-key"), ["k-bearer"])

    def test_responses_request(self):
        hdrs, body = self.sent("responses", "/openai/v1/chat/completions?x=1", request_fixture("basic"),
                               {"api-key": "k-azure", "authorization": "Bearer k-bearer"})
        self.assertEqual(values(hdrs, ":path"), ["/base/v1/responses"])
        self.assertEqual(values(hdrs, "api-key"), ["k-azure"])
        self.assertEqual(values(hdrs, "authorization"), ["Bearer k-bearer"])
        self.assertEqual(values(hdrs, "anthropic-version"), [])
        self.assertEqual(body, translated("basic", "responses"))

    def test_refused_over_h2(self):
        for d in DIALECTS:
            for name in ("refuse_tools", "refuse_n", "refuse_image"):
                with self.subTest(dialect=d, request=name):
                    st, out = h2_post(self.cg[d].port, "/v1/chat/completions", request_fixture(name), {})
                    self.assertEqual(st, 400)
                    self.assertEqual(json.loads(out), translated(name, d))
        self.assertEqual(self.up.requests(), [])


class H2Answers(DialectCase, AnswerChecks):
    @classmethod
    def setUpClass(cls):
        cls.up = H.H2MockUpstream().start()
        cls.start_citegates(cls.up.url, {"CITEGATE_UPSTREAM_PROTOCOL": "h2"})

    def post(self, exp, body, hdrs=None):
        h = {"x-mock-fixture": "dialects/e2e/" + exp["fixture"]}
        h.update(hdrs or {})
        return h2_post(self.cg[exp["dialect"]].port, "/v1/chat/completions", body, h)

    def test_streams(self):
        for fixture in ("anthropic_stream.sse", "responses_stream.sse", "anthropic_error.sse",
                        "responses_failed.sse"):
            with self.subTest(fixture=fixture):
                exp = answer_expected(fixture)
                st, out = self.post(exp, answer_request(exp, True))
                self.assertEqual(st, 200)
                self.check_stream(exp, out.decode())

    def test_bodies(self):
        for fixture in ("anthropic_response.json", "responses_response.json"):
            with self.subTest(fixture=fixture):
                exp = answer_expected(fixture)
                st, out = self.post(exp, answer_request(exp, False))
                self.assertEqual(st, 200)
                self.check_body(exp, out)

    def test_upstream_reset_has_no_done(self):
        for fixture in ("anthropic_stream.sse", "responses_stream.sse"):
            with self.subTest(fixture=fixture):
                exp = answer_expected(fixture)
                st, out = self.post(exp, answer_request(exp, True), {"x-mock-fault": "rst"})
                self.assertEqual(st, 200)
                v = client_view.view(out.decode())
                self.assertFalse(v["ends_with_done"], out[-300:])
                self.assertTrue(v["ends_with_error_event"], out[-300:])


# --------------------------------------------------------------------------- the demo

DEMO = {
    "anthropic": "The X100 charges over USB-C in about two hours [[1]](https://docs.example.com/x100/manual.pdf)."
                 " It is covered by a two-year warranty [2], and its battery can be swapped at a service"
                 " centre [[3]](https://docs.example.com/service/battery%20swap.html)"
                 "[[1]](https://docs.example.com/x100/manual.pdf).",
    "responses": "The X100 charges over USB-C in about two hours [[1]](https://docs.example.com/x100/manual.pdf)."
                 " It is covered by a two-year warranty, and its battery can be swapped at a service"
                 " centre [[2]](https://docs.example.com/service/battery%20swap.html)"
                 "[[1]](https://docs.example.com/x100/manual.pdf).",
}
DEMO_SOURCES = {
    "anthropic": ["https://docs.example.com/x100/manual.pdf", None,
                  "https://docs.example.com/service/battery swap.html"],
    "responses": ["https://docs.example.com/x100/manual.pdf",
                  "https://docs.example.com/service/battery swap.html"],
}
QUESTION = {"messages": [{"role": "user", "content": "How do I charge the X100?"}]}


class DemoCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cg = {d: H.Citegate(env={"CITEGATE_UPSTREAM_DIALECT": d}).start() for d in DIALECTS}

    @classmethod
    def tearDownClass(cls):
        stop_clean(cls.cg.values())


class DemoRefusal(DemoCase):
    def test_demo_refuses_what_the_dialect_cannot_carry(self):
        for d in DIALECTS:
            with self.subTest(dialect=d):
                st, _, out = self.cg[d].request("POST", "/v1/chat/completions", request_fixture("refuse_tools"))
                self.assertEqual(st, 400)
                self.assertEqual(json.loads(out), translated("refuse_tools", d))


class DemoAnswers(DemoCase):
    def check_sources(self, d, sources):
        self.assertEqual([s["source"].get("url") for s in sources], DEMO_SOURCES[d])

    def test_stream(self):
        for d in DIALECTS:
            with self.subTest(dialect=d):
                st, hd, out = self.cg[d].request("POST", "/v1/chat/completions", dict(QUESTION, stream=True))
                self.assertEqual(st, 200)
                self.assertTrue(hd.get("Content-Type", "").startswith("text/event-stream"), hd)
                v = client_view.view(out.decode())
                self.assertEqual(v["content"], {"0": DEMO[d]})
                self.assertTrue(v["ends_with_done"])
                self.check_sources(d, v["sources"])

    def test_stream_over_h2c(self):
        for d in DIALECTS:
            with self.subTest(dialect=d):
                st, out = h2_post(self.cg[d].port, "/v1/chat/completions",
                                  json.dumps(dict(QUESTION, stream=True)).encode(), {})
                self.assertEqual(st, 200)
                v = client_view.view(out.decode())
                self.assertEqual(v["content"], {"0": DEMO[d]})
                self.assertTrue(v["ends_with_done"])

    def test_anthropic_demo_beside_request_sources(self):
        """The request's <source> tags go upstream as documents 0 and 1: the demo's own
        citations take the numbers after their ids, and its document no index of theirs."""
        body = dict(json.loads(H.fixture_bytes("openwebui_rag_request.json")), stream=True)
        st, _, out = self.cg["anthropic"].request("POST", "/v1/chat/completions", body)
        self.assertEqual(st, 200)
        v = client_view.view(out.decode())
        self.assertEqual([s["source"]["name"] for s in v["sources"]],
                         ["[3] X100 User Manual", "[4] Warranty FAQ", "[5] Battery service"])
        self.assertIn(" two-year warranty [4],", v["content"]["0"])

    def test_body(self):
        for d in DIALECTS:
            with self.subTest(dialect=d):
                st, _, out = self.cg[d].request("POST", "/v1/chat/completions", QUESTION)
                self.assertEqual(st, 200)
                body = json.loads(out)
                self.assertEqual(body["choices"][0]["message"]["content"], DEMO[d])
                self.assertEqual(body["choices"][0]["finish_reason"], "stop")
                self.check_sources(d, body["sources"])


if __name__ == "__main__":
    unittest.main()
