#!/usr/bin/env python3
"""Mock OpenAI-compatible / Azure OpenAI / Anthropic / OpenAI Responses / Gemini upstream for
citegate's integration tests.

Python 3 standard library only. An asyncio HTTP/1.1 server (plain, or TLS with
--tls-cert/--tls-key; ALPN offers only http/1.1) bound to 127.0.0.1.

usage: mock_upstream.py --port 0 [--tls-cert C --tls-key K] --fixtures DIR --ready-file F
                        [--parent-pid PID]

With --port 0 a free port is picked; once listening, the port number is written
to the ready file (atomically: write a temporary file, then rename).

Routes
  GET  /__mock/requests   JSON list of recorded requests (see below); /__mock/* is not recorded
  POST /__mock/reset      clear the request log and the counters (open connections stay), and
                          put the embeddings endpoint back to its defaults
  GET  /__mock/stats      {"open":N,"closed_by_peer":M,"requests":K, ...}
  POST /__mock/embeddings set how the embeddings endpoint answers (see "Embeddings");
                          GET shows the settings
  GET  /v1/models         a small JSON model list
  *    /echo, /echo/...   JSON {method, path, query, headers, body} of the request
  POST /v1/embeddings, or any path ending in /embeddings (without X-Mock-Fixture):
                          an OpenAI-shaped embeddings answer (see "Embeddings")
  any path with X-Mock-Fixture, or any path ending in /chat/completions, /v1/messages
  (Anthropic Messages), /v1/responses (OpenAI Responses), :streamGenerateContent or
  :generateContent (Gemini, Vertex AI), /v2/chat (Cohere): a fixture
  anything else           404 with an OpenAI-style JSON error

Request headers that control a response (citegate forwards end-to-end headers):
  X-Mock-Fixture: NAME    serve DIR/NAME (NAME may name a file in a subdirectory of DIR):
                          *.sse as text/event-stream (chunked), anything else as
                          application/json with Content-Length.
                          Default when the request JSON has "stream": true / else:
                          chat path      azure_oyd_stream.sse / azure_oyd_response.json
                          /v1/messages   dialects/e2e/anthropic_stream.sse / …_response.json
                          /v1/responses  dialects/e2e/responses_stream.sse / …_response.json
                          …:streamGenerateContent  dialects/e2e/gemini_stream.sse (whatever
                                         the body says: Gemini streams by its path)
                          …:generateContent        dialects/e2e/gemini_response.json
                          /v2/chat       dialects/e2e/cohere_stream.sse / …_response.json
  X-Mock-Split: N         write the body in N-byte pieces (one chunk, one write+drain each).
                          Without it an .sse body is written one SSE event per piece and a
                          JSON body in one piece.
  X-Mock-Split-Wire: N    like X-Mock-Split but cut the encoded bytes (chunk framing
                          included) into N-byte writes.
  X-Mock-Delay-Ms: D      sleep D ms between pieces.
  X-Mock-Fault: F[,F...]  reset          abort the TCP connection (SO_LINGER 0 -> RST) after
                                         half the body
                          eof            close cleanly after half the body (no chunked
                                         terminator / short of Content-Length)
                          stall          send half the body, then stay idle until the peer
                                         closes
                          status:NNN     respond NNN with an OpenAI-style JSON error body
                          slow-headers:MS  wait MS before sending the response headers
                          close-delimited  no Content-Length/chunked; the body ends with
                                         connection close
                          no-done        strip the `data: [DONE]` event
                          interim:NNN    send an `HTTP/1.1 NNN` interim response (no body)
                                         before the real one
                          gzip           serve the body gzip-compressed, with
                                         Content-Encoding: gzip (whatever was asked for)
                          bighead        70 more header fields of 1 KiB each (over
                                         citegate's 64 KiB for an answer's head)

Recording: every request (except /__mock/*) is logged in memory as
  {"seq", "conn", "time", "method", "path", "query", "target", "version",
   "headers": [[name, value], ...] (wire order and case), "body" (UTF-8, replacement
   characters), "body_b64", "body_json" (parsed or null), "outcome"}
where outcome is "pending", "complete", "aborted" (peer closed or reset the
connection while the response was being sent), "reset", "eof", "stall" (the
fault was applied; "stall" changes to "aborted" when the peer gives up).

Stats: "open" = connections currently open; "closed_by_peer" = connections the
peer closed or reset while a response was in progress (client gave up);
"idle_closed_by_peer" = peer closes between requests; "tls_resumed" = TLS
connections that resumed an earlier session; "connections" = accepted
since reset; "requests" = recorded requests since reset;
"embeddings_requests" = embeddings requests since reset; "embeddings_in_flight" =
embeddings requests being answered (delayed or hanging included) now;
"embeddings_in_flight_max" = the most at once since reset.

Embeddings
  POST …/embeddings with {"model": M, "input": TEXT} (or a list of texts: one vector
  each) answers
    {"object":"list","data":[{"object":"embedding","index":0,"embedding":[…]}],
     "model":M,"usage":{"prompt_tokens":W,"total_tokens":W}}   (W: words of the input)
  Embeddings requests are recorded like any other (headers included), so a test can
  check the Authorization a caller sent.

  The vectors are deterministic and made so that paraphrases point the same way and
  unrelated questions do not. The lower-cased words of a text ([a-z0-9]+) are looked up
  in a table of topics, each a set of synonyms with a basis direction of its own
  (dimension i for topic i, so topics are orthogonal):
    charging   charge charging charged charger power powered battery batteries
               recharge recharging plug plugged
    device     x100 handset phone device smartphone
    refund     refund refunds refunded money back return returns reimburse reimbursed
    policy     policy policies rules terms conditions
    search     azure ai search index indexes indexing retrieval
    weather    weather rain sunny forecast temperature snow
    cooking    cook cooking recipe recipes bake baking oven pasta kitchen
    warranty   warranty guarantee defect defects manufacturing repair
    shipping   ship shipping delivery deliver parcel courier
    account    account password login username
    service    service centre center nearest shop store
    manual     manual guide instructions handbook documentation
  The vector is the sum of the directions of the topics the text names (each once),
  plus for every distinct word a small component (EMBED_WORD_WEIGHT) in one of the
  dimensions after the topics' (picked and signed by a SHA-256 of the word), normalised
  to length 1. So "How do I charge the X100?" and "power up my handset" share no word
  but both are charging + device: their cosine is about 0.98. "What is the refund
  policy?" is refund + policy, orthogonal to both: its cosine with them is the words'
  small components alone (about 0 to 0.01). A text with no topic word still gets a vector
  (its words' components). The dimension is 64 unless set below; with fewer dimensions
  than topics, topics share dimensions (modulo) and the words' components too.

  POST /__mock/embeddings {"mode": MODE, "dim": N, "delay_ms": D} changes how later
  embeddings requests are answered (each is answered as things were when it arrived);
  members left out keep their value, /__mock/reset restores mode "ok", dim 64, delay 0.
  It answers the resulting settings. MODE:
    ok          the answer above
    status:NNN  status NNN with an OpenAI-style error body
    malformed   200 with a JSON body cut short
    hang        never answer (until the peer closes)
    base64      200 with each embedding a base64 string of little-endian float32
                (OpenAI's encoding_format "base64"), not an array
  "dim" changes the dimension of every later vector, as a change of model would;
  "delay_ms" waits D ms before answering (or before hanging).
"""
import argparse
import asyncio
import base64
import gzip
import hashlib
import json
import math
import os
import re
import signal
import socket
import ssl
import struct
import sys
import time
from urllib.parse import urlsplit

MAX_HEADER_BYTES = 1 << 20
MAX_BODY_BYTES = 64 << 20

MODELS_BODY = json.dumps({
    "object": "list",
    "data": [
        {"id": "gpt-4o", "object": "model", "created": 1715367049, "owned_by": "system"},
        {"id": "gpt-4o-mini", "object": "model", "created": 1721172741, "owned_by": "system"},
    ],
}, separators=(",", ":")).encode()

STATUS_TEXT = {
    100: "Continue", 200: "OK", 204: "No Content", 400: "Bad Request", 401: "Unauthorized",
    403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
    413: "Payload Too Large", 429: "Too Many Requests", 500: "Internal Server Error",
    502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
}


def error_body(status):
    """The OpenAI-style error body served for X-Mock-Fault: status:NNN (tests import this)."""
    if status == 429:
        err = {"code": "429", "type": "rate_limit_exceeded",
               "message": "Requests to the ChatCompletions_Create Operation have exceeded "
                          "the rate limit. Please retry after 1 second."}
    else:
        err = {"code": str(status), "type": "server_error" if status >= 500 else "invalid_request_error",
               "message": f"mock upstream error {status}"}
    return json.dumps({"error": err}, separators=(",", ":")).encode()


DONE_RE = re.compile(rb"(?m)^data: ?\[DONE\][ \t]*(?:\r\n|\r|\n)(?:\r\n|\r|\n)?")


def strip_done(body):
    return DONE_RE.sub(b"", body)


def sse_event_pieces(body):
    """Cut an SSE body after each blank line (event end), keeping every byte."""
    pieces, start = [], 0
    for m in re.finditer(rb"(?:\r\n|\r(?!\n)|\n)(?:\r\n|\r(?!\n)|\n)", body):
        pieces.append(body[start:m.end()])
        start = m.end()
    if start < len(body):
        pieces.append(body[start:])
    return [p for p in pieces if p]


# Default fixtures per API: (path suffix, streaming answer, body answer).
DEFAULT_FIXTURES = (
    ("/chat/completions", "azure_oyd_stream.sse", "azure_oyd_response.json"),
    ("/v1/messages", "dialects/e2e/anthropic_stream.sse", "dialects/e2e/anthropic_response.json"),
    ("/v1/responses", "dialects/e2e/responses_stream.sse", "dialects/e2e/responses_response.json"),
    (":streamGenerateContent", "dialects/e2e/gemini_stream.sse", "dialects/e2e/gemini_stream.sse"),
    (":generateContent", "dialects/e2e/gemini_response.json", "dialects/e2e/gemini_response.json"),
    ("/v2/chat", "dialects/e2e/cohere_stream.sse", "dialects/e2e/cohere_response.json"),
)


def default_fixture(path):
    """(stream fixture, body fixture) of the API at path, or None."""
    for suffix, stream, body in DEFAULT_FIXTURES:
        if path.endswith(suffix):
            return stream, body
    return None


def fixture_path(root, name):
    """root/name for a name inside root (subdirectories allowed), else None."""
    rel = os.path.normpath(name)
    if os.path.isabs(rel) or rel == ".." or rel.startswith(".." + os.sep):
        return None
    return os.path.join(root, rel)


# ---- embeddings: see "Embeddings" in the docstring ----------------------------------

EMBED_TOPICS = (
    ("charging", "charge charging charged charger power powered battery batteries recharge "
                 "recharging plug plugged"),
    ("device", "x100 handset phone device smartphone"),
    ("refund", "refund refunds refunded money back return returns reimburse reimbursed"),
    ("policy", "policy policies rules terms conditions"),
    ("search", "azure ai search index indexes indexing retrieval"),
    ("weather", "weather rain sunny forecast temperature snow"),
    ("cooking", "cook cooking recipe recipes bake baking oven pasta kitchen"),
    ("warranty", "warranty guarantee defect defects manufacturing repair"),
    ("shipping", "ship shipping delivery deliver parcel courier"),
    ("account", "account password login username"),
    ("service", "service centre center nearest shop store"),
    ("manual", "manual guide instructions handbook documentation"),
)
EMBED_TOPIC_OF = {w: i for i, (_, words) in enumerate(EMBED_TOPICS) for w in words.split()}
# Small next to a topic's 1.0: a question of ten words adds 10 * 0.01 to a squared
# length of 2 (two topics), so paraphrases keep a cosine near 0.97.
EMBED_WORD_WEIGHT = 0.1
EMBED_DEFAULTS = {"mode": "ok", "dim": 64, "delay_ms": 0}
EMBED_MAX_DIM = 65536  # above citegate's bound on purpose: a test may want a refusal


def embed_words(text):
    return re.findall(r"[a-z0-9]+", text.lower())


def embed_vector(text, dim):
    """The unit vector of text in dim dimensions (deterministic across runs)."""
    v = [0.0] * dim
    words = embed_words(text)
    for t in sorted({EMBED_TOPIC_OF[w] for w in words if w in EMBED_TOPIC_OF}):
        v[t % dim] += 1.0
    first = len(EMBED_TOPICS) if dim > len(EMBED_TOPICS) else 0
    for w in sorted(set(words)):
        h = hashlib.sha256(w.encode()).digest()
        k = first + int.from_bytes(h[:4], "little") % (dim - first)
        v[k] += EMBED_WORD_WEIGHT if h[4] & 1 else -EMBED_WORD_WEIGHT
    norm = math.sqrt(sum(x * x for x in v))
    if norm == 0.0:  # no word at all: still a vector, the same for every empty text
        v[dim - 1], norm = 1.0, 1.0
    return [x / norm for x in v]


def embed_settings(current, change):
    """current updated by the members of change; raises ValueError on a bad one."""
    out = dict(current)
    if not isinstance(change, dict):
        raise ValueError("settings must be a JSON object")
    for key, value in change.items():
        if key == "mode":
            ok = value in ("ok", "malformed", "hang", "base64") or (
                isinstance(value, str) and re.fullmatch(r"status:[1-5][0-9][0-9]", value))
            if not ok:
                raise ValueError(f"unknown mode {value!r}")
        elif key == "dim":
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= EMBED_MAX_DIM:
                raise ValueError(f"dim must be an integer 1..{EMBED_MAX_DIM}")
        elif key == "delay_ms":
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError("delay_ms must be an integer >= 0")
        else:
            raise ValueError(f"unknown setting {key!r}")
        out[key] = value
    return out


def embed_answer(model, texts, dim, base64_vectors=False):
    """The body of an OpenAI embeddings answer for texts."""
    data = []
    for i, text in enumerate(texts):
        vec = embed_vector(text, dim)
        if base64_vectors:
            vec = base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode()
        data.append({"object": "embedding", "index": i, "embedding": vec})
    words = sum(len(embed_words(t)) for t in texts)
    return json.dumps({"object": "list", "data": data, "model": model,
                       "usage": {"prompt_tokens": words, "total_tokens": words}},
                      separators=(",", ":")).encode()


def embed_request(body):
    """(model, [texts]) of an embeddings request body; raises ValueError when it has none."""
    try:
        obj = json.loads(body or b"")
    except ValueError:
        raise ValueError("the body is not JSON")
    if not isinstance(obj, dict):
        raise ValueError("the body is not a JSON object")
    model, text = obj.get("model"), obj.get("input")
    if not isinstance(model, str) or not model:
        raise ValueError("you must provide a model parameter")
    texts = [text] if isinstance(text, str) else text
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError("'input' must be a string or a non-empty list of strings")
    return model, texts


def cut(data, n):
    return [data[i:i + n] for i in range(0, len(data), n)] or [b""]


class Request:
    __slots__ = ("method", "target", "version", "headers", "body", "record")

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default


class BadRequest(Exception):
    pass


class Conn:
    """One client connection: a reader task feeding parsed requests, a serving loop."""

    def __init__(self, mock, reader, writer, cid):
        self.mock, self.reader, self.writer, self.cid = mock, reader, writer, cid
        self.peer_closed = asyncio.Event()
        self.queue = asyncio.Queue()
        self.in_response = False
        self.aborted_counted = False
        self.closing = False

    # -- reading -----------------------------------------------------------------
    async def read_request(self):
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as e:
            if e.partial.strip():
                raise BadRequest("truncated request head")
            return None
        except asyncio.LimitOverrunError:
            raise BadRequest("request head too large")
        lines = head[:-4].split(b"\r\n")
        while lines and lines[0] == b"":  # tolerate stray CRLF between requests
            lines.pop(0)
        if not lines:
            return await self.read_request()
        try:
            method, target, version = lines[0].decode("latin-1").split(" ", 2)
        except ValueError:
            raise BadRequest("bad request line")
        req = Request()
        req.method, req.target, req.version = method, target, version
        req.headers = []
        for line in lines[1:]:
            name, sep, value = line.decode("latin-1").partition(":")
            if not sep or not name or name != name.strip():
                raise BadRequest("bad header line")
            req.headers.append((name, value.strip(" \t")))
        te = (req.header("transfer-encoding") or "").lower()
        if req.header("expect", "").lower() == "100-continue":
            self.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        if te:
            if te.split(",")[-1].strip() != "chunked":
                raise BadRequest("unsupported transfer-encoding")
            req.body = await self.read_chunked()
        else:
            cl = req.header("content-length")
            n = 0
            if cl is not None:
                if not cl.isdigit():
                    raise BadRequest("bad content-length")
                n = int(cl)
            if n > MAX_BODY_BYTES:
                raise BadRequest("body too large")
            req.body = await self.reader.readexactly(n) if n else b""
        return req

    async def read_chunked(self):
        out = bytearray()
        while True:
            line = await self.reader.readuntil(b"\r\n")
            size = line[:-2].split(b";", 1)[0].strip()
            try:
                n = int(size, 16)
            except ValueError:
                raise BadRequest("bad chunk size")
            if n == 0:
                while (await self.reader.readuntil(b"\r\n")) != b"\r\n":
                    pass  # trailers
                return bytes(out)
            out += await self.reader.readexactly(n)
            if await self.reader.readexactly(2) != b"\r\n":
                raise BadRequest("bad chunk end")
            if len(out) > MAX_BODY_BYTES:
                raise BadRequest("body too large")

    async def reader_loop(self):
        try:
            while True:
                req = await self.read_request()
                if req is None:
                    break
                await self.queue.put(req)
                if (req.header("connection", "").lower() == "close"
                        or req.version == "HTTP/1.0"):
                    # no more requests will come; keep watching for the peer's close
                    await self.reader.read()
                    break
        except BadRequest as e:
            await self.queue.put(e)
            return
        except (ConnectionError, OSError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        except asyncio.CancelledError:
            raise
        self.peer_closed.set()
        await self.queue.put(None)

    # -- writing -----------------------------------------------------------------
    async def send(self, data):
        """Write and drain; returns False when the peer is gone."""
        if self.peer_closed.is_set() and self.in_response:
            self.note_abort()
            return False
        try:
            self.writer.write(data)
            await self.writer.drain()
            return True
        except (ConnectionError, OSError, ssl.SSLError, RuntimeError):
            self.peer_closed.set()
            self.note_abort()
            return False

    async def sleep(self, ms):
        """Sleep, waking early when the peer closes; returns False then."""
        if ms <= 0:
            return not self.peer_closed.is_set()
        try:
            await asyncio.wait_for(self.peer_closed.wait(), ms / 1000.0)
        except asyncio.TimeoutError:
            return True
        self.note_abort()
        return False

    def note_abort(self):
        if self.in_response and not self.aborted_counted:
            self.aborted_counted = True
            self.mock.closed_by_peer += 1
            rec = self.current_record
            if rec is not None and rec["outcome"] in ("pending", "stall"):
                rec["outcome"] = "aborted"
                rec["aborted_at"] = time.time()

    def abort_rst(self):
        sock = self.writer.get_extra_info("socket")
        try:
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.writer.transport.abort()
        self.closing = True

    # -- serving -----------------------------------------------------------------
    async def run(self):
        self.current_record = None
        rtask = asyncio.ensure_future(self.reader_loop())
        try:
            while not self.closing:
                req = await self.queue.get()
                if req is None:
                    if not self.in_response:
                        self.mock.idle_closed_by_peer += 1
                    break
                if isinstance(req, BadRequest):
                    await self.simple(None, 400, "application/json",
                                      json.dumps({"error": {"message": str(req), "type": "invalid_request_error",
                                                            "code": "bad_request"}}).encode(), close=True)
                    break
                keep = await self.handle(req)
                if not keep:
                    break
        except (ConnectionError, OSError, ssl.SSLError):
            pass
        finally:
            rtask.cancel()
            if not self.closing:
                try:
                    self.writer.close()
                except Exception:
                    pass
            self.mock.open -= 1

    def wants_close(self, req):
        return req.header("connection", "").lower() == "close" or req.version == "HTTP/1.0"

    def head_bytes(self, status, headers):
        lines = [f"HTTP/1.1 {status} {STATUS_TEXT.get(status, 'Status')}"]
        lines += [f"{k}: {v}" for k, v in headers]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def simple(self, req, status, ctype, body, close=False, extra=()):
        close = close or (req is not None and self.wants_close(req))
        headers = [("Content-Type", ctype), ("Content-Length", str(len(body))),
                   ("X-Mock-Upstream", "1"), ("X-Mock-Conn", str(self.cid))]
        headers += list(extra)
        if close:
            headers.append(("Connection", "close"))
        else:
            headers.append(("Keep-Alive", "timeout=30"))
        self.in_response = True
        ok = await self.send(self.head_bytes(status, headers) + body)
        self.in_response = False
        if self.current_record is not None and self.current_record["outcome"] == "pending":
            self.current_record["outcome"] = "complete" if ok else "aborted"
        return ok and not close

    async def handle(self, req):
        self.current_record = None
        u = urlsplit(req.target)
        path, query = u.path, u.query
        if path.startswith("/__mock/"):
            return await self.admin(req, path)
        rec = self.mock.record(req, path, query, self.cid)
        self.current_record = rec
        self.aborted_counted = False

        if path == "/echo" or path.startswith("/echo/"):
            body = json.dumps({"method": req.method, "path": path, "query": query,
                               "headers": [[k, v] for k, v in req.headers],
                               "body": req.body.decode("utf-8", "replace")}).encode()
            return await self.simple(req, 200, "application/json", body)
        fixture = req.header("x-mock-fixture")
        if path.endswith("/embeddings") and req.method == "POST" and fixture is None:
            return await self.embeddings(req)
        if path == "/v1/models" and req.method == "GET" and fixture is None:
            return await self.simple(req, 200, "application/json", MODELS_BODY,
                                     extra=[("X-Mock-Models", "yes")])
        if fixture is None and default_fixture(path) is None:
            body = json.dumps({"error": {"message": f"no route for {req.method} {path}",
                                         "type": "invalid_request_error", "code": "404"}}).encode()
            return await self.simple(req, 404, "application/json", body)
        return await self.serve_fixture(req, path, fixture)

    async def admin(self, req, path):
        m = self.mock
        if path == "/__mock/requests":
            body = json.dumps(m.log).encode()
        elif path == "/__mock/reset":
            m.reset()
            body = b'{"ok":true}'
        elif path == "/__mock/stats":
            body = json.dumps(m.stats()).encode()
        elif path == "/__mock/embeddings":
            try:
                if req.method == "POST":
                    m.embed = embed_settings(m.embed, json.loads(req.body or b"{}"))
            except ValueError as e:
                return await self.simple(req, 400, "application/json",
                                         json.dumps({"error": {"message": str(e)}}).encode())
            body = json.dumps(m.embed).encode()
        else:
            return await self.simple(req, 404, "application/json", b'{"error":{"message":"unknown mock path"}}')
        return await self.simple(req, 200, "application/json", body)

    async def embeddings(self, req):
        """An embeddings request, answered as the settings were when it arrived."""
        m = self.mock
        settings = dict(m.embed)
        m.embed_requests += 1
        m.embed_in_flight += 1
        m.embed_in_flight_max = max(m.embed_in_flight_max, m.embed_in_flight)
        self.in_response = True  # a peer that gives up while we wait is counted
        try:
            if settings["delay_ms"] and not await self.sleep(settings["delay_ms"]):
                return False
            mode = settings["mode"]
            if mode == "hang":
                self.current_record["outcome"] = "stall"
                await self.peer_closed.wait()
                self.note_abort()
                return False
            if mode.startswith("status:"):
                status = int(mode[len("status:"):])
                return await self.simple(req, status, "application/json", error_body(status))
            try:
                model, texts = embed_request(req.body)
            except ValueError as e:
                body = json.dumps({"error": {"message": str(e), "type": "invalid_request_error",
                                             "code": "400"}}).encode()
                return await self.simple(req, 400, "application/json", body)
            body = embed_answer(model, texts, settings["dim"], base64_vectors=mode == "base64")
            if mode == "malformed":
                body = body[:body.index(b"[", body.index(b'"embedding"')) + 24]
            return await self.simple(req, 200, "application/json", body)
        finally:
            m.embed_in_flight -= 1
            self.in_response = False

    async def serve_fixture(self, req, path, fixture):
        rec = self.current_record
        faults = {}
        for f in (req.header("x-mock-fault") or "").split(","):
            f = f.strip()
            if f:
                name, _, arg = f.partition(":")
                faults[name.strip().lower()] = arg.strip()
        split = int(req.header("x-mock-split") or 0)
        wire_split = int(req.header("x-mock-split-wire") or 0)
        delay = int(req.header("x-mock-delay-ms") or 0)

        if "slow-headers" in faults:
            if not await self.sleep_in_response(int(faults["slow-headers"] or 0)):
                return False
        if "interim" in faults:
            code = int(faults["interim"])
            if not await self.send(b"HTTP/1.1 %d Interim\r\n\r\n" % code):
                return False
        if "status" in faults:
            status = int(faults["status"])
            extra = [("Retry-After", "1")] if status == 429 else []
            return await self.simple(req, status, "application/json", error_body(status), extra=extra)

        if fixture is None:
            try:
                stream = json.loads(req.body or b"{}").get("stream") is True
            except (ValueError, AttributeError):
                stream = False
            fixture = default_fixture(path)[0 if stream else 1]
        fpath = fixture_path(self.mock.fixtures, fixture)
        try:
            with open(fpath, "rb") as f:
                body = f.read()
        except (OSError, TypeError):
            body = json.dumps({"error": {"message": f"mock: no fixture {fixture}",
                                         "type": "invalid_request_error", "code": "404"}}).encode()
            return await self.simple(req, 404, "application/json", body)
        is_sse = fixture.endswith(".sse")
        if "no-done" in faults:
            body = strip_done(body)
        if "gzip" in faults:
            body = gzip.compress(body)

        close_delim = "close-delimited" in faults
        close = close_delim or self.wants_close(req)
        headers = [("Content-Type", "text/event-stream" if is_sse else "application/json"),
                   ("X-Mock-Upstream", "1"), ("X-Mock-Conn", str(self.cid)),
                   ("X-Mock-Fixture-Served", os.path.basename(fixture)),
                   ("apim-request-id", f"mock-{rec['seq']}")]
        if is_sse:
            headers.append(("Cache-Control", "no-cache"))
        if "gzip" in faults:
            headers.append(("Content-Encoding", "gzip"))
        if "bighead" in faults:
            headers += [("X-P%03d" % i, "v" * 1016) for i in range(70)]
        chunked = is_sse and not close_delim
        if chunked:
            headers.append(("Transfer-Encoding", "chunked"))
        elif not close_delim:
            headers.append(("Content-Length", str(len(body))))
        if close:
            headers.append(("Connection", "close"))
        else:
            headers.append(("Keep-Alive", "timeout=30"))

        # which part of the body is sent
        cut_at = None
        for f in ("reset", "eof", "stall"):
            if f in faults:
                cut_at = len(body) // 2
                break
        payload = body if cut_at is None else body[:cut_at]
        if split > 0:
            pieces = cut(payload, split)
        elif is_sse and "gzip" not in faults:
            pieces = sse_event_pieces(payload)
        else:
            pieces = [payload]
        pieces = [p for p in pieces if p]

        def frame(p):
            return (b"%x\r\n" % len(p)) + p + b"\r\n" if chunked else p

        self.in_response = True
        head = self.head_bytes(200, headers)
        if wire_split > 0:
            wire = head + b"".join(frame(p) for p in pieces)
            if cut_at is None and chunked:
                wire += b"0\r\n\r\n"
            writes, first_extra = cut(wire, wire_split), b""
        else:
            writes = [frame(p) for p in pieces]
            if cut_at is None and chunked:
                if writes:
                    writes[-1] += b"0\r\n\r\n"
                else:
                    writes = [b"0\r\n\r\n"]
            first_extra = head
        if first_extra:
            if not await self.send(first_extra):
                return self.end_response(False)
        for i, w in enumerate(writes):
            if i > 0 and delay and not await self.sleep(delay):
                return self.end_response(False)
            if not await self.send(w):
                return self.end_response(False)

        if "reset" in faults:
            # A RST makes the peer's kernel drop what it has not read yet: give it
            # 50 ms to read what was sent, so the reset comes mid-answer, as meant,
            # also on a loaded machine (under ASan a read can lag the writes).
            await self.sleep(50)
            rec["outcome"] = "reset"
            self.in_response = False
            self.abort_rst()
            return False
        if "eof" in faults:
            rec["outcome"] = "eof"
            self.in_response = False
            return False
        if "stall" in faults:
            rec["outcome"] = "stall"
            await self.peer_closed.wait()
            self.note_abort()
            self.in_response = False
            return False
        if rec["outcome"] == "pending":
            rec["outcome"] = "complete"
        self.in_response = False
        return not close

    async def sleep_in_response(self, ms):
        self.in_response = True
        ok = await self.sleep(ms)
        self.in_response = ok  # stays True only while still serving
        return ok

    def end_response(self, ok):
        self.in_response = False
        return ok


class Mock:
    def __init__(self, fixtures):
        self.fixtures = fixtures
        self.log = []
        self.open = 0
        self.seq = 0
        self.conn_seq = 0
        self.reset()

    def reset(self):
        self.log = []
        self.closed_by_peer = 0
        self.idle_closed_by_peer = 0
        self.connections = 0
        self.tls_resumed = 0
        self.embed = dict(EMBED_DEFAULTS)
        self.embed_requests = 0
        self.embed_in_flight_max = self.embed_in_flight = getattr(self, "embed_in_flight", 0)

    def stats(self):
        return {"open": self.open, "closed_by_peer": self.closed_by_peer, "requests": len(self.log),
                "idle_closed_by_peer": self.idle_closed_by_peer, "connections": self.connections,
                "tls_resumed": self.tls_resumed, "embeddings_requests": self.embed_requests,
                "embeddings_in_flight": self.embed_in_flight,
                "embeddings_in_flight_max": self.embed_in_flight_max}

    def record(self, req, path, query, cid):
        self.seq += 1
        try:
            body_json = json.loads(req.body) if req.body else None
        except ValueError:
            body_json = None
        rec = {"seq": self.seq, "conn": cid, "time": time.time(), "method": req.method,
               "path": path, "query": query, "target": req.target, "version": req.version,
               "headers": [[k, v] for k, v in req.headers],
               "body": req.body.decode("utf-8", "replace"),
               "body_b64": base64.b64encode(req.body).decode(),
               "body_json": body_json, "outcome": "pending"}
        self.log.append(rec)
        return rec

    async def on_conn(self, reader, writer):
        self.open += 1
        self.connections += 1
        tls = writer.get_extra_info("ssl_object")
        if tls is not None and tls.session_reused:
            self.tls_resumed += 1
        self.conn_seq += 1
        try:
            await Conn(self, reader, writer, self.conn_seq).run()
        except asyncio.CancelledError:
            pass  # server shutting down


async def amain(args):
    mock = Mock(os.path.abspath(args.fixtures))
    ctx = None
    if args.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        ctx.set_alpn_protocols(["http/1.1"])
    server = await asyncio.start_server(mock.on_conn, args.host, args.port, ssl=ctx,
                                        limit=MAX_HEADER_BYTES, reuse_address=True)
    port = server.sockets[0].getsockname()[1]
    if args.ready_file:
        tmp = args.ready_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, args.ready_file)
    else:
        print(port, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if args.parent_pid:
        async def watch_parent():
            while True:
                await asyncio.sleep(0.5)
                try:
                    os.kill(args.parent_pid, 0)
                except ProcessLookupError:
                    stop.set()
                    return
        asyncio.ensure_future(watch_parent())
    async with server:
        await stop.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--fixtures", default=os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures"))
    ap.add_argument("--ready-file")
    ap.add_argument("--parent-pid", type=int, help="exit when this process is gone")
    args = ap.parse_args()
    if bool(args.tls_cert) != bool(args.tls_key):
        ap.error("--tls-cert and --tls-key go together")
    try:
        asyncio.run(amain(args))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
