#!/usr/bin/env python3
"""Independent reference model ("oracle") of SPEC §6-7 for every profile.

Written from /work/shared/SPEC.md §5-7 and the profile design notes only, never from
citegate's C code. It does not model reads, splits or held-back bytes: it works on the
concatenated content of each choice, which is exactly what fidelity rule 1 says the client
must end up with. It does model *when* a stream's citations become known (events are
processed in order), because a reference that completes before that is left as is.

Citation sources, first match wins per stream: Azure context, top-level citations /
search_results, request-side <source> tags (from the first event with content), then
url_citation annotations (SPEC §6): one citation per distinct url, numbered in order of
arrival, each counted as referenced once ("mentioned") at the event that brought it; the
upstream's annotation chunks reach the client unchanged, and profile openai does not repeat
them. A mention comes before the references that complete in the same event.

SPEC §6 rule 4: every upstream top-level member whose name, unescaped, is "event" is
removed (duplicates included), in streams and bodies. Rule 6: an event larger than
max_event (CITEGATE_MAX_EVENT_BYTES; its size counts every byte through its blank line, a
CRLF there as one byte, as docs/architecture.md defines it) is forwarded unchanged: its content and
its members reach the client as they are, nothing of it is read (citations, meta, finish,
[DONE]), and since held bytes go out before it, no reference spans it. A stream that ends
inside one gets it completed (the client sees it). Profile structured holds at most
max_event bytes of a stream and lets a longer one through unchanged.

    view = oracle.expected_view(body_bytes, request_obj_or_None, profile,
                                ref_style="auto", max_doc_bytes=8192, scores=True,
                                max_event=4194304)
    view = oracle.client_view(citegate_output_bytes)

Both return the CLIENT VIEW, a dict with the same keys:
  content      {"<choice index>": final content (all delta.content / message.content)}
  end          "done" ([DONE] last), "error" (error event last), "eof" (neither), "body" (JSON)
  sources      openwebui: event.data of `source` chunks / top-level "sources"
  annotations  {"<choice index>": [url_citation annotations]} (choices that have any)
  citations    openai: top-level "citations" lists whose items are SOURCE objects
  entities     webchat: top-level "entities"
  events       every other top-level "event" member value (duplicates included)
expected_view() adds "oversized" (the data of the events forwarded unchanged), "own_sources"
(how many of "sources" are the profile's own, at the end), "own_annotations" (openai: those
of its own chunk, after the upstream's), "passthrough" (structured: the
stream went through unchanged), "removed" and "shaped" (structured: invalid citations
removed; which choices have the {response, citations} shape), "defs" (webchat definitions,
markdown Sources blocks)
and "meta" (the first non-empty id/created/model of the stream), which client_view() cannot
see.

usage: oracle.py BODY [--request FILE] [--profile P] [--ref-style S] [--max-doc-bytes N]
                      [--max-event N] [--no-scores]   print the expected view as JSON
       oracle.py --client OUTPUT             print the client view of a citegate output
"""
import json
import re
import sys
import urllib.parse

PROFILES = ("openwebui", "openai", "webchat", "structured", "markdown", "off")
REF_RE = {"doc": re.compile(r"\[doc([0-9]{1,4})\]"), "numeric": re.compile(r"\[([0-9]{1,4})\]"),
          "citation": re.compile(r"\[citation:([0-9]{1,4})\]")}
MARKER_RE = re.compile(r"\[([0-9]{1,4})\]")
ZWSP = "\u200b"
ELLIPSIS = "\u2026"
MAX_ANNOTATIONS = 1024
MAX_EVENT = 4 * 1024 * 1024  # CITEGATE_MAX_EVENT_BYTES; also structured's hold
INF = float("inf")


# ------------------------------------------------------------------------------ SSE (WHATWG)

def sse_events(text):
    """Dispatched events of an SSE text as (fields, data): fields = {"event": …, "id": …}.
    Lines end in CR, LF or CRLF; an event ends at a blank line; an incomplete last event
    (no blank line after it) is dropped, as EventSource does."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = re.split(r"\r\n|\r|\n", text)
    lines.pop()  # the text after the last line end is not a complete line
    out, data, fields = [], [], {}
    for line in lines:
        if line == "":
            if data:
                out.append((fields, "\n".join(data)))
            data, fields = [], {}
            continue
        if line.startswith(":"):
            continue
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name in ("event", "id"):
            fields[name] = value
    return out


def sse_blocks(body):
    """Every event of an SSE body (bytes), also those without data and an unterminated
    last one, as (data or None, size, complete): data joins the `data` values with LF (None
    without any); size counts every byte through the blank line, its line end as one byte
    (the LF of a CRLF there is left out), the BOM with the first event."""
    out, data, size = [], [], 0
    for m in re.finditer(rb"([^\r\n]*)(\r\n|\r|\n|\Z)", body):
        if m.start() == len(body):
            break
        raw, eol = m.group(1), m.group(2)
        line = raw[3:] if m.start() == 0 and raw.startswith(b"\xef\xbb\xbf") else raw
        if line == b"" and eol:
            out.append(("\n".join(data) if data else None, size + len(raw) + 1, True))
            data, size = [], 0
            continue
        size += len(m.group(0))
        name, colon, value = line.partition(b":")
        if name == b"data":
            value = value[1:] if value.startswith(b" ") else value
            data.append(value.decode("utf-8", errors="replace"))
    if size:
        out.append(("\n".join(data) if data else None, size, False))
    return out


class Obj(dict):
    """A JSON object that also keeps its members in order, duplicates included."""

    def __init__(self, pairs):
        super().__init__(pairs)
        self.pairs = pairs


def loads_pairs(data):
    return json.loads(data, object_pairs_hook=Obj)


def is_json_body(body):
    return body.lstrip(b" \t\r\n").startswith(b"{")


# ------------------------------------------------------------------------------ citations

def is_abs_url(s):
    return isinstance(s, str) and s[:8].lower().startswith(("http://", "https://"))


def nonempty(s):
    return isinstance(s, str) and s != ""


def link(url):
    """URL as put into a Markdown link: space ( ) < > percent-encoded."""
    return (url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")
            .replace("<", "%3C").replace(">", "%3E"))


def file_name(path, is_url):
    if is_url:
        path = path.split("#", 1)[0].split("?", 1)[0]
    seg = path.split("/")[-1]
    return urllib.parse.unquote(seg, errors="surrogateescape")


def cut_utf8(s, n):
    b = s.encode("utf-8")
    if len(b) <= n:
        return s
    b = b[:n]
    for _ in range(4):  # drop the bytes of a character cut in the middle, if any
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            b = b[:-1]
    raise AssertionError("not UTF-8")


class Citation:
    """One citation, normalised: raw fields plus the derived TITLE / URL / KEY."""

    def __init__(self, content="", title=None, url=None, filepath=None, chunk_id=None, score=None):
        self.content = content if isinstance(content, str) else ""
        self.title_raw = title if isinstance(title, str) else None
        self.url_raw = url if isinstance(url, str) else None
        self.filepath = filepath if isinstance(filepath, str) else None
        self.chunk_id = chunk_id if isinstance(chunk_id, str) else None
        self.score = score

    @property
    def url(self):
        """Absolute http(s) URL: `url`, else `filepath` when that is one; else None."""
        if is_abs_url(self.url_raw):
            return self.url_raw
        if is_abs_url(self.filepath):
            return self.filepath
        return None

    @property
    def title(self):
        if nonempty(self.title_raw):
            return self.title_raw
        if nonempty(self.filepath):
            name = file_name(self.filepath, is_abs_url(self.filepath))
            if name:
                return name
        if nonempty(self.url_raw):
            name = file_name(self.url_raw, True)
            if name:
                return name
        return "Unknown Document"

    @property
    def key(self):
        if nonempty(self.filepath):
            k = self.filepath
        elif nonempty(self.url_raw):
            k = self.url_raw
        else:
            k = self.title
        if nonempty(self.chunk_id):
            k += "#" + self.chunk_id
        return k

    def snippet(self, max_doc_bytes):
        return cut_utf8(self.content, max_doc_bytes)

    def source(self, label, max_doc_bytes, scores):
        """The openwebui SOURCE object (SPEC §7)."""
        name = "[%s] %s" % (label, self.title)
        src = {"id": label, "name": name}
        md = {"source": "%s:%s" % (label, self.key), "name": name}
        if self.url:
            src["url"] = self.url
            md["source_url"] = self.url
        if nonempty(self.filepath):
            md["filepath"] = self.filepath
        if nonempty(self.chunk_id):
            md["chunk_id"] = self.chunk_id
        out = {"source": src, "document": [self.snippet(max_doc_bytes)], "metadata": [md]}
        if scores and self.score is not None:
            out["distances"] = [self.score]
        return out


def _num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def score_of(doc):
    if _num(doc.get("rerank_score")):
        s = doc["rerank_score"] / 4
    elif _num(doc.get("original_search_score")):
        s = doc["original_search_score"]
        if s > 1:
            s = s / 100
    else:
        return None
    return min(1.0, max(0.0, float(s)))


def match_retrieved(c, docs):
    """First entry of all_retrieved_documents equal on (filepath, chunk_id), else on
    (title, chunk_id), else on the first 100 bytes of content; a key counts only when its
    fields are non-empty on both sides."""
    docs = [d for d in docs if isinstance(d, dict)]

    def s(d, k):
        v = d.get(k)
        return v if isinstance(v, str) else ""

    keys = [lambda d: (s(d, "filepath"), s(d, "chunk_id")),
            lambda d: (s(d, "title"), s(d, "chunk_id")),
            lambda d: (s(d, "content").encode("utf-8")[:100],)]
    cd = {"filepath": c.filepath or "", "chunk_id": c.chunk_id or "",
          "title": c.title_raw or "", "content": c.content}
    for key in keys:
        mine = key(cd)
        if not all(mine):
            continue
        for d in docs:
            theirs = key(d)
            if all(theirs) and theirs == mine:
                return d
    return None


def azure_citations(ctx):
    docs = ctx.get("all_retrieved_documents")
    docs = docs if isinstance(docs, list) else []
    out = []
    for c in ctx["citations"]:
        c = c if isinstance(c, dict) else {}
        cit = Citation(c.get("content"), c.get("title"), c.get("url"), c.get("filepath"),
                       c.get("chunk_id"))
        m = match_retrieved(cit, docs)
        cit.score = score_of(m) if m is not None else None
        out.append(cit)
    return out


def _nonempty_list(v):
    return isinstance(v, list) and len(v) > 0


def perplexity_citations(obj):
    """Top-level `citations` (URL list), each described by the `search_results` entry of the
    same URL; `search_results` alone when there is no non-empty `citations` list."""
    srs = [r for r in obj["search_results"] if isinstance(r, dict)] \
        if isinstance(obj.get("search_results"), list) else []
    if _nonempty_list(obj.get("citations")):
        out = []
        for u in obj["citations"]:
            u = u if isinstance(u, str) else None
            sr = next((r for r in srs if r.get("url") == u), None) if u is not None else None
            out.append(Citation(sr.get("snippet") if sr else "", sr.get("title") if sr else None, u))
        return out
    return [Citation(r.get("snippet"), r.get("title"), r.get("url")) for r in srs]


def has_perplexity(obj):
    """A source matches only when it has citations: an empty list is no match."""
    return _nonempty_list(obj.get("citations")) or _nonempty_list(obj.get("search_results"))


def has_azure(holder):
    return isinstance(holder, dict) and isinstance(holder.get("context"), dict) \
        and _nonempty_list(holder["context"].get("citations"))


SOURCE_OPEN = re.compile(r"<source\b([^>]*)>")
ATTR = re.compile(r"""([A-Za-z_:][-A-Za-z0-9_:.]*)\s*=\s*(?:"([^"]*)"|'([^']*)')""")


def message_texts(msg):
    c = msg.get("content")
    if isinstance(c, str):
        return [c]
    if isinstance(c, list):
        return [p["text"] for p in c if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return []


def request_sources(request):
    """{int id: Citation} from <source id="N" name="…">text</source> tags (SPEC §5)."""
    out = {}
    if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
        return out
    for msg in request["messages"]:
        if not isinstance(msg, dict):
            continue
        for text in message_texts(msg):
            for m in SOURCE_OPEN.finditer(text):
                close = text.find("</source>", m.end())
                if close < 0:
                    continue
                if text.find("<source", m.end(), close) >= 0:
                    continue  # another opening tag comes first: this one has no pair
                attrs = {a.group(1): a.group(2) if a.group(2) is not None else a.group(3)
                         for a in ATTR.finditer(m.group(1))}
                ident = attrs.get("id")
                if ident is None or not re.fullmatch(r"[0-9]+", ident):
                    continue
                n = int(ident)
                if n in out:
                    continue  # the first element of an id wins
                name = attrs.get("name")
                body = text[m.end():close]
                if is_abs_url(name):
                    out[n] = Citation(body, None, name)
                else:
                    out[n] = Citation(body, name)
    return out


def tool_texts(request):
    out = []
    if isinstance(request, dict) and isinstance(request.get("messages"), list):
        for msg in request["messages"]:
            if isinstance(msg, dict) and msg.get("role") == "tool":
                out.append("".join(message_texts(msg)))
    return out


# ------------------------------------------------------------------------------ references

class Stream:
    """What the transformation needs to know about one answer (stream or body)."""

    def __init__(self):
        self.content = {}      # choice index -> upstream content (concatenated)
        self.segments = {}     # choice index -> [(start, end, event_no, pos_in_event)]
        self.kind = None       # "azure" | "perplexity" | "request" | "annotations" | None
        self.cits = None       # list (azure/perplexity/annotations) or {id: Citation} (request)
        self.cit_ev = {}       # annotations: citation index -> event number it arrived in
        self.mentions = []     # annotations: a Ref per citation, where it arrived
        self.up_anns = {}      # choice index -> the upstream's annotations (forwarded)
        self.body = False      # a JSON body, not a stream
        self.known_ev = INF    # event number from which references can resolve
        self.meta = {"id": None, "created": None, "model": None}
        self.order = []        # choice indices in order of first appearance
        self.cuts = {}         # choice index -> offsets no reference spans (oversized events)
        self.raw = {}          # choice index -> {(start, end)} of content forwarded unchanged
        self.passed = []       # data of the oversized events (forwarded unchanged)

    def add(self, idx, text, ev, pos):
        if idx not in self.content:
            self.content[idx] = ""
            self.segments[idx] = []
            self.order.append(idx)
            self.cuts[idx], self.raw[idx] = [], set()
        start = len(self.content[idx])
        self.content[idx] += text
        if text:
            self.segments[idx].append((start, start + len(text), ev, pos))

    def cut(self):
        for idx in self.order:
            self.cuts[idx].append(len(self.content[idx]))

    def add_oversized(self, data):
        """An event over max_event: forwarded unchanged; held bytes went out before it."""
        self.cut()
        if data is not None:
            self.passed.append(data)
            try:
                obj = json.loads(data)
            except ValueError:
                obj = None
            self.forward_annotations(_choices(obj) if isinstance(obj, dict) else [])
            for pos, ch in enumerate(_choices(obj) if isinstance(obj, dict) else []):
                d = ch.get("delta")
                if isinstance(d, dict) and isinstance(d.get("content"), str) and d["content"]:
                    idx = str(_index(ch, pos))
                    self.add(idx, "", None, pos)
                    start = len(self.content[idx])
                    self.content[idx] += d["content"]
                    self.raw[idx].add((start, len(self.content[idx])))
        self.cut()

    def annotate(self, idx, ann, ev):
        """One upstream annotation of choice idx (SPEC §6): a url_citation with a url,
        inside "url_citation" or at the annotation's top level, adds a citation unless
        one has that url, and mentions it."""
        if not isinstance(ann, dict) or ann.get("type") != "url_citation":
            return
        obj = ann["url_citation"] if isinstance(ann.get("url_citation"), dict) else ann
        url = obj.get("url")
        cits = self.cits if self.cits is not None else []
        if not nonempty(url) or len(cits) >= 1000 or any(c.url_raw == url for c in cits):
            return
        self.kind, self.cits = "annotations", cits
        cits.append(Citation(obj.get("content"), obj.get("title"), url))
        key = len(cits) - 1
        self.cit_ev[key] = ev
        self.mentions.append(Ref(idx, None, key + 1, cits[key], key, True, (ev, -1, len(self.mentions))))

    def forward_annotations(self, chs):
        """The client sees every non-empty delta.annotations list as it came."""
        for pos, ch in enumerate(chs):
            d = ch.get("delta")
            if isinstance(d, dict) and isinstance(d.get("annotations"), list) and d["annotations"]:
                self.up_anns.setdefault(str(_index(ch, pos)), []).extend(d["annotations"])

    def known_at(self, key, n):
        """The event from which a reference to citation n (key) resolves: an annotation's
        own event, else known_from(n)."""
        return self.cit_ev.get(key, self.known_from(n))

    def finder_spans(self, idx):
        """The stretches of content[idx] that a reference finder reads as one."""
        bounds = sorted(set([0, len(self.content[idx])] + self.cuts[idx]))
        return [(a, b) for a, b in zip(bounds, bounds[1:]) if (a, b) not in self.raw[idx]]

    def event_of(self, idx, offset):
        """(event_no, pos) of the event that brought content[idx][offset]."""
        for s, e, ev, pos in self.segments[idx]:
            if s <= offset < e:
                return ev, pos
        raise AssertionError("offset outside content")

    def known_from(self, n):
        """The event from which a reference to citation n resolves (a stream whose
        citations arrive one by one, as a dialect's do, overrides this)."""
        return self.known_ev

    def ref_known(self, n, ev, key):
        """Was citation n (key) known when event ev reached the finder? (A dialect's
        citations may arrive one by one: its stream overrides this or known_from.)"""
        return ev >= self.known_at(key, n)

    def lookup(self, n):
        if self.cits is None:
            return None
        if self.kind == "request":
            return self.cits.get(n)
        return self.cits[n - 1] if 1 <= n <= len(self.cits) else None

    def set_meta(self, obj):
        for k in ("id", "model"):
            if self.meta[k] is None and nonempty(obj.get(k)):
                self.meta[k] = obj[k]
        if self.meta["created"] is None and _num(obj.get("created")) and obj["created"] != 0:
            self.meta["created"] = obj["created"]


class Ref:
    """A reference found in the content, or (m None) a mention: an annotation's citation."""

    def __init__(self, idx, m, n, cit, key, resolves, when):
        self.idx = idx
        self.start, self.end, self.text = (m.start(), m.end(), m.group(0)) if m else (None, None, "")
        self.n, self.cit, self.key, self.resolves, self.when = n, cit, key, resolves, when
        self.label = None


def resolve_style(ref_style, request, st):
    """SPEC §3: a fixed style; or auto: doc for Azure context (or a request with
    data_sources), else citation when the first reference seen is [citation:N], numeric
    otherwise ([docN] does not decide: outside Azure context it is no reference)."""
    if ref_style in ("doc", "numeric", "citation"):
        return ref_style
    if isinstance(request, dict) and request.get("data_sources") not in (None, [], {}):
        return "doc"
    if st.kind == "azure":
        return "doc"
    return first_form(st) or "numeric"


def first_form(st):
    """"numeric" or "citation": the form of the first [N] / [citation:N] to reach the
    client (by the event that completes it, the choice's place in that event, its offset)."""
    best = None
    for idx in st.order:
        for a, b in st.finder_spans(idx):
            for form in ("numeric", "citation"):
                m = REF_RE[form].search(st.content[idx], a, b)
                if m:
                    ev, pos = st.event_of(idx, m.end() - 1)
                    if best is None or (ev, pos, m.start()) < best[0]:
                        best = ((ev, pos, m.start()), form)
    return best[1] if best else None


def find_refs(st, style):
    """All references of all choices, each with: its citation (None when N does not name
    one), whether it resolves (citations known when it completed), and when it reached
    the client (event, position in the event's choices, offset)."""
    refs = []
    for idx in st.order:
        for a, b in st.finder_spans(idx):
            for m in REF_RE[style].finditer(st.content[idx], a, b):
                n = int(m.group(1))
                cit = st.lookup(n)
                key = (n if st.kind == "request" else n - 1) if cit is not None else None
                ev, pos = st.event_of(idx, m.end() - 1)
                r = Ref(idx, m, n, cit, key, cit is not None and st.ref_known(n, ev, key),
                        (ev, pos, m.start()))
                r.label = ("doc%d" if style == "doc" else "%d") % n  # citation: N
                refs.append(r)
    refs.sort(key=lambda r: r.when)
    return refs


def first_order(refs):
    """Distinct citations in order of first reference: [(key, first ref)]."""
    seen, out = set(), []
    for r in refs:
        if r.key not in seen:
            seen.add(r.key)
            out.append((r.key, r))
    return out


def apply(content, repl):
    """Replace spans: repl = [(start, end, text)] sorted, non-overlapping."""
    out, at = [], 0
    for s, e, t in repl:
        out.append(content[at:s])
        out.append(t)
        at = e
    out.append(content[at:])
    return "".join(out)


def u16len(s):
    return len(s.encode("utf-16-le")) // 2


# ------------------------------------------------------------------------------ profiles

def webchat_escape(s):
    return (s.replace("\\", "\\\\").replace('"', '\\"')
            .replace("\r", " ").replace("\n", " ").replace("\t", " "))


def markdown_escape(s):
    """SPEC §7 markdown: backslash, backtick, *, _, [, ], < and > in TITLE get a backslash."""
    return re.sub(r"([\\`*_\[\]<>])", r"\\\1", s)


def markdown_sources(st, emitting, counted):
    """Profile markdown: {key: position} and {choice: positions its Sources block lists}.
    Positions as in webchat: first resolving reference or annotation (a mention takes its
    position where its annotation arrived, in its choice). A citation the answer references
    only before the citations were known is still emitted (SPEC §6): it takes the next
    positions, in first-reference order, in the first choice (lowest index) that has
    content of its own (not only content forwarded inside oversized events)."""
    pos = {}
    for key, _ in first_order(emitting):
        pos[key] = len(pos) + 1
    listed = {}
    for r in emitting:
        listed.setdefault(r.idx, set()).add(pos[r.key])
    late = [key for key, _ in first_order(counted) if key not in pos]
    with_text = sorted((i for i in st.order if st.segments[i]), key=int)
    if late and with_text:
        for key in late:
            pos[key] = len(pos) + 1
            listed.setdefault(with_text[0], set()).add(pos[key])
    return pos, listed


def abstract_of(snippet, title):
    a = re.sub(r"[ \t\n\r\f\v]+", " ", snippet).strip(" ")
    if a == "":
        return title
    if len(a) > 200:
        head = a[:199]
        sp = head.rfind(" ")
        if sp >= 0:
            head = head[:sp].rstrip(" ")
        a = head + ELLIPSIS
    return a


def transform(st, profile, style, max_doc_bytes, scores):
    """Final content per choice plus the profile's extras."""
    refs = find_refs(st, style)
    counted = [r for r in refs if r.cit is not None]
    resolving = [r for r in refs if r.resolves]
    for r in st.mentions:
        r.label = ("doc%d" if style == "doc" else "%d") % r.n
    cited = sorted(counted + st.mentions, key=lambda r: r.when)  # what the profiles emit
    emitting = sorted(resolving + st.mentions, key=lambda r: r.when)
    out = {"content": dict(st.content), "sources": [], "annotations": {}, "citations": [],
           "entities": [], "defs": {}}
    if profile == "openwebui":
        for idx in st.order:
            repl = [(r.start, r.end, "[%s](%s)" % (r.text, link(r.cit.url)))
                    for r in resolving if r.idx == idx and r.cit.url]
            out["content"][idx] = apply(st.content[idx], sorted(repl))
        out["sources"] = [r.cit.source(r.label, max_doc_bytes, scores) for _, r in first_order(cited)]
    elif profile == "openai":
        budget = MAX_ANNOTATIONS
        for idx in st.order:
            mine = sorted((r for r in resolving if r.idx == idx and r.cit.url), key=lambda r: r.start)
            repl = [(r.start, r.end, "[%s](%s)" % (r.text, link(r.cit.url))) for r in mine]
            final = apply(st.content[idx], repl)
            out["content"][idx] = final
            anns, shift = [], 0
            for r, (_, _, t) in zip(mine, repl):
                s16 = u16len(st.content[idx][:r.start]) + shift
                e16 = s16 + u16len(t)
                shift += u16len(t) - u16len(r.text)
                anns.append({"type": "url_citation", "url_citation": {
                    "url": link(r.cit.url), "title": r.cit.title,
                    "start_index": s16, "end_index": e16}})
            anns = anns[:budget]
            budget -= len(anns)
            if anns:
                out["annotations"][idx] = anns
        if st.kind != "annotations":  # the upstream's annotations already carry those
            out["citations"] = [r.cit.source(r.label, max_doc_bytes, scores)
                                for _, r in first_order(cited) if not r.cit.url]
    elif profile == "webchat":
        order = first_order(emitting)
        pos = {key: p + 1 for p, (key, _) in enumerate(order)}
        # A stream's choice that only has annotations still gets its definitions.
        extra = [] if st.body else [r.idx for r in st.mentions if r.idx not in st.content]
        for idx in st.order + sorted(set(extra), key=extra.index):
            mine = sorted((r for r in resolving if r.idx == idx), key=lambda r: r.start)
            named = {pos[r.key] for r in mine} | {pos[r.key] for r in st.mentions if r.idx == idx}
            if idx not in st.content and not named:
                continue
            repl, text = [], st.content.get(idx, "")
            starts = {r.start for r in mine}
            for r in mine:
                t = "[%d]" % pos[r.key]
                # U+200B keeps Markdown from joining a badge with a bracket
                # before it, or with "[", "(" or ":" right after it.
                if r.start > 0 and text[r.start - 1] == "]":
                    t = ZWSP + t
                if r.end < len(text) and text[r.end] in "[(:" and r.end not in starts:
                    t = t + ZWSP
                repl.append((r.start, r.end, t))
            out["content"][idx] = apply(text, repl)
            if named:
                lines = []
                for p in sorted(named):
                    c = order[p - 1][1].cit
                    if c.url:
                        lines.append('[%d]: %s "%s"' % (p, link(c.url), webchat_escape(c.title)))
                    else:
                        ab = abstract_of(c.snippet(max_doc_bytes), c.title)
                        lines.append('[%d]: cite:%d "%s"' % (p, p, webchat_escape(ab)))
                out["defs"][idx] = "\n\n" + "\n".join(lines)
                out["content"][idx] += out["defs"][idx]
        if order:
            claims = []
            for p, (_, r) in enumerate(order, 1):
                c = r.cit
                snip = c.snippet(max_doc_bytes)
                app = {"@type": "DigitalDocument", "name": c.title}
                if c.url:
                    app["url"] = link(c.url)
                app["abstract"] = abstract_of(snip, c.title)
                app["text"] = snip  # always: Web Chat's modal needs it
                app["encodingFormat"] = "text/markdown"
                claims.append({"@type": "Claim", "position": str(p), "appearance": app})
            out["entities"] = [{"@context": "https://schema.org", "@id": "", "@type": "Message",
                                "type": "https://schema.org/Message",
                                "keywords": ["AIGeneratedContent"], "citation": claims}]
    elif profile == "markdown":
        pos, listed = markdown_sources(st, emitting, counted)
        cit_of = {pos[r.key]: r.cit for r in cited if r.key in pos}
        # A stream's choice that only has annotations still gets its Sources.
        extra = [] if st.body else [r.idx for r in st.mentions if r.idx not in st.content]
        for idx in st.order + sorted(set(extra), key=extra.index):
            mine = sorted((r for r in resolving if r.idx == idx), key=lambda r: r.start)
            repl = [(r.start, r.end, "[%d](%s)" % (pos[r.key], link(r.cit.url)) if r.cit.url
                     else "[%d]" % pos[r.key]) for r in mine]
            out["content"][idx] = apply(st.content.get(idx, ""), repl)
            if listed.get(idx):
                lines = []
                for p in sorted(listed[idx]):
                    c = cit_of[p]
                    if c.url:
                        lines.append("%d. [%s](%s)" % (p, markdown_escape(c.title), link(c.url)))
                    else:
                        lines.append("%d. %s" % (p, markdown_escape(c.title)))
                out["defs"][idx] = "\n\n**Sources**\n" + "\n".join(lines)
                out["content"][idx] += out["defs"][idx]
    return out


def structured_fix(content, texts):
    """(corrected content, removed count, shaped) for a {response, citations} answer;
    shaped is False (and the content unchanged) for anything else."""
    try:
        obj = json.loads(content)
    except ValueError:
        return content, 0, False
    if not isinstance(obj, dict) or not isinstance(obj.get("response"), str) \
            or not isinstance(obj.get("citations"), list):
        return content, 0, False
    cits = obj["citations"]

    def valid(c):
        return (isinstance(c, list) and len(c) == 2 and all(isinstance(x, str) for x in c)
                and any(c[0] in t and c[1] in t for t in texts))

    keep = [valid(c) for c in cits]
    newno, k = {}, 0
    for i, ok in enumerate(keep):
        if ok:
            k += 1
            newno[i + 1] = k
    resp = obj["response"]
    repl = []
    for m in MARKER_RE.finditer(resp):
        n = int(m.group(1))
        if not 1 <= n <= len(cits):
            continue
        if keep[n - 1]:
            repl.append((m.start(), m.end(), "[%d]" % newno[n]))
        else:
            s = m.start() - 1 if m.start() > 0 and resp[m.start() - 1] == " " else m.start()
            repl.append((s, m.end(), ""))
    obj["response"] = apply(resp, repl)
    obj["citations"] = [c for c, ok in zip(cits, keep) if ok]
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")), keep.count(False), True


# ------------------------------------------------------------------------------ entry points

def _choices(obj):
    ch = obj.get("choices")
    return [c for c in ch if isinstance(c, dict)] if isinstance(ch, list) else []


def _index(ch, pos):
    i = ch.get("index")
    return i if isinstance(i, int) and not isinstance(i, bool) else pos


def read_stream(body, request, max_event=MAX_EVENT):
    st = Stream()
    tags = request_sources(request)
    finish_seen, end, ev = False, None, 0
    for data, size, complete in sse_blocks(body):
        if size > max_event:
            st.add_oversized(data)
            continue
        if data is None or not complete:
            continue  # no data; or the last event, unfinished: dropped (EventSource)
        ev += 1
        if data == "[DONE]":
            end = "done"
            break
        try:
            obj = json.loads(data)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        st.set_meta(obj)
        chs = _choices(obj)
        if st.cits is None:
            ctx = next((c["delta"]["context"] for c in chs if has_azure(c.get("delta"))), None)
            if ctx is not None:
                st.kind, st.cits = "azure", azure_citations(ctx)
            elif has_perplexity(obj):
                st.kind, st.cits = "perplexity", perplexity_citations(obj)
            elif tags and any(isinstance(c.get("delta"), dict) and isinstance(c["delta"].get("content"), str)
                              for c in chs):  # the first event carrying content (even "")
                st.kind, st.cits = "request", tags
            if st.cits is not None:
                st.known_ev = ev
        st.forward_annotations(chs)
        if st.kind == "annotations" or (st.cits is None and not tags):
            learn_annotations(st, chs, "delta", ev)
        for pos, ch in enumerate(chs):
            d = ch.get("delta")
            if isinstance(d, dict) and isinstance(d.get("content"), str):
                st.add(str(_index(ch, pos)), d["content"], ev, pos)
            if ch.get("finish_reason") is not None:
                finish_seen = True
    if end is None:
        end = "done" if finish_seen else "error"
    return st, end


def read_body(obj, request):
    st = Stream()
    st.set_meta(obj)
    chs = _choices(obj)
    for pos, ch in enumerate(chs):
        msg = ch.get("message")
        if isinstance(msg, dict) and isinstance(msg.get("content"), str):
            st.add(str(_index(ch, pos)), msg["content"], 0, pos)
    ctx = next((c["message"]["context"] for c in chs if has_azure(c.get("message"))), None)
    if ctx is not None:
        st.kind, st.cits = "azure", azure_citations(ctx)
    elif has_perplexity(obj):
        st.kind, st.cits = "perplexity", perplexity_citations(obj)
    elif request_sources(request):
        st.kind, st.cits = "request", request_sources(request)
    else:
        learn_annotations(st, chs, "message", 0)
    st.known_ev = 0
    st.body = True
    return st


def learn_annotations(st, chs, key, ev):
    for pos, ch in enumerate(chs):
        m = ch.get(key)
        if isinstance(m, dict) and isinstance(m.get("annotations"), list):
            for a in m["annotations"]:
                st.annotate(str(_index(ch, pos)), a, ev)


def expected_view(body, request=None, profile="openwebui", ref_style="auto",
                  max_doc_bytes=8192, scores=True, max_event=MAX_EVENT):
    """The client view citegate must produce for `body` (bytes) and `request` (parsed)."""
    if profile == "off":
        return client_view(body)
    if profile not in PROFILES:
        raise ValueError(profile)
    if is_json_body(body):
        obj = json.loads(body.decode("utf-8"))
        st, end = read_body(obj, request), "body"
    else:
        st, end = read_stream(body, request, max_event)
    if profile == "structured" and end != "body" and len(body) > max_event:
        # Too long to hold: everything goes through unchanged, "event" members included.
        view = client_view(body)
        view.update(meta=st.meta, removed=0, shaped={i: False for i in view["content"]}, oversized=[],
                    passthrough=True)
        return view
    # The upstream's annotation chunks reach the client unchanged, in every profile.
    view = {"content": {}, "end": end, "sources": [], "citations": [],
            "annotations": {k: list(v) for k, v in st.up_anns.items()},
            "entities": [], "events": [], "meta": st.meta, "oversized": st.passed}
    for data in st.passed:  # their "event" members reach the client
        try:
            obj_ev = loads_pairs(data)
        except ValueError:
            continue
        if isinstance(obj_ev, dict):
            event_members(obj_ev, view)
    if profile == "structured":
        removed, texts, view["shaped"] = 0, tool_texts(request), {}
        for idx in st.order:
            view["content"][idx], r, view["shaped"][idx] = structured_fix(st.content[idx], texts)
            removed += r
        view["removed"] = removed
        if end == "body":
            _keep_body_extras(view, obj)
        return view
    style = resolve_style(ref_style, request, st)
    out = transform(st, profile, style, max_doc_bytes, scores)
    view["content"] = out["content"]
    view["sources"] += out["sources"]
    view["own_sources"] = len(out["sources"])  # after the oversized events' ones
    view["citations"] = out["citations"]
    view["own_annotations"] = out["annotations"]  # openai's chunk before the end
    for idx, anns in out["annotations"].items():
        view["annotations"].setdefault(idx, []).extend(anns)
    view["entities"] = out["entities"]
    view["defs"] = out["defs"]
    view["style"] = style
    if end == "body":
        _keep_body_extras(view, obj, profile)
    return view


def _keep_body_extras(view, obj, profile=None):
    """Members of a JSON body that citegate keeps and the client view also sees."""
    up = client_view(json.dumps(obj).encode())
    for idx, anns in up["annotations"].items():  # an existing message.annotations is extended
        view["annotations"][idx] = anns + view["annotations"].get(idx, [])
    if profile == "openai" and isinstance(obj.get("citations"), list):
        view["citations"] = up["citations"]  # the root already has "citations": not added
    elif up["citations"]:
        view["citations"] = up["citations"] + view["citations"]
    for k in ("sources", "entities"):
        if k in obj and isinstance(obj[k], list) and not view[k]:
            view[k] = obj[k]


def _source_list(v):
    return v if isinstance(v, list) and v and all(isinstance(x, dict) for x in v) else []


def event_members(obj, view):
    """Every top-level "event" member of obj (names unescaped, duplicates included): Open
    WebUI source events go to view["sources"], all others to view["events"]."""
    for k, v in obj.pairs:
        if k != "event":
            continue
        if isinstance(v, dict) and v.get("type") == "source":
            view["sources"].append(v.get("data"))
        else:
            view["events"].append(v)


def client_view(out):
    """The view a client has of citegate's output bytes (SSE or a JSON body)."""
    text = out.decode("utf-8")
    view = {"content": {}, "end": "body", "sources": [], "annotations": {}, "citations": [],
            "entities": [], "events": []}
    if is_json_body(out):
        obj = loads_pairs(text)
        for pos, ch in enumerate(_choices(obj)):
            msg = ch.get("message") if isinstance(ch.get("message"), dict) else {}
            if isinstance(msg.get("content"), str):
                view["content"][str(_index(ch, pos))] = msg["content"]
            if isinstance(msg.get("annotations"), list) and msg["annotations"]:
                view["annotations"][str(_index(ch, pos))] = msg["annotations"]
        view["sources"] = obj.get("sources") if isinstance(obj.get("sources"), list) else []
        view["citations"] = _source_list(obj.get("citations"))
        view["entities"] = obj.get("entities") if isinstance(obj.get("entities"), list) else []
        view["events"] = [v for k, v in obj.pairs if k == "event"]
        return view
    last = None
    for _, data in sse_events(text):
        last = data
        try:
            obj = loads_pairs(data)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        event_members(obj, view)
        view["citations"] += _source_list(obj.get("citations"))
        if isinstance(obj.get("entities"), list):
            view["entities"] += obj["entities"]
        for pos, ch in enumerate(_choices(obj)):
            d = ch.get("delta") if isinstance(ch.get("delta"), dict) else {}
            key = str(_index(ch, pos))
            if isinstance(d.get("content"), str):
                view["content"][key] = view["content"].get(key, "") + d["content"]
            if isinstance(d.get("annotations"), list) and d["annotations"]:
                view["annotations"].setdefault(key, []).extend(d["annotations"])
    view["end"] = "eof"
    if last == "[DONE]":
        view["end"] = "done"
    elif last is not None:
        try:
            o = json.loads(last)
            if isinstance(o, dict) and "error" in o:
                view["end"] = "error"
        except ValueError:
            pass
    return view


COMPARED = ("content", "end", "sources", "annotations", "citations", "entities", "events")


def comparable(view):
    return {k: view[k] for k in COMPARED}


def main(argv):
    if argv[:1] == ["--client"]:
        with open(argv[1], "rb") as f:
            print(json.dumps(client_view(f.read()), indent=1, ensure_ascii=False))
        return 0
    body_path, opts = argv[0], {"profile": "openwebui", "ref_style": "auto",
                                "max_doc_bytes": 8192, "scores": True, "max_event": MAX_EVENT}
    request, i = None, 1
    while i < len(argv):
        a = argv[i]
        if a == "--request":
            with open(argv[i + 1], encoding="utf-8") as f:
                request = json.load(f)
            i += 2
        elif a in ("--profile", "--ref-style", "--max-doc-bytes", "--max-event"):
            v = argv[i + 1]
            opts[a[2:].replace("-", "_")] = int(v) if a in ("--max-doc-bytes", "--max-event") else v
            i += 2
        elif a == "--no-scores":
            opts["scores"] = False
            i += 1
        else:
            raise SystemExit("unknown argument " + a)
    with open(body_path, "rb") as f:
        body = f.read()
    print(json.dumps(expected_view(body, request, **opts), indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
