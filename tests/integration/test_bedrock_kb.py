"""The `bedrock-kb` dialect (SPEC §6a, Amazon Bedrock Knowledge Bases) end to end, with AWS's
own code on the other side.

The upstream is tests/bedrock/bedrock_mock.mjs (see test_bedrock.py): its
retrieveAndGenerateStream answers are framed by @smithy/eventstream-codec, every request's
SigV4 signature is checked by @smithy/signature-v4, and it answers with the header
x-amzn-bedrock-knowledge-base-session-id (the request's sessionId, else a new one). Its
Knowledge Bases scenarios are tests/fixtures/dialects/bedrock/kb_*.json. Each class that
talks to it runs once per upstream protocol, HTTP/1.1 and h2c.

- Answers: the client's content and sources in profiles openwebui, openai, webchat and off,
  streamed and as a body, against the independent oracle tests/tools/bedrock_kb_oracle.py
  run on the same messages (encoded by make_bedrock_fixtures.py) and the same body; a Chinese
  answer; the stream written 7 bytes at a time; the guardrail; an exception; an upstream 404
  passed through.
- Requests: the path and the body ({input, retrieveAndGenerateConfiguration, sessionId?},
  nothing else) on the chat route and the Azure routes; every request signed and passing
  the mock's check, none of the client's keys forwarded; the session header both ways; a last
  user message without text refused with nothing sent.
- Startup: exit status 2 without AWS keys or CITEGATE_BEDROCK_KB, or with a
  CITEGATE_BEDROCK_KB that is no JSON object; a bedrock-agent-runtime host names the region.
- Demo: the embedded demo answering as Knowledge Bases do.

Every citegate is stopped with SIGTERM at the end of its class and must exit 0 with no
sanitizer report (harness.DaemonCase). Without node or npm the module fails; it never skips.
"""
import json
import unittest

import harness as H  # first: it puts tests/tools on the path
import bedrock_kb_oracle
import client_view
import make_bedrock_fixtures
import test_bedrock as TB

KB_CONFIG = {"type": "KNOWLEDGE_BASE",
             "knowledgeBaseConfiguration": {"knowledgeBaseId": "KB12345678",
                                            "modelArn": "arn:aws:bedrock:eu-west-3::foundation-model/"
                                                        "amazon.nova-pro-v1:0"}}
QUESTION = "How do I charge the X100?"
CHAT = {"model": "kb", "messages": [{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": "Hello"},
                                    {"role": "assistant", "content": "Hi."},
                                    {"role": "user", "content": QUESTION}]}
KEYS = {"AWS_ACCESS_KEY_ID": TB.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": TB.SECRET,
        "AWS_SESSION_TOKEN": TB.TOKEN, "AWS_REGION": TB.REGION}
PROFILES = TB.PROFILES


def kb_env(**more):
    e = dict(KEYS, CITEGATE_UPSTREAM_DIALECT="bedrock-kb", CITEGATE_BEDROCK_KB=json.dumps(KB_CONFIG))
    e.update(more)
    return e


def events_of(scenario):
    return TB.fixture(scenario)["events"]


def stream_bytes(scenario):
    """The scenario's event stream, framed by the project's own fixture encoder."""
    return b"".join(make_bedrock_fixtures.entry_bytes(e) for e in events_of(scenario))


def body_bytes(scenario, session):
    """The RetrieveAndGenerate body the mock makes of the scenario's events."""
    out = {"sessionId": session, "output": {"text": ""}, "citations": []}
    for e in events_of(scenario):
        p = e.get("payload") or {}
        if e.get("event") == "output":
            out["output"]["text"] += p.get("text", "")
        elif e.get("event") == "citation":
            c = dict(p) if "generatedResponsePart" in p or "retrievedReferences" in p else dict(p["citation"])
            c.pop("citation", None)
            out["citations"].append(c)
        elif e.get("event") == "guardrail" and p.get("action") == "INTERVENED":
            out["guardrailAction"] = "INTERVENED"
    return json.dumps(out).encode()


class KBCase:
    """A mock and a bedrock-kb citegate signing with the keys the mock expects (mixed into
    TB.BedrockCase, once per upstream protocol)."""

    proto = None

    @classmethod
    def setUpClass(cls):
        cls.mock = TB.BedrockMock().start()
        cls.cg = TB.citegate(cls.mock.url(cls.proto), cls.proto, kb_env())

    def setUp(self):
        self.mock.reset()
        self.mock.expect(TB.expected_credentials())

    def post(self, body, scenario="kb_grounded", profile="openwebui", path="/v1/chat/completions",
             **hdrs):
        h = {"X-Mock-Scenario": scenario, "X-Citegate-Profile": profile,
             "Authorization": "Bearer " + TB.CLIENT_KEY, "api-key": "client-azure-key"}
        h.update(hdrs)
        return self.cg.request("POST", path, body, h)

    def check_signed(self, r):
        self.assertEqual(r.get("signature"), "ok", r)
        (auth,) = TB.header(r, "authorization")
        self.assertTrue(TB.AUTH_RE.match(auth), auth)
        self.assertEqual(TB.header(r, "x-amz-security-token"), [TB.TOKEN])
        self.assertEqual(TB.header(r, "api-key"), [])
        self.assertEqual(TB.header(r, "x-bedrock-session-id"), [])


class Answers(KBCase):
    """The client's view of Knowledge Bases answers, against the oracle."""

    def check(self, scenario, profile, stream, **hdrs):
        st, hd, out = self.post(dict(CHAT, stream=stream), scenario, profile, **hdrs)
        self.assertEqual(st, 200, out[:400])
        (r,) = self.mock.requests()
        session = hd.get("X-Bedrock-Session-Id")
        self.assertEqual(session, f"kb-session-{r['seq']}")
        got = client_view.view(out.decode())
        raw = stream_bytes(scenario) if stream else body_bytes(scenario, session)
        want = bedrock_kb_oracle.expected_view(raw, None, profile)
        self.assertEqual(got["content"], want["content"])
        self.assertEqual(got["sources"], want["sources"])
        if stream:
            self.assertTrue(hd.get("Content-Type", "").startswith("text/event-stream"), hd)
            evts = TB.data_events(out.decode())
            self.assertEqual(TB.finish_reasons(evts), list(want["finish_reason"].values()))
            self.assertEqual(got["ends_with_done"], want["end"] == "done")
        else:
            body = json.loads(out)
            self.assertEqual(body["choices"][0]["finish_reason"], want["finish_reason"]["0"])
        return got, out

    def test_streams_and_bodies_in_every_profile(self):
        for scenario in ("kb_grounded", "kb_chinese"):
            for profile in PROFILES:
                for stream in (True, False):
                    with self.subTest(scenario=scenario, profile=profile, stream=stream):
                        self.mock.reset()
                        self.check(scenario, profile, stream)

    def test_what_the_client_sees(self):
        """Pinned by hand: the s3 source is a title with no link, the web one links; a body
        places each reference after its sentence."""
        got, _ = self.check("kb_grounded", "openwebui", False)
        self.assertEqual(got["content"]["0"],
                         "The X100 charges over USB-C in about two hours.[1] Use only the supplied"
                         " charger, and keep it below 35 \u00b0C while charging."
                         "[[2]](https://docs.example.com/x100/faq.html)"
                         "[[3]](https://acme.atlassian.net/wiki/spaces/X/pages/1/Battery+care)[1]")
        first = got["sources"][0]
        self.assertEqual(first["source"], {"id": "1", "name": "[1] manual.pdf"})
        self.assertEqual(first["metadata"][0]["chunk_id"], "1%3A0%3AqNa9")
        self.assertEqual(first["metadata"][0]["page"], 4)

    def test_messages_cut_anywhere(self):
        self.check("kb_grounded", "openwebui", True, **{"X-Mock-Pieces": "7"})

    def test_guardrail(self):
        for stream in (True, False):
            with self.subTest(stream=stream):
                self.mock.reset()
                self.check("kb_guardrail", "openwebui", stream)

    def test_exception(self):
        got, out = self.check("kb_throttling", "openwebui", True)
        self.assertTrue(got["ends_with_error_event"])
        self.assertEqual(TB.data_events(out.decode())[-1]["error"]["code"], "throttlingException")
        self.assertNotIn("Never sent", out.decode())

    def test_upstream_404_passes_through(self):
        for stream in (True, False):
            with self.subTest(stream=stream):
                st, _, out = self.post(dict(CHAT, stream=stream), "kb_not_found")
                self.assertEqual(st, 404)
                self.assertEqual(json.loads(out), {"message": "Knowledge base KB404 was not found."})


class Requests(KBCase):
    """What the mock received."""

    def test_path_and_body(self):
        for stream, path in ((True, "/retrieveAndGenerateStream"), (False, "/retrieveAndGenerate")):
            with self.subTest(stream=stream):
                self.mock.reset()
                st, _, out = self.post(dict(CHAT, stream=stream, temperature=0.2, max_tokens=50))
                self.assertEqual(st, 200, out[:300])
                (r,) = self.mock.requests()
                self.assertEqual(r["path"], path)
                self.assertEqual(r["body_json"], {"input": {"text": QUESTION},
                                                  "retrieveAndGenerateConfiguration": KB_CONFIG})
                self.check_signed(r)

    def test_azure_routes(self):
        for deployment in ("kb", "gpt-4o"):
            for stream in (True, False):
                with self.subTest(deployment=deployment, stream=stream):
                    self.mock.reset()
                    st, _, out = self.post({"messages": CHAT["messages"], "stream": stream},
                                           path=TB.DEPLOYMENT_ROUTE.format(deployment))
                    self.assertEqual(st, 200, out[:300])
                    (r,) = self.mock.requests()
                    self.assertEqual(r["path"], "/retrieveAndGenerateStream" if stream else "/retrieveAndGenerate")
                    self.assertEqual(r["body_json"]["input"], {"text": QUESTION})
                    self.check_signed(r)

    def test_session_both_ways(self):
        for stream in (True, False):
            with self.subTest(stream=stream):
                self.mock.reset()
                st, hd, out = self.post(dict(CHAT, stream=stream), **{"X-Bedrock-Session-Id": "sess-42"})
                self.assertEqual(st, 200, out[:300])
                self.assertEqual(hd.get("X-Bedrock-Session-Id"), "sess-42")
                (r,) = self.mock.requests()
                self.assertEqual(r["body_json"]["sessionId"], "sess-42")
                self.check_signed(r)

    def test_refused_with_nothing_sent(self):
        for body in ({"messages": [{"role": "assistant", "content": "a"}]},
                     dict(CHAT, tools=[{"type": "function", "function": {"name": "f"}}])):
            with self.subTest(body=body):
                st, _, out = self.post(body)
                self.assertEqual(st, 400, out[:300])
        self.assertEqual(self.mock.requests(), [])

    def test_empty_question_refused_with_nothing_sent(self):
        """Knowledge Bases refuse an empty input text: a last user message without text is
        citegate's 400, whatever an earlier user message held."""
        for content in (None, "", [], [{"type": "text", "text": ""}]):
            for stream in (True, False):
                with self.subTest(content=content, stream=stream):
                    msgs = CHAT["messages"] + [{"role": "user", "content": content}]
                    st, _, out = self.post(dict(CHAT, messages=msgs, stream=stream))
                    self.assertEqual(st, 400, out[:300])
                    err = json.loads(out)["error"]
                    self.assertEqual((err["code"], err["param"], err["type"]),
                                     ("missing_required_parameter", "messages", "invalid_request_error"))
                    self.assertIn("no text", err["message"])
        self.assertEqual(self.mock.requests(), [])

    def test_the_check_fails_on_another_secret(self):
        self.mock.expect(TB.expected_credentials(secret=TB.SECRET[:-1] + "X"))
        st, _, out = self.post(dict(CHAT, stream=True))
        self.assertEqual(st, 403, out[:300])
        (r,) = self.mock.requests()
        self.assertTrue(r["signature"].startswith("Authorization differs"), r["signature"])

    def test_keys_never_logged(self):
        self.post(dict(CHAT, stream=True))
        log = self.cg.stderr()
        for secret in (TB.SECRET, TB.ACCESS_KEY, TB.TOKEN, TB.CLIENT_KEY, "client-azure-key"):
            self.assertNotIn(secret, log)


class Cors(KBCase, TB.BedrockCase):
    """With CORS on, a browser may read the session header on the answer: it is listed in
    Access-Control-Expose-Headers beside X-Request-Id (citegate's own error answers carry no
    session, and list X-Request-Id alone)."""

    proto = "h1"
    ORIGIN = "https://chat.example.com"

    @classmethod
    def setUpClass(cls):
        cls.mock = TB.BedrockMock().start()
        cls.cg = TB.citegate(cls.mock.url(cls.proto), cls.proto,
                             kb_env(CITEGATE_CORS_ORIGINS=cls.ORIGIN))

    def test_session_exposed(self):
        for stream in (True, False):
            with self.subTest(stream=stream):
                st, hd, out = self.post(dict(CHAT, stream=stream), Origin=self.ORIGIN,
                                        **{"X-Bedrock-Session-Id": "sess-7"})
                self.assertEqual(st, 200, out[:300])
                self.assertEqual(hd.get("Access-Control-Allow-Origin"), self.ORIGIN)
                self.assertEqual(hd.get("Access-Control-Expose-Headers"),
                                 "X-Request-Id, X-Bedrock-Session-Id")
                self.assertEqual(hd.get("X-Bedrock-Session-Id"), "sess-7")

    def test_error_exposes_the_request_id_only(self):
        st, hd, out = self.post({"messages": [{"role": "assistant", "content": "a"}]},
                                Origin=self.ORIGIN)
        self.assertEqual(st, 400, out[:300])
        self.assertEqual(hd.get("Access-Control-Expose-Headers"), "X-Request-Id")
        self.assertIsNone(hd.get("X-Bedrock-Session-Id"))


class H1Answers(Answers, TB.BedrockCase):
    proto = "h1"


class H2Answers(Answers, TB.BedrockCase):
    proto = "h2"


class H1Requests(Requests, TB.BedrockCase):
    proto = "h1"


class H2Requests(Requests, TB.BedrockCase):
    proto = "h2"


class Startup(unittest.TestCase):
    """Settings that stop citegate at start (exit status 2), with --check and without."""

    def run_both(self, env):
        return TB.run_both(self, dict({"CITEGATE_BEDROCK_KB": None}, **env), "bedrock-kb")

    def test_exit_2(self):
        up = "http://127.0.0.1:9"
        kb = json.dumps(KB_CONFIG)
        cases = [
            ({"CITEGATE_UPSTREAM": up, "CITEGATE_BEDROCK_KB": kb}, "AWS_ACCESS_KEY_ID"),
            ({"CITEGATE_UPSTREAM": up, "CITEGATE_BEDROCK_KB": kb, "AWS_ACCESS_KEY_ID": TB.ACCESS_KEY,
              "AWS_REGION": TB.REGION}, "AWS_SECRET_ACCESS_KEY"),
            (dict(KEYS, CITEGATE_UPSTREAM=up), "CITEGATE_BEDROCK_KB"),
            (dict(KEYS, CITEGATE_UPSTREAM=up, CITEGATE_BEDROCK_KB="[]"), "CITEGATE_BEDROCK_KB"),
            (dict(KEYS, CITEGATE_UPSTREAM=up, CITEGATE_BEDROCK_KB='"KB1"'), "CITEGATE_BEDROCK_KB"),
            (dict(KEYS, CITEGATE_UPSTREAM=up, CITEGATE_BEDROCK_KB="{"), "CITEGATE_BEDROCK_KB"),
        ]
        for env, named in cases:
            with self.subTest(named=named, env=sorted(env)):
                for rc, text in self.run_both(env):
                    self.assertEqual(rc, 2, text)
                    self.assertIn(named, text)
                    for secret in (TB.ACCESS_KEY, TB.SECRET, TB.TOKEN):
                        self.assertNotIn(secret, text)

    def test_region_from_the_agent_runtime_host(self):
        env = dict(KEYS, CITEGATE_UPSTREAM="https://bedrock-agent-runtime.eu-west-3.amazonaws.com",
                   CITEGATE_BEDROCK_KB=json.dumps(KB_CONFIG), AWS_REGION=None,
                   CITEGATE_UPSTREAM_DIALECT="bedrock-kb")
        p = H.run_citegate(["--check"], env=dict({v: None for v in TB.AWS_VARS}, **env))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


class Demo(TB.BedrockCase):
    """The embedded demo (no upstream, no keys needed) answering as Knowledge Bases do: the
    same answer as the other dialects' demos, streamed and as a body."""

    @classmethod
    def setUpClass(cls):
        cls.cg = TB.citegate(None, "h1", {"CITEGATE_UPSTREAM_DIALECT": "bedrock-kb"})

    def test_stream_and_body(self):
        for stream in (True, False):
            with self.subTest(stream=stream):
                st, hd, out = self.cg.request("POST", "/v1/chat/completions",
                                              dict(TB.QUESTION, stream=stream),
                                              {"X-Bedrock-Session-Id": "demo-1"})
                self.assertEqual(st, 200, out[:300])
                v = client_view.view(out.decode())
                self.assertEqual(v["content"], {"0": TB.DEMO})
                self.assertEqual([(s["source"]["name"], s["source"].get("url")) for s in v["sources"]], [
                    ("[1] X100 User Manual", "https://docs.example.com/x100/manual.pdf"),
                    ("[2] Warranty FAQ", None),
                    ("[3] Battery service", "https://docs.example.com/service/battery swap.html")])
                self.assertEqual(hd.get("X-Bedrock-Session-Id"), "demo-1")


if __name__ == "__main__":
    unittest.main()
