"""What the dialect oracles share: the chat side of an upstream answer, which is the same
whatever the upstream (anthropic_oracle.py, bedrock_oracle.py, bedrock_kb_oracle.py,
cohere_oracle.py), and the expected files and --check of gemini_oracle.py and
responses_oracle.py.

Like the oracles, this is written from /work/shared/SPEC.md (§6, §6a, §7), never from
citegate's C code: it is part of the reference, and shares Python only with other oracles.

The chat side: an answer read as the chat chunks it amounts to (Answer), numbered in the
order they would go out, with the citations oracle.py's profile model rewrites (view_of);
what the client reads besides oracle.py's view (client_extras: finish_reason, usage, meta,
error); and the expected files under tests/fixtures/dialects/expected (write_expected).
"""
import json
import os
import subprocess

import oracle

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures")
DIALECTS = os.path.join(FIXTURES, "dialects")
EXPECTED = os.path.join(DIALECTS, "expected")
CREATED = 1700000000
PROFILES = ("openwebui", "openai", "webchat", "off")


# ------------------------------------------------------------------------- values

def count(v):
    """A non-negative whole number (a token count, an index, an offset), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return int(v) if v >= 0 and float(v).is_integer() else None


def string(v):
    return v if isinstance(v, str) else None


def nonempty(v):
    return v if isinstance(v, str) and v != "" else None


# ------------------------------------------------------------------------- the request

def document_ids(request):
    """SPEC §6a: each <source> with non-empty text becomes a document, in id order, when
    the request has a user message; document_index k is the k-th of them."""
    if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
        return []
    if not any(isinstance(m, dict) and m.get("role") == "user" for m in request["messages"]):
        return []
    return sorted(i for i, c in oracle.request_sources(request).items() if c.content != "")


def model_of(request):
    """The chunks' model where the upstream names none: the request's, "" without one."""
    return string(request.get("model")) or "" if isinstance(request, dict) else ""


def include_usage(request):
    """Did the client ask for a usage chunk (stream_options.include_usage)?"""
    return isinstance(request, dict) and isinstance(request.get("stream_options"), dict) \
        and request["stream_options"].get("include_usage") is True


def load_request(rel):
    """The request of a case (relative to tests/fixtures/dialects), or None."""
    if rel is None:
        return None
    with open(os.path.join(DIALECTS, rel), encoding="utf-8") as f:
        return json.load(f)


# ------------------------------------------------------------------------- the answer

class Answer(oracle.Stream):
    """The chat chunks an answer amounts to, and its citations: the request's <source>
    tags (its documents `docs`, as the dialect numbers them) and the sources the answer
    cites, each known from the chunk that first names it."""

    def __init__(self, request, docs):
        super().__init__()
        self.tags = oracle.request_sources(request) if request is not None else {}
        self.docs = docs
        self.kind, self.cits = "request", {}
        self.known = {}        # citation number -> chunk from which it resolves
        self.keys = {}         # source key -> citation number
        self.chunks = 0
        self.finish, self.usage, self.error = {}, None, None

    def known_from(self, n):
        return self.known.get(n, oracle.INF)

    def adopt(self, at):
        """Request-side sources count from the first content or citation on (SPEC §6)."""
        for n, c in self.tags.items():
            if n not in self.cits:
                self.cits[n], self.known[n] = c, at

    def chunk(self, content=None):
        self.chunks += 1
        if content is not None:
            self.adopt(self.chunks)
            self.add("0", content, self.chunks, 0)


def typed_events(body):
    """(type, object) of each complete SSE event whose data is a JSON object, its type the
    data's "type", else the `event:` field (anthropic, cohere); other data is counted as
    malformed and left out."""
    for fields, data in oracle.sse_events(body.decode("utf-8")):
        try:
            obj = json.loads(data)
        except ValueError:
            continue
        if isinstance(obj, dict):
            t = obj.get("type") if isinstance(obj.get("type"), str) else fields.get("event")
            yield t, obj


def view_of(ans, end, profile):
    """The client's view of answer ans (ended as `end`) in that profile."""
    view = {"content": dict(ans.content), "end": end, "sources": [], "annotations": {},
            "citations": [], "entities": [], "events": []}
    if profile != "off":
        out = oracle.transform(ans, profile, "numeric", 8192, True)
        for k in ("content", "sources", "annotations", "citations", "entities"):
            view[k] = out[k]
    view.update(finish_reason=ans.finish, usage=ans.usage, meta=ans.meta, error=ans.error)
    return view


def viewer(body_reader, stream_reader):
    """The expected_view(body, request, profile) of an oracle whose readers of a JSON body
    and of a stream are these."""
    def expected_view(body, request=None, profile="openwebui"):
        if oracle.is_json_body(body):
            ans, end = body_reader(json.loads(body.decode("utf-8")), request), "body"
        else:
            ans, end = stream_reader(body, request)
        return view_of(ans, end, profile)
    return expected_view


# ------------------------------------------------------------------------- the client

def client_extras(out):
    """finish_reason, usage, meta and error as the client reads them from citegate's output."""
    text = out.decode("utf-8")
    got = {"finish_reason": {}, "usage": None, "meta": None, "error": None}
    if oracle.is_json_body(out):
        objs = [json.loads(text)]
        msg_key = "message"
    else:
        objs = []
        for _, data in oracle.sse_events(text):
            try:
                objs.append(json.loads(data))
            except ValueError:
                pass
        msg_key = "delta"
    for o in objs:
        if not isinstance(o, dict):
            continue
        if got["meta"] is None and "object" in o:
            got["meta"] = {k: o.get(k) for k in ("id", "object", "created", "model")}
        for pos, ch in enumerate(oracle._choices(o)):
            if ch.get("finish_reason") is not None and isinstance(ch.get(msg_key), dict):
                got["finish_reason"][str(oracle._index(ch, pos))] = ch["finish_reason"]
        if isinstance(o.get("usage"), dict):
            got["usage"] = o["usage"]
        if isinstance(o.get("error"), dict):
            got["error"] = o["error"]
    return got


EXTRAS = ("finish_reason", "usage", "meta", "error")
COMPARED = oracle.COMPARED + EXTRAS


def reconcile(want, got):
    """An error message the SPEC leaves free (null in the expected view) matches any
    non-empty string the client got."""
    w, g = want.get("error"), got.get("error")
    if isinstance(w, dict) and w.get("message") is None and isinstance(g, dict) \
            and nonempty(g.get("message")):
        got = dict(got, error=dict(g, message=None))
    return got


# ------------------------------------------------------------------------- files

def expected_name(fixture, request, profile):
    stem, ext = os.path.basename(fixture).rsplit(".", 1)
    return "%s_%s.%s.json" % (stem, "body" if ext == "json" else "stream", profile)


def write_expected(cases, view_of_body, dialect, name=expected_name):
    """Writes the expected view of each (fixture, request) case in every profile, in the file
    name(fixture, request, profile); returns {(fixture, request, profile): view}."""
    os.makedirs(EXPECTED, exist_ok=True)
    views = {}
    for fixture, request in cases:
        with open(os.path.join(DIALECTS, fixture), "rb") as f:
            body = f.read()
        for profile in PROFILES:
            view = view_of_body(body, load_request(request), profile)
            views[fixture, request, profile] = view
            doc = {"fixture": fixture, "request": request, "dialect": dialect, "created": CREATED,
                   "profile": profile}
            doc.update({k: view[k] for k in COMPARED})
            with open(os.path.join(EXPECTED, name(fixture, request, profile)), "w",
                      encoding="utf-8") as f:
                json.dump(doc, f, indent=1, ensure_ascii=False)
                f.write("\n")
    return views


def print_view(argv, view_of_body):
    """BODY [--request FILE] [--profile P]: prints view_of_body's expected view."""
    body_path, request, profile, i = argv[0], None, "openwebui", 1
    while i < len(argv):
        if argv[i] == "--request":
            with open(argv[i + 1], encoding="utf-8") as f:
                request = json.load(f)
        elif argv[i] == "--profile":
            profile = argv[i + 1]
        else:
            raise SystemExit("unknown argument " + argv[i])
        i += 2
    with open(body_path, "rb") as f:
        print(json.dumps(view_of_body(f.read(), request, profile), indent=1, ensure_ascii=False))
    return 0


def main(argv, regen, view_of_body):
    """--regen, or BODY [--request FILE] [--profile P] (print_view)."""
    if argv[:1] == ["--regen"]:
        return regen()
    return print_view(argv, view_of_body)


# ------------------------------------------------------------------------- gemini, responses

def extras_of(out):
    """What oracle.client_view does not read: the finish reason, the usage, the error and
    the id/created/model every chunk (or the body) carries (gemini's and responses' view)."""
    text = out.decode("utf-8")
    ex = {"finish_reason": None, "usage": None, "error": None, "meta": None}
    objs = []
    if oracle.is_json_body(out):
        objs = [json.loads(text)]
    else:
        for _, data in oracle.sse_events(text):
            try:
                objs.append(json.loads(data))
            except ValueError:
                pass
    metas = []
    for o in objs:
        if not isinstance(o, dict):
            continue
        if "object" in o:
            metas.append({"id": o.get("id"), "created": o.get("created"), "model": o.get("model")})
        for ch in o.get("choices") or []:
            if ch.get("finish_reason") is not None:
                ex["finish_reason"] = ch["finish_reason"]
        if "usage" in o:
            ex["usage"] = o["usage"]
        if "error" in o:
            ex["error"] = o["error"]
    distinct = [m for k, m in enumerate(metas) if m not in metas[:k]]
    ex["meta"] = distinct[0] if len(distinct) == 1 else distinct
    return ex


ANSWER_COMPARED = oracle.COMPARED + ("finish_reason", "usage", "error", "meta")


def answer_client_view(out):
    view = oracle.client_view(out)
    view.update(extras_of(out))
    return {k: view[k] for k in ANSWER_COMPARED}


def load(rel):
    """The bytes of a file under tests/fixtures."""
    with open(os.path.join(FIXTURES, rel), "rb") as f:
        return f.read()


class Goldens:
    """The expected files of an oracle that keeps one per answer (tests/fixtures/dialects/
    answers/<prefix>*.sse and .json) and profile in a folder of its own, and checks
    `citegate filter` against them (--check): gemini_oracle.py, responses_oracle.py.

    expected_view(body, request, profile) is the oracle's; request_for(fixture) names the
    request a fixture is read with (relative to tests/fixtures, or None); dialect_for(fixture)
    the dialect it is filtered as."""

    def __init__(self, prefix, folder, profiles, expected_view, request_for, dialect_for):
        self.prefix, self.folder, self.profiles = prefix, folder, profiles
        self.expected_view = expected_view
        self.request_for, self.dialect_for = request_for, dialect_for

    def fixtures(self):
        return sorted(f for f in os.listdir(os.path.join(DIALECTS, "answers"))
                      if f.startswith(self.prefix) and
                      (f.endswith(".sse") or (f.endswith(".json") and ".request." not in f)))

    def expected_for(self, fixture, profile):
        req_rel = self.request_for(fixture)
        request = json.loads(load(req_rel)) if req_rel else None
        view = self.expected_view(load("dialects/answers/" + fixture), request, profile)
        head = {"fixture": "dialects/answers/" + fixture, "request": req_rel, "profile": profile,
                "dialect": self.dialect_for(fixture), "created": CREATED}
        head.update({k: view[k] for k in ANSWER_COMPARED})
        return head

    def expected_name(self, fixture, profile):
        stem, ext = fixture.rsplit(".", 1)
        return os.path.join(self.folder, "%s.%s.%s.json" % (
            stem, "body" if ext == "json" else "stream", profile))

    def regen(self):
        os.makedirs(self.folder, exist_ok=True)
        for old in os.listdir(self.folder):
            os.remove(os.path.join(self.folder, old))
        for fixture in self.fixtures():
            for profile in self.profiles:
                with open(self.expected_name(fixture, profile), "w", encoding="utf-8") as f:
                    json.dump(self.expected_for(fixture, profile), f, indent=1,
                              ensure_ascii=False)
                    f.write("\n")
        return 0

    def check(self, citegate, path):
        """`citegate filter` on the answer of expected file `path`, against it, and the file
        against what the oracle says now."""
        with open(path, encoding="utf-8") as f:
            want = json.load(f)
        bad = []
        fixture = os.path.basename(want["fixture"])
        if want != self.expected_for(fixture, want["profile"]):
            bad.append("the stored file is not what the oracle says (run --regen and review)")
        proc = run_filter(citegate, want)
        if proc.returncode != 0:
            bad.append("exit %d: %s" % (proc.returncode, proc.stderr.decode(errors="replace")))
        else:
            got = answer_client_view(proc.stdout)
            for k in ANSWER_COMPARED:
                if got[k] != want[k]:
                    bad.append("%s:\n  want %s\n  got  %s" % (
                        k, json.dumps(want[k], ensure_ascii=False),
                        json.dumps(got[k], ensure_ascii=False)))
        for b in bad:
            print(b)
        print("%s (%s): %s" % (want["fixture"], want["profile"], "FAIL" if bad else "ok"))
        return 1 if bad else 0

    def main(self, argv):
        """--regen; --check CITEGATE EXPECTED_JSON...; or FIXTURE [--profile P]
        [--request FILE]: print the expected view."""
        if argv[:1] == ["--regen"]:
            return self.regen()
        if argv[:1] == ["--check"]:
            return max(self.check(argv[1], path) for path in argv[2:])
        fixture, profile, request = argv[0], "openwebui", None
        for k in range(1, len(argv), 2):
            if argv[k] == "--profile":
                profile = argv[k + 1]
            elif argv[k] == "--request":
                with open(argv[k + 1], encoding="utf-8") as f:
                    request = json.load(f)
        with open(fixture, "rb") as f:
            view = self.expected_view(f.read(), request, profile)
        print(json.dumps(view, indent=1, ensure_ascii=False))
        return 0


def run_filter(citegate, want):
    """`citegate filter` as expected file `want` says (dialect, created, profile, request,
    fixture), without the caller's CITEGATE_ and AZURE_AI_ settings."""
    cmd = [citegate, "filter", "--dialect", want["dialect"], "--created", str(want["created"]),
           "--profile", want["profile"]]
    if want["request"]:
        cmd += ["--request", os.path.join(FIXTURES, want["request"])]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CITEGATE_", "AZURE_AI_"))}
    return subprocess.run(cmd, input=load(want["fixture"]), capture_output=True, timeout=30,
                          env=env)
