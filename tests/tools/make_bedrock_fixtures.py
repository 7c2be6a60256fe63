#!/usr/bin/env python3
"""Writes the bedrock dialect's answers (tests/fixtures/dialects/answers/bedrock_*.bin and
bedrock_*.json) from their readable descriptions in
tests/fixtures/dialects/answers/bedrock_answers.desc.json.

A streamed answer is AWS's event stream (application/vnd.amazon.eventstream), as Bedrock's
ConverseStream sends it: each message is

    total length (u32 BE) | headers length (u32 BE) | CRC-32 of those 8 bytes |
    headers | payload | CRC-32 of everything before it

with the IEEE CRC-32 (zlib.crc32), and each header is a name length (u8), the name, a type
(u8) and a value: 0 true and 1 false (no value), 2 byte, 3 int16, 4 int32, 5 int64,
6 byte array and 7 string (u16 length first), 8 timestamp (int64 ms), 9 UUID (16 bytes).

The entries of a description's "stream":
  [TYPE, PAYLOAD]            an event: headers :event-type TYPE, :content-type
                             application/json, :message-type event (in that order), the
                             payload as compact JSON with raw UTF-8
  {"event": TYPE, "payload": P, ...} the same, with any of
      "headers": [...]       the headers in this order: a name of the three above, or
                             [name, type, value] with type bool, byte, short, int, long,
                             bytes (hex), string, timestamp or uuid (hex)
      "ascii": true          the payload's JSON escapes every non-ASCII character (\\u…)
      "pad": N               a padding member "p" of N letters added to the payload
      "corrupt": "message_crc" | "prelude_crc" | "header_overrun" | "headers_past"
                             the message CRC (or the prelude CRC) is off by one; or the last
                             header's value length claims 5 bytes more than its section
                             holds; or the headers length claims one byte more than the
                             message has room for (in these two, both CRCs match the bytes
                             written)
      "cut": N               only the message's first N bytes are written (the body ends)
  {"exception": TYPE, "payload": P}   :message-type exception, :exception-type TYPE
  {"error": CODE, "message": M}       :message-type error, :error-code, :error-message,
                                      no payload
  {"prelude": {"total": T, "headers": H}, "then": TEXT}
                             a prelude claiming a T-byte message (its CRC right), then TEXT
  {"repeat": N, "entries": [...]}     those entries, N times over
A description's "body" is written, pretty-printed, as bedrock_NAME.json (Converse's JSON
answer); "stream_of_body" writes bedrock_NAME.bin as ConverseStream would send that body:
messageStart, each content block's text deltas (a few words each) and citation deltas
(after the text, or before it for the blocks listed in "citations_first"; the citation
"split_citation": {"BLOCK": K} names is sent as two deltas, the second one with only the
rest of its sourceContent), contentBlockStop, messageStop, metadata.

usage: make_bedrock_fixtures.py      (rewrites every bedrock_* answer; then run
                                      tests/tools/bedrock_oracle.py --regen)
"""
import json
import os
import struct
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ANSWERS = os.path.join(os.path.dirname(HERE), "fixtures", "dialects", "answers")
DESC = os.path.join(ANSWERS, "bedrock_answers.desc.json")
LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def crc(b):
    return zlib.crc32(b) & 0xFFFFFFFF


def header(name, kind, value):
    n = name.encode("utf-8")
    out = struct.pack(">B", len(n)) + n
    if kind == "bool":
        return out + struct.pack(">B", 0 if value else 1)
    if kind == "byte":
        return out + struct.pack(">Bb", 2, value)
    if kind == "short":
        return out + struct.pack(">Bh", 3, value)
    if kind == "int":
        return out + struct.pack(">Bi", 4, value)
    if kind == "long":
        return out + struct.pack(">Bq", 5, value)
    if kind == "bytes":
        v = bytes.fromhex(value)
        return out + struct.pack(">BH", 6, len(v)) + v
    if kind == "string":
        v = value.encode("utf-8")
        return out + struct.pack(">BH", 7, len(v)) + v
    if kind == "timestamp":
        return out + struct.pack(">Bq", 8, value)
    if kind == "uuid":
        v = bytes.fromhex(value)
        assert len(v) == 16
        return out + struct.pack(">B", 9) + v
    raise ValueError(kind)


def message(headers, payload, corrupt=None):
    """One event-stream message; headers = [(name, kind, value)]."""
    hb = [header(*h) for h in headers]
    if corrupt == "header_overrun":
        # The last header is a string: its length field claims 5 more bytes than exist.
        last = bytearray(hb[-1])
        nlen = last[0]
        assert last[1 + nlen] == 7
        (vlen,) = struct.unpack_from(">H", last, 2 + nlen)
        struct.pack_into(">H", last, 2 + nlen, vlen + 5)
        hb[-1] = bytes(last)
    hdrs = b"".join(hb)
    total = 12 + len(hdrs) + len(payload) + 4
    hlen = total - 16 + 1 if corrupt == "headers_past" else len(hdrs)
    prelude = struct.pack(">II", total, hlen)
    pcrc = crc(prelude) ^ (1 if corrupt == "prelude_crc" else 0)
    head = prelude + struct.pack(">I", pcrc) + hdrs + payload
    mcrc = crc(head) ^ (1 if corrupt == "message_crc" else 0)
    return head + struct.pack(">I", mcrc)


def payload_bytes(obj, ascii_only=False):
    return json.dumps(obj, ensure_ascii=ascii_only, separators=(",", ":")).encode("utf-8")


STANDARD = {":event-type": None, ":content-type": "application/json", ":message-type": "event"}


def event(kind, payload, order=None, ascii_only=False, pad=0, corrupt=None):
    if pad:
        payload = dict(payload)
        payload["p"] = "".join(LETTERS[i % len(LETTERS)] for i in range(pad))
    headers = []
    for h in order or [":event-type", ":content-type", ":message-type"]:
        if isinstance(h, str):
            headers.append((h, "string", kind if h == ":event-type" else STANDARD[h]))
        else:
            headers.append(tuple(h))
    return message(headers, payload_bytes(payload, ascii_only), corrupt)


def entry_bytes(e):
    if isinstance(e, dict) and "repeat" in e:
        return b"".join(entry_bytes(x) for x in e["entries"]) * e["repeat"]
    if isinstance(e, list):
        return event(e[0], e[1])
    if "event" in e:
        m = event(e["event"], e["payload"], e.get("headers"), e.get("ascii", False),
                  e.get("pad", 0), e.get("corrupt"))
        return m[:e["cut"]] if "cut" in e else m
    if "exception" in e:
        return message([(":exception-type", "string", e["exception"]),
                        (":content-type", "string", "application/json"),
                        (":message-type", "string", "exception")], payload_bytes(e["payload"]))
    if "error" in e:
        return message([(":error-code", "string", e["error"]),
                        (":error-message", "string", e["message"]),
                        (":message-type", "string", "error")], b"")
    if "prelude" in e:
        p = struct.pack(">II", e["prelude"]["total"], e["prelude"]["headers"])
        return p + struct.pack(">I", crc(p)) + e["then"].encode("utf-8")
    raise ValueError(e)


def words(text, per=3):
    """The text in deltas of a few words (the spaces go with the word after them)."""
    out, cur, n = [], "", 0
    for ch in text:
        if ch == " " and cur.strip() and n + 1 >= per:
            out.append(cur)
            cur, n = "", 0
        elif ch == " " and cur.strip():
            n += 1
        cur += ch
    if cur:
        out.append(cur)
    return out


def stream_of_body(body, opts):
    """ConverseStream's events for a Converse body."""
    first = set(opts.get("citations_first", []))
    split = {int(k): v for k, v in opts.get("split_citation", {}).items()}
    out = [["messageStart", {"role": "assistant"}]]
    for i, blk in enumerate(body["output"]["message"]["content"]):
        if "text" in blk:
            texts, cits = [blk["text"]], []
        else:
            cc = blk["citationsContent"]
            texts, cits = [c["text"] for c in cc["content"]], cc["citations"]
        deltas = []
        for t in texts:
            deltas += [{"text": w} for w in words(t)]
        cdeltas = []
        for k, c in enumerate(cits):
            if split.get(i) == k:
                sc = c["sourceContent"][0]["text"]
                cut = len(sc) // 2
                head = dict(c, sourceContent=[{"text": sc[:cut]}])
                cdeltas += [{"citation": head}, {"citation": {"sourceContent": [{"text": sc[cut:]}]}}]
            else:
                cdeltas.append({"citation": c})
        deltas = cdeltas + deltas if i in first else deltas + cdeltas
        out += [["contentBlockDelta", {"contentBlockIndex": i, "delta": d}] for d in deltas]
        out.append(["contentBlockStop", {"contentBlockIndex": i}])
    out.append(["messageStop", {"stopReason": body["stopReason"]}])
    out.append(["metadata", {"usage": body["usage"], "metrics": body["metrics"]}])
    # Bedrock pads every payload with a member "p" of letters.
    for k, (_, p) in enumerate(out):
        p["p"] = LETTERS[:(7 * k + 5) % 40 + 1]
    return out


def write_answers(desc_path, prefix, stream_of):
    """Writes each answer of the description file: PREFIX_NAME.bin, the event stream of the
    entries stream_of(description) gives (None: none), and PREFIX_NAME.json, its "body"."""
    with open(desc_path, encoding="utf-8") as f:
        desc = json.load(f)["answers"]
    for name, d in desc.items():
        stream = stream_of(d)
        if stream is not None:
            with open(os.path.join(ANSWERS, "%s_%s.bin" % (prefix, name)), "wb") as f:
                f.write(b"".join(entry_bytes(e) for e in stream))
        if "body" in d:
            with open(os.path.join(ANSWERS, "%s_%s.json" % (prefix, name)), "w", encoding="utf-8") as f:
                json.dump(d["body"], f, indent=1, ensure_ascii=False)
                f.write("\n")
    return 0


def main():
    return write_answers(DESC, "bedrock", lambda d: stream_of_body(d["body"], d["stream_of_body"])
                         if "stream_of_body" in d else d.get("stream"))

if __name__ == "__main__":
    sys.exit(main())
