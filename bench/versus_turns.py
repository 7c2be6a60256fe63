#!/usr/bin/env python3
"""bench/versus_turns.py: where a burst's first bytes wait, from a syscall trace.

Reads `perf script` output of a `bench/versus --profile trace` recording
(every sys_enter tracepoint of the gateway, and the exits of accept4,
socket and epoll_wait) and prints two views of the load:

* the loop turns: each epoll_wait's ready count and the system calls the
  turn made, so the order of a burst shows (all accepts, then all request
  reads, then all upstream connects, ...);
* the stages of each stream, in ms since the first accept: accepted, its
  request read, its upstream connection opened, its request written
  upstream, the upstream's first bytes read, the first bytes written to
  the client; percentiles of each and of the steps between them.

A stream is followed through its descriptors: the client's comes from
accept4; its request is the first read on it; the upstream connection is
the next socket() (or, for a pooled connection, the next write to a
descriptor that is neither a client's nor stdio); the rest are the first
writes and reads on those descriptors. This holds for one request per
connection and one thread (both citegate's and nginx's worker here).

usage: perf script -i versus-profile/citegate-1.trace > t.txt
       python3 bench/versus_turns.py t.txt [--turns 40]
"""
import argparse
import re
import sys
from collections import Counter

LINE = re.compile(r"^\s*\S+\s+\d+\s+(?:\[\d+\]\s+)?([\d.]+):\s+syscalls:sys_(enter|exit)_(\w+):\s*(.*)$")
READS = ("read", "recvfrom", "readv", "recvmsg")
WRITES = ("write", "writev", "sendto", "sendmsg")
STAGES = (("acc", "accepted"), ("read", "request read"), ("conn", "upstream connect"),
          ("upw", "request written upstream"), ("upread", "upstream bytes read"),
          ("out", "first bytes to the client"))
STEPS = (("acc", "read"), ("read", "upw"), ("upw", "upread"), ("upread", "out"), ("acc", "out"))


def parse(path):
    """(ms, 'enter'|'exit', syscall, args) of every traced line."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                out.append((float(m[1]) * 1000, m[2], m[3], m[4]))
    return out


def ret_of(args):
    v = int(args, 16) if args.startswith("0x") else int(args)
    return v - (1 << 64) if v >= 1 << 63 else v


def fd_of(args):
    m = re.search(r"\bfd: 0x([0-9a-f]+)", args)
    return int(m[1], 16) if m else None


def turns(events):
    """Loop turns from one epoll_wait return to the next call."""
    out, cur = [], None
    for t, kind, name, args in events:
        if name in ("epoll_wait", "epoll_pwait"):
            if kind == "exit":
                cur = dict(start=t, end=t, ready=ret_of(args), calls=Counter())
                out.append(cur)
            elif cur:
                cur["end"] = t
        elif kind == "enter" and cur is not None:
            cur["calls"][name] += 1
    return out


def streams(events):
    """Per client descriptor: the times of its stages."""
    cli, owner, pending = {}, {}, None
    for t, kind, name, args in events:
        if kind == "exit":
            r = ret_of(args)
            if name == "accept4" and r >= 0:
                cli[r] = dict(acc=t)
                owner.pop(r, None)
            elif name == "socket" and r >= 0 and pending is not None:
                owner[r] = pending
                cli[pending]["conn"] = t
                pending = None
            continue
        fd = fd_of(args)
        if fd is None:
            continue
        if name in READS:
            if fd in cli and "read" not in cli[fd]:
                cli[fd]["read"] = t
                pending = fd
            elif fd in owner:
                cli[owner[fd]].setdefault("upread", t)
        elif name in WRITES:
            if fd in cli and "read" in cli[fd]:
                cli[fd].setdefault("out", t)
            elif fd in owner:
                cli[owner[fd]].setdefault("upw", t)
            elif pending is not None and fd > 2:
                owner[fd] = pending  # an idle pooled connection, written at once
                cli[pending].update(upw=t, pooled=True)
                pending = None
    return [s for s in cli.values() if "out" in s]


def pct(vals, q):
    vals = sorted(vals)
    return vals[min(len(vals) - 1, max(0, int(q * len(vals) + 0.5) - 1))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("script", help="perf script output of a --profile trace recording")
    ap.add_argument("--turns", type=int, default=40, help="loop turns to list (from the first accept)")
    args = ap.parse_args()
    events = parse(args.script)
    first = next((t for t, kind, name, _ in events if name == "accept4" and kind == "exit"), None)
    if first is None:
        print("versus_turns: no accept4 in the trace (was it recorded with --profile trace?)",
              file=sys.stderr)
        return 2
    ss = streams(events)
    print(f"{len(ss)} streams answered, {sum(1 for s in ss if s.get('pooled'))} on pooled upstream "
          "connections; times in ms since the first accept")
    print(f"{'stage':<28}{'first':>8}{'p50':>8}{'p99':>8}{'last':>8}")
    for key, label in STAGES:
        v = [s[key] - first for s in ss if key in s]
        if v:
            print(f"{label:<28}{min(v):8.1f}{pct(v, .5):8.1f}{pct(v, .99):8.1f}{max(v):8.1f}")
    print(f"{'step':<28}{'':>8}{'p50':>8}{'p99':>8}{'max':>8}")
    for a, b in STEPS:
        v = [s[b] - s[a] for s in ss if a in s and b in s]
        if v:
            print(f"{a + ' -> ' + b:<28}{'':>8}{pct(v, .5):8.2f}{pct(v, .99):8.2f}{max(v):8.2f}")
    if args.turns <= 0:
        return 0
    print("loop turns (ready: epoll_wait's count; then the calls the turn made):")
    shown = 0
    for tr in turns(events):
        if tr["start"] < first or not tr["calls"]:
            continue
        calls = " ".join(f"{k}={v}" for k, v in tr["calls"].most_common(10))
        print(f"{tr['start'] - first:8.1f} ..{tr['end'] - first:8.1f}  ready={tr['ready']:<5d} {calls}")
        shown += 1
        if shown >= args.turns:
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
