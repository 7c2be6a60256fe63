#!/usr/bin/env python3
"""docs/configuration.md against what the code reads and what `citegate --help` prints.

usage: test_config_doc.py CITEGATE_BINARY REPO_ROOT

What the code reads, found in the sources, not in a list kept here:
- the settings table of src/core/config.c (every `{"NAME", T_...` entry), which the parser and
  --help both use;
- every getenv("NAME") (or secure_getenv) with a literal name anywhere under src/;
- every "--flag" string literal under src/ (the flags the command line accepts).

The rules:
1. Every variable of the settings table has a row in one of the doc's settings tables, and every
   row there names a variable of the table.
2. A variable read with getenv("NAME") outside the settings table is not a setting: it must have a
   row under a `##` heading of the doc that says "(test builds only)", and every row there must be
   such a variable. (Today: the failure-injection switches of src/io/fault.c.)
3. For every setting, the doc's flags, default and values are those `citegate --help` prints
   (the help prints the settings table itself, so this holds the doc to the code).
4. The doc's flags (settings tables and the flags table), the flags --help prints and the "--flag"
   literals under src/ are the same set.
"""
import re
import subprocess
import sys
from pathlib import Path

CITEGATE, ROOT = sys.argv[1], Path(sys.argv[2])
DOC = ROOT / "docs" / "configuration.md"
NAME = r"[A-Z][A-Z0-9_]*"
failures = []


def fail(msg):
    failures.append(msg)


def source_files():
    return sorted(p for p in (ROOT / "src").rglob("*") if p.suffix in (".c", ".h"))


def strip_comments(text):
    """C source without comments, so a name in a comment is not taken for a read."""
    literal = r'"(?:\\.|[^"\\\n])*"' + r"|'(?:\\.|[^'\\\n])*'"
    return re.sub(r"(" + literal + r")|/\*.*?\*/|//[^\n]*", lambda m: m.group(1) or " ", text,
                  flags=re.S)


def code_reads():
    """(settings table names in order, {getenv name: files}, {"--flag" literals})."""
    table_src = strip_comments((ROOT / "src" / "core" / "config.c").read_text())
    table = re.findall(r'\{\s*"(' + NAME + r')"\s*,\s*T_[A-Z_]+\s*,', table_src)
    getenv, flags = {}, set()
    for path in source_files():
        text = strip_comments(path.read_text(errors="replace"))
        for m in re.finditer(r'\b(?:secure_)?getenv\s*\(\s*"(' + NAME + r')"\s*\)', text):
            getenv.setdefault(m.group(1), set()).add(str(path.relative_to(ROOT)))
        flags.update(re.findall(r'"(--[a-z][a-z0-9-]*)', text))
    return table, getenv, flags


def help_output():
    """{name: (flags, default, values)} and the set of flags that --help names."""
    p = subprocess.run([CITEGATE, "--help"], capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        fail(f"citegate --help exited {p.returncode}: {p.stderr.strip()}")
    settings, flags = {}, set()
    line_re = re.compile(r"^  (" + NAME + r")((?:, (?:filter )?--[a-z][a-z0-9-]*)*)"
                         r"  default: (\S+)  values: (.+)$")
    for line in p.stdout.splitlines():
        m = line_re.match(line)
        if m:
            fl = tuple(f.strip() for f in m.group(2).split(",") if f.strip())
            settings[m.group(1)] = (fl, m.group(3), m.group(4).strip())
        flags.update(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", line))
    if not settings:
        fail("citegate --help prints no settings")
    return settings, flags


def cells(line):
    """A Markdown table row's cells ('\\|' is a pipe inside a cell)."""
    parts = re.split(r"(?<!\\)\|", line.strip())
    return [c.strip().replace("\\|", "|") for c in parts[1:-1]]


def ticked(cell):
    return re.findall(r"`([^`]*)`", cell)


def doc_tables():
    """({name: (flags, default, values)}, {test-only name}, {flag rows}, every doc flag)."""
    settings, test_only, flag_rows, all_flags = {}, set(), set(), set()
    heading = ""
    for n, line in enumerate(DOC.read_text().splitlines(), 1):
        if line.startswith("## "):
            heading = line
            continue
        if not line.startswith("|"):
            continue
        row = cells(line)
        first = ticked(row[0]) if row and row[0].startswith("`") else []
        if first and re.fullmatch(NAME, first[0]):
            name = first[0]
            if "(test builds only)" in heading:
                test_only.add(name)
                continue
            if len(row) < 5:
                fail(f"configuration.md:{n}: {name}: a settings row has 5 cells "
                     "(variable, flag, default, values, meaning)")
                continue
            if name in settings:
                fail(f"configuration.md:{n}: {name} has two rows")
            fl = tuple(ticked(row[1]))
            all_flags.update(f.split()[-1] for f in fl)
            d = row[2]
            default = ticked(d)[0] if d.startswith("`") else ("unset" if d.startswith("unset") else d)
            values = re.sub(r"`", "", row[3])
            settings[name] = (fl, default, values)
        elif first and re.fullmatch(r"(filter )?--[a-z][a-z0-9-]*( [A-Z][A-Z:]*)?", first[0]):
            flag = first[0].split()[1] if first[0].startswith("filter ") else first[0].split()[0]
            flag_rows.add(first[0])
            all_flags.add(flag)
    return settings, test_only, flag_rows, all_flags


def main():
    if not DOC.exists():
        print(f"FAIL: {DOC} is missing")
        return 1
    table, getenv, src_flags = code_reads()
    help_settings, help_flags = help_output()
    doc_settings, doc_test_only, _, doc_flags = doc_tables()

    if not table:
        fail("no settings table found in src/core/config.c")
    if set(table) != set(help_settings):
        fail(f"--help and the settings table of config.c differ: only in the table "
             f"{sorted(set(table) - set(help_settings))}, only in --help "
             f"{sorted(set(help_settings) - set(table))}")

    # 1. The settings.
    for name in table:
        if name not in doc_settings:
            fail(f"{name} is read (settings table of src/core/config.c) but docs/configuration.md "
                 "has no row for it")
    for name in doc_settings:
        if name not in table:
            fail(f"docs/configuration.md lists {name}, which nothing reads")

    # 2. Variables read outside the table: test-only, in their own section.
    others = {n: f for n, f in getenv.items() if n not in table}
    for name, files in sorted(others.items()):
        if name not in doc_test_only:
            fail(f"{name} is read by getenv in {', '.join(sorted(files))} but docs/configuration.md "
                 "lists it in no '(test builds only)' section (nor as a setting of config.c's table)")
    for name in sorted(doc_test_only):
        if name not in others:
            fail(f"docs/configuration.md lists {name} as test-only, but no getenv(\"{name}\") "
                 "outside the settings table reads it")

    # 3. Flags, defaults and values as --help prints them.
    for name, (fl, default, values) in doc_settings.items():
        if name not in help_settings:
            continue
        hfl, hdefault, hvalues = help_settings[name]
        if set(fl) != set(hfl):
            fail(f"{name}: the doc's flags {list(fl)} are not --help's {list(hfl)}")
        if default != hdefault:
            fail(f"{name}: the doc's default '{default}' is not --help's '{hdefault}'")
        if values != hvalues:
            fail(f"{name}: the doc's values '{values}' are not --help's '{hvalues}'")

    # 4. One set of flags.
    for what, flags in (("the '--flag' literals under src/", src_flags), ("citegate --help", help_flags)):
        if doc_flags != flags:
            fail(f"flags differ between docs/configuration.md and {what}: only in the doc "
                 f"{sorted(doc_flags - flags)}, only in {what} {sorted(flags - doc_flags)}")

    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print(f"ok: {len(table)} settings, {len(others)} test-only variables, {len(doc_flags)} flags: "
          "docs/configuration.md, the sources and citegate --help agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
