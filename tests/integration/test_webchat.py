"""A real Bot Framework Web Chat page (botframework-webchat from npm, pinned in
tests/webchat/package.json) renders citegate's `webchat` profile output in headless Chromium.

For each fixture, `citegate filter --profile webchat` produces the client's bytes; the bot message
activity is built from them the way a Web Chat bot would: text = the concatenated delta.content
(or message.content), textFormat markdown, entities = [the Message thing of the entity chunk].
tests/webchat/render.mjs shows it in Web Chat (tests/webchat/index.html, fake offline DirectLine)
and reports the DOM. Checked against expectations written down here from the fixtures + SPEC §7:

- no console error, no uncaught exception, no network request;
- the "N references" list under the message has one entry per distinct cited position, with the
  citation's title, a link to its URL (URL citations) or a button (non-URL citations);
- one badge per reference occurrence inside the text, in order, linking to the URL or carrying
  `cite:N`, labelled "N TITLE" (URL ones); no reference is left as literal `[N]` text;
- clicking a non-URL citation opens Web Chat's citation modal with the title and the snippet.

Needs: node + npm (tests/webchat is installed with `npm ci` on first use), chromium
(CHROMIUM_BIN, else `chromium` on PATH). Set CG_WEBCHAT_SCREENSHOTS=DIR to keep PNGs.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import harness as H

WEBCHAT = os.path.join(H.ROOT, "tests", "webchat")
FIX = H.FIXTURES

# Expected Web Chat rendering per fixture, written from the fixtures and SPEC §7 (TITLE rule,
# URL percent-encoding), independently of citegate's output.
#   inline: the position of every reference badge in the text, in order
#   cites:  position -> (title, url or None, snippet)
CASES = {
    "azure_oyd_stream": {
        "fixture": "azure_oyd_stream.sse",
        "request": None,
        "inline": [1, 2, 3, 1],
        "cites": {
            1: ("X100 Manual", "https://docs.example.com/x100/manual.pdf",
                "The X100 charges via USB-C in 2 hours. A full charge lasts 14 hours of mixed use."),
            2: ("Warranty FAQ", None,
                "All devices come with a two-year limited warranty covering manufacturing defects."),
            3: ("battery swap.html", "https://docs.example.com/service/battery%20swap.html",
                "Battery replacement is available at authorised service centres."),
        },
    },
    "azure_oyd_response": {
        "fixture": "azure_oyd_response.json",
        "request": None,
        "inline": [1, 2, 1],
        "cites": {
            1: ("Dog Grooming", "https://contoso.blob.core.windows.net/docs/grooming%20%28v2%29.pdf",
                "Brushing once a week keeps the coat healthy."),
            2: ("guide.docx", None, "Annual vaccination is recommended for adult dogs."),
        },
    },
    "numeric_stream": {
        "fixture": "numeric_stream.sse",
        "request": "openwebui_rag_request.json",
        # "... 8 min 20 s [2][3]." -- [3] names no source and stays as written
        "inline": [1, 2],
        "cites": {
            1: ("Speed_of_light", "https://wiki.example.org/Speed_of_light",
                "The speed of light in vacuum is exactly 299,792,458 m/s."),
            2: ("physics-notes.md", None,
                "Light takes about 8 minutes 20 seconds to reach Earth from the Sun."),
        },
    },
    # choice 0 of a two-choice answer: non-BMP text, a title with `"` and `\`, a URL with ( ) < >,
    # a snippet cut to an abstract with "…", a citation with an empty snippet (no "text")
    "azure_unicode_response": {
        "fixture": "profiles/azure_unicode_response.json",
        "request": None,
        "inline": [1, 2, 3, 4, 1],
        "cites": {
            1: ('X200 "Quick" Start \\ Guide', "https://docs.example.com/x200/quick%20start.pdf",
                "Caf\u00e9 au lait \u2615 \u2014 the X200 pairs over Bluetooth 5.3 in under ten seconds."),
            2: ("<c>.html", "https://example.org/a%28b%29/%3Cc%3E.html?x=1", "Short."),
            3: ("Service Notes", None,
                "Service   notes for the X200:\n\tthe battery module is held by four T5 screws; remove the back "
                "cover first, then disconnect the ribbon cable gently. Replacement batteries must be the genuine "
                "4,200 mAh part (P/N 77-1204) or the warranty is void. Calibrate after swapping."),
            4: ("Empty", None, None),
        },
    },
}

DEF_RE = re.compile(r'^\[([0-9]+)\]: (\S+) "((?:[^"\\]|\\.)*)"$')


def ensure_webchat():
    bundle = os.path.join(WEBCHAT, "node_modules", "botframework-webchat", "dist", "webchat.js")
    if not os.path.isfile(bundle):
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=WEBCHAT,
                       check=True, timeout=300)


def chromium_bin():
    b = os.environ.get("CHROMIUM_BIN") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not b:
        raise AssertionError("chromium not found (Debian package `chromium`; or set CHROMIUM_BIN)")
    return b


def run_filter(fixture, request):
    args = ["filter", "--profile", "webchat"]
    if request:
        args += ["--request", os.path.join(FIX, request)]
    with open(os.path.join(FIX, fixture), "rb") as f:
        p = subprocess.run([H.citegate_bin()] + args, stdin=f, capture_output=True, timeout=20)
    return p


def activity_of(output, is_sse):
    """(text, message thing, details) from citegate's webchat output, as a Web Chat bot builds it."""
    text = output.decode("utf-8")
    if not is_sse:
        body = json.loads(text)
        return body["choices"][0]["message"]["content"], body.get("entities"), {"body": True}
    content, entity_chunks, datas = "", [], []
    for _, data in H.client_view.sse_events(text):
        datas.append(data)
        if data == "[DONE]":
            continue
        obj = json.loads(data)
        if "entities" in obj:
            entity_chunks.append(obj)
        for ch in obj.get("choices") or []:
            if ch.get("index", 0) == 0 and isinstance((ch.get("delta") or {}).get("content"), str):
                content += ch["delta"]["content"]
    entities = entity_chunks[0]["entities"] if len(entity_chunks) == 1 else None
    return content, entities, {"entity_chunks": len(entity_chunks), "last": datas[-1] if datas else None}


class WebChatRendersCitegate(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        ensure_webchat()
        cls.chromium = chromium_bin()
        cls.tmp = tempfile.mkdtemp(prefix="cg-webchat-")
        cls.outputs, cls.problems, cases = {}, {}, []
        for name, c in CASES.items():
            p = run_filter(c["fixture"], c["request"])
            if p.returncode != 0:
                cls.problems[name] = f"citegate filter exit {p.returncode}: {p.stderr.decode()[-1000:]}"
                continue
            try:
                text, entities, details = activity_of(p.stdout, c["fixture"].endswith(".sse"))
            except (ValueError, KeyError, IndexError, TypeError) as e:
                cls.problems[name] = f"cannot read citegate output ({e!r}): {p.stdout[-1500:]!r}"
                continue
            if not isinstance(entities, list) or len(entities) != 1:
                cls.problems[name] = f"expected one entity chunk with one Message thing, got {entities!r} {details}"
                continue
            cls.outputs[name] = {"text": text, "message": entities[0], "details": details}
            cases.append({"name": name, "activity": {"type": "message", "textFormat": "markdown",
                                                     "text": text, "entities": [entities[0]]}})
        cls.rendered = {}
        if cases:
            path = os.path.join(cls.tmp, "cases.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump({"cases": cases}, f)
            shots = os.environ.get("CG_WEBCHAT_SCREENSHOTS")
            if shots:
                os.makedirs(shots, exist_ok=True)
            env = dict(os.environ, CHROMIUM_BIN=cls.chromium)
            p = subprocess.run(["node", os.path.join(WEBCHAT, "render.mjs"), path] + ([shots] if shots else []),
                               capture_output=True, timeout=240, cwd=WEBCHAT, env=env)
            if p.returncode != 0:
                shutil.rmtree(cls.tmp, ignore_errors=True)
                raise AssertionError("render.mjs failed: " + p.stderr.decode(errors="replace")[-3000:])
            out = json.loads(p.stdout)
            cls.browser = out["browser"]
            cls.rendered = {c["name"]: c for c in out["cases"]}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # ------------------------------------------------------------------ helpers
    def case(self, name):
        self.assertNotIn(name, self.problems, self.problems.get(name))
        self.assertIn(name, self.rendered)
        return CASES[name], self.outputs[name], self.rendered[name]

    def check_citegate_output(self, name, exp, out):
        """The activity citegate's output yields: Message thing + Markdown definitions agree."""
        msg, text = out["message"], out["text"]
        if out["details"].get("last") is not None:
            self.assertEqual(out["details"]["last"], "[DONE]", name)
        for k, v in (("@context", "https://schema.org"), ("@id", ""), ("@type", "Message"),
                     ("type", "https://schema.org/Message")):
            self.assertEqual(msg.get(k), v, f"{name}: Message thing {k}")
        claims = msg.get("citation")
        self.assertIsInstance(claims, list, name)
        by_pos = {}
        for c in claims:
            self.assertEqual(c.get("@type"), "Claim", name)
            app = c["appearance"]
            self.assertEqual(app.get("@type"), "DigitalDocument", name)
            by_pos[int(c["position"])] = app
        self.assertEqual({p: (a.get("name"), a.get("url")) for p, a in by_pos.items()},
                         {p: (t, u) for p, (t, u, _) in exp["cites"].items()},
                         f"{name}: claims (position: name, url) of the Message thing")
        for p, (_, url, snippet) in exp["cites"].items():
            if snippet:
                self.assertEqual(by_pos[p].get("text"), snippet, f"{name}: text of claim {p}")
            elif not url:
                # Web Chat 4.18 renders a non-URL citation's modal with renderMarkdown(appearance.text):
                # a claim without "text" throws (TypeError ... reading 'replace') when clicked.
                self.assertIsInstance(by_pos[p].get("text"), str,
                                      f"{name}: non-URL claim {p} has no appearance.text: {by_pos[p]}")
        # reference definitions at the end of the text, one per position, agreeing with the claims
        defs = {}
        for line in text.split("\n"):
            m = DEF_RE.match(line)
            if m:
                defs[int(m.group(1))] = m.group(2)
        want = {p: (u if u else f"cite:{p}") for p, (_, u, _) in exp["cites"].items()}
        self.assertEqual(defs, want, f"{name}: Markdown link definitions in {text!r}")

    def check_rendering(self, name, exp, r):
        self.assertEqual(r["errors"], [], f"{name}: console errors / exceptions / network")
        ins = r["inspect"]
        n = len(exp["cites"])
        positions = sorted(exp["cites"])
        # the reference list under the message: one entry per distinct position
        self.assertEqual(ins["header"], f"{n} references" if n != 1 else "1 reference", name)
        self.assertEqual([d["badge"] for d in ins["definitions"]], [str(p) for p in positions],
                         f"{name}: reference list badges")
        for d, p in zip(ins["definitions"], positions):
            title, url, _ = exp["cites"][p]
            self.assertEqual(d["text"], title, f"{name}: title of reference {p}")
            self.assertEqual(d["title"], title, f"{name}: title attribute of reference {p}")
            if url:
                self.assertEqual((d["tag"], d["href"]), ("a", url), f"{name}: link of reference {p}")
            else:
                self.assertEqual((d["tag"], d["href"]), ("button", None), f"{name}: non-URL reference {p}")
        # the badges inside the text: one per reference occurrence
        got = [(b["tag"], b["text"], b["href"] if b["tag"] == "a" else b["value"]) for b in ins["inline"]]
        want = [("a", str(p), exp["cites"][p][1]) if exp["cites"][p][1] else ("button", str(p), f"cite:{p}")
                for p in exp["inline"]]
        self.assertEqual(got, want, f"{name}: citation badges in the text {ins['markdownText']!r}")
        for b in ins["inline"]:
            p = int(b["text"])
            title, url, _ = exp["cites"][p]
            if url:
                self.assertTrue((b["ariaLabel"] or "").startswith(f"{p} {title} "),
                                f"{name}: aria-label {b['ariaLabel']!r} of badge {p}")
            else:
                self.assertTrue(b["isCitation"], f"{name}: badge {p} is not a citation button")
        text = ins["markdownText"]
        for p in positions:
            self.assertNotIn(f"[{p}]", text, f"{name}: reference [{p}] shown as literal text: {text!r}")
        self.assertNotIn("cite:", text, f"{name}: link definitions shown as text")
        self.assertNotIn("]: ", text, f"{name}: link definitions shown as text")
        # non-URL citations open the citation modal with title and snippet
        non_url = [p for p in positions if not exp["cites"][p][1]]
        opened = {}
        for m in ins["modals"]:
            self.assertTrue(m["opened"], f"{name}: citation {m['label']} ({m['where']}) opened no modal")
            opened.setdefault(int(m["label"]), []).append(m)
        self.assertEqual(sorted(opened), non_url, f"{name}: citation buttons")
        texts = {int(c["position"]): c["appearance"].get("text") for c in self.outputs[name]["message"]["citation"]}
        for p, ms in opened.items():
            title, _, snippet = exp["cites"][p]
            snippet = snippet or texts.get(p)
            for m in ms:
                self.assertEqual(m["header"], title, f"{name}: modal title of citation {p}")
                # the claim text is Markdown: whitespace runs render as one space
                self.assertEqual(" ".join(m["body"].split()), " ".join((snippet or "").split()),
                                 f"{name}: modal text of citation {p}")
            self.assertIn("definition", [m["where"] for m in ms], f"{name}: citation {p} in the list")
            if p in exp["inline"]:
                self.assertIn("inline", [m["where"] for m in ms], f"{name}: citation {p} badge")

    def run_case(self, name):
        exp, out, r = self.case(name)
        self.check_citegate_output(name, exp, out)
        self.check_rendering(name, exp, r)

    # ------------------------------------------------------------------ tests
    def test_azure_stream(self):
        self.run_case("azure_oyd_stream")

    def test_azure_response(self):
        self.run_case("azure_oyd_response")

    def test_numeric_stream_with_request_sources(self):
        self.run_case("numeric_stream")

    def test_unicode_titles_and_abstracts(self):
        self.run_case("azure_unicode_response")


if __name__ == "__main__":
    unittest.main()
