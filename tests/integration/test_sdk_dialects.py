"""Real clients in front of an upstream of another dialect (SPEC §6a): the official
OpenAI SDK (openai-node) and the Vercel AI SDK (`ai` + `@ai-sdk/openai`, whose chat
model turns url_citation annotations into sources), pinned in tests/sdk/package.json,
driven by tests/sdk/sdk_dialects.mjs through citegate (anthropic / responses / gemini /
vertex) to the HTTP/1.1 mock serving tests/fixtures/dialects/e2e/, then the same SDKs
over h2 (citegate speaking h2c to the h2 mock upstream, tests/tools/h2mock.c). Node's
fetch speaks HTTP/1.1 to citegate; test_dialects.py covers h2c clients.

What the SDKs hand to the application must be the client view of the fixture's
NAME.openwebui.json: the rewritten content (profiles openwebui and openai), the
emitted citations (openwebui: source events / top-level sources; openai: url_citation
annotations, which the AI SDK reports as sources).
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import harness as H

SDK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sdk")
E2E = os.path.join(H.FIXTURES, "dialects", "e2e")
CASES = {  # dialect -> (stream fixture, body fixture)
    "anthropic": ("anthropic_stream.sse", "anthropic_response.json"),
    "responses": ("responses_stream.sse", "responses_response.json"),
    "gemini": ("gemini_stream.sse", "gemini_response.json"),
    "vertex": ("gemini_stream.sse", "gemini_response.json"),
}
# Also run over an h2 upstream (CITEGATE_UPSTREAM_PROTOCOL=h2): the dialects whose answer
# comes whole only at the end of the body.
H2_CASES = ("gemini", "vertex")


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


class SDKsOnDialects(H.DaemonCase):
    @classmethod
    def setUpClass(cls):
        H.ensure_npm(SDK)
        cls.mock = H.MockUpstream().start()
        cls.h2mock = H.H2MockUpstream().start()
        cls.dir = tempfile.mkdtemp(prefix="cg-sdk-dialects-")
        cls.out, cls.rcs = {}, []
        runs = [(d, d, cls.mock.url, {}) for d in CASES]
        runs += [(d + "_h2", d, cls.h2mock.url, {"CITEGATE_UPSTREAM_PROTOCOL": "h2"})
                 for d in H2_CASES]
        for key, d, upstream, env in runs:
            stream, body = CASES[d]
            cg = H.Citegate(upstream=upstream, env=dict(env, CITEGATE_UPSTREAM_DIALECT=d)).start()
            try:
                cls.out[key] = cls.run_sdks(cg.port, stream, body)
            finally:
                cls.rcs.append((cg.stop(), cg.sanitizer_reports()))
                cg.cleanup()

    @classmethod
    def run_sdks(cls, port, stream, body):
        request = json.loads(H.fixture_bytes(expected(stream)["request"]))
        plan = os.path.join(cls.dir, stream + ".plan.json")
        with open(plan, "w") as f:
            json.dump({"stream": "dialects/e2e/" + stream, "body": "dialects/e2e/" + body,
                       "messages": request["messages"]}, f)
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
            cls.mock.cleanup()
            cls.h2mock.cleanup()
            shutil.rmtree(cls.dir, ignore_errors=True)

    def cases(self):
        """(key of the run, dialect, stream fixture, body fixture) of every run."""
        for d, (stream, body) in CASES.items():
            yield d, d, stream, body
        for d in H2_CASES:
            yield d + "_h2", d, CASES[d][0], CASES[d][1]

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
                    anns = out[key]["annotations"]
                    self.check_sources(key, exp, [(a["url"], a["title"]) for a in anns])
                    # the profile's own annotations span their rewritten reference (SPEC §7)
                    for a in anns:
                        if (a["url"], a["title"]) in linked(exp):
                            self.assertRegex(content[a["start_index"]:a["end_index"]],
                                             r"^\[\[\d+\]\]\(" + re.escape(a["url"].replace(" ", "%20")) + r"\)$",
                                             (key, a))

    def test_ai_sdk_text_and_sources(self):
        for run, d, stream, body in self.cases():
            with self.subTest(run=run):
                out = self.got(run)
                for key, fixture in (("ai_stream", stream), ("ai_body", body)):
                    exp = expected(fixture)
                    self.assertEqual(out[key]["text"], exp["content"]["0"], key)
                    self.assertEqual(out[key]["finishReason"], "stop", key)
                    self.check_sources(key, exp, [(s["url"], s["title"]) for s in out[key]["sources"]])

    def test_citegate_exited_cleanly_without_sanitizer_reports(self):
        self.assertEqual(self.rcs, [(0, [])] * (len(CASES) + len(H2_CASES)))


if __name__ == "__main__":
    unittest.main()
