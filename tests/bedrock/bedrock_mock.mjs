#!/usr/bin/env node
// A mock Amazon Bedrock Converse and Knowledge Bases upstream for
// tests/integration/test_bedrock.py and test_bedrock_kb.py, built on
// AWS's own code: its event-stream messages are framed by @smithy/eventstream-codec (the
// codec of AWS's JavaScript SDK), and its signature check is @smithy/signature-v4 with
// @aws-crypto/sha256-js, the SDK's signer. Nothing here frames or signs by hand.
//
// usage: node bedrock_mock.mjs --fixtures DIR[:DIR...] --ready-file FILE [--parent-pid PID]
//
// It serves HTTP/1.1 and h2c (prior knowledge) on two ports of 127.0.0.1, written to the
// ready file as {"h1": PORT, "h2": PORT} once both listen. On either:
//
//   POST /model/{MODEL}/converse-stream   the scenario's events in AWS's event stream
//   POST /model/{MODEL}/converse          the scenario's answer as a Converse JSON body
//   POST /retrieveAndGenerateStream       Knowledge Bases: the scenario's events (default
//                                          kb_grounded) in AWS's event stream
//   POST /retrieveAndGenerate             the same answer as a RetrieveAndGenerate body
//                                          (both answer with the header
//                                          x-amzn-bedrock-knowledge-base-session-id: the
//                                          request's sessionId, else a new one)
//   GET  /__mock/requests                 every model request, in arrival order: {seq, proto,
//                                          conn, method, path (as received), headers ([name,
//                                          value] in order, h2's pseudo-headers too), body,
//                                          body_json, signature (when checked), closed,
//                                          rst_code (h2: how the stream ended), sent_all}
//   GET  /__mock/connections              {id: {proto, opened, closed, peer_ended}}
//   POST /__mock/reset                    forget the requests
//   POST /__mock/config                   {"credentials": {accessKeyId, secretAccessKey,
//                                          sessionToken?} | null, "region": R}: check (or
//                                          stop checking) every model request's SigV4
//
// The scenario is the fixture NAME.json named by the request's X-Mock-Scenario (default
// nova_web), from the first DIR that has one (several: one mock serves the scenarios of
// other tests too). A fixture is
//   {"events": [ENTRY...], "body"?: {...}, "http"?: {"status", "errortype", "message"}}
// with ENTRY one of
//   {"event": TYPE, "payload": {...}}                 :message-type event
//   {"exception": TYPE, "payload": {"message": M}}    :message-type exception
//   {"error": {"code": C, "message": M}}              :message-type error
//   {"hold": true}                                    (last) keep the response open
//   {"together": true}                                the messages after it leave in one
//                                                     write with the body's end, 100 ms
//                                                     (or X-Mock-Delay-Ms) after the others
// and, on any message entry, "corrupt": "message" (a payload byte flipped: the message CRC
// fails) or "prelude" (a length byte flipped: the prelude CRC fails), or "claim_length": N
// (the total length rewritten to N, the prelude CRC made right again with @aws-crypto/crc32;
// only the real bytes are sent). "http" answers both routes with that error status and
// AWS's JSON error body. "body" is the /converse answer; without it the body is made of
// the events as Bedrock makes one: a block's text deltas joined, a block with citations a
// citationsContent block (a citation delta with only sourceContent continues the one
// before), stopReason, usage and metrics. A Knowledge Bases body is made of `output`
// events' texts joined, the `citation` events' citations (their deprecated nested
// `citation` left out) and a guardrail's INTERVENED as guardrailAction.
//
// A fixture's "delay_ms" is a pause before each message. Request headers that steer it:
// X-Mock-Delay-Ms (the pause, instead of the fixture's),
// X-Mock-Pieces (the stream written in pieces of that many bytes, a millisecond apart).
//
// A signature is checked as AWS checks it: the request is signed again, with the expected
// credentials, the region, service `bedrock` and the request's own x-amz-date, over its
// method, its path as received, the header fields its SignedHeaders names, and its body
// (whose SHA-256 the signer computes itself); the Authorization made must equal the one
// received. A difference is answered 403 with AWS's InvalidSignatureException body.
import fs from "node:fs";
import http from "node:http";
import http2 from "node:http2";
import path from "node:path";

import { crc32 } from "@aws-crypto/crc32";
import { Sha256 } from "@aws-crypto/sha256-js";
import { EventStreamCodec } from "@smithy/eventstream-codec";
import { SignatureV4 } from "@smithy/signature-v4";
import { fromUtf8, toUtf8 } from "@smithy/util-utf8";

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
if (!args.fixtures || !args["ready-file"]) {
  console.error("usage: bedrock_mock.mjs --fixtures DIR[:DIR...] --ready-file FILE [--parent-pid PID]");
  process.exit(2);
}

const codec = new EventStreamCodec(toUtf8, fromUtf8);
const HOLD_MS = 20000; // the longest a held response stays open

let config = { credentials: null, region: "us-east-1" };
let requests = [];
let seq = 0;
const connections = {};
let nextConn = 0;

// --- the event stream --------------------------------------------------------------

function str(value) {
  return { type: "string", value };
}

function encodeEntry(e) {
  let msg;
  if (e.event !== undefined) {
    msg = {
      headers: { ":event-type": str(e.event), ":content-type": str("application/json"), ":message-type": str("event") },
      body: fromUtf8(JSON.stringify(e.payload ?? {})),
    };
  } else if (e.exception !== undefined) {
    msg = {
      headers: { ":exception-type": str(e.exception), ":content-type": str("application/json"), ":message-type": str("exception") },
      body: fromUtf8(JSON.stringify(e.payload ?? {})),
    };
  } else if (e.error !== undefined) {
    msg = {
      headers: { ":error-code": str(e.error.code), ":error-message": str(e.error.message), ":message-type": str("error") },
      body: new Uint8Array(0),
    };
  } else {
    return null;
  }
  const bytes = Uint8Array.from(codec.encode(msg));
  const view = new DataView(bytes.buffer);
  if (e.corrupt === "message") {
    const headersLen = view.getUint32(4);
    const payloadLen = bytes.length - 16 - headersLen;
    bytes[12 + headersLen + (payloadLen > 0 ? payloadLen >> 1 : 0)] ^= 0x01;
  } else if (e.corrupt === "prelude") {
    bytes[3] ^= 0x01;
  }
  if (e.claim_length !== undefined) {
    view.setUint32(0, e.claim_length);
    view.setUint32(8, crc32(bytes.subarray(0, 8)));
  }
  return bytes;
}

// The /converse body Bedrock gives for the same answer.
function bodyOf(fx) {
  if (fx.body) return fx.body;
  const blocks = [];
  const out = { output: { message: { role: "assistant", content: [] } } };
  for (const e of fx.events ?? []) {
    const p = e.payload ?? {};
    if (e.event === "contentBlockDelta") {
      const b = (blocks[p.contentBlockIndex] ??= { text: "", citations: [] });
      const d = p.delta ?? {};
      if (typeof d.text === "string") b.text += d.text;
      if (d.citation) {
        const c = d.citation;
        const last = b.citations[b.citations.length - 1];
        if (last && c.location === undefined && c.title === undefined && c.source === undefined) {
          const more = (c.sourceContent ?? []).map((s) => s.text).join("");
          if (last.sourceContent?.length) last.sourceContent[last.sourceContent.length - 1].text += more;
          else last.sourceContent = [{ text: more }];
        } else {
          b.citations.push(structuredClone(c));
        }
      }
    } else if (e.event === "messageStop") {
      out.stopReason = p.stopReason;
    } else if (e.event === "metadata") {
      if (p.usage) out.usage = p.usage;
      if (p.metrics) out.metrics = p.metrics;
    }
  }
  for (const b of blocks) {
    if (!b) continue;
    out.output.message.content.push(
      b.citations.length ? { citationsContent: { content: [{ text: b.text }], citations: b.citations } } : { text: b.text });
  }
  return out;
}

// The /retrieveAndGenerate body Knowledge Bases give for the same answer.
function kbBodyOf(fx, sessionId) {
  const out = { sessionId, output: { text: "" }, citations: [] };
  for (const e of fx.events ?? []) {
    const p = e.payload ?? {};
    if (e.event === "output" && typeof p.text === "string") out.output.text += p.text;
    else if (e.event === "citation") {
      const c = p.generatedResponsePart || p.retrievedReferences ? { ...p } : { ...(p.citation ?? {}) };
      delete c.citation;
      out.citations.push(c);
    } else if (e.event === "guardrail" && p.action === "INTERVENED") out.guardrailAction = "INTERVENED";
  }
  return fx.body ? { ...fx.body, sessionId } : out;
}

const fixtureDirs = args.fixtures.split(path.delimiter);

function loadFixture(name) {
  if (!/^[A-Za-z0-9_-]+$/.test(name)) throw new Error(`bad scenario name ${JSON.stringify(name)}`);
  const files = fixtureDirs.map((d) => path.join(d, name + ".json"));
  const file = files.find((f) => fs.existsSync(f)) ?? files[0]; // none: the first one's error
  return JSON.parse(fs.readFileSync(file, "utf8"));
}

// --- the signature ---------------------------------------------------------------

function header(rec, name) {
  for (const [k, v] of rec.headers) if (k.toLowerCase() === name) return v;
  return undefined;
}

function amzDate(s) {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(s ?? "");
  return m ? new Date(Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6])) : null;
}

// null when the signature is AWS's, else why not.
async function checkSignature(rec, bodyBytes) {
  const auth = header(rec, "authorization");
  const m = /^AWS4-HMAC-SHA256 Credential=([^,]+), SignedHeaders=([^,]+), Signature=([0-9a-f]+)$/.exec(auth ?? "");
  if (!m) return "no AWS4-HMAC-SHA256 Authorization";
  const date = amzDate(header(rec, "x-amz-date"));
  if (!date) return "no x-amz-date";
  if (Math.abs(Date.now() - date.getTime()) > 5 * 60 * 1000) return "x-amz-date more than 5 minutes away";
  // What the signer adds itself: the date (from signingDate), the token (from the
  // expected credentials) and the body's SHA-256 (computed over the body received).
  const own = new Set(["x-amz-date", "x-amz-security-token", "x-amz-content-sha256"]);
  const headers = {};
  for (const name of m[2].split(";")) {
    if (own.has(name)) continue;
    const v = name === "host" ? header(rec, "host") ?? header(rec, ":authority") : header(rec, name);
    if (v === undefined) return `signed header ${name} missing`;
    headers[name] = v;
  }
  const signer = new SignatureV4({
    credentials: config.credentials,
    region: config.region,
    service: "bedrock",
    sha256: Sha256,
    uriEscapePath: true,
    applyChecksum: true,
  });
  const [p, q] = rec.path.split("?");
  const query = {};
  for (const [k, v] of new URLSearchParams(q ?? "")) query[k] = v;
  const signed = await signer.sign(
    { method: rec.method, protocol: "http:", hostname: "", path: p, query, headers, body: bodyBytes },
    { signingDate: date });
  const want = signed.headers.authorization;
  if (want !== auth) return `Authorization differs: want ${want}`;
  if (signed.headers["x-amz-content-sha256"] !== header(rec, "x-amz-content-sha256"))
    return "x-amz-content-sha256 is not the body's";
  return null;
}

// --- answering -------------------------------------------------------------------

function sendJson(res, status, obj, extra = {}) {
  const body = Buffer.from(JSON.stringify(obj));
  res.writeHead(status, { "content-type": "application/json", "content-length": body.length, ...extra });
  res.end(body);
}

function awsError(res, status, type, message) {
  sendJson(res, status, { message }, { "x-amzn-errortype": `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/` });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function stream(req, res, rec, fx, extra = {}) {
  res.writeHead(200, { "content-type": "application/vnd.amazon.eventstream", "x-amzn-requestid": `req-${rec.seq}`, ...extra });
  const delay = Number(header(rec, "x-mock-delay-ms") ?? fx.delay_ms ?? 0);
  const pieces = Number(header(rec, "x-mock-pieces") ?? 0);
  let hold = false;
  let tail = null; // after {"together": true}: the messages that leave in one write, with the end
  for (const e of fx.events ?? []) {
    if (e.hold) {
      hold = true;
      break;
    }
    if (e.together) {
      tail = [];
      continue;
    }
    const bytes = encodeEntry(e);
    if (!bytes) continue;
    if (tail) {
      tail.push(bytes);
      continue;
    }
    if (delay) await sleep(delay);
    if (rec.closed) return;
    if (pieces > 0) {
      for (let i = 0; i < bytes.length && !rec.closed; i += pieces) {
        res.write(Buffer.from(bytes.subarray(i, i + pieces)));
        await sleep(1);
      }
    } else {
      res.write(Buffer.from(bytes));
    }
  }
  if (tail) {
    await sleep(Math.max(delay, 100)); // what went before is read on its own
    if (rec.closed) return;
    const last = Buffer.concat(tail.map((b) => Buffer.from(b)));
    rec.sent_all = true;
    if (hold) res.write(last);
    else return void res.end(last); // the messages and the body's end in one write
  }
  if (rec.closed) return;
  rec.sent_all = true;
  if (!hold) {
    res.end();
    return;
  }
  const t = setTimeout(() => res.end(), HOLD_MS);
  res.on("close", () => clearTimeout(t));
}

async function answer(req, res, rec, bodyBytes) {
  const route = /^\/model\/([^/?]+)\/(converse|converse-stream)(\?.*)?$/.exec(rec.path);
  const kb = /^\/(retrieveAndGenerate|retrieveAndGenerateStream)(\?.*)?$/.exec(rec.path);
  if (req.method !== "POST" || !(route || kb)) {
    awsError(res, 404, "UnknownOperationException", `no route for ${req.method} ${rec.path}`);
    return;
  }
  if (config.credentials) {
    const why = await checkSignature(rec, bodyBytes);
    rec.signature = why ?? "ok";
    if (why) {
      awsError(res, 403, "InvalidSignatureException",
        "The request signature we calculated does not match the signature you provided. " +
        "Check your AWS Secret Access Key and signing method. Consult the service documentation for details.");
      return;
    }
  }
  const fx = loadFixture(header(rec, "x-mock-scenario") ?? (kb ? "kb_grounded" : "nova_web"));
  if (fx.http) {
    awsError(res, fx.http.status, fx.http.errortype, fx.http.message);
    return;
  }
  if (kb) {
    const session = typeof rec.body_json?.sessionId === "string" ? rec.body_json.sessionId : `kb-session-${rec.seq}`;
    const extra = { "x-amzn-bedrock-knowledge-base-session-id": session };
    if (kb[1] === "retrieveAndGenerateStream") await stream(req, res, rec, fx, extra);
    else sendJson(res, 200, kbBodyOf(fx, session), { "x-amzn-requestid": `req-${rec.seq}`, ...extra });
    return;
  }
  if (route[2] === "converse-stream") await stream(req, res, rec, fx);
  else sendJson(res, 200, bodyOf(fx), { "x-amzn-requestid": `req-${rec.seq}` });
}

function control(req, res, rec, bodyText) {
  if (req.method === "GET" && rec.path === "/__mock/requests") return sendJson(res, 200, requests);
  if (req.method === "GET" && rec.path === "/__mock/connections") return sendJson(res, 200, connections);
  if (req.method === "POST" && rec.path === "/__mock/reset") {
    requests = [];
    return sendJson(res, 200, {});
  }
  if (req.method === "POST" && rec.path === "/__mock/config") {
    config = { ...config, ...JSON.parse(bodyText) };
    return sendJson(res, 200, config.credentials ? { checking: true } : { checking: false });
  }
  sendJson(res, 404, { message: "no such control path" });
}

function onRequest(proto, req, res) {
  const conn = proto === "h1" ? req.socket.cgConn : req.stream.session.cgConn;
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks);
    const headers = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2) headers.push([req.rawHeaders[i], req.rawHeaders[i + 1]]);
    const rec = { seq: ++seq, proto, conn, method: req.method, path: req.url, headers, body: body.toString("utf8") };
    if (rec.path.startsWith("/__mock/")) return control(req, res, rec, rec.body);
    try {
      rec.body_json = JSON.parse(rec.body);
    } catch {
      rec.body_json = null;
    }
    requests.push(rec);
    res.on("close", () => {
      rec.closed = true;
      rec.finished = res.writableFinished;
      if (proto === "h2") rec.rst_code = req.stream.rstCode ?? null;
    });
    answer(req, res, rec, new Uint8Array(body)).catch((err) => {
      rec.mock_error = String(err?.stack ?? err);
      console.error(rec.mock_error);
      if (!res.headersSent) sendJson(res, 500, { message: rec.mock_error });
      else res.destroy();
    });
  });
}

function track(proto, emitter) {
  const id = `${proto}-${++nextConn}`;
  connections[id] = { proto, opened: Date.now(), closed: null, peer_ended: false };
  emitter.cgConn = id;
  return id;
}

const h1 = http.createServer((req, res) => onRequest("h1", req, res));
h1.keepAliveTimeout = 120000; // an idle connection stays until citegate closes it
h1.on("connection", (sock) => {
  const id = track("h1", sock);
  sock.on("end", () => (connections[id].peer_ended = true));
  sock.on("close", () => (connections[id].closed = Date.now()));
});

const h2 = http2.createServer({}, (req, res) => onRequest("h2", req, res));
h2.on("session", (session) => {
  const id = track("h2", session);
  session.on("close", () => (connections[id].closed = Date.now()));
});

function listen(server) {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve(server.address().port));
  });
}

const ports = { h1: await listen(h1), h2: await listen(h2) };
const ready = args["ready-file"];
fs.writeFileSync(ready + ".tmp", JSON.stringify(ports));
fs.renameSync(ready + ".tmp", ready);

if (args["parent-pid"]) {
  const parent = Number(args["parent-pid"]);
  setInterval(() => {
    try {
      process.kill(parent, 0);
    } catch {
      process.exit(0);
    }
  }, 1000).unref();
}
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => process.exit(0));
