#!/usr/bin/env python3
"""Profiles openwebui / openai / webchat / structured / markdown / off: `citegate filter` against
the independent reference model in oracle.py (SPEC §6-7 + the profile design notes).

  * the oracle itself reproduces the hand-written tests/fixtures/expected/*.openwebui.json;
  * the stored expected/profiles/<name>.<profile>.json files are what the oracle says;
  * every fixture x profile (and a few option variants) through citegate == oracle, plus
    checks that need no oracle: where the profile chunks sit, their id/created/model,
    openai annotation offsets (UTF-16), webchat Markdown definitions == entity, markdown
    Sources blocks well formed and the same position meaning the same source in every choice;
  * 300 random structured answers (as JSON bodies and as randomly split streams);
  * 300 random answers with references for openai / webchat / markdown (and openwebui);
  * 200 random answers whose chunks and bodies carry upstream "event" members in any
    spelling and number, with events of exactly, just over and far over max_event between
    their chunks (SPEC §6 rules 4 and 6);
  * SSE lines stay under 64 KiB when a profile has much to emit.

usage: test_profiles.py [CITEGATE_BIN] [unittest args]   (or CITEGATE_BIN in the environment)
       test_profiles.py --regen      rewrite tests/fixtures/expected/profiles/ from the oracle
PROFILES_SEED=N picks another random seed (the seed is printed with every random failure).
"""
import concurrent.futures
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle  # noqa: E402

TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
FIXTURES = os.path.join(TESTS, "fixtures")
EXPECTED = os.path.join(FIXTURES, "expected")
PEXPECTED = os.path.join(EXPECTED, "profiles")
BIN = None
SEED = int(os.environ.get("PROFILES_SEED", "20250911"))
FAILDIR = os.path.join(tempfile.gettempdir(), "citegate-profiles-failures")

# (fixture, request) relative to tests/fixtures
CASES = [
    ("azure_oyd_stream.sse", "chat_request.json"),
    ("azure_oyd_filters_crlf.sse", "chat_request.json"),
    ("azure_oyd_response.json", "chat_request.json"),
    ("azure_truncated.sse", "chat_request.json"),
    ("numeric_stream.sse", "openwebui_rag_request.json"),
    ("numeric_malformed.sse", "openwebui_rag_request.json"),
    ("perplexity_stream.sse", "chat_request.json"),
    ("structured_response.json", "structured_request.json"),
    ("profiles/azure_multi_choice.sse", "chat_request.json"),
    ("profiles/azure_unicode_response.json", "chat_request.json"),
    ("profiles/azure_late_context.sse", "profiles/azure_ds_request.json"),
    ("profiles/azure_truncated_refs.sse", "chat_request.json"),
    ("profiles/perplexity_response.json", "chat_request.json"),
    ("profiles/perplexity_search_results_stream.sse", "chat_request.json"),
    ("profiles/request_sources_stream.sse", "profiles/rag_request_rich.json"),
    ("profiles/request_sources_response.json", "profiles/rag_request_rich.json"),
    ("profiles/request_sources_no_done.sse", "profiles/rag_request_rich.json"),
    ("profiles/structured_stream.sse", "structured_request.json"),
    ("profiles/event_injection.sse", "chat_request.json"),
    ("profiles/openai_search_stream.sse", "chat_request.json"),
    ("profiles/openai_search_response.json", "chat_request.json"),
    ("profiles/openrouter_stream.sse", "chat_request.json"),
    ("profiles/annotations_flat_response.json", "chat_request.json"),
    ("profiles/deepseek_citation_stream.sse", "chat_request.json"),
]
# option variants: (fixture, request, options) -- checked against the oracle, no stored file
VARIANTS = [
    ("azure_oyd_stream.sse", "chat_request.json", {"max_doc_bytes": 10, "scores": False}),
    ("azure_oyd_stream.sse", "chat_request.json", {"ref_style": "numeric"}),
    ("numeric_stream.sse", "openwebui_rag_request.json", {"ref_style": "doc"}),
    ("profiles/azure_multi_choice.sse", "chat_request.json", {"max_doc_bytes": 4}),
    ("profiles/azure_unicode_response.json", "chat_request.json", {"ref_style": "numeric"}),
    ("profiles/request_sources_stream.sse", "profiles/rag_request_rich.json", {"max_doc_bytes": 50}),
    ("profiles/azure_late_context.sse", "chat_request.json", {"ref_style": "doc"}),
    ("profiles/deepseek_citation_stream.sse", "chat_request.json", {"ref_style": "numeric"}),
    ("profiles/deepseek_citation_stream.sse", "chat_request.json", {"ref_style": "citation"}),
    ("profiles/openrouter_stream.sse", "chat_request.json", {"ref_style": "citation", "max_doc_bytes": 9}),
    # a request with <source> tags: they win over annotations (SPEC §6, first match)
    ("profiles/openrouter_stream.sse", "openwebui_rag_request.json", {}),
    ("profiles/openai_search_response.json", "openwebui_rag_request.json", {}),
]
TRANSFORMING = ("openwebui", "openai", "webchat", "structured", "markdown")
STORED = ("openai", "webchat", "structured", "markdown")  # + openwebui for the fixtures under profiles/


def read(rel):
    with open(os.path.join(FIXTURES, rel), "rb") as f:
        return f.read()


def load_request(rel):
    return json.loads(read(rel)) if rel else None


def stem(rel):
    return os.path.basename(rel).rsplit(".", 1)[0]


# ------------------------------------------------------------------------------ running citegate

def run_citegate(body, profile, request_path=None, opts=None):
    """stdout of `citegate filter` (raises on a non-zero exit)."""
    opts = opts or {}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CITEGATE_", "AZURE_AI_"))}
    if "max_doc_bytes" in opts:
        env["CITEGATE_MAX_DOC_BYTES"] = str(opts["max_doc_bytes"])
    if opts.get("scores") is False:
        env["AZURE_AI_INCLUDE_SEARCH_SCORES"] = "false"
    if "max_event" in opts:
        env["CITEGATE_MAX_EVENT_BYTES"] = str(opts["max_event"])
    cmd = [BIN, "filter", "--profile", profile]
    if opts.get("ref_style"):
        cmd += ["--ref-style", opts["ref_style"]]
    if request_path:
        cmd += ["--request", request_path]
    p = subprocess.run(cmd, input=body, capture_output=True, timeout=30, env=env)
    if p.returncode != 0:
        raise RuntimeError("exit %d: %s" % (p.returncode, p.stderr.decode(errors="replace")[:500]))
    return p.stdout


def run_many(jobs):
    """jobs: [(body, profile, request_path, opts)] -> [stdout bytes or Exception]."""
    def one(j):
        try:
            return run_citegate(*j)
        except Exception as e:  # noqa: BLE001 -- reported by the caller
            return e
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as ex:
        return list(ex.map(one, jobs))


def oracle_opts(opts):
    return {k: opts[k] for k in ("ref_style", "max_doc_bytes", "scores", "max_event") if k in opts}


# ------------------------------------------------------------------------------ comparisons

def same(a, b):
    """JSON value equality; floats within 1e-9 (scores are computed, printing may differ)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-9
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def strip_json_strings(text):
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)


def top_members(text):
    """[(key, value text)] of a JSON object text, or None when the framing is not compact
    (whitespace around the braces, keys, colons or commas)."""
    dec, out, i = json.JSONDecoder(), [], 1
    if not (text.startswith("{") and text.endswith("}")):
        return None
    if text == "{}":
        return out
    while True:
        if text[i] != '"':
            return None
        key, j = dec.raw_decode(text, i)
        if text[j] != ":" or text[j + 1].isspace():
            return None
        _, k = dec.raw_decode(text, j + 1)
        out.append((key, text[j + 1:k]))
        if text[k] == "}" and k == len(text) - 1:
            return out
        if text[k] != ",":
            return None
        i = k + 1


def structured_equal(got, want, changed):
    """Structured content: the oracle's corrected object -- the same members in the same
    order, compact framing, "response" and "citations" compact (other members' values may
    keep their upstream formatting) -- or the content unchanged when it is not of the
    {response, citations} shape."""
    if not changed:
        return got == want
    try:
        g = json.loads(got, object_pairs_hook=lambda p: ("obj", p))
        members = top_members(got)
    except (ValueError, IndexError):
        return False
    w = json.loads(want, object_pairs_hook=lambda p: ("obj", p))
    return g == w and members is not None and all(
        not re.search(r"\s", strip_json_strings(v)) for k, v in members if k in ("response", "citations"))


def diff_views(got, want, structured_changed=None):
    """List of differences between a client view and the oracle's."""
    bad = []
    for k in oracle.COMPARED:
        if k == "content" and structured_changed is not None:
            if got["content"].keys() != want["content"].keys() or not all(
                    structured_equal(got["content"][i], want["content"][i], structured_changed.get(i))
                    for i in want["content"]):
                bad.append(k)
        elif not same(got[k], want[k]):
            bad.append(k)
    return ["%s:\n    want %s\n    got  %s" % (k, json.dumps(want[k], ensure_ascii=False),
                                                json.dumps(got[k], ensure_ascii=False)) for k in bad]


# ------------------------------------------------------------------------------ checks without oracle

ANN_TEXT = re.compile(r"\[(\[(?:doc|citation:)?[0-9]{1,4}\])\]\((.*)\)", re.S)
DEF_LINE = re.compile(r'\[([0-9]+)\]: (\S+) "((?:[^"\\]|\\.)*)"')


def unescape_def(s):
    return re.sub(r"\\(.)", r"\1", s)


def check_annotations(view, body):
    """openai: content16[start:end] == "[" + ref + "](" + url + ")" for every annotation of
    its own (the upstream's, forwarded unchanged, come first and are the upstream's)."""
    bad = []
    upstream = oracle.client_view(body)["annotations"]
    for idx, anns in view["annotations"].items():
        c16 = view["content"].get(idx, "").encode("utf-16-le")
        theirs = upstream.get(idx, [])
        if anns[:len(theirs)] != theirs:
            bad.append("choice %s: the upstream's annotations are not forwarded first, unchanged" % idx)
        for a in anns[len(theirs):]:
            u = a.get("url_citation", {})
            s, e = u.get("start_index"), u.get("end_index")
            if a.get("type") != "url_citation" or not isinstance(s, int) or not isinstance(e, int):
                bad.append("malformed annotation %r" % a)
                continue
            piece = c16[2 * s:2 * e].decode("utf-16-le", errors="replace")
            m = ANN_TEXT.fullmatch(piece)
            if not m or m.group(2) != u.get("url"):
                bad.append("choice %s: content16[%d:%d] = %r does not match %r"
                           % (idx, s, e, piece, "[[ref]](%s)" % u.get("url")))
    return bad


def check_webchat(view):
    """webchat: definitions in the content and the entity agree; every [P] resolves."""
    bad = []
    claims = view["entities"][0]["citation"] if view["entities"] else []
    by_pos = {c["position"]: c["appearance"] for c in claims}
    if [c["position"] for c in claims] != [str(p) for p in range(1, len(claims) + 1)]:
        bad.append("claim positions not 1..n: %r" % [c["position"] for c in claims])
    for idx, content in view["content"].items():
        _, sep, defs = content.rpartition("\n\n")
        lines = defs.split("\n") if sep else []
        if not lines or not all(DEF_LINE.fullmatch(x) for x in lines):
            continue  # no definitions block in this choice
        seen = []
        for line in lines:
            p, target, text = DEF_LINE.fullmatch(line).groups()
            seen.append(int(p))
            app = by_pos.get(p)
            if app is None:
                bad.append("choice %s: definition [%s] has no claim" % (idx, p))
                continue
            if target.startswith("cite:"):
                if target != "cite:" + p or "url" in app or unescape_def(text) != \
                        re.sub(r"[\r\n\t]", " ", app["abstract"]):
                    bad.append("choice %s: %r disagrees with claim %r" % (idx, line, app))
            elif target != app.get("url") or unescape_def(text) != re.sub(r"[\r\n\t]", " ", app["name"]):
                bad.append("choice %s: %r disagrees with claim %r" % (idx, line, app))
        if seen != sorted(set(seen)):
            bad.append("choice %s: definitions not ascending/unique: %r" % (idx, seen))
    return bad


SOURCES_HEAD = "\n\n**Sources**\n"
SOURCE_LINE = re.compile(r"([0-9]+)\. (?:\[((?:[^\\\[\]]|\\.)*)\]\(([^\s()<>]+)\)|((?:[^\\\[\]]|\\.)*))")
MD_SPECIAL = set("\\`*_[]<>")


def check_markdown(view):
    """markdown: each choice's Sources block (if any) is the last thing in its content, its
    lines `N. [TITLE](URL)` / `N. TITLE` with N ascending and every special character of
    TITLE escaped; a position names the same title and URL in every choice."""
    bad, seen = [], {}
    for idx, content in view["content"].items():
        _, sep, block = content.rpartition(SOURCES_HEAD)
        if not sep:
            continue
        nums = []
        for line in re.split(r"\n(?=[0-9]+\. )", block):  # a TITLE may hold a line break
            m = SOURCE_LINE.fullmatch(line)
            if not m:
                bad.append("choice %s: Sources line %r is malformed" % (idx, line))
                continue
            n, title = int(m.group(1)), m.group(2) if m.group(3) else m.group(4)
            plain = re.sub(r"\\(.)", r"\1", title)
            if re.sub(r"\\.", "", title) and set(re.sub(r"\\.", "", title)) & MD_SPECIAL:
                bad.append("choice %s: unescaped special character in %r" % (idx, line))
            nums.append(n)
            if seen.setdefault(n, (plain, m.group(3))) != (plain, m.group(3)):
                bad.append("position %d is %r here, %r elsewhere" % (n, (plain, m.group(3)), seen[n]))
        if nums != sorted(set(nums)):
            bad.append("choice %s: Sources positions not ascending/unique: %r" % (idx, nums))
    return bad


def oracle_pairs(data):
    """Top-level members of an event's JSON object data, duplicates included; [] if none."""
    try:
        o = oracle.loads_pairs(data)
    except ValueError:
        return []
    return o.pairs if isinstance(o, dict) else []


def sse_objects(out):
    """[(data, obj or None)] of citegate's SSE output."""
    res = []
    for _, data in oracle.sse_events(out.decode("utf-8")):
        try:
            res.append((data, json.loads(data)))
        except ValueError:
            res.append((data, None))
    return res


def check_stream_shape(out, profile, want):
    """Profile chunks come right before [DONE] / the error event, carry the stream's
    id/created/model and "object":"chat.completion.chunk"; no upstream `event` key survives."""
    bad = []
    evs = sse_objects(out)
    if want["end"] in ("done", "error"):
        if not evs:
            return ["no events"]
        evs = evs[:-1]
    meta = want["meta"]

    def meta_ok(o):
        return (o.get("object") == "chat.completion.chunk"
                and all(o.get(k) == meta[k] for k in ("id", "created", "model") if meta[k] is not None))

    if profile == "openwebui":
        n = want["own_sources"]
        tail = evs[len(evs) - n:] if n else []
        if any(not (o and isinstance(o.get("event"), dict) and o["event"].get("type") == "source"
                    and o.get("choices") == [] and meta_ok(o)) for _, o in tail):
            bad.append("the %d source chunks are not the last events before the end, with id/"
                       "created/model/object of the stream and choices []" % n)
        evs = evs[:len(evs) - n] if n else evs
    elif profile == "openai" and (want["own_annotations"] or want["citations"]):
        _, o = evs[-1] if evs else (None, None)
        idx = [c.get("index") for c in (o or {}).get("choices", [])]
        if not (o and meta_ok(o) and idx == sorted(idx)
                and all(set(c.get("delta", {})) == {"annotations"} for c in o.get("choices", []))):
            bad.append("the annotations chunk is not the last event before the end: %r" % (o,))
        evs = evs[:-1]
    elif profile == "webchat" and want["entities"]:
        _, o = evs[-1] if evs else (None, None)
        if not (o and meta_ok(o) and o.get("choices") == [] and "entities" in o):
            bad.append("the entities chunk is not the last event before the end: %r" % (o,))
        defs = want["defs"]
        got_defs = {}
        for _, d in evs[-1 - len(defs):-1]:
            for c in (d or {}).get("choices", []):
                got_defs[str(c.get("index"))] = c.get("delta", {}).get("content")
            if not (d and meta_ok(d)):
                bad.append("definitions chunk without the stream's id/created/model: %r" % (d,))
        if got_defs != defs:
            bad.append("definitions chunks before the entity: want %r got %r" % (defs, got_defs))
        evs = evs[:-1 - len(defs)]
    elif profile == "markdown" and want["defs"]:
        # The Sources blocks: content-only chunks of our own, in choice order, each block in
        # one chunk unless it is too long for one line.
        defs, got_defs, n = want["defs"], {}, 0
        for _, d in reversed(evs):
            chs = d.get("choices") if isinstance(d, dict) else None
            if got_defs == defs or not (meta_ok(d) and isinstance(chs, list) and len(chs) == 1
                                        and set(chs[0].get("delta") or {}) == {"content"}):
                break
            i = str(chs[0].get("index"))
            got_defs[i] = chs[0]["delta"]["content"] + got_defs.get(i, "")
            n += 1
        if got_defs != defs:
            bad.append("Sources chunks before the end: want %r got %r" % (defs, got_defs))
        evs = evs[:len(evs) - n]
    elif profile == "structured":
        pieces = {}
        for _, o in evs:
            for c in (o or {}).get("choices", []) if isinstance(o, dict) else []:
                d = c.get("delta") if isinstance(c, dict) and isinstance(c.get("delta"), dict) else {}
                if isinstance(d.get("content"), str):
                    pieces.setdefault(str(c.get("index")), []).append(d["content"])
        for idx, ps in pieces.items():
            if not want["shaped"].get(idx):
                continue  # not of the shape: events go through as they are
            if any(ps[1:]):
                bad.append("choice %s: the corrected content is not all in the first content event: %r"
                           % (idx, ps[:4]))
    if profile != "off" and not want.get("passthrough"):
        passed = set(want.get("oversized", []))  # forwarded unchanged (rule 6)
        for data, o in evs:
            if data not in passed and any(k == "event" for k, _ in oracle_pairs(data)):
                bad.append("upstream top-level event key not removed: %s" % data[:200])
    return bad


def check_body_shape(body, out, profile, want):
    """JSON bodies: everything but the content, upstream "event" members and the profile's
    own members is kept, in order; openai's "annotations" is the message's last member."""
    pairs = lambda p: ("obj", p)  # noqa: E731 -- keeps member order and duplicates
    try:
        a, b = json.loads(body, object_pairs_hook=pairs), json.loads(out, object_pairs_hook=pairs)
    except ValueError as e:
        return ["output is not JSON: %s" % e]
    bad = []
    added_root = {"openwebui": {"sources"}, "openai": {"citations"}, "webchat": {"entities"}}.get(profile, set())
    if profile == "openai" and any(k == "citations" for k, _ in a[1]):
        added_root = set()  # an existing "citations" member is left alone

    def strip(o, root):
        out_pairs = []
        for k, v in o[1]:
            if root and (k in added_root or k == "event"):  # rule 4 removes upstream ones
                continue
            if root and k == "choices" and isinstance(v, list):
                v = [("obj", [(ck, ("obj", [(mk, mv) for mk, mv in cv[1] if mk != "content"
                                             and not (profile == "openai" and mk == "annotations")])
                               if ck == "message" and isinstance(cv, tuple) else cv)
                              for ck, cv in c[1]]) if isinstance(c, tuple) else c for c in v]
            out_pairs.append((k, v))
        return ("obj", out_pairs)

    if strip(a, True) != strip(b, True):
        bad.append("members other than the content/profile members changed")
    if profile == "openai":
        def message_keys(o):
            out = []
            for k, v in o[1]:
                for ch in v if k == "choices" and isinstance(v, list) else []:
                    msg = dict(ch[1]).get("message") if isinstance(ch, tuple) else None
                    out.append([mk for mk, _ in msg[1]] if isinstance(msg, tuple) else [])
            return out
        for before, keys in zip(message_keys(a), message_keys(b)):
            # an upstream "annotations" member stays where it is; one of ours comes last
            if "annotations" in keys and "annotations" not in before and keys[-1] != "annotations":
                bad.append("annotations is not the message's last member: %r" % keys)
    return bad


def check_output(body, request, profile, opts, out, shaped):
    """What is wrong with citegate's output `out` for answer body (the oracle's view of it,
    the stream's or body's shape, the profile's own rules); shaped: hold structured's
    corrected events to the oracle's (diff_views)."""
    want = oracle.expected_view(body, request, profile, **oracle_opts(opts))
    got = oracle.client_view(out)
    bad = diff_views(got, want, want["shaped"] if shaped else None)
    if want["end"] != "body":
        bad += check_stream_shape(out, profile, want)
    else:
        bad += check_body_shape(body, out, profile, want)
    if profile == "openai":
        bad += check_annotations(got, body)
    if profile == "webchat":
        bad += check_webchat(got)
    if profile == "markdown":
        bad += check_markdown(got)
    return bad


# ------------------------------------------------------------------------------ random answers

WORDS = ["the", "X200", "café", "naïve", "😀", "𝄞", "日本語", "charge", "quick", "—", '"quoted"',
         "back\\slash", "a/b", "(paren)", "<tag>", "50%", "\n", "\t", "👍🏽", "é"]
NOISE = ["[", "]", "[doc", "[x]", "[12345]", "[doc12345]", "[ 1]", "[-1]", "[1.5]", "[doc]", "[[", "]]",
         "[d", "[do", "[citation:", "[citation:12345]", "[citation]", "[Citation:1]", "[citat"]


def rand_url(rng):
    return rng.choice(["https://docs.example.com/a/%s.pdf" % rng.choice(["x", "guide v2", "café"]),
                       "HTTP://example.org/p(1)/<q>.html?x=1&y=2", "https://ex.com/wiki/Some_Page",
                       "https://ex.com/dir/file%20name.md#frag", "http://h.example/a b"])


def rand_text(rng, lo, hi):
    return rng.choice(["", " ", "  "]).join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def rand_snippet(rng):
    k = rng.random()
    if k < 0.15:
        return ""
    if k < 0.35:
        return ("Long   snippet\twith  whitespace\nruns é😀 " + "word%d " % rng.randint(0, 9)) * rng.randint(8, 20)
    if k < 0.45:
        return "x" * 230  # no space to cut back to
    return rand_text(rng, 1, 12)


def rand_title(rng):
    return rng.choice(["", "", "Plain Title", 'Title "with" quotes \\ and backslash', "Tab\there\nnewline",
                       "Ünïcode 😀 title", None])


def rand_azure_citation(rng, i):
    url = rng.choice([None, None, rand_url(rng), "ftp://not.http/x.txt", ""])
    fp = rng.choice([None, "docs/file%d.pdf" % i, "https://files.example.com/f%d.pdf" % i, "dir/sub dir/n%d.txt" % i])
    return {"content": rand_snippet(rng), "title": rand_title(rng), "url": url, "filepath": fp,
            "chunk_id": rng.choice([None, "", str(i), "c%d" % rng.randint(0, 3)])}


def rand_retrieved(rng, cits):
    docs = []
    for c in cits:
        k = rng.random()
        d = dict(c)
        if k < 0.25:
            continue
        if k < 0.4:
            d["filepath"] = None  # match on title+chunk or content
        elif k < 0.5:
            d["title"], d["filepath"] = None, None  # match on content only
        elif k < 0.55:
            d["title"], d["filepath"] = None, None  # the first 100 bytes only
            d["content"] = (c["content"] or "").encode("utf-8")[:100].decode("utf-8", "ignore") + " (more)"
        if rng.random() < 0.5:
            d["rerank_score"] = rng.choice([0.5, 2.0, 3.25, 4.5])
        if rng.random() < 0.8:
            d["original_search_score"] = rng.choice([0.25, 0.75, 12.5, 42.0, 180.0])
        docs.append(d)
    rng.shuffle(docs)
    return docs


def rand_perplexity(rng, n):
    urls = ["https://site%d.example.com/page/%s" % (i, rng.choice(["a", "b%20c", "d_(e)"])) for i in range(n)]
    srs = [{"title": rand_title(rng) or "T%d" % i, "url": u, "date": None, "snippet": rand_snippet(rng)}
           for i, u in enumerate(urls)]
    top = {"search_results": srs}
    if rng.random() < 0.8:
        top["citations"] = urls
    return top


def rand_request_sources(rng, n):
    ids = rng.sample(range(1, 12), n)
    tags = []
    for i in ids:
        name = rng.choice(["https://kb.example.com/wiki/Page_%d" % i, "notes %d.md" % i, "back\\slash %d" % i,
                           "http://x.example/a b/%d.txt" % i])
        text = rand_snippet(rng).replace("<", "(").replace(">", ")")
        tags.append('<source id="%d" name="%s">%s</source>' % (i, name, text))
    sysmsg = ("Cite with [id] when the <source> tag has an id (e.g., <source id=\"1\">).\n<context>\n"
              + "\n".join(tags) + "\n</context>")
    return {"model": "m", "stream": True, "messages": [{"role": "system", "content": sysmsg},
                                                       {"role": "user", "content": "q?"}]}, ids


def rand_answer(rng, ncit, style_ids, doc_bias, cit_bias=0.0):
    """Content with references [docN], [N] and [citation:N] (N from style_ids + out of
    range), adjacency, repeats and noise."""
    toks = []
    for _ in range(rng.randint(1, 14)):
        k = rng.random()
        if k < 0.35:
            toks.append(rand_text(rng, 1, 4))
        elif k < 0.8:
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                n = rng.choice(style_ids + [0, ncit + 1, 99, 9999])
                fmt = rng.choice(["%d", "%d", "%d", "%02d", "%04d"])
                k = rng.random()
                pre = "[doc" if k < doc_bias else "[citation:" if k < doc_bias + cit_bias else "["
                toks.append((pre + fmt + "]") % n)
        else:
            toks.append(rng.choice(NOISE))
    return "".join(t + rng.choice(["", " ", " ", "\n"]) for t in toks)


def split_text(rng, s):
    """Random pieces of s, cutting inside references often."""
    cuts = set()
    for m in re.finditer(r"\[", s):
        if rng.random() < 0.3:
            cuts.add(m.start() + rng.randint(0, 6))
    for _ in range(rng.randint(0, 4)):
        cuts.add(rng.randint(0, len(s)))
    cuts = sorted(c for c in cuts if 0 < c < len(s))
    return [s[a:b] for a, b in zip([0] + cuts, cuts + [len(s)])]


def build_stream(rng, contents, top_every=None, context=None, late_at=None, meta=None, crlf=False,
                 ending="done", first_top=None, mangle=None, extra=None, tail=None, anns=None,
                 anns_alone=False, varying=False):
    """SSE body for {idx: content}. top_every: members added to every chunk from event late_at
    on (Perplexity); context: Azure context put on choice 0's delta at event late_at;
    anns: [(idx, annotations)], each batch put on a random event's delta of that choice, or
    (anns_alone) in an event of its own.
    mangle(data): rewrites each chunk's JSON text; extra(nl): events (lists of lines) to put
    after a chunk; tail: what a truncated stream ends with. varying: every chunk ends with
    members whose values change from chunk to chunk, as OpenAI's "obfuscation" padding and
    a sequence number do; now and then one is not valid JSON (the chunk is then malformed)."""
    meta = meta or {"id": "chatcmpl-R", "created": 1757800000, "model": "gpt-r"}
    pieces = {i: split_text(rng, c) for i, c in contents.items()}
    events = [[(i, {"role": "assistant"}) for i in contents]]
    while any(pieces.values()):
        live = [i for i in pieces if pieces[i]]
        picked = rng.sample(live, min(len(live), rng.choice([1, 1, 1, 2])))
        events.append([(i, {"content": pieces[i].pop(0)}) for i in picked])
    late_at = min(late_at or 0, len(events) - 1)
    if context is not None:
        first = sorted(contents)[0]
        for i, d in events[late_at]:
            if i == first:
                d["context"] = context
                break
        else:
            events[late_at].append((first, {"context": context}))
    for idx, batch in anns or []:
        if anns_alone:
            events.insert(rng.randint(1, len(events)), [(idx, {"annotations": batch})])
            continue
        ev = events[rng.randrange(len(events))]
        d = next((d for i, d in ev if i == idx), None)
        if d is None:
            ev.append((idx, {"annotations": batch}))
        else:
            d["annotations"] = batch
    finishes = [[(i, None)] for i in contents]
    out = []
    nl = {False: "\n", True: "\r\n"}.get(crlf, crlf)
    for n, ev in enumerate(events + finishes):
        fin = n >= len(events)
        o = dict(meta)
        if n == 0 and first_top:
            o.update(first_top)
        if top_every is not None and late_at <= n:
            o.update(top_every)
        o["object"] = "chat.completion.chunk"
        if fin and ending == "truncated":
            break
        o["choices"] = [{"index": int(i), "delta": d or {}, "finish_reason": "stop" if fin else None}
                        for i, d in ev]
        if varying:
            o["obfuscation"] = "".join(rng.choice('ab9Z"\\é/ ') for _ in range(rng.randint(0, 12)))
            o["seq"] = rng.choice([n, -n, n + 0.5, n * 1e20, 0])
        data = json.dumps(o, ensure_ascii=rng.random() < 0.3)
        if varying and rng.random() < 0.1:
            data = rng.choice([data.replace('"seq": ', '"seq": 0', 1),
                               data.replace('"obfuscation": "', '"obfuscation": "\\q', 1)])
        if mangle:
            data = mangle(data)
        k = rng.random()
        if k < 0.05:  # the JSON spread over two data lines (joined with "\n": still JSON)
            cut = data.index('"choices"')
            out.append(["data: " + data[:cut], "data: " + data[cut:]])
        elif k < 0.1:
            out.append(["id: ev%d" % n, "event: message", "data: " + data])
        else:
            out.append(["data: " + data])
        if extra:
            out += extra(nl)
        k = rng.random()
        if k < 0.05:
            out.append([": keep-alive"])
        elif k < 0.08:
            out.append(["event: ping", "data: {}"])
        elif k < 0.1:
            out.append(["data: {not json"])
    text = "".join(nl.join(lines) + nl + nl for lines in out)
    if ending == "done":
        text += "data: [DONE]" + nl + nl
    elif ending == "truncated" and (tail or rng.random() < 0.5):
        text += tail or 'data: {"id":"x","choices":[{"index":0,"delta":{"content":"[doc1]'  # incomplete
    return text.encode("utf-8")


def build_body(rng, contents, top=None, context=None, anns=None):
    chs = []
    for i, c in contents.items():
        msg = {"role": "assistant", "content": c}
        for idx, batch in anns or []:
            if idx == i:
                msg.setdefault("annotations", []).extend(batch)
        chs.append({"index": int(i), "finish_reason": "stop", "message": msg})
    if context is not None:
        chs[rng.randrange(len(chs))]["message"]["context"] = context
    o = {"id": "chatcmpl-B", "object": "chat.completion", "created": 1757800001, "model": "gpt-b"}
    o.update(top or {})
    o["choices"] = chs
    o["usage"] = {"total_tokens": 1}
    return json.dumps(o, ensure_ascii=rng.random() < 0.3, indent=rng.choice([None, 1])).encode("utf-8")


def rand_annotations(rng, ncit, idxs):
    """[(choice idx, annotations)]: url_citations of ncit urls (repeated, across choices),
    nested or flat (url and title at the top level), with or without title and content;
    and ones that add nothing: no url, another type, not an object."""
    urls = ["https://s%d.example.com/%s" % (i, rng.choice(["a", "page (2).html", "c%20d", "e?x=1"]))
            for i in range(ncit)]
    batches = []
    for _ in range(rng.randint(1, 4)):
        batch = []
        for _ in range(rng.randint(1, 4)):
            k = rng.random()
            if k < 0.08:
                batch.append(rng.choice([{"type": "file_citation", "file_citation": {"file_id": "f"}},
                                         {"type": "url_citation", "url_citation": {"title": "no url"}},
                                         {"type": "url_citation", "url_citation": {"url": ""}}, 7, None]))
                continue
            uc = {"url": rng.choice(urls) if k > 0.12 else "www.example.com/relative"}
            if rng.random() < 0.7:
                uc["title"] = rand_title(rng)
            if rng.random() < 0.4:
                uc["content"] = rand_snippet(rng)
            uc["start_index"], uc["end_index"] = 0, rng.randint(0, 9)
            if rng.random() < 0.25:
                batch.append(dict(uc, type="url_citation"))  # the flat form
            else:
                batch.append({"type": "url_citation", "url_citation": uc})
        batches.append((rng.choice(idxs), batch))
    return batches


def rand_ref_case(rng, stream_extras=None):
    """(body, request, opts) with 1-5 choices of random answers. stream_extras(contents):
    more arguments for build_stream."""
    kind = rng.choice(["azure", "azure", "perplexity", "request", "annotations"])
    streaming = rng.random() < 0.7
    ncit = rng.randint(1, 5)
    request, opts = {"messages": [{"role": "user", "content": "q"}]}, {}
    late = streaming and rng.random() < 0.4
    if kind == "request":
        request, ids = rand_request_sources(rng, ncit)
        ids_style = ids
    else:
        ids_style = list(range(1, ncit + 1))
        if kind == "azure" and late:
            if rng.random() < 0.5:
                request["data_sources"] = [{"type": "azure_search", "parameters": {}}]
            else:
                opts["ref_style"] = "doc"
    if rng.random() < 0.1:
        opts["ref_style"] = rng.choice(["doc", "numeric", "citation"])
    if rng.random() < 0.15:
        opts["max_doc_bytes"] = rng.choice([1, 7, 64])
    if rng.random() < 0.1:
        opts["scores"] = False
    nch = rng.choice([1, 1, 1, 2, 3, 5])
    doc_bias = 0.75 if kind == "azure" else 0.25
    # DeepSeek / Higress write [citation:N]: mostly that form, or a mix that auto must decide.
    cit_bias = rng.choice([0.0, 0.0, 0.6, 0.3]) if kind != "azure" else rng.choice([0.0, 0.0, 0.1])
    contents = {str(i): rand_answer(rng, ncit, ids_style, doc_bias, cit_bias) for i in rng.sample(range(6), nch)}
    context = top = None
    # url_citation annotations: the source of their own kind, or (ignored unless they come
    # first) alongside the others
    anns = rand_annotations(rng, ncit, sorted(contents)) \
        if kind == "annotations" or rng.random() < 0.25 else None
    if kind == "azure":
        cits = [rand_azure_citation(rng, i) for i in range(ncit)]
        context = {"citations": cits, "intent": "[]"}
        if rng.random() < 0.8:
            context["all_retrieved_documents"] = rand_retrieved(rng, cits)
    elif kind == "perplexity":
        top = rand_perplexity(rng, ncit)
    if streaming:
        body = build_stream(rng, contents, top_every=top, context=context,
                            late_at=rng.randint(1, 3) if late else 0, crlf=rng.choice(["\n"] * 6 + ["\r\n", "\r"]),
                            ending=rng.choice(["done"] * 8 + ["truncated", "finish_only"]),
                            meta=rng.choice([None, {"id": "", "created": 0, "model": ""}]),
                            first_top=None, anns=anns, varying=rng.random() < 0.5,
                            **(stream_extras(contents) if stream_extras else {}))
    else:
        body = build_body(rng, contents, top=top, context=context, anns=anns)
    return body, request, opts


# ---- structured

def rand_tool_request(rng):
    msgs, tools = [{"role": "user", "content": "Summarise"}], []
    for t in range(rng.randint(1, 3)):
        docs = [{"path": "/t%d/doc%d.pdf" % (t, d),
                 "fields": [{"name": "f%d" % f, "value": rng.choice(["1,200 EUR", "café", "😀 ok", 'say "hi"']),
                             "bounding_boxes": "D(%d,%d.5,%d)" % (t, d, f)} for f in range(rng.randint(1, 3))]}
                for d in range(rng.randint(1, 3))]
        kind = rng.random()
        if kind < 0.6:
            content = json.dumps({"collection": "C-%d" % t, "documents": docs})
        elif kind < 0.8:
            content = "\n".join("%s: %s" % (d["path"], f["bounding_boxes"]) for d in docs for f in d["fields"]) \
                + '\nField "total" = 1,200 EUR'
        else:
            text = json.dumps(docs)
            content = [{"type": "text", "text": text[:len(text) // 2]},
                       {"type": "text", "text": text[len(text) // 2:]}]
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_%d" % t, "type": "function", "function": {"name": "get", "arguments": "{}"}}]})
        msgs.append({"role": "tool", "tool_call_id": "call_%d" % t, "content": content})
        tools.append(docs)
    return {"messages": msgs}, tools


def rand_structured_answer(rng, tools):
    cits = []
    for _ in range(rng.randint(0, 6)):
        t = rng.randrange(len(tools))
        d = rng.choice(tools[t])
        f = rng.choice(d["fields"])
        k = rng.random()
        if k < 0.45:
            cits.append([d["path"], f["bounding_boxes"]])
        elif k < 0.5:
            cits.append([d["path"][:-4], f["bounding_boxes"][:6]])  # substrings: valid
        elif k < 0.6 and len(tools) > 1:
            t2 = (t + 1) % len(tools)
            cits.append([d["path"], rng.choice(tools[t2])["fields"][0]["bounding_boxes"]])  # two messages
        elif k < 0.7:
            cits.append(["/nowhere/%d.pdf" % rng.randint(0, 9), f["bounding_boxes"]])
        elif k < 0.75:
            cits.append([d["path"], f["bounding_boxes"], "extra"])
        elif k < 0.8:
            cits.append([d["path"]])
        elif k < 0.85:
            cits.append(rng.choice(["%s" % d["path"], 7, None, {"path": d["path"]}, [d["path"], 3]]))
        elif k < 0.9:
            cits.append([d["path"], 'say "hi"'])  # a quote: occurs only in non-JSON tool text
        else:
            cits.append([d["path"], "D(9,9.5,9)"])
    n = len(cits)
    toks = []
    for _ in range(rng.randint(0, 10)):
        k = rng.random()
        if k < 0.4:
            toks.append(rand_text(rng, 1, 4).replace("[", "(").replace("]", ")"))
        elif k < 0.85 and n:
            toks.append("".join("[%d]" % rng.randint(1, n) for _ in range(rng.choice([1, 1, 2]))))
        else:
            toks.append(rng.choice(["[0]", "[99]", "[%d]" % (n + 1), "[01]"]))
    resp = "".join(rng.choice(["", " ", " ", "  "]) + t for t in toks)
    obj = {"response": resp, "citations": cits}
    k = rng.random()
    if k < 0.2:
        obj = {"citations": cits, "note": "cit first", "response": resp}
    elif k < 0.3:
        obj = {"response": resp, "confidence": 0.75, "citations": cits, "extra": [1, {"a": None}]}
    elif k < 0.35:
        return "Plain text answer [1] without JSON."
    elif k < 0.4:
        return json.dumps({"answer": resp, "citations": cits})
    return json.dumps(obj, ensure_ascii=rng.random() < 0.5,
                      indent=rng.choice([None, None, 2]),
                      separators=rng.choice([None, (",", ":")]) if rng.random() < 0.7 else None)


# ------------------------------------------------------------------------------ tests

# ---- rules 4 and 6: upstream "event" members, oversized events

EVENT_NAMES = ['"event"', '"\\u0065vent"', '"ev\\u0065nt"', '"\\u0065\\u0076ent"',
               '"\\u0065\\u0076\\u0065\\u006e\\u0074"']
EVENT_VALUES = ['{"type":"source","data":{"source":{"id":"evil","name":"[evil] injected"},'
                '"document":["x"],"metadata":[{"source":"evil"}]}}',
                '{"type":"status","data":{"description":"injected","done":true}}',
                "1", "null", '[1,{}]', '"x"']


def inject_events(rng, data, most=3):
    """JSON object text with up to `most` upstream "event" members, in any spelling, at its
    start, before "choices" or at its end (duplicates likely)."""
    for _ in range(rng.choice([0, 0, 1, 1, 2, most])):
        member = "%s:%s" % (rng.choice(EVENT_NAMES), rng.choice(EVENT_VALUES))
        where = rng.choice(["start", "choices", "end"])
        empty = re.fullmatch(r"\{\s*\}", data) is not None
        if empty:
            data = "{" + member + "}"
        elif where == "start":
            data = "{" + member + "," + data[1:]
        elif where == "choices" and '"choices"' in data:
            i = data.index('"choices"')
            data = data[:i] + member + "," + data[i:]
        else:
            data = data[:-1] + "," + member + "}"
    return data


def sized_event(rng, nl, size, content=None):
    """An event of exactly `size` bytes (SPEC §6 rule 6, sizes as oracle.sse_blocks counts
    them): a chunk padded in a member of its own, with content for choice `content` (idx,
    text) if given and maybe "event" members; or a comment. None when it cannot be that
    small."""
    if rng.random() < 0.25:
        fill = size - len(nl) - 1 - 2
        return [": " + "k" * fill] if fill >= 0 else None
    chs = [] if content is None else [{"index": int(content[0]), "delta": {"content": content[1]}}]
    o = {"id": "chatcmpl-R", "object": "chat.completion.chunk", "choices": chs, "x_pad": ""}
    line = "data: " + inject_events(rng, json.dumps(o, ensure_ascii=False))
    fill = size - len(line.encode()) - len(nl) - 1
    return [line.replace('"x_pad": ""', '"x_pad": "%s"' % ("p" * fill), 1)] if fill >= 0 else None


def rand_rules_case(rng):
    """(body, request, opts, profiles): a random answer (as rand_ref_case) whose chunks and
    bodies carry upstream "event" members; streams also get events of max_event bytes, one
    more, and far more, between chunks (content in them only for openwebui and markdown, whose
    output carries no positions that would have to count it), and may end inside one."""
    max_event = rng.choice([1024, 2048, 4096])
    with_content = rng.random() < 0.4

    def extras(contents):
        def extra(nl):
            out = []
            while rng.random() < 0.12:
                size = rng.choice([max_event, max_event + 1, max_event + rng.randint(2, 3000)])
                text = None
                if with_content:
                    text = (rng.choice(sorted(contents)), rng.choice(["[doc1] big ", "[1] big", "] [", "x"]))
                ev = sized_event(rng, nl, size, text)
                if ev:
                    out.append(ev)
            return out
        tail = None
        if rng.random() < 0.5:  # used when the stream is truncated
            tail = 'data: {"choices":[{"index":0,"delta":{"content":"' + "t" * (max_event + 10)
        # annotations in chunks of their own: one with content could pass max_event, and
        # content that goes through unchanged is counted by no profile (see above)
        return {"mangle": lambda d: inject_events(rng, d), "extra": extra, "tail": tail,
                "anns_alone": True}

    body, request, opts = rand_ref_case(rng, extras)
    opts["max_event"] = max_event
    if oracle.is_json_body(body):
        body = inject_events(rng, body.decode("utf-8"), 5).encode("utf-8")
        return body, request, opts, ["openwebui", "openai", "webchat", "structured", "markdown"]
    # A chunk can pass max_event by itself too (a late Azure context on a chunk with content).
    with_content = with_content or oversized_content(body, max_event)
    profiles = ["openwebui", "markdown"] if with_content else ["openwebui", "openai", "webchat", "markdown"]
    if rng.random() < 0.3:
        profiles.append("structured")
    return body, request, opts, profiles


def oversized_content(body, max_event):
    """Whether an event over max_event carries content (which then goes through unchanged)."""
    for data, size, _ in oracle.sse_blocks(body):
        if size > max_event and data is not None:
            try:
                obj = json.loads(data)
            except ValueError:
                continue
            chs = obj.get("choices") if isinstance(obj, dict) else None
            for ch in chs if isinstance(chs, list) else []:
                d = ch.get("delta") if isinstance(ch, dict) else None
                if isinstance(d, dict) and isinstance(d.get("content"), str) and d["content"]:
                    return True
    return False


def save_failure(tag, body, request):
    os.makedirs(FAILDIR, exist_ok=True)
    b = os.path.join(FAILDIR, tag + ".body")
    with open(b, "wb") as f:
        f.write(body)
    r = None
    if request is not None:
        r = os.path.join(FAILDIR, tag + ".request.json")
        with open(r, "w", encoding="utf-8") as f:
            json.dump(request, f, ensure_ascii=False)
    return b, r


class T1OracleSelfCheck(unittest.TestCase):
    """The oracle reproduces the hand-written expected files (validates the oracle)."""

    def test_given_openwebui_expected(self):
        for name in sorted(os.listdir(EXPECTED)):
            if not name.endswith(".json"):
                continue
            with self.subTest(expected=name):
                with open(os.path.join(EXPECTED, name), encoding="utf-8") as f:
                    exp = json.load(f)
                v = oracle.expected_view(read(exp["fixture"]), load_request(exp.get("request")),
                                         exp.get("profile", "openwebui"))
                self.assertEqual(v["content"], exp["content"])
                self.assertTrue(same(v["sources"], exp["sources"]))
                if "ends_with_done" in exp:
                    self.assertEqual(v["end"] == "done", exp["ends_with_done"])
                    self.assertEqual(v["end"] == "error", exp["ends_with_error_event"])

    def test_stored_profile_expectations_are_the_oracles(self):
        want = expected_files()
        have = sorted(n for n in os.listdir(PEXPECTED) if n.endswith(".json"))
        self.assertEqual(have, sorted(want), "run test_profiles.py --regen")
        for name, (fixture, request, profile) in want.items():
            with self.subTest(expected=name):
                with open(os.path.join(PEXPECTED, name), encoding="utf-8") as f:
                    exp = json.load(f)
                self.assertEqual((exp["fixture"], exp["request"], exp["profile"]), (fixture, request, profile))
                self.assertEqual(exp, stored_expectation(fixture, request, profile))


def expected_files():
    out = {}
    for fixture, request in CASES:
        for profile in STORED + (("openwebui",) if fixture.startswith("profiles/") else ()):
            out["%s.%s.json" % (stem(fixture), profile)] = (fixture, request, profile)
    return out


def stored_expectation(fixture, request, profile):
    v = oracle.expected_view(read(fixture), load_request(request), profile)
    exp = {"fixture": fixture, "request": request, "profile": profile, "content": v["content"]}
    if v["end"] != "body":
        exp["ends_with_done"] = v["end"] == "done"
        exp["ends_with_error_event"] = v["end"] == "error"
    if profile == "openwebui":
        exp["sources"] = v["sources"]
    elif profile == "openai":
        exp["annotations"], exp["citations"] = v["annotations"], v["citations"]
    elif profile == "webchat":
        exp["entities"] = v["entities"]
    elif profile == "structured":
        exp["citations_removed"] = v["removed"]
    return json.loads(json.dumps(exp))


def regen():
    os.makedirs(PEXPECTED, exist_ok=True)
    for name in os.listdir(PEXPECTED):
        if name.endswith(".json"):
            os.remove(os.path.join(PEXPECTED, name))
    for name, (fixture, request, profile) in expected_files().items():
        with open(os.path.join(PEXPECTED, name), "w", encoding="utf-8") as f:
            json.dump(stored_expectation(fixture, request, profile), f, indent=1, ensure_ascii=False)
            f.write("\n")
    print("wrote %d files to %s" % (len(expected_files()), PEXPECTED))


class T2Fixtures(unittest.TestCase):
    """Every fixture x profile (and option variants) through citegate == oracle."""

    @classmethod
    def setUpClass(cls):
        cls.cases = []
        for fixture, request in CASES:
            for profile in TRANSFORMING + ("off",):
                cls.cases.append((fixture, request, profile, {}))
        for fixture, request, opts in VARIANTS:
            for profile in ("openwebui", "openai", "webchat", "markdown"):
                cls.cases.append((fixture, request, profile, opts))
        jobs = [(read(f), p, os.path.join(FIXTURES, r) if r else None, o) for f, r, p, o in cls.cases]
        cls.outputs = run_many(jobs)

    def test_fixtures(self):
        for (fixture, request, profile, opts), out in zip(self.cases, self.outputs):
            with self.subTest(fixture=fixture, profile=profile, opts=opts):
                if isinstance(out, Exception):
                    self.fail(str(out))
                body = read(fixture)
                if profile == "off":
                    self.assertEqual(out, body, "profile off must be byte identical")
                    continue
                bad = check_output(body, load_request(request), profile, opts, out,
                                   profile == "structured")
                if bad:
                    self.fail("filter --profile %s%s --request %s < %s\n  %s" % (
                        profile, "".join(" %s=%s" % kv for kv in opts.items()), request, fixture,
                        "\n  ".join(bad)))


class T3RandomStructured(unittest.TestCase):
    """300 random {response, citations} answers, as JSON bodies and as split streams."""

    N_BATCH, PER_BATCH = 30, 10

    def test_random_structured(self):
        rng = random.Random(SEED)
        tmp = tempfile.mkdtemp(prefix="cg-structured-")
        self.addCleanup(shutil.rmtree, tmp, True)
        cases, jobs = [], []
        for b in range(self.N_BATCH):
            request, tools = rand_tool_request(rng)
            rpath = os.path.join(tmp, "req%d.json" % b)
            with open(rpath, "w", encoding="utf-8") as f:
                json.dump(request, f, ensure_ascii=rng.random() < 0.5)
            contents = {str(i): rand_structured_answer(rng, tools) for i in range(self.PER_BATCH)}
            for body in (build_body(rng, contents),
                         build_stream(rng, contents, crlf=rng.random() < 0.3)):
                cases.append((body, request, rpath, contents))
                jobs.append((body, "structured", rpath, {}))
        outputs = run_many(jobs)
        failures = []
        for n, ((body, request, rpath, contents), out) in enumerate(zip(cases, outputs)):
            tag = "structured-%d-%d" % (SEED, n)
            if isinstance(out, Exception):
                failures.append("%s: %s" % (tag, out))
                continue
            want = oracle.expected_view(body, request, "structured")
            got = oracle.client_view(out)
            sc = want["shaped"]
            bad = diff_views(got, want, sc)
            bad += self.numbering(got, contents, request, sc)
            if want["end"] == "body":
                bad += check_body_shape(body, out, "structured", want)
            else:
                bad += check_stream_shape(out, "structured", want)
            if bad:
                b, r = save_failure(tag, body, request)
                failures.append("%s: citegate filter --profile structured --request %s < %s\n  %s"
                                % (tag, r, b, "\n  ".join(bad)))
        if failures:
            self.fail("seed %d, %d of %d bodies differ:\n%s"
                      % (SEED, len(failures), len(cases), "\n".join(failures[:5])))

    def numbering(self, got, contents, request, changed):
        """Independent of the oracle: kept citations are valid and in original order; every
        in-range [k] of the corrected response points at the citation it pointed at."""
        bad = []
        texts = oracle.tool_texts(request)
        for idx, content in contents.items():
            if not changed.get(idx):
                continue
            orig = json.loads(content)
            try:
                new = json.loads(got["content"].get(idx, ""))
            except ValueError:
                bad.append("choice %s: not JSON" % idx)
                continue
            cits = orig["citations"]
            valid = [isinstance(c, list) and len(c) == 2 and all(isinstance(x, str) for x in c)
                     and any(c[0] in t and c[1] in t for t in texts) for c in cits]
            if new.get("citations") != [c for c, v in zip(cits, valid) if v]:
                bad.append("choice %s: kept citations %r" % (idx, new.get("citations")))
                continue
            kept = new["citations"]
            before = [cits[int(k) - 1] for k in re.findall(r"\[([0-9]{1,4})\]", orig["response"])
                      if 1 <= int(k) <= len(cits) and valid[int(k) - 1]]
            after = [kept[int(k) - 1] for k in re.findall(r"\[([0-9]{1,4})\]", new.get("response", ""))
                     if 1 <= int(k) <= len(kept)]
            if before != after:
                bad.append("choice %s: markers point at %r, want %r" % (idx, after, before))
        return bad


class T4RandomReferences(unittest.TestCase):
    """300 random answers with references (valid, out of range, adjacent, split across
    events, late citations) for openai, webchat and markdown (and openwebui on a third of
    them)."""

    N_ANSWERS = 300

    def test_random_references(self):
        rng = random.Random(SEED + 1)
        tmp = tempfile.mkdtemp(prefix="cg-refs-")
        self.addCleanup(shutil.rmtree, tmp, True)
        cases, jobs, answers = [], [], 0
        while answers < self.N_ANSWERS:
            body, request, opts = rand_ref_case(rng)
            answers += len(oracle.client_view(body)["content"]) if oracle.is_json_body(body) else \
                len(oracle.read_stream(body, request)[0].content)
            rpath = os.path.join(tmp, "req%d.json" % len(cases))
            with open(rpath, "w", encoding="utf-8") as f:
                json.dump(request, f, ensure_ascii=False)
            profiles = ["openai", "webchat", "markdown"] + (["openwebui"] if rng.random() < 0.33 else [])
            for p in profiles:
                cases.append((body, request, p, opts, len(jobs)))
                jobs.append((body, p, rpath, opts))
        outputs = run_many(jobs)
        failures = []
        for (body, request, profile, opts, n), out in zip(cases, outputs):
            tag = "refs-%d-%d" % (SEED, n)
            if isinstance(out, Exception):
                failures.append("%s: %s" % (tag, out))
                continue
            bad = check_output(body, request, profile, opts, out, False)
            if bad:
                b, r = save_failure(tag, body, request)
                failures.append("%s: citegate filter --profile %s%s --request %s < %s\n  %s" % (
                    tag, profile, "".join(" %s=%s" % kv for kv in opts.items()), r, b, "\n  ".join(bad)))
        if failures:
            self.fail("seed %d, %d of %d runs differ (%d answers):\n%s"
                      % (SEED + 1, len(failures), len(cases), answers, "\n".join(failures[:6])))


class T6EventsAndOversized(unittest.TestCase):
    """SPEC §6 rules 4 and 6 on 200 random answers: upstream "event" members in any
    spelling and number, in chunks and bodies, never reach the client; events over
    max_event (exactly at it, one byte over, far over, a stream ending inside one) go
    through unchanged while the events around them are transformed."""

    N_CASES = 200

    def test_random_event_members_and_oversized(self):
        rng = random.Random(SEED + 2)
        tmp = tempfile.mkdtemp(prefix="cg-rules-")
        self.addCleanup(shutil.rmtree, tmp, True)
        cases, jobs = [], []
        for n in range(self.N_CASES):
            body, request, opts, profiles = rand_rules_case(rng)
            rpath = os.path.join(tmp, "req%d.json" % n)
            with open(rpath, "w", encoding="utf-8") as f:
                json.dump(request, f, ensure_ascii=False)
            for p in profiles:
                cases.append((body, request, p, opts, len(jobs)))
                jobs.append((body, p, rpath, opts))
        outputs = run_many(jobs)
        failures, oversized = [], 0
        for (body, request, profile, opts, n), out in zip(cases, outputs):
            tag = "rules-%d-%d" % (SEED, n)
            if isinstance(out, Exception):
                failures.append("%s: %s" % (tag, out))
                continue
            want = oracle.expected_view(body, request, profile, **oracle_opts(opts))
            oversized += len(want.get("oversized", []))
            got = oracle.client_view(out)
            bad = diff_views(got, want, want["shaped"] if profile == "structured" else None)
            if want["end"] != "body":
                bad += check_stream_shape(out, profile, want)
            else:
                bad += check_body_shape(body, out, profile, want)
                if any(k == "event" for k, _ in oracle_pairs(out.decode("utf-8"))):
                    bad.append("an upstream event member is left in the body")
            if bad:
                b, r = save_failure(tag, body, request)
                failures.append("%s: CITEGATE_MAX_EVENT_BYTES=%d citegate filter --profile %s%s "
                                "--request %s < %s\n  %s" % (
                                    tag, opts["max_event"], profile,
                                    "".join(" %s=%s" % kv for kv in opts.items() if kv[0] != "max_event"),
                                    r, b, "\n  ".join(bad)))
        if failures:
            self.fail("seed %d, %d of %d runs differ:\n%s"
                      % (SEED + 2, len(failures), len(cases), "\n".join(failures[:6])))
        self.assertGreater(oversized, 50, "too few oversized events generated")


class T5Bounds(unittest.TestCase):
    """Bounds: SPEC §6 fidelity 5 (no SSE line downstream exceeds 64 KiB except one
    forwarded unchanged from upstream) also when a profile has much to say (many references,
    many long snippets, a long event full of references); structured buffers 4 MiB at most."""

    def test_structured_buffer_bound(self):
        resp = json.dumps({"response": "A [1] B [2]", "citations": [
            ["/test/1.pdf", "D(1,0.5,1.2,2.5,1.2,2.5,1.4,0.5,1.4)"], ["/x", "y"]]})
        rpath = os.path.join(FIXTURES, "structured_request.json")
        request = load_request("structured_request.json")

        def ev(delta, fin=None, **extra):
            return "data: " + json.dumps(dict({"id": "s", "object": "chat.completion.chunk", "created": 1,
                                               "model": "m"}, choices=[{"index": 0, "delta": delta,
                                                                        "finish_reason": fin}], **extra)) + "\n\n"
        bodies = []
        for n in (3000, 5000):  # about 3.4 MB and 5.8 MB
            text = ev({"content": resp[:10]}) + "".join(ev({}, pad="x" * 1000) for _ in range(n)) \
                + ev({"content": resp[10:]}) + ev({}, "stop") + "data: [DONE]\n\n"
            bodies.append(text.encode())
        outs = run_many([(b, "structured", rpath, {}) for b in bodies])
        for body, out in zip(bodies, outs):
            if isinstance(out, Exception):
                self.fail(str(out))
            want = oracle.expected_view(body, request, "structured")
            bad = diff_views(oracle.client_view(out), want, want["shaped"])
            self.assertFalse(bad, "structured stream of %d bytes:\n%s" % (len(body), "\n".join(bad)))

    def test_long_lines(self):
        cits = [{"content": ("snippet %d " % i) * 900, "title": "T%d" % i, "url": None,
                 "filepath": "f%d.md" % i, "chunk_id": str(i)} for i in range(12)]
        url = [{"content": "one", "title": "T1", "url": "https://a.example/1"}]
        long_titles = [{"content": "s", "title": "%d%s" % (i, "*_" * 500), "url": "https://l.example/%s%d"
                        % (" " * 1000, i)} for i in range(25)]
        meta = {"id": "chatcmpl-L", "object": "chat.completion.chunk", "created": 1, "model": "m"}

        def ev(delta, fin=None):
            return "data: " + json.dumps(dict(meta, choices=[{"index": 0, "delta": delta,
                                                               "finish_reason": fin}])) + "\n\n"
        bodies = {
            # 12 referenced citations with 8 KiB snippets (webchat entity, openai citations)
            "12 long snippets": ev({"role": "assistant", "context": {"citations": cits}})
            + "".join(ev({"content": "[doc%d] " % (i + 1)}) for i in range(12)),
            # 1,100 references in short events (openai: 1,024 annotations)
            "1100 references": ev({"role": "assistant", "context": {"citations": url}})
            + "".join(ev({"content": "[doc1] " * 10}) for _ in range(110)),
            # one 42 KB event full of references: the rewritten event
            "42 KB event": ev({"role": "assistant", "context": {"citations": url}})
            + ev({"content": "[doc1] " * 6000}),
            # 25 titles of 1,000 characters to escape, URLs of 1,000 spaces: markdown's Sources
            # block is 150 KB of JSON, webchat's definitions 100 KB
            "25 long titles": ev({"role": "assistant", "context": {"citations": long_titles}})
            + "".join(ev({"content": "[doc%d] " % (i + 1)}) for i in range(25)),
        }
        jobs, names = [], []
        for name, text in bodies.items():
            body = (text + ev({}, "stop") + "data: [DONE]\n\n").encode()
            for p in ("openwebui", "openai", "webchat", "markdown"):
                if p == "webchat" and name == "25 long titles":
                    continue  # its one entity line holds every name and URL (docs/profiles.md, Known limits)
                names.append((name, p, body))
                jobs.append((body, p, None, {}))
        bad = []
        for (name, p, body), out in zip(names, run_many(jobs)):
            if isinstance(out, Exception):
                bad.append("%s/%s: %s" % (name, p, out))
                continue
            upstream = set(re.split(rb"\r\n|\r|\n", body))
            long = [len(x) for x in re.split(rb"\r\n|\r|\n", out) if len(x) > 65536 and x not in upstream]
            if long:
                bad.append("%s, profile %s: lines of %s bytes (upstream lines <= %d)"
                           % (name, p, long, max(len(x) for x in upstream)))
            got, want = oracle.client_view(out), oracle.expected_view(body, None, p)
            # Within the line limit, fewer annotations (a prefix of the oracle's, at most 1024)
            # and claims without "text" are acceptable; everything else is as the oracle says.
            for idx, anns in list(got["annotations"].items()):
                if anns and anns == want["annotations"].get(idx, [])[:len(anns)]:
                    got["annotations"][idx] = want["annotations"][idx]
            # openai's one chunk cuts the snippets of its non-URL citations to fit.
            for s_got, s_want in zip(got.get("citations") or [], want.get("citations") or []):
                dg, dw = s_got.get("document", []), s_want.get("document", [])
                if len(dg) == len(dw) == 1 and dw[0].startswith(dg[0]):
                    s_got["document"] = dw
            for e_got, e_want in zip(got["entities"], want["entities"]):
                for c_got, c_want in zip(e_got.get("citation", []), e_want["citation"]):
                    if c_got.get("appearance", {}).get("text") == "":
                        c_want["appearance"]["text"] = ""
            d = diff_views(got, want)
            d += {"openai": lambda g: check_annotations(g, body), "webchat": check_webchat,
                  "markdown": check_markdown}.get(p, lambda _: [])(got)
            if d:
                bad.append("%s, profile %s: %s" % (name, p, "\n  ".join(d)[:1000]))
        if bad:
            self.fail("\n".join(bad))


def main():
    global BIN
    args = sys.argv[1:]
    if args[:1] == ["--regen"]:
        regen()
        return 0
    BIN = os.environ.get("CITEGATE_BIN")
    if args and os.path.isfile(args[0]) and os.access(args[0], os.X_OK):
        BIN = args.pop(0)
    BIN = BIN or os.path.join(ROOT, "build", "citegate")
    if not os.access(BIN, os.X_OK):
        print("no citegate binary at %s (set CITEGATE_BIN)" % BIN)
        return 1
    prog = unittest.main(argv=[sys.argv[0]] + args, exit=False, verbosity=2)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
