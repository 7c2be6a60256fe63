#!/usr/bin/env python3
"""Independent model of the `responses` upstream dialect's answer side (SPEC §6a) and the
client view citegate must give for it, in every profile.

Written from SPEC §6, §6a, §7 and the design notes at the top of src/dialects/responses.c,
never from citegate's output. It works on decoded text and code points: the events a
Responses upstream sends are read in order, the text each one lets out is noted with the
event it came in, and the profiles' rewrite (tests/tools/oracle.py) is applied to the
concatenation, knowing for each reference whether its citation had arrived by then.

The view: only output_text deltas are content, all parts into choice 0. Markers 【…†…】
(no other 【 or 】 inside, at most 256 bytes as UTF-8) wait for the next event; the
annotations it brings whose [start_index, end_index) (code points of the part, markers
included) cover a marker make it [N] (the first one wins); a run of
output_text.annotation.added events lets the text out up to the first marker still open;
any other event deletes open markers and lets everything out, except that a delta of the
same part keeps a marker in progress. Text behind a waiting marker waits too.
url_citation / file_citation annotations are citations (distinct by url / file_id,
numbered in arrival order after any request-side <source> ids); one that covers no
waiting marker counts its citation as referenced once where it arrives, and a
url_citation's is forwarded as a chat annotation (upstream offsets). Final lists
(output_text.done, content_part.done, output_item.done, response.completed) repeat
annotations: one seen before (part, type, key, range) only covers. A body is the stream
it amounts to: each part's text as a delta, then one annotation.added per annotation, and
its text counts as let out where that stream would let it out, so a body and the same
answer streamed get the same numbers (the order of output items, parts and annotations).

usage: responses_oracle.py --regen
         rewrite tests/fixtures/expected/responses/ from the fixtures
       responses_oracle.py --check CITEGATE EXPECTED_JSON...
         each stored file is what the oracle says, and citegate's client view matches it
       responses_oracle.py FIXTURE [--profile P] [--request FILE]   print the expected view
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dialect_oracle as D  # noqa: E402  (expected files and --check, as the other oracles')
import oracle  # noqa: E402

EXPECTED = os.path.join(D.FIXTURES, "expected", "responses")
PROFILES = ("openwebui", "openai", "webchat", "off")
CREATED = 1700000000
MARKER_MAX = 256
OPEN, CLOSE, DAGGER = "\u3010", "\u3011", "\u2020"
# The request each fixture needs (include_usage); none for the others.
REQUESTS = {"responses_usage.sse": "dialects/answers/responses_usage.request.json"}


def u8(s):
    return len(s.encode("utf-8", "surrogatepass"))


class Citation(oracle.Citation):
    """A dialect citation: no snippet; a file_citation's KEY is its file_id."""

    def __init__(self, title, url=None, key=None):
        super().__init__("", title, url)
        self.forced_key = key

    @property
    def key(self):
        return self.forced_key if self.forced_key else oracle.Citation.key.fget(self)


class Mention:
    """A citation counted as referenced once, where its annotation arrived."""

    def __init__(self, n, cit, when):
        self.idx, self.n, self.cit, self.key, self.when = "0", n, cit, n - 1, when
        self.resolves, self.label = False, str(n)


class Answer(oracle.Stream):
    """What the view hands the transformer: content pieces with the moment each was let
    out, citations with the moment each arrived, and the mentions."""

    def __init__(self, request):
        super().__init__()
        self.kind, self.cits, self.arrived = "dialect", {}, {}
        self.said = self.mentions  # the base class's list of mentions
        self.sources = oracle.request_sources(request)
        for n, c in self.sources.items():
            self.cits[n], self.arrived[n] = c, -1

    def ref_known(self, n, ev, key):
        return n in self.arrived and self.arrived[n] <= ev

    def lookup(self, n):
        return self.cits.get(n)


class View:
    """The responses view over a sequence of events."""

    def __init__(self, request, body=False):
        self.ans = Answer(request)
        self.body, self.ev = body, 0
        self.cp = {}              # part -> code points so far
        self.cur = None           # the part of the last delta
        self.cand = None          # [text, start code point] of a marker in progress
        self.held = []            # ["text", s] / ["marker", s, start, end, n]
        self.out = []             # text let out by the current event
        self.numbers, self.seen = {}, set()
        self.forwarded = []       # chat annotations, in order
        self.end, self.finish, self.usage, self.error = None, None, None, None

    # --- text ---------------------------------------------------------------------------
    def emit(self, s):
        if s:
            if any(h[0] == "marker" for h in self.held):
                self.held.append(["text", s])
            else:
                self.out.append(s)

    def feed(self, text):
        for ch in text:
            cp = self.cp[self.cur]
            self.cp[self.cur] = cp + 1
            if self.cand is None:
                if ch == OPEN:
                    self.cand = [ch, cp]
                else:
                    self.emit(ch)
            elif ch == OPEN:
                self.emit(self.cand[0])
                self.cand = [ch, cp]
            elif ch == CLOSE:
                whole = self.cand[0] + ch
                if DAGGER in whole and u8(whole) <= MARKER_MAX:
                    self.held.append(["marker", whole, self.cand[1], cp + 1, 0])
                else:
                    self.emit(whole)
                self.cand = None
            else:
                self.cand[0] += ch
                if u8(self.cand[0]) + 3 > MARKER_MAX:  # no room left for its 】
                    self.emit(self.cand[0])
                    self.cand = None

    def settle(self, keep_open):
        rest = []
        for k, h in enumerate(self.held):
            if h[0] == "text":
                self.out.append(h[1])
            elif h[4]:
                self.out.append("[%d]" % h[4])
            elif keep_open:
                rest = self.held[k:]
                break
        self.held = rest

    def release(self, keep_cand=False):
        self.settle(False)
        if self.cand is not None and not keep_cand:
            self.emit(self.cand[0])
            self.cand = None

    def let_out(self):
        """Notes the text this event let out, with its moment."""
        text = "".join(self.out)
        self.out = []
        if text:
            self.ans.add("0", text, 2 * self.ev + 1, 0)

    # --- annotations --------------------------------------------------------------------
    def take(self, a, part, final):
        if not isinstance(a, dict) or a.get("type") not in ("url_citation", "file_citation"):
            return
        url = a["type"] == "url_citation"
        key_name, title_name = ("url", "title") if url else ("file_id", "filename")
        key, title = a.get(key_name), a.get(title_name)
        if not isinstance(key, str):
            inner = a.get(a["type"])
            inner = inner if isinstance(inner, dict) else {}
            key = inner.get(key_name)
            if not isinstance(title, str):
                title = inner.get(title_name)
        if not isinstance(key, str):
            return
        title = title if isinstance(title, str) else None
        s, e = a.get("start_index"), a.get("end_index")
        ranged = all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (s, e)) \
            and s <= e
        ident = (part, url, key, ranged, s if ranged else 0, e if ranged else 0)
        seen = ident in self.seen
        self.seen.add(ident)
        n = self.numbers.get((url, key))
        if n is None:
            n = max(self.ans.cits, default=0) + 1
            self.numbers[(url, key)] = n
            self.ans.cits[n] = Citation(title, url=key) if url else Citation(title, key=key)
            self.ans.arrived[n] = 2 * self.ev
        covers = False
        if ranged and part == self.cur:
            for h in self.held:
                if h[0] == "marker" and s <= h[2] and h[3] <= e:
                    covers = True
                    h[4] = h[4] or n
        if covers or seen:
            return
        when = (2 * self.ev, 0, len(self.ans.said))
        self.ans.said.append(Mention(n, self.ans.cits[n], when))
        if url:
            chat = {"url": key, "title": title if title is not None else ""}
            if ranged:
                chat.update(start_index=s, end_index=e)
            self.forwarded.append({"type": "url_citation", "url_citation": chat})

    def take_list(self, anns, part):
        for a in anns if isinstance(anns, list) else []:
            self.take(a, part, True)

    def take_item(self, item, out):
        if isinstance(item, dict) and item.get("type") == "message" and \
                isinstance(item.get("content"), list):
            for k, p in enumerate(item["content"]):
                if isinstance(p, dict) and p.get("type") == "output_text":
                    self.take_list(p.get("annotations"), (out, k))

    def take_output(self, resp):
        out = resp.get("output") if isinstance(resp, dict) else None
        for i, item in enumerate(out if isinstance(out, list) else []):
            self.take_item(item, i)

    # --- events -------------------------------------------------------------------------
    def delta(self, part, text):
        self.release(keep_cand=part == self.cur)
        self.cur = part
        self.cp.setdefault(part, 0)
        self.feed(text)

    def event(self, obj):
        self.ev += 1
        t = obj.get("type")
        part = (index(obj.get("output_index")), index(obj.get("content_index")))
        if t in ("response.created", "response.in_progress", "response.completed",
                 "response.incomplete") and isinstance(obj.get("response"), dict):
            self.ans.set_meta(obj["response"])  # the first non-empty id and model win
        if t == "response.output_text.delta":
            d = obj.get("delta")
            self.delta(part, d if isinstance(d, str) else "")
        elif t in ("response.output_text.annotation.added", "response.output_text_annotation.added"):
            self.take(obj.get("annotation"), part, False)
            self.settle(True)
        elif t in ("response.completed", "response.incomplete"):
            resp = obj.get("response") if isinstance(obj.get("response"), dict) else {}
            self.take_output(resp)
            self.release()
            self.finish = finish_reason(resp) or ("stop" if t == "response.completed" else "length")
            self.usage = usage_of(resp)
            self.end = "done"
        elif t in ("response.failed", "error"):
            self.release()
            err = obj.get("response", {}).get("error") if t == "response.failed" else \
                (obj if isinstance(obj.get("message"), str) else obj.get("error"))
            self.error = error_of(err)
            self.end = "error"
        else:
            if t == "response.output_text.done":
                self.take_list(obj.get("annotations"), part)
            elif t == "response.content_part.done" and isinstance(obj.get("part"), dict) and \
                    obj["part"].get("type") == "output_text":
                self.take_list(obj["part"].get("annotations"), part)
            elif t == "response.output_item.done":
                self.take_item(obj.get("item"), part[0])
            self.release()
        self.let_out()

    def read_body(self, resp):
        out = resp.get("output")
        for i, item in enumerate(out if isinstance(out, list) else []):
            if not (isinstance(item, dict) and item.get("type") == "message" and
                    isinstance(item.get("content"), list)):
                continue
            for k, p in enumerate(item["content"]):
                if not (isinstance(p, dict) and p.get("type") == "output_text" and
                        isinstance(p.get("text"), str)):
                    continue
                self.ev += 1
                self.delta((i, k), p["text"])
                self.let_out()
                for a in p.get("annotations") if isinstance(p.get("annotations"), list) else []:
                    self.ev += 1
                    self.take(a, (i, k), False)
                    self.settle(True)
                    self.let_out()
        self.release()
        self.let_out()


def index(v):
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2 ** 31 else -1


def finish_reason(resp):
    if resp.get("status") == "completed":
        return "stop"
    if resp.get("status") != "incomplete":
        return None
    d = resp.get("incomplete_details")
    return "content_filter" if isinstance(d, dict) and d.get("reason") == "content_filter" \
        else "length"


def usage_of(resp):
    u = resp.get("usage") if isinstance(resp, dict) else None
    if not isinstance(u, dict):
        return None
    i, o = u.get("input_tokens"), u.get("output_tokens")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (i, o)):
        return None
    return {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o}


def error_of(err):
    err = err if isinstance(err, dict) else {}
    m, c = err.get("message"), err.get("code")
    return {"message": m if isinstance(m, str) else "the upstream response failed",
            "type": "upstream_error", "code": c if isinstance(c, str) else None}


# ---------------------------------------------------------------------------------- views

def read(body, request):
    """The view run over an upstream body: (View, is_body)."""
    if oracle.is_json_body(body):
        resp = json.loads(body.decode("utf-8"))
        v = View(request, body=True)
        v.ans.set_meta(resp)
        if resp.get("status") == "failed":
            v.error, v.end = error_of(resp.get("error")), "body"
        else:
            v.read_body(resp)
            v.end, v.finish, v.usage = "body", finish_reason(resp), usage_of(resp)
        return v, True
    v = View(request)
    for data, _, complete in oracle.sse_blocks(body):
        if data is None or not complete or v.end:
            continue
        try:
            obj = json.loads(data)
        except ValueError:
            continue
        if isinstance(obj, dict):
            v.event(obj)
    if v.end is None:  # the upstream ended first: what is held goes out, then the error
        v.ev += 1
        v.release()
        v.let_out()
        v.end = "error"
        v.error = {"message": "upstream closed the stream before the answer finished",
                   "type": "upstream_error", "code": "upstream_closed"}
    return v, False


def expected_view(body, request=None, profile="openwebui"):
    v, is_body = read(body, request)
    ans = v.ans
    ans.content.setdefault("0", "")
    if "0" not in ans.order:
        ans.order.append("0")
        ans.segments["0"], ans.cuts["0"], ans.raw["0"] = [], [], set()
    view = {"content": {"0": ans.content["0"]}, "end": v.end, "sources": [], "annotations": {},
            "citations": [], "entities": [], "events": []}
    if is_body and v.error:
        view["content"] = {}
    elif profile != "off":
        out = oracle.transform(ans, profile, "numeric", 8192, True)
        view["content"] = out["content"]
        view["sources"], view["citations"] = out["sources"], out["citations"]
        view["entities"], view["annotations"] = out["entities"], out["annotations"]
    if v.forwarded:
        view["annotations"]["0"] = v.forwarded + view["annotations"].get("0", [])
    view["finish_reason"] = v.finish
    view["usage"] = v.usage if (is_body or (request or {}).get("stream_options", {}).get(
        "include_usage") is True) else None
    view["error"] = v.error
    # Every chunk (or the chat completion) names the response; a failed body is an error.
    rid, model = ans.meta["id"], ans.meta["model"]
    view["meta"] = [] if is_body and v.error else \
        {"id": rid or "", "created": CREATED, "model": model or ""}
    return view


COMPARED = D.ANSWER_COMPARED
client_view = D.answer_client_view
GOLDENS = D.Goldens("responses_", EXPECTED, PROFILES, expected_view, REQUESTS.get,
                    lambda fixture: "responses")
main = GOLDENS.main


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
