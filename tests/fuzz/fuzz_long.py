#!/usr/bin/env python3
"""Runs every fuzz target for a while and writes a summary table (make fuzz-long).

usage: fuzz_long.py --build build-fuzz --seconds N [--jobs 2] [--targets a,b] [--out FILE]

Each target runs alone (one process, no fork) for N seconds with -print_final_stats=1,
on a working corpus seeded from tests/fuzz/corpus/<name> (the checked-in one is only
read), with its dictionary; --jobs targets run at a time. Crash inputs land in
<build>/tests/fuzz/long/<name>/; the table counts them. The table (Markdown) goes to
stdout and to --out: target, seconds, executions, executions per second, coverage
(libFuzzer's edge counter `cov`), features, corpus size, peak RSS, crashes.
Exit status 1 when any target crashed.
"""
import argparse
import concurrent.futures
import datetime
import glob
import os
import platform
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TARGETS = ["sse", "json", "xform", "dialect_req", "anthropic", "responses", "gemini", "embedding",
           "evstream", "bedrock", "bedrock_kb", "cohere", "alias", "h1_server", "h2_server", "up_h1", "up_h2"]


def dictionary(name):
    d = os.path.join(HERE, name + ".dict")
    return d if os.path.exists(d) else os.path.join(HERE, "sse.dict")


def run(build, name, seconds):
    binary = os.path.join(build, "tests", "fuzz", "fuzz_" + name)
    work = os.path.join(build, "tests", "fuzz", "long", name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "corpus"))
    cmd = [binary, f"-max_total_time={seconds}", "-print_final_stats=1", "-rss_limit_mb=2048",
           "-timeout=10", f"-dict={dictionary(name)}", f"-artifact_prefix={work}/",
           os.path.join(work, "corpus"), os.path.join(HERE, "corpus", name)]
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1", UBSAN_OPTIONS="print_stacktrace=1")
    start = time.monotonic()
    with open(os.path.join(work, "log"), "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    ran = round(time.monotonic() - start)  # less than asked when a crash stopped it
    text = open(os.path.join(work, "log"), errors="replace").read()
    stat = dict(re.findall(r"^stat::(\w+):\s+(\d+)", text, re.M))
    last = re.findall(r"^#\d+\s+(?:DONE|pulse|NEW|REDUCE)\s+cov: (\d+) ft: (\d+) corp: (\d+)", text, re.M)
    cov, ft, corp = last[-1] if last else ("?", "?", "?")
    crashes = len(glob.glob(os.path.join(work, "crash-*")) + glob.glob(os.path.join(work, "leak-*"))
                  + glob.glob(os.path.join(work, "timeout-*")) + glob.glob(os.path.join(work, "oom-*")))
    if rc != 0 and crashes == 0:
        crashes = 1  # died without an artifact: the log says why
    return {"target": "fuzz_" + name, "seconds": ran,
            "execs": int(stat.get("number_of_executed_units", 0)),
            "exec_s": int(stat.get("average_exec_per_sec", 0)), "cov": cov, "ft": ft, "corpus": corp,
            "rss": stat.get("peak_rss_mb", "?"), "crashes": crashes, "log": os.path.join(work, "log")}


def table(rows, seconds, jobs):
    cpu = platform.processor() or platform.machine()
    head = (f"{datetime.date.today()}, {os.cpu_count()} cores ({cpu}), {jobs} targets at a time, "
            f"{seconds} s each, ASan+UBSan+LeakSanitizer\n\n"
            "| target | seconds | executions | exec/s | coverage (edges) | features | corpus | peak RSS MB | crashes |\n"
            "|---|---|---|---|---|---|---|---|---|\n")
    lines = [f"| {r['target']} | {r['seconds']} | {r['execs']:,} | {r['exec_s']:,} | {r['cov']} | {r['ft']} "
             f"| {r['corpus']} | {r['rss']} | {r['crashes']} |" for r in rows]
    return head + "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build-fuzz")
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--out")
    a = ap.parse_args()
    names = [t for t in a.targets.split(",") if t]
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        rows = list(pool.map(lambda n: run(a.build, n, a.seconds), names))
    out = table(rows, a.seconds, a.jobs)
    sys.stdout.write(out)
    if a.out:
        with open(a.out, "w") as f:
            f.write(out)
    for r in rows:
        if r["crashes"]:
            print(f"{r['target']}: {r['crashes']} crash(es), see {r['log']}", file=sys.stderr)
    return 1 if any(r["crashes"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
