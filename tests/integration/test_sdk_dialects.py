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

What the SDKs hand to the application must be the client view of the fixture's
NAME.openwebui.json: the rewritten content (profiles openwebui and openai), the
emitted citations (openwebui: source events / top-level sources; openai: url_citation
annotations, which the AI SDK reports as sources, and the top-level citations without a
URL). LangChain keeps no annotation of chat completions in its messages' fields, so its
annotations are read from the raw chunks and body that `__includeRawResponse` adds.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest
from urllib.parse import quote

import harness as H

SDK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sdk")
E2E = os.path.join(H.FIXTURES, "dialects", "e2e")
BEDROCK_DIR = os.path.join(H.ROOT, "tests", "bedrock")
CASES = {  # dialect -> (stream fixture, body fixture)
    "anthropic": ("anthropic_stream.sse", "anthropic_response.json"),
    "responses": ("responses_stream.sse", "responses_response.json"),
    "gemini": ("gemini_stream.sse", "gemini_response.json"),
    "vertex": ("gemini_stream.sse", "gemini_response.json"),
    "bedrock": ("bedrock_stream.json", "bedrock_response.json"),
    "cohere": ("cohere_stream.sse", "cohere_response.json"),
}
# Also run over an h2 upstream (CITEGATE_UPSTREAM_PROTOCOL=h2): the dialects whose answer
# comes whole only at the end of the body, bedrock's event stream, and cohere's citations
# between its text deltas.
H2_CASES = ("gemini", "vertex", "bedrock", "cohere")
# Unset for the bedrock citegates: the runner's own AWS keys must not leak in (without
# keys, citegate forwards the client's Authorization; the mock checks no signature).
AWS_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
            "AWS_DEFAULT_REGION", "AWS_BEARER_TOKEN_BEDROCK")
# What each run of sdk_dialects.mjs asks for: (streamed, not streamed) requests.
SDK_REQUESTS = (5, 4)


def expected(fixture):
    with open(os.path.join(E2E, fixture.rsplit(".", 1)[0] + ".openwebui.json"), encoding="utf-8") as f:
        return json.load(f)


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


class BedrockMock:
    """tests/bedrock/bedrock_mock.mjs serving the scenarios of tests/fixtures/dialects/e2e/
    (X-Mock-Scenario: NAME for NAME.json), HTTP/1.1 on .h1 and h2c on .h2."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="cg-sdk-bedrock-")
        self.proc = self.log = None

    def start(self, timeout=30):
        H.ensure_npm(BEDROCK_DIR)
        ready = os.path.join(self.dir, "ready")
        self.log = open(os.path.join(self.dir, "mock.log"), "wb")
        self.proc = subprocess.Popen(
            ["node", os.path.join(BEDROCK_DIR, "bedrock_mock.mjs"), "--fixtures", E2E,
             "--ready-file", ready, "--parent-pid", str(os.getpid())],
            stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=H._die_with_parent)
        if not H.wait_for(lambda: os.path.exists(ready) or self.proc.poll() is not None, timeout) \
                or not os.path.exists(ready):
            with open(os.path.join(self.dir, "mock.log"), errors="replace") as f:
                out = f.read()
            self.cleanup()
            raise RuntimeError("the bedrock mock did not start: " + out)
        with open(ready) as f:
            ports = json.load(f)
        self.h1, self.h2 = ports["h1"], ports["h2"]
        return self

    def url(self, proto):
        return f"http://127.0.0.1:{self.h1 if proto == 'h1' else self.h2}"

    def take_requests(self):
        """The model requests received since the last call: (proto, method, path)."""
        st, _, out = H.request(self.h1, "GET", "/__mock/requests")
        assert st == 200, (st, out)
        got = [(r["proto"], r["method"], r["path"]) for r in json.loads(out)]
        st, _, out = H.request(self.h1, "POST", "/__mock/reset", body=b"")
        assert st == 200, (st, out)
        return got

    def cleanup(self):
        if self.proc is not None:
            H._stop_process(self.proc, timeout=5)
            self.proc = None
        if self.log:
            self.log.close()
            self.log = None
        shutil.rmtree(self.dir, ignore_errors=True)


class SDKsOnDialects(H.DaemonCase):
    @classmethod
    def setUpClass(cls):
        H.ensure_npm(SDK)
        cls.mock = cls.h2mock = cls.bedrock = None
        cls.dir = tempfile.mkdtemp(prefix="cg-sdk-dialects-")
        cls.mock = H.MockUpstream().start()
        cls.h2mock = H.H2MockUpstream().start()
        cls.bedrock = BedrockMock().start()
        cls.out, cls.rcs, cls.upstream_requests = {}, [], {}
        for key, d, proto in cls.runs():
            stream, body = CASES[d]
            env = {"CITEGATE_UPSTREAM_DIALECT": d}
            if proto == "h2":
                env["CITEGATE_UPSTREAM_PROTOCOL"] = "h2"
            if d == "bedrock":
                upstream = cls.bedrock.url(proto)
                env.update({v: None for v in AWS_VARS})
            else:
                upstream = cls.h2mock.url if proto == "h2" else cls.mock.url
            cg = H.Citegate(upstream=upstream, env=env).start()
            try:
                cls.out[key] = cls.run_sdks(cg.port, d, stream, body)
            finally:
                cls.rcs.append((cg.stop(), cg.sanitizer_reports()))
                cg.cleanup()
            if d == "bedrock":
                cls.upstream_requests[key] = cls.bedrock.take_requests()

    @staticmethod
    def runs():
        """(key of the run, dialect, upstream protocol) of every run."""
        return [(d, d, "h1") for d in CASES] + [(d + "_h2", d, "h2") for d in H2_CASES]

    @classmethod
    def run_sdks(cls, port, dialect, stream, body):
        request = json.loads(H.fixture_bytes(expected(stream)["request"]))
        plan = os.path.join(cls.dir, dialect + "." + stream + ".plan.json")
        if dialect == "bedrock":  # the bedrock mock's scenarios: e2e/NAME.json
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
        for key, d, _ in self.runs():
            yield key, d, CASES[d][0], CASES[d][1]

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
                for key, fixture in (("sdk_stream", stream), ("sdk_body", body)):
                    exp = expected(fixture)
                    self.assertEqual(out[key]["content"], exp["content"]["0"], key)
                    ids = sorted(out[key]["sources"], key=lambda s: int(s["id"]))
                    self.assertEqual(ids, sorted(source_heads(exp), key=lambda s: int(s["id"])), key)
                self.assertEqual(out["sdk_stream"]["sources"], source_heads(expected(stream)))

    def test_openai_sdk_openai_profile(self):
        for run, d, stream, body in self.cases():
            with self.subTest(run=run):
                out = self.got(run)
                for key, fixture in (("sdk_stream_openai", stream), ("sdk_body_openai", body)):
                    exp = expected(fixture)
                    content = out[key]["content"]
                    self.assertEqual(content, exp["content"]["0"], key)
                    self.check_annotations(key, exp, content, out[key]["annotations"])
                    # the citations without a URL: top-level "citations" (SPEC §7)
                    self.assertEqual(out[key]["citations"], [s for s in source_heads(exp) if "url" not in s], key)

    def test_ai_sdk_text_and_sources(self):
        for run, d, stream, body in self.cases():
            with self.subTest(run=run):
                out = self.got(run)
                for key, fixture in (("ai_stream", stream), ("ai_body", body)):
                    exp = expected(fixture)
                    self.assertEqual(out[key]["text"], exp["content"]["0"], key)
                    self.assertEqual(out[key]["finishReason"], "stop", key)
                    self.check_sources(key, exp, [(s["url"], s["title"]) for s in out[key]["sources"]])

    def test_langchain_text_and_annotations(self):
        for run, d, stream, body in self.cases():
            with self.subTest(run=run):
                out = self.got(run)
                for key, fixture in (("lc_stream", stream), ("lc_stream_openai", stream),
                                     ("lc_body_openai", body)):
                    exp = expected(fixture)
                    got = out[key]
                    self.assertEqual(got["content"], exp["content"]["0"], key)
                    self.assertEqual(got["finishReason"], exp["finish_reason"], key)
                    u = exp["usage"]
                    self.assertEqual(got["usage"], {"input_tokens": u["prompt_tokens"],
                                                    "output_tokens": u["completion_tokens"],
                                                    "total_tokens": u["total_tokens"]}, key)
                    if d == "bedrock":  # Bedrock names no model: the request's is the answer's
                        self.assertEqual(got["modelName"], json.loads(H.fixture_bytes(exp["request"]))["model"], key)
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
        model = quote(json.loads(H.fixture_bytes(expected(CASES["bedrock"][0])["request"]))["model"], safe="")
        for key, d, proto in self.runs():
            if d != "bedrock":
                continue
            with self.subTest(run=key):
                got = self.upstream_requests[key]
                streamed, whole = SDK_REQUESTS
                self.assertEqual(sorted(got), sorted([(proto, "POST", f"/model/{model}/converse-stream")] * streamed
                                                     + [(proto, "POST", f"/model/{model}/converse")] * whole))

    def test_citegate_exited_cleanly_without_sanitizer_reports(self):
        self.assertEqual(self.rcs, [(0, [])] * (len(CASES) + len(H2_CASES)))


if __name__ == "__main__":
    unittest.main()
