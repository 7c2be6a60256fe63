"""Real clients in front of an upstream of another dialect (SPEC §6a): the official
OpenAI SDK (openai-node), the Vercel AI SDK (`ai` + `@ai-sdk/openai`, whose chat model
turns url_citation annotations into sources) and LangChain JS (`@langchain/openai`'s
ChatOpenAI), pinned in tests/sdk/package.json, driven by tests/sdk/sdk_dialects.mjs
through citegate (anthropic / responses / gemini / vertex / cohere) to the HTTP/1.1 mock serving
tests/fixtures/dialects/e2e/, then the same SDKs over h2 (citegate speaking h2c to the h2
mock upstream, tests/tools/h2mock.c). Node's fetch speaks HTTP/1.1 to citegate;
test_dialects.py covers h2c clients.

For `bedrock` the upstream is tests/bedrock/bedrock_mock.mjs (AWS's event-stream codec,
@smithy/eventstream-codec), over HTTP/1.1 and over h2c, serving e2e/bedrock_stream.json
(ConverseStream: the messages of answers/bedrock_citations.bin, which the codec frames
into the same bytes) and e2e/bedrock_response.json (the same answer as a Converse body:
answers/bedrock_citations.json), with document citations of the request's <source> tags
and a web citation. Their expected views are tests/tools/bedrock_oracle.py's for those
bytes and answers/bedrock_documents.request.json (equal to the golden
expected/bedrock_citations_{stream,body}.*.json), not citegate's output.

For `bedrock-kb` the same mock serves Knowledge Bases answers (the scenarios of
tests/fixtures/dialects/bedrock/ that test_bedrock_kb.py uses): kb_grounded (an s3 source
without a URL, a web and a Confluence one, one cited twice, `°C`) and kb_chinese (a Chinese
answer: a body's references go in at code-point offsets), one streamed and the other as a
body, swapped on the h2 upstream, so that each is read both ways. citegate has AWS keys and
CITEGATE_BEDROCK_KB; the mock checks every request's SigV4 signature, and each must be
RetrieveAndGenerate(Stream) with the last user message's text and the configuration.
Their expected views are computed when the test runs by the independent oracle
tests/tools/bedrock_kb_oracle.py, from the bytes the mock sends (test_bedrock_kb.py's
stream_bytes / body_bytes), in profiles openwebui and openai: for openai the exact
url_citation annotations (offsets included) and citations. Knowledge Bases give no usage.

What the SDKs hand to the application must be the client view of the fixture's
NAME.openwebui.json: the rewritten content (profiles openwebui and openai), the
emitted citations (openwebui: source events / top-level sources, whole SOURCE objects
where the expected file has them; openai: url_citation annotations, which the AI SDK
reports as sources, and the top-level citations without a URL). LangChain keeps no
annotation of chat completions in its messages' fields, so its annotations are read from
the raw chunks and body that `__includeRawResponse` adds.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest
from urllib.parse import quote

import harness as H  # first: it puts tests/tools on the path
import bedrock_kb_oracle
import test_bedrock as TB
import test_bedrock_kb as TKB

SDK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sdk")
E2E = os.path.join(H.FIXTURES, "dialects", "e2e")
CASES = {  # dialect -> (stream fixture, body fixture)
    "anthropic": ("anthropic_stream.sse", "anthropic_response.json"),
    "responses": ("responses_stream.sse", "responses_response.json"),
    "gemini": ("gemini_stream.sse", "gemini_response.json"),
    "vertex": ("gemini_stream.sse", "gemini_response.json"),
    "bedrock": ("bedrock_stream.json", "bedrock_response.json"),
    "bedrock-kb": ("kb_grounded.json", "kb_chinese.json"),  # swapped on h2 (runs())
    "cohere": ("cohere_stream.sse", "cohere_response.json"),
}
# Also run over an h2 upstream (CITEGATE_UPSTREAM_PROTOCOL=h2): the dialects whose answer
# comes whole only at the end of the body, bedrock's and bedrock-kb's event streams, and
# cohere's citations between its text deltas.
H2_CASES = ("gemini", "vertex", "bedrock", "bedrock-kb", "cohere")
AWS_DIALECTS = ("bedrock", "bedrock-kb")  # upstream: the AWS-codec mock
# Unset for the bedrock citegates: the runner's own AWS keys must not leak in (without
# keys, citegate forwards the client's Authorization; the mock checks no signature). The
# bedrock-kb ones get test_bedrock_kb's keys and configuration instead.
AWS_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
            "AWS_DEFAULT_REGION", "AWS_BEARER_TOKEN_BEDROCK")
# What each run of sdk_dialects.mjs asks for: (streamed, not streamed) requests.
SDK_REQUESTS = (5, 4)


def expected(dialect, fixture, streamed):
    """The client view the SDKs must see of a fixture served streamed or not."""
    if dialect == "bedrock-kb":
        return kb_expected(fixture.rsplit(".", 1)[0], streamed)
    with open(os.path.join(E2E, fixture.rsplit(".", 1)[0] + ".openwebui.json"), encoding="utf-8") as f:
        return json.load(f)


def kb_expected(scenario, streamed):
    """bedrock_kb_oracle's views of a Knowledge Bases scenario as the mock sends it, in the
    shape of the e2e expected files, plus profile openai's annotations and citations."""
    raw = TKB.stream_bytes(scenario) if streamed else TKB.body_bytes(scenario, "kb-session")
    web = bedrock_kb_oracle.expected_view(raw, None, "openwebui")
    oai = bedrock_kb_oracle.expected_view(raw, None, "openai")
    assert web["end"] == ("done" if streamed else "body") and oai["content"] == web["content"], web
    return {"content": web["content"], "sources": web["sources"],
            "finish_reason": web["finish_reason"]["0"], "usage": web["usage"],
            "openai": {"annotations": [a["url_citation"] for a in oai["annotations"].get("0", [])],
                       "citations": [c["source"] for c in oai["citations"]]}}


def request_of(dialect, stream_fixture):
    """The chat request the SDKs send: the fixture's (bedrock-kb: test_bedrock_kb's, whose
    last user message is not its only one)."""
    if dialect == "bedrock-kb":
        return TKB.CHAT
    return json.loads(H.fixture_bytes(expected(dialect, stream_fixture, True)["request"]))


def source_heads(exp):
    return exp.get("source_heads") or [s["source"] for s in exp["sources"]]


def linked(exp):
    """(url, title) of the citations with a URL that the content references: the
    annotations of profile openai, in order of first reference."""
    content = exp["content"]["0"]
    out = []
    for s in source_heads(exp):
        ref = f"[[{s['id']}]]({s['url'].replace(' ', '%20')})" if "url" in s else None
        if ref and ref in content:
            out.append((content.index(ref), s["url"], s["name"].split("] ", 1)[1]))
    return [(url, title) for _, url, title in sorted(out)]


class SDKsOnDialects(H.DaemonCase):
    @classmethod
    def setUpClass(cls):
        H.ensure_npm(SDK)
        cls.mock = cls.h2mock = cls.bedrock = None
        cls.dir = tempfile.mkdtemp(prefix="cg-sdk-dialects-")
        cls.mock = H.MockUpstream().start()
        cls.h2mock = H.H2MockUpstream().start()
        cls.bedrock = TB.BedrockMock(fixtures=(E2E, TB.FIXDIR)).start()
        cls.out, cls.rcs, cls.upstream_requests = {}, [], {}
        for key, d, proto, stream, body in cls.runs():
            if d in AWS_DIALECTS:  # bedrock-kb's requests are signed: the mock checks them
                cls.bedrock.expect(TB.expected_credentials() if d == "bedrock-kb" else None)
            cg = H.Citegate(upstream=cls.upstream(d, proto), env=cls.env(d, proto)).start()
            try:
                cls.out[key] = cls.run_sdks(cg.port, d, stream, body)
            finally:
                cls.rcs.append((cg.stop(), cg.sanitizer_reports()))
                cg.cleanup()
            if d in AWS_DIALECTS:
                cls.upstream_requests[key] = cls.bedrock.requests()
                cls.bedrock.reset()

    @classmethod
    def upstream(cls, dialect, proto):
        if dialect in AWS_DIALECTS:
            return cls.bedrock.url(proto)
        return cls.h2mock.url if proto == "h2" else cls.mock.url

    @staticmethod
    def env(dialect, proto):
        env = {"CITEGATE_UPSTREAM_DIALECT": dialect}
        if dialect in AWS_DIALECTS:
            env.update({v: None for v in AWS_VARS})
        if dialect == "bedrock-kb":
            env.update(TKB.kb_env())
        if proto == "h2":
            env["CITEGATE_UPSTREAM_PROTOCOL"] = "h2"
        return env

    @staticmethod
    def runs():
        """(key of the run, dialect, upstream protocol, stream fixture, body fixture) of every
        run. bedrock-kb's h2 run swaps its two answers: each is read streamed and as a body."""
        out = [(d, d, "h1") + CASES[d] for d in CASES]
        for d in H2_CASES:
            stream, body = CASES[d]
            out.append((d + "_h2", d, "h2") + ((body, stream) if d == "bedrock-kb" else (stream, body)))
        return out

    @classmethod
    def run_sdks(cls, port, dialect, stream, body):
        request = request_of(dialect, stream)
        plan = os.path.join(cls.dir, dialect + "." + stream + ".plan.json")
        if dialect in AWS_DIALECTS:  # the bedrock mock's scenarios: NAME.json
            p = {"stream": stream.rsplit(".", 1)[0], "body": body.rsplit(".", 1)[0],
                 "fixture_header": "X-Mock-Scenario", "model": request["model"]}
        else:
            p = {"stream": "dialects/e2e/" + stream, "body": "dialects/e2e/" + body}
        with open(plan, "w") as f:
            json.dump(dict(p, messages=request["messages"]), f)
        p = subprocess.run(["node", os.path.join(SDK, "sdk_dialects.mjs"), str(port), plan],
                           capture_output=True, timeout=120, cwd=SDK)
        if p.returncode != 0:
            return {"error": p.stderr.decode()[-2000:]}
        return json.loads(p.stdout)

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            for m in (cls.mock, cls.h2mock, cls.bedrock):
                if m is not None:
                    m.cleanup()
            shutil.rmtree(cls.dir, ignore_errors=True)

    def cases(self):
        """(key of the run, dialect, stream fixture, body fixture) of every run."""
        for key, d, _, stream, body in self.runs():
            yield key, d, stream, body

    def got(self, dialect):
        out = self.out[dialect]
        if "error" in out:
            self.fail(f"{dialect}: the node script failed: {out['error'][-1200:]}")
        return out

    def check_sources(self, key, exp, got):
        """got: (url, title) of each url_citation. Every linked reference is there;
        beyond them, only the answer's other URL citations (one whose annotation
        covers no marker, SPEC §6a). In a stream, in order of first reference."""
        want = linked(exp)
        self.assertTrue(set(want) <= set(got), (key, got, want))
        heads = {(s["url"], s["name"].split("] ", 1)[1]) for s in source_heads(exp) if "url" in s}
        self.assertTrue(set(got) <= heads, (key, got))
        if "stream" in key:
            self.assertEqual([g for g in got if g in want], want, key)

    def check_annotations(self, key, exp, content, anns):
        """anns: the url_citation objects of profile openai."""
        self.check_sources(key, exp, [(a["url"], a["title"]) for a in anns])
        if "openai" in exp:  # bedrock-kb: the oracle's own view of profile openai
            self.assertEqual(anns, exp["openai"]["annotations"], key)
        # the profile's own annotations span their rewritten reference (SPEC §7)
        for a in anns:
            if (a["url"], a["title"]) in linked(exp):
                self.assertRegex(content[a["start_index"]:a["end_index"]],
                                 r"^\[\[\d+\]\]\(" + re.escape(a["url"].replace(" ", "%20")) + r"\)$",
                                 (key, a))

    def test_openai_sdk_openwebui(self):
        for run, d, stream, body in self.cases():
            with self.subTest(run=run):
                out = self.got(run)
                for key, fixture, streamed in (("sdk_stream", stream, True), ("sdk_body", body, False)):
                    exp = expected(d, fixture, streamed)
                    self.assertEqual(out[key]["content"], exp["content"]["0"], key)
                    ids = sorted(out[key]["sources"], key=lambda s: int(s["id"]))
                    self.assertEqual(ids, sorted(source_heads(exp), key=lambda s: int(s["id"])), key)
                    if "sources" in exp:  # where the SPEC fixes every member of a SOURCE
                        got = sorted(out[key]["source_objects"], key=lambda s: int(s["source"]["id"]))
                        self.assertEqual(got, sorted(exp["sources"], key=lambda s: int(s["source"]["id"])), key)
                self.assertEqual(out["sdk_stream"]["sources"], source_heads(expected(d, stream, True)))

    def test_openai_sdk_openai_profile(self):
        for run, d, stream, body in self.cases():
            with self.subTest(run=run):
                out = self.got(run)
                for key, fixture, streamed in (("sdk_stream_openai", stream, True),
                                               ("sdk_body_openai", body, False)):
                    exp = expected(d, fixture, streamed)
                    content = out[key]["content"]
                    self.assertEqual(content, exp["content"]["0"], key)
                    self.check_annotations(key, exp, content, out[key]["annotations"])
                    # the citations without a URL: top-level "citations" (SPEC §7)
                    self.assertEqual(out[key]["citations"], [s for s in source_heads(exp) if "url" not in s], key)
                    if "openai" in exp:
                        self.assertEqual(out[key]["citations"], exp["openai"]["citations"], key)

    def test_ai_sdk_text_and_sources(self):
        for run, d, stream, body in self.cases():
            with self.subTest(run=run):
                out = self.got(run)
                for key, fixture, streamed in (("ai_stream", stream, True), ("ai_body", body, False)):
                    exp = expected(d, fixture, streamed)
                    self.assertEqual(out[key]["text"], exp["content"]["0"], key)
                    self.assertEqual(out[key]["finishReason"], "stop", key)
                    self.check_sources(key, exp, [(s["url"], s["title"]) for s in out[key]["sources"]])

    def test_langchain_text_and_annotations(self):
        for run, d, stream, body in self.cases():
            with self.subTest(run=run):
                out = self.got(run)
                for key, fixture, streamed in (("lc_stream", stream, True), ("lc_stream_openai", stream, True),
                                               ("lc_body_openai", body, False)):
                    exp = expected(d, fixture, streamed)
                    got = out[key]
                    self.assertEqual(got["content"], exp["content"]["0"], key)
                    self.assertEqual(got["finishReason"], exp["finish_reason"], key)
                    u = exp["usage"]
                    if u is None:  # none upstream: LangChain has none, or (a body) one without counts
                        self.assertIn(got["usage"], (None, {}), key)
                    else:
                        self.assertEqual(got["usage"], {"input_tokens": u["prompt_tokens"],
                                                        "output_tokens": u["completion_tokens"],
                                                        "total_tokens": u["total_tokens"]}, key)
                    if d == "bedrock":  # Bedrock names no model: the request's is the answer's
                        self.assertEqual(got["modelName"], request_of(d, stream)["model"], key)
                    if key == "lc_stream":
                        # profile openwebui makes no annotation: only the answer's own URL
                        # citations that cover no marker pass (as the OpenAI SDK got them)
                        anns = [(a["url"], a["title"]) for a in got["annotations"]]
                        self.assertFalse(set(anns) & set(linked(exp)), (key, anns))
                        self.assertEqual(got["annotations"], out["sdk_stream"]["annotations"], key)
                    else:
                        self.check_annotations(key, exp, got["content"], got["annotations"])

    def test_bedrock_requests_reached_the_aws_codec_mock(self):
        """Every SDK request of a bedrock run went to the mock as Converse / ConverseStream,
        the model one percent-encoded path segment, over the run's upstream protocol."""
        model = quote(request_of("bedrock", CASES["bedrock"][0])["model"], safe="")
        for key, d, proto, _, _ in self.runs():
            if d != "bedrock":
                continue
            with self.subTest(run=key):
                got = [(r["proto"], r["method"], r["path"]) for r in self.upstream_requests[key]]
                streamed, whole = SDK_REQUESTS
                self.assertEqual(sorted(got), sorted([(proto, "POST", f"/model/{model}/converse-stream")] * streamed
                                                     + [(proto, "POST", f"/model/{model}/converse")] * whole))

    def test_bedrock_kb_requests_signed_with_the_last_question(self):
        """Every SDK request of a bedrock-kb run went to the mock as RetrieveAndGenerate(Stream)
        over the run's upstream protocol, passed its SigV4 check, and carried only the last
        user message's text and CITEGATE_BEDROCK_KB, whatever the SDK made of the messages."""
        body = {"input": {"text": TKB.QUESTION}, "retrieveAndGenerateConfiguration": TKB.KB_CONFIG}
        for key, d, proto, _, _ in self.runs():
            if d != "bedrock-kb":
                continue
            with self.subTest(run=key):
                got = [(r["proto"], r["method"], r["path"], r.get("signature"), r["body_json"])
                       for r in self.upstream_requests[key]]
                streamed, whole = SDK_REQUESTS
                want = [(proto, "POST", "/retrieveAndGenerateStream", "ok", body)] * streamed \
                    + [(proto, "POST", "/retrieveAndGenerate", "ok", body)] * whole
                self.assertEqual(sorted(got, key=repr), sorted(want, key=repr))

    def test_citegate_exited_cleanly_without_sanitizer_reports(self):
        self.assertEqual(self.rcs, [(0, [])] * (len(CASES) + len(H2_CASES)))


if __name__ == "__main__":
    unittest.main()
