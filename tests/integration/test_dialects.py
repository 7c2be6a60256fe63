"""Upstream dialects (SPEC §6a) end to end: citegate with CITEGATE_UPSTREAM_DIALECT
anthropic, responses, gemini, vertex or cohere, in front of the HTTP/1.1 mock
(tests/tools/mock_upstream.py), the h2c mock (tests/tools/h2mock.c) and its embedded
demo, with HTTP/1.1 and h2c clients (h2frames.py).

Request side (classes *Requests, DemoRefusal): the translated upstream request
(path, anthropic-version, x-api-key, x-goog-api-key, which credentials are forwarded,
the body as tests/fixtures/dialects/ has it, CITEGATE_GEMINI_TOOLS), refusals that
reach nothing upstream (a model the gemini path cannot carry among them), routes that
are forwarded as they are, upstream error statuses passed through.

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

DIALECTS = ("anthropic", "responses", "gemini", "vertex", "cohere")
API_PATH = {"anthropic": "/v1/messages", "responses": "/v1/responses", "cohere": "/v2/chat"}
GEMINI_TOOLS = '[{"googleSearch":{}}]'


def api_target(d, model="my-model", stream=True):
    """(path, query) under the base where citegate sends a chat request of dialect d:
    a fixed path, or gemini's and vertex's, which names the model and says whether the
    answer streams."""
    if d in API_PATH:
        return API_PATH[d], ""
    verb = "streamGenerateContent" if stream else "generateContent"
    return f"/models/{model}:{verb}", "alt=sse" if stream else ""


def e2e_stream(d):
    """The answer fixture of dialect d (vertex answers as gemini does)."""
    return "dialects/e2e/" + ("gemini" if d == "vertex" else d) + "_stream.sse"
E2E = os.path.join(H.FIXTURES, "dialects", "e2e")
DEPLOYMENT = "/openai/deployments/my-deployment/chat/completions?api-version=2024-10-21"
# Set for every citegate here: bodies compared with tests/fixtures/dialects/ show that a
# dialect body never gets it.
DATA_SOURCES = '{"type":"azure_search","parameters":{"endpoint":"https://s.example","index_name":"i"}}'


# The answers of tests/fixtures/dialects/e2e/, each with the dialect that reads it (None:
# the one its expected file names; vertex reads gemini's).
STREAMS = (("anthropic_stream.sse", None), ("responses_stream.sse", None),
           ("gemini_stream.sse", None), ("gemini_stream.sse", "vertex"), ("cohere_stream.sse", None))
BODIES = (("anthropic_response.json", None), ("responses_response.json", None),
          ("gemini_response.json", None), ("gemini_response.json", "vertex"),
          ("cohere_response.json", None))
ERRORS = (("anthropic_error.sse", None), ("responses_failed.sse", None),
          ("gemini_error.sse", None), ("gemini_error.sse", "vertex"), ("cohere_error.sse", None))


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
    H.check_daemons(cgs)


def h2_post(port, path, body, hdrs, timeout=15):
    """(status, body) of one POST over h2c with prior knowledge."""
    with h2frames.H2Client(port, timeout=timeout) as c:
        sid = c.request("POST", path, body, hdrs)
        st = c.response(sid, timeout=timeout)
        return st.status, bytes(st.body)


class DialectCase(H.DaemonCase):
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
            super().tearDownClass()
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
                    path, query = api_target(d)
                    self.assertEqual(r["path"], "/base" + path)
                    self.assertEqual(r["query"], query)
                    self.assertEqual(r["body_json"], translated("basic", d))
                    self.assertEqual(values(r["headers"], "content-length"), [str(len(r["body"].encode()))])

    def test_deployment_names_the_model(self):
        for d in DIALECTS:
            with self.subTest(dialect=d):
                self.up.reset()
                r = self.sent(d, DEPLOYMENT, request_fixture("azure_deployment"))
                path, query = api_target(d, model="my-deployment")
                self.assertEqual(r["path"], "/base" + path)
                self.assertEqual(r["query"], query)
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

    def test_gemini_key_from_goog_key_then_api_key_then_bearer(self):
        cases = [
            ({"X-Goog-Api-Key": " k-goog ", "api-key": "k-azure", "Authorization": "Bearer b"}, ["k-goog"]),
            ({"api-key": "k-azure", "Authorization": "Bearer k-bearer"}, ["k-azure"]),
            ({"Authorization": "bearer   k-bearer "}, ["k-bearer"]),
            ({"Authorization": "Basic dXNlcjpwdw=="}, []),
            ({}, []),
        ]
        for given, key in cases:
            with self.subTest(headers=given):
                self.up.reset()
                r = self.sent("gemini", "/v1/chat/completions", request_fixture("basic"),
                              dict(given, **{"X-Trace": "t-1"}))
                self.assertEqual(values(r["headers"], "x-goog-api-key"), key)
                self.assertEqual(values(r["headers"], "api-key"), [])
                self.assertEqual(values(r["headers"], "authorization"), [])
                self.assertEqual(values(r["headers"], "x-trace"), ["t-1"])

    def test_vertex_forwards_the_oauth_token(self):
        cases = [
            ({"Authorization": "Bearer ya29.token"}, ["Bearer ya29.token"], []),
            ({"Authorization": "Bearer ya29.token", "api-key": "k-express"}, ["Bearer ya29.token"],
             ["k-express"]),
            ({"x-goog-api-key": "k-goog", "api-key": "k-azure"}, [], ["k-goog"]),
        ]
        for given, auth, key in cases:
            with self.subTest(headers=given):
                self.up.reset()
                r = self.sent("vertex", DEPLOYMENT, request_fixture("azure_deployment"), given)
                self.assertEqual(values(r["headers"], "authorization"), auth)
                self.assertEqual(values(r["headers"], "x-goog-api-key"), key)
                self.assertEqual(values(r["headers"], "api-key"), [])

    def test_gemini_model_names_the_path_or_is_refused(self):
        """The model becomes part of the upstream path: anything but A-Z a-z 0-9 . _ -, or
        a '..', is a 400 naming model, and nothing is sent."""
        for d in ("gemini", "vertex"):
            for model in ("models/gemini-2.5-flash", "gemini..x", "", "gemini 2", "g%2Fx",
                          "gemini?alt=json", None):
                with self.subTest(dialect=d, model=model):
                    body = json.loads(request_fixture("basic"))
                    if model is None:
                        del body["model"]
                    else:
                        body["model"] = model
                    st, hd, out = self.cg[d].request("POST", "/v1/chat/completions",
                                                     json.dumps(body).encode())
                    self.assertEqual(st, 400, out)
                    err = json.loads(out)["error"]
                    self.assertEqual((err["code"], err["param"], err["type"]),
                                     ("invalid_request", "model", "invalid_request_error"))
                    self.assertTrue(hd.get("X-Request-Id"))
            with self.subTest(dialect=d, deployment="gem..x"):
                st, _, out = self.cg[d].request(
                    "POST", "/openai/deployments/gem..x/chat/completions?api-version=1",
                    request_fixture("azure_deployment"))
                self.assertEqual(st, 400, out)
                self.assertEqual(json.loads(out)["error"]["param"], "model")
        self.assertEqual(self.up.requests(), [])

    def test_gemini_tools(self):
        """CITEGATE_GEMINI_TOOLS goes as `tools` in every gemini and vertex request."""
        for d in ("gemini", "vertex"):
            with self.subTest(dialect=d):
                cg = H.Citegate(upstream=self.up.url + "/base",
                                env={"CITEGATE_UPSTREAM_DIALECT": d,
                                     "CITEGATE_GEMINI_TOOLS": GEMINI_TOOLS}).start()
                try:
                    self.up.reset()
                    st, _, out = cg.request("POST", "/v1/chat/completions", request_fixture("basic"))
                    self.assertEqual(st, 200, out[:300])
                    sent = self.up.requests()[0]["body_json"]
                    want = dict(translated("basic", d), tools=json.loads(GEMINI_TOOLS))
                    self.assertEqual(sent, want)
                finally:
                    stop_clean([cg])

    def test_gemini_tools_must_be_a_json_array(self):
        for value in ('{"googleSearch":{}}', "googleSearch", "[{"):
            with self.subTest(value=value):
                p = H.run_citegate(["--check"], env={
                    "CITEGATE_UPSTREAM": "http://127.0.0.1:9", "CITEGATE_UPSTREAM_DIALECT": "gemini",
                    "CITEGATE_GEMINI_TOOLS": value})
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                out = (p.stdout + p.stderr).decode(errors="replace")
                self.assertIn("CITEGATE_GEMINI_TOOLS: is not a JSON array", out)
                self.assertEqual(len([l for l in out.splitlines() if "CITEGATE_GEMINI_TOOLS" in l]), 1)

    def test_responses_forwards_credentials(self):
        hdrs = {"api-key": "k-azure", "Authorization": "Bearer k-bearer", "X-Trace": "t-1"}
        r = self.sent("responses", "/v1/chat/completions", request_fixture("basic"), hdrs)
        self.assertEqual(values(r["headers"], "api-key"), ["k-azure"])
        self.assertEqual(values(r["headers"], "authorization"), ["Bearer k-bearer"])
        self.assertEqual(values(r["headers"], "x-trace"), ["t-1"])
        self.assertEqual(values(r["headers"], "anthropic-version"), [])
        self.assertEqual(values(r["headers"], "x-api-key"), [])

    def test_cohere_key_as_bearer(self):
        """The client's Authorization goes as it came; an api-key alone goes as
        Authorization: Bearer; api-key itself never goes."""
        cases = [
            ({"Authorization": "Bearer co-key", "X-Trace": "t-1"}, ["Bearer co-key"]),
            ({"api-key": " co-azure "}, ["Bearer co-azure"]),
            ({"api-key": "co-azure", "Authorization": "Bearer co-bearer"}, ["Bearer co-bearer"]),
            ({}, []),
        ]
        for given, auth in cases:
            with self.subTest(headers=given):
                self.up.reset()
                r = self.sent("cohere", DEPLOYMENT, request_fixture("azure_deployment"), given)
                self.assertEqual(r["path"], "/base/v2/chat")
                self.assertEqual(r["query"], "")
                self.assertEqual(values(r["headers"], "authorization"), auth)
                self.assertEqual(values(r["headers"], "api-key"), [])
                self.assertEqual(r["body_json"], translated("azure_deployment", "cohere"))

    def test_cohere_citation_modes(self):
        """CITEGATE_COHERE_CITATIONS names citation_options.mode; off sends none."""
        for mode in ("accurate", "off"):
            with self.subTest(mode=mode):
                cg = H.Citegate(upstream=self.up.url + "/base",
                                env={"CITEGATE_UPSTREAM_DIALECT": "cohere",
                                     "CITEGATE_COHERE_CITATIONS": mode}).start()
                try:
                    self.up.reset()
                    st, _, out = cg.request("POST", "/v1/chat/completions", request_fixture("basic"))
                    self.assertEqual(st, 200, out[:300])
                    sent = self.up.requests()[0]["body_json"]
                    want = dict(translated("basic", "cohere"))
                    del want["citation_options"]
                    if mode != "off":
                        want["citation_options"] = {"mode": mode}
                    self.assertEqual(sent, want)
                finally:
                    stop_clean([cg])
        p = H.run_citegate(["--check"], env={
            "CITEGATE_UPSTREAM": "http://127.0.0.1:9", "CITEGATE_UPSTREAM_DIALECT": "cohere",
            "CITEGATE_COHERE_CITATIONS": "slow"})
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("CITEGATE_COHERE_CITATIONS: 'slow' is not one of: fast, accurate, off",
                      (p.stdout + p.stderr).decode(errors="replace"))

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

    def post(self, exp, body, hdrs=None, dialect=None):
        h = {"X-Mock-Fixture": "dialects/e2e/" + exp["fixture"]}
        h.update(hdrs or {})
        return self.cg[dialect or exp["dialect"]].request("POST", "/v1/chat/completions", body, h)

    def test_streams_in_every_split(self):
        for fixture, d in STREAMS:
            exp = answer_expected(fixture)
            for split in ("1", "7", "64", "100000"):
                with self.subTest(fixture=fixture, dialect=d, split=split):
                    st, hd, out = self.post(exp, answer_request(exp, True), {"X-Mock-Split": split}, d)
                    self.assertEqual(st, 200)
                    self.assertTrue(hd.get("Content-Type", "").startswith("text/event-stream"), hd)
                    self.check_stream(exp, out.decode())

    def test_usage_chunk_when_asked(self):
        for fixture, d in STREAMS:
            with self.subTest(fixture=fixture, dialect=d):
                exp = answer_expected(fixture)
                body = answer_request(exp, True, stream_options={"include_usage": True})
                st, _, out = self.post(exp, body, dialect=d)
                self.assertEqual(st, 200)
                self.check_usage(exp, out.decode())
                st, _, out = self.post(exp, answer_request(exp, True), dialect=d)
                self.assertEqual([e for e in data_events(out.decode()) if e.get("usage")], [])

    def test_bodies(self):
        for fixture, d in BODIES:
            with self.subTest(fixture=fixture, dialect=d):
                exp = answer_expected(fixture)
                st, hd, out = self.post(exp, answer_request(exp, False), dialect=d)
                self.assertEqual(st, 200)
                self.assertEqual(hd.get("Content-Length"), str(len(out)))
                self.check_body(exp, out)

    def test_upstream_error_event(self):
        for fixture, d in ERRORS:
            with self.subTest(fixture=fixture, dialect=d):
                exp = answer_expected(fixture)
                st, _, out = self.post(exp, answer_request(exp, True), dialect=d)
                self.assertEqual(st, 200)
                self.check_stream(exp, out.decode())

    def test_truncated_stream_has_no_done(self):
        for fixture, d in STREAMS:
            with self.subTest(fixture=fixture, dialect=d):
                exp = answer_expected(fixture)
                st, _, out = self.post(exp, answer_request(exp, True), {"X-Mock-Fault": "eof"}, d)
                self.assertEqual(st, 200)
                v = client_view.view(out.decode())
                self.assertFalse(v["ends_with_done"], out[-300:])
                self.assertTrue(v["ends_with_error_event"], out[-300:])
                err = data_events(out.decode())[-1]["error"]
                self.assertEqual(err["code"], "upstream_closed")
                content = v["content"].get("0", "")
                self.assertTrue(content and exp["content"]["0"].startswith(content[:10]), content)

    def test_every_profile_gets_chat_chunks(self):
        for fixture, d in STREAMS:
            exp = answer_expected(fixture)
            for profile in ("openai", "webchat", "markdown", "structured", "off"):
                with self.subTest(fixture=fixture, dialect=d, profile=profile):
                    st, _, out = self.post(exp, answer_request(exp, True), {"X-Citegate-Profile": profile}, d)
                    self.assertEqual(st, 200)
                    text = out.decode()
                    self.assertTrue(client_view.view(text)["ends_with_done"], text[-300:])
                    for e in data_events(text):
                        self.assertNotIn("type", e, e)
                        self.assertEqual(e.get("object"), "chat.completion.chunk", e)

    def test_gemini_references_in_every_profile(self):
        """The references Gemini's grounding adds after the last text, as each profile
        shows them (the answer's own [1] is request-side source 1)."""
        exp = answer_expected("gemini_stream.sse")
        want = {
            "openai": "[[3]](https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQe2eWiki)"
                      "[[4]](https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQe2eNasa)",
            "markdown": "[2](https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQe2eWiki)"
                        "[3](https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQe2eNasa)"
                        "\n\n**Sources**\n1. [Speed\\_of\\_light](https://wiki.example.org/Speed_of_light)\n"
                        "2. [wikipedia.org](https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQe2eWiki)\n"
                        "3. [nasa.gov](https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQe2eNasa)",
            "webchat": "[2]\u200b[3]\n\n[1]: https://wiki.example.org/Speed_of_light \"Speed_of_light\"\n"
                       "[2]: https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQe2eWiki \"wikipedia.org\"\n"
                       "[3]: https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQe2eNasa \"nasa.gov\"",
            "structured": "[3][4]",
            "off": "[3][4]",
        }
        for d in ("gemini", "vertex"):
            for profile, tail in want.items():
                with self.subTest(dialect=d, profile=profile):
                    st, _, out = self.post(exp, answer_request(exp, True), {"X-Citegate-Profile": profile}, d)
                    self.assertEqual(st, 200)
                    content = client_view.view(out.decode())["content"]["0"]
                    self.assertTrue(content.startswith("Light travels at exactly 299,792,458 m/s "), content)
                    self.assertTrue(content.endswith(" to reach Earth. " + tail), content)


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
                          dict(hdrs, **{"x-mock-fixture": e2e_stream(dialect)}))
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

    def test_gemini_request(self):
        hdrs, body = self.sent("gemini", DEPLOYMENT, request_fixture("azure_deployment"),
                               {"api-key": "k-azure", "authorization": "Bearer k-bearer"})
        path, query = api_target("gemini", model="my-deployment")
        self.assertEqual(values(hdrs, ":path"), ["/base" + path + "?" + query])
        self.assertEqual(values(hdrs, "x-goog-api-key"), ["k-azure"])
        self.assertEqual(values(hdrs, "api-key") + values(hdrs, "authorization"), [])
        self.assertEqual(body, translated("azure_deployment", "gemini"))

    def test_vertex_request(self):
        hdrs, body = self.sent("vertex", "/v1/chat/completions", request_fixture("basic"),
                               {"authorization": "Bearer ya29.token", "x-goog-api-key": "k-express"})
        path, query = api_target("vertex")
        self.assertEqual(values(hdrs, ":path"), ["/base" + path + "?" + query])
        self.assertEqual(values(hdrs, "authorization"), ["Bearer ya29.token"])
        self.assertEqual(values(hdrs, "x-goog-api-key"), ["k-express"])
        self.assertEqual(body, translated("basic", "vertex"))

    def test_cohere_request(self):
        hdrs, body = self.sent("cohere", DEPLOYMENT, request_fixture("azure_deployment"),
                               {"api-key": "k-azure"})
        self.assertEqual(values(hdrs, ":path"), ["/base/v2/chat"])
        self.assertEqual(values(hdrs, "authorization"), ["Bearer k-azure"])
        self.assertEqual(values(hdrs, "api-key"), [])
        self.assertEqual(body, translated("azure_deployment", "cohere"))

        self.up.reset()
        hdrs, body = self.sent("cohere", "/v1/chat/completions", request_fixture("rag_sources"),
                               {"authorization": "Bearer co-key"})
        self.assertEqual(values(hdrs, "authorization"), ["Bearer co-key"])
        self.assertEqual(body, translated("rag_sources", "cohere"))

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

    def post(self, exp, body, hdrs=None, dialect=None):
        h = {"x-mock-fixture": "dialects/e2e/" + exp["fixture"]}
        h.update(hdrs or {})
        return h2_post(self.cg[dialect or exp["dialect"]].port, "/v1/chat/completions", body, h)

    def test_streams(self):
        for fixture, d in STREAMS + ERRORS:
            with self.subTest(fixture=fixture, dialect=d):
                exp = answer_expected(fixture)
                st, out = self.post(exp, answer_request(exp, True), dialect=d)
                self.assertEqual(st, 200)
                self.check_stream(exp, out.decode())

    def test_bodies(self):
        for fixture, d in BODIES:
            with self.subTest(fixture=fixture, dialect=d):
                exp = answer_expected(fixture)
                st, out = self.post(exp, answer_request(exp, False), dialect=d)
                self.assertEqual(st, 200)
                self.check_body(exp, out)

    def test_upstream_reset_has_no_done(self):
        for fixture, d in STREAMS:
            with self.subTest(fixture=fixture, dialect=d):
                exp = answer_expected(fixture)
                st, out = self.post(exp, answer_request(exp, True), {"x-mock-fault": "rst"}, d)
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
    # Gemini's references come after the text when it streams (its grounding comes last).
    "gemini": "The X100 charges over USB-C in about two hours, best at 10\u201330 \u00b0C. It is covered"
              " by a two-year warranty, and its battery can be swapped at a service centre."
              " [[1]](https://docs.example.com/x100/manual.pdf)[2]"
              "[[3]](https://docs.example.com/service/battery%20swap.html)",
}
DEMO["vertex"] = DEMO["gemini"]
# ... and where each support ends in a body, at byte offsets past characters of 2 and 3 bytes.
DEMO_BODY = dict(DEMO, gemini="The X100 charges over USB-C in about two hours, best at 10\u201330 \u00b0C"
                              "[[1]](https://docs.example.com/x100/manual.pdf). It is covered by a two-year"
                              " warranty[2], and its battery can be swapped at a service centre"
                              "[[3]](https://docs.example.com/service/battery%20swap.html)"
                              "[[1]](https://docs.example.com/x100/manual.pdf).")
DEMO_BODY["vertex"] = DEMO_BODY["gemini"]
DEMO_SOURCES = {
    "anthropic": ["https://docs.example.com/x100/manual.pdf", None,
                  "https://docs.example.com/service/battery swap.html"],
    "responses": ["https://docs.example.com/x100/manual.pdf",
                  "https://docs.example.com/service/battery swap.html"],
}
DEMO_SOURCES["gemini"] = DEMO_SOURCES["vertex"] = DEMO_SOURCES["anthropic"]
# Cohere's citations come right after each passage (fast mode): where they sit in a body too,
# at character offsets past characters of 2 and 3 bytes.
DEMO["cohere"] = DEMO_BODY["cohere"] = DEMO_BODY["gemini"]
DEMO_SOURCES["cohere"] = DEMO_SOURCES["anthropic"]
# The model names gemini's upstream path; the other dialects send it along.
QUESTION = {"model": "citegate-demo", "messages": [{"role": "user", "content": "How do I charge the X100?"}]}


class DemoCase(H.DaemonCase):
    @classmethod
    def setUpClass(cls):
        cls.cg = {d: H.Citegate(env={"CITEGATE_UPSTREAM_DIALECT": d}).start() for d in DIALECTS}


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
                self.assertEqual(body["choices"][0]["message"]["content"], DEMO_BODY[d])
                self.assertEqual(body["choices"][0]["finish_reason"], "stop")
                self.check_sources(d, body["sources"])


if __name__ == "__main__":
    unittest.main()
