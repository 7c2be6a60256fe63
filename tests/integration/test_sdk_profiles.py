"""Every profile (openwebui, openai, webchat, structured, markdown, off), chosen per request with the
X-Citegate-Profile header, consumed by real client code (tests/sdk/sdk_profiles.mjs):

- the official OpenAI SDK (openai-node, pinned in tests/sdk/package.json): streaming through
  chat.completions.create() (no exception; content, delta.annotations, top-level
  citations / entities / event.source collected) and non-streaming with .withResponse();
- for profile openai also the SDK's ChatCompletionStream helper (chat.completions.stream) and its
  finalChatCompletion(), which must carry the annotations on the message;
- the raw bytes through the `eventsource-parser` package: every event's data is JSON or [DONE],
  the last one is [DONE].

What the SDK hands to the application must be the client view recorded in
tests/fixtures/expected/ (openwebui: <fixture>.openwebui.json; other profiles:
profiles/<fixture>.<profile>.json); profile off must show the upstream unchanged. Annotation
offsets are checked in JavaScript string indices: content.slice(start, end) is the rewritten
reference `[[docN]](URL)`. Profile structured is checked on the {response, citations} fixtures with
values written out here, including X-Citegate-Citations-Removed.
"""
import json
import os
import re
import subprocess
import tempfile
import unittest

import harness as H

SDK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sdk")
PROFILES = ("openwebui", "openai", "webchat", "structured", "markdown", "off")

STREAMS = {  # fixture -> request fixture
    "azure_oyd_stream.sse": "chat_request.json",
    "numeric_stream.sse": "openwebui_rag_request.json",
}
BODIES = {"azure_oyd_response.json": "chat_request.json"}

# structured: values written from tests/fixtures/structured_*.{json,sse} + SPEC §7 (the citation
# ["/test/9.pdf", ...] resp. ["/x", "y"] is in no tool output: removed with its marker and the space
# before it, later markers renumbered; compact JSON, members in their order).
C1 = ["/test/1.pdf", "D(1,0.5,1.2,2.5,1.2,2.5,1.4,0.5,1.4)"]
C2 = ["/test/2.pdf", "D(2,1.0,3.0,2.0,3.0,2.0,3.2,1.0,3.2)"]


def compact(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


STRUCTURED_BODY = compact({"response": "The total is 1,200 EUR [1]. The invoice was approved by J. Doe. "
                                       "Payment is due on 2025-03-01 [2].", "citations": [C1, C2]})
STRUCTURED_STREAM = compact({"response": "A [1] B C [2].", "citations": [C1, C2]})


def request_obj(name):
    obj = json.loads(H.fixture_bytes(name))
    obj.pop("stream", None)
    obj.pop("model", None)
    return obj


def expected_view(fixture, profile):
    if profile == "openwebui":
        return H.expected(f"{fixture.rsplit('.', 1)[0]}.openwebui.json")
    return H.expected(f"profiles/{fixture.rsplit('.', 1)[0]}.{profile}.json")


def upstream_stream_view(fixture):
    """The upstream's own content and event data (what profile off must hand through)."""
    text = H.fixture_bytes(fixture).decode("utf-8")
    content, datas = {}, []
    for _, data in H.client_view.sse_events(text):
        datas.append(data)
        if data == "[DONE]":
            continue
        for ch in json.loads(data).get("choices") or []:
            c = (ch.get("delta") or {}).get("content")
            if isinstance(c, str):
                content[str(ch.get("index", 0))] = content.get(str(ch.get("index", 0)), "") + c
    return content, datas


ANNOT_SLICE = re.compile(r"^\[\[(?:doc)?[0-9]{1,4}\]\]\((\S+)\)$")


class SDKProfiles(H.DaemonCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        H.ensure_npm(SDK)
        cls.mock = H.MockUpstream().start()
        cls.cg = H.Citegate(upstream=cls.mock.url).start()
        runs = []
        for p in PROFILES:
            for fx, req in STREAMS.items():
                base = {"profile": p, "fixture": fx, "request": request_obj(req)}
                runs.append(dict(base, name=f"{p}:{fx}:stream", mode="stream", split=7))
                runs.append(dict(base, name=f"{p}:{fx}:raw", mode="raw"))
                if p == "openai":
                    runs.append(dict(base, name=f"{p}:{fx}:helper", mode="helper", split=5))
            for fx, req in BODIES.items():
                runs.append({"name": f"{p}:{fx}:body", "mode": "body", "profile": p, "fixture": fx,
                             "request": request_obj(req)})
        sreq = request_obj("structured_request.json")
        for p in ("structured", "off"):
            runs.append({"name": f"{p}:structured_response.json:body", "mode": "body", "profile": p,
                         "fixture": "structured_response.json", "request": sreq})
            for mode in ("stream", "raw"):
                runs.append({"name": f"{p}:structured_stream.sse:{mode}", "mode": mode, "profile": p,
                             "fixture": "structured_stream.sse", "request": sreq})
        cls.tmp = tempfile.mkdtemp(prefix="cg-sdkprof-")
        plan = os.path.join(cls.tmp, "plan.json")
        with open(plan, "w", encoding="utf-8") as f:
            json.dump({"runs": runs}, f)
        p = subprocess.run(["node", os.path.join(SDK, "sdk_profiles.mjs"), str(cls.cg.port), plan],
                           capture_output=True, timeout=120, cwd=SDK)
        if p.returncode != 0:
            cls.tearDownClass()
            raise AssertionError("sdk_profiles.mjs failed: " + p.stderr.decode(errors="replace")[-3000:])
        cls.got = json.loads(p.stdout)

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            if getattr(cls, "mock", None) is not None:
                cls.mock.cleanup()
            import shutil
            shutil.rmtree(getattr(cls, "tmp", "/nonexistent"), ignore_errors=True)

    # ------------------------------------------------------------------ helpers
    def run_of(self, name):
        r = self.got[name]
        self.assertIsNone(r.get("error"), f"{name}: {r.get('error')}")
        return r

    def check_slices(self, name, content, annotations, slices):
        for i, anns in annotations.items():
            self.assertEqual(len(slices[i]), len(anns), name)
            for a, s in zip(anns, slices[i]):
                m = ANNOT_SLICE.match(s)
                self.assertTrue(m, f"{name}: content[{a['url_citation']['start_index']}:"
                                   f"{a['url_citation']['end_index']}] = {s!r} is not a rewritten reference")
                self.assertEqual(m.group(1), a["url_citation"]["url"], f"{name}: annotation url vs link")

    def check_raw(self, name, r):
        self.assertEqual(r["status"], 200, name)
        self.assertTrue((r["contentType"] or "").startswith("text/event-stream"), f"{name}: {r['contentType']}")
        self.assertEqual(r["parseErrors"], [], name)
        self.assertEqual(r["notJson"], [], f"{name}: event data neither JSON nor [DONE]")
        self.assertGreater(len(r["events"]), 1, name)
        self.assertEqual(r["events"][-1]["data"], "[DONE]", f"{name}: last event")
        self.assertEqual([e["data"] for e in r["events"]].count("[DONE]"), 1, name)

    def raw_content(self, r):
        content = {}
        for e in r["events"]:
            if e["data"] == "[DONE]":
                continue
            for ch in json.loads(e["data"]).get("choices") or []:
                c = (ch.get("delta") or {}).get("content")
                if isinstance(c, str):
                    content[str(ch.get("index", 0))] = content.get(str(ch.get("index", 0)), "") + c
        return content

    # ------------------------------------------------------------------ streams
    def check_stream(self, profile, fixture):
        name = f"{profile}:{fixture}"
        s = self.run_of(f"{name}:stream")
        raw = self.run_of(f"{name}:raw")
        self.check_raw(f"{name}:raw", raw)
        self.assertEqual(self.raw_content(raw), s["content"], f"{name}: eventsource-parser vs SDK content")
        if profile == "off":
            content, datas = upstream_stream_view(fixture)
            self.assertEqual(s["content"], content, name)
            self.assertEqual([e["data"] for e in raw["events"]], datas, f"{name}: events not passed through")
            self.assertEqual((s["annotations"], s["citations"], s["entities"], s["sources"]), ({}, [], [], []), name)
            return
        exp = expected_view(fixture, profile)
        self.assertEqual(s["content"], exp["content"], f"{name}: content")
        self.assertEqual(s["sources"], exp.get("sources", []) if profile == "openwebui" else [], f"{name}: sources")
        self.assertEqual(s["annotations"], exp.get("annotations", {}) if profile == "openai" else {},
                         f"{name}: delta.annotations")
        want_cit = [exp["citations"]] if profile == "openai" and exp.get("citations") else []
        self.assertEqual(s["citations"], want_cit, f"{name}: top-level citations")
        self.assertEqual(s["entities"], [exp["entities"]] if profile == "webchat" else [], f"{name}: entities")
        if profile == "openai":
            self.check_slices(name, s["content"], s["annotations"], s["slices"])
            h = self.run_of(f"{name}:helper")
            fin = h["final"]
            self.assertEqual(fin["content"], exp["content"], f"{name}: finalChatCompletion content")
            self.assertEqual(fin["annotations"], exp.get("annotations", {}), f"{name}: final message.annotations")
            self.assertEqual(fin["citations"], exp.get("citations"), f"{name}: final citations")
            self.assertEqual(fin["finish_reason"], ["stop"], name)
            self.assertEqual(h["content"], {"0": exp["content"]["0"]}, f"{name}: helper 'content' event snapshot")
            self.check_slices(f"{name}:helper", fin["content"], fin["annotations"], fin["slices"])

    def check_body(self, profile, fixture):
        name = f"{profile}:{fixture}:body"
        b = self.run_of(name)
        self.assertIsNone(b["citationsRemoved"] if profile != "structured" else None, name)
        if profile == "off":
            up = json.loads(H.fixture_bytes(fixture))
            self.assertEqual(b["content"], {str(c["index"]): c["message"]["content"] for c in up["choices"]}, name)
            self.assertEqual((b["annotations"], b["citations"], b["entities"], b["sources"]), ({}, None, None, None), name)
            return
        exp = expected_view(fixture, profile)
        self.assertEqual(b["content"], exp["content"], f"{name}: content")
        self.assertEqual(b["sources"], exp.get("sources") if profile == "openwebui" else None, f"{name}: sources")
        self.assertEqual(b["annotations"], exp.get("annotations", {}) if profile == "openai" else {},
                         f"{name}: message.annotations")
        self.assertEqual(b["citations"], exp.get("citations") if profile == "openai" else None, f"{name}: citations")
        self.assertEqual(b["entities"], exp.get("entities") if profile == "webchat" else None, f"{name}: entities")
        if profile == "openai":
            self.check_slices(name, b["content"], b["annotations"], b["slices"])
        if profile == "structured":
            self.assertIn(b["citationsRemoved"], (None, "0"), f"{name}: nothing to remove here")

    def test_openwebui(self):
        for fx in STREAMS:
            self.check_stream("openwebui", fx)
        for fx in BODIES:
            self.check_body("openwebui", fx)

    def test_openai(self):
        for fx in STREAMS:
            self.check_stream("openai", fx)
        for fx in BODIES:
            self.check_body("openai", fx)

    def test_webchat(self):
        for fx in STREAMS:
            self.check_stream("webchat", fx)
        for fx in BODIES:
            self.check_body("webchat", fx)

    def test_markdown(self):
        for fx in STREAMS:
            self.check_stream("markdown", fx)
        for fx in BODIES:
            self.check_body("markdown", fx)

    def test_structured_on_citation_answers(self):
        for fx in STREAMS:
            self.check_stream("structured", fx)
        for fx in BODIES:
            self.check_body("structured", fx)

    def test_off(self):
        for fx in STREAMS:
            self.check_stream("off", fx)
        for fx in BODIES:
            self.check_body("off", fx)

    # ------------------------------------------------------------------ structured answers
    def test_structured_body(self):
        b = self.run_of("structured:structured_response.json:body")
        self.assertEqual(b["content"], {"0": STRUCTURED_BODY})
        self.assertEqual(b["citationsRemoved"], "1", "X-Citegate-Citations-Removed")
        off = self.run_of("off:structured_response.json:body")
        up = json.loads(H.fixture_bytes("structured_response.json"))
        self.assertEqual(off["content"], {"0": up["choices"][0]["message"]["content"]})
        self.assertIsNone(off["citationsRemoved"])

    def test_structured_stream(self):
        s = self.run_of("structured:structured_stream.sse:stream")
        raw = self.run_of("structured:structured_stream.sse:raw")
        self.check_raw("structured stream raw", raw)
        self.assertEqual(s["content"], {"0": STRUCTURED_STREAM})
        self.assertEqual(self.raw_content(raw), s["content"])
        self.assertEqual(raw["citationsRemoved"], "1", "X-Citegate-Citations-Removed on the stream")
        off = self.run_of("off:structured_stream.sse:stream")
        self.assertEqual(off["content"], upstream_stream_view("structured_stream.sse")[0])


if __name__ == "__main__":
    unittest.main()
