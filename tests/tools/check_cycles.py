#!/usr/bin/env python3
"""Fails when two modules of the build use each other's symbols, directly or around a
circle (the layering rule of docs/architecture.md "The layers").

usage: check_cycles.py OBJECT_DIR...   (the CMakeFiles/<target>.dir folders)

A module is one object file; A uses B when A's undefined symbols include one B
defines (nm). Prints each circle with the symbols that close it.
"""
import os
import subprocess
import sys


def objects(dirs):
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in files:
                if f.endswith(".o"):
                    yield os.path.join(root, f)


def symbols(path, flag):
    out = subprocess.run(["nm", flag, path], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def main():
    objs = sorted(objects(sys.argv[1:]))
    if not objs:
        sys.exit("no object files: build first")
    name = {o: o.split(".dir/", 1)[-1] for o in objs}
    owner = {}
    for o in objs:
        for s in symbols(o, "--defined-only") - {""}:
            owner.setdefault(s, o)
    uses = {o: {} for o in objs}
    for o in objs:
        for s in symbols(o, "-u"):
            b = owner.get(s)
            if b and b != o:
                uses[o].setdefault(b, []).append(s)
    # A module is in a circle when it can reach itself.
    bad = []
    for start in objs:
        seen, todo = set(), list(uses[start])
        while todo:
            n = todo.pop()
            if n == start:
                bad.append(start)
                break
            if n not in seen:
                seen.add(n)
                todo.extend(uses[n])
    for o in bad:
        for b, syms in sorted(uses[o].items()):
            print(f"{name[o]} -> {name[b]}: {', '.join(sorted(syms)[:5])}")
    if bad:
        sys.exit(f"{len(bad)} modules in circles")
    print(f"no cycles among {len(objs)} object files")


if __name__ == "__main__":
    main()
