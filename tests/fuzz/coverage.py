#!/usr/bin/env python3
"""Line coverage of the I/O shell reached by the shell drivers' corpora (make fuzz-coverage).

usage: coverage.py --build build-cov [--long build-fuzz] [--out FILE]

Runs fuzz_h1_server, fuzz_h2_server, fuzz_up_h1 and fuzz_up_h2 (built with
-DCITEGATE_FUZZ_COVERAGE=ON) once over every input of their checked-in corpus and, when
--long names a fuzz build where `make fuzz-long` ran, of the corpus that run grew;
merges the profiles (llvm-profdata) and prints llvm-cov's line coverage of src/io/ as a
Markdown table, the five protocol files first, with their total.
"""
import argparse
import glob
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGETS = ["h1_server", "h2_server", "up_h1", "up_h2"]
MAIN = ["h1.c", "h2.c", "exchange.c", "up_h1.c", "up_h2.c"]


def tool(name):
    for n in (name, name + "-14"):
        if subprocess.run(["sh", "-c", f"command -v {n}"], capture_output=True).returncode == 0:
            return n
    sys.exit(f"{name} not found (Debian package llvm-14 or clang)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build-cov")
    ap.add_argument("--long")
    ap.add_argument("--out")
    a = ap.parse_args()
    prof = os.path.join(a.build, "coverage")
    os.makedirs(prof, exist_ok=True)
    for f in glob.glob(os.path.join(prof, "*.profraw")):
        os.remove(f)
    binaries = []
    for t in TARGETS:
        binary = os.path.join(a.build, "tests", "fuzz", "fuzz_" + t)
        binaries.append(binary)
        dirs = [os.path.join(HERE, "corpus", t)]
        if a.long and os.path.isdir(os.path.join(a.long, "tests", "fuzz", "long", t, "corpus")):
            dirs.append(os.path.join(a.long, "tests", "fuzz", "long", t, "corpus"))
        env = dict(os.environ, LLVM_PROFILE_FILE=os.path.join(prof, t + "-%p.profraw"),
                   ASAN_OPTIONS="detect_leaks=0")
        subprocess.run([binary, "-runs=0"] + dirs, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    data = os.path.join(prof, "all.profdata")
    subprocess.run([tool("llvm-profdata"), "merge", "-sparse", "-o", data]
                   + glob.glob(os.path.join(prof, "*.profraw")), check=True)
    cmd = [tool("llvm-cov"), "report", binaries[0]] + [f"-object={b}" for b in binaries[1:]]
    cmd += [f"-instr-profile={data}", os.path.join(ROOT, "src", "io")]
    report = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in report.splitlines():
        # llvm-cov names the files relative to the folder asked for:
        # file, regions, missed, cover, functions, missed, executed, lines, missed, ...
        m = re.match(r"(\S+\.c)\s+(.*)$", line)
        if m:
            nums = m.group(2).split()
            rows[os.path.basename(m.group(1))] = (int(nums[6]), int(nums[7]))
    order = [f for f in MAIN if f in rows] + sorted(f for f in rows if f not in MAIN)
    out = ["| file | lines | covered | coverage |", "|---|---|---|---|"]
    total = [0, 0]
    for f in order:
        n, missed = rows[f]
        if f in MAIN:
            total[0] += n
            total[1] += n - missed
        out.append(f"| src/io/{f} | {n} | {n - missed} | {100.0 * (n - missed) / n:.1f}% |")
    out.insert(2 + len([f for f in order if f in MAIN]),
               f"| **the five protocol files** | {total[0]} | {total[1]} | "
               f"**{100.0 * total[1] / max(total[0], 1):.1f}%** |")
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
