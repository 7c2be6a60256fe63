"""Structure checks of the deployment files in docker/ (Dockerfile, compose, Kubernetes).

No Docker daemon or cluster is needed: the files are parsed (PyYAML, Debian
python3-yaml) and checked against the repository: what the Dockerfile copies
and compose mounts exists, the build stage runs what CI runs (.ci/run), probes
and ports match the configured listeners, drain time fits in the grace
periods, every variable is one citegate reads (the table in src/core/config.c),
and the Secret and HPA references resolve. The runtime stage is FROM
scratch with the root docker/rootfs.sh assembles, its health check is
`citegate health` (test_health.py runs it). With a built citegate
(CITEGATE_BIN, or build/citegate) the configurations also go through
`citegate --check`.

Run from this directory: python3 -m unittest -v test_deploy
"""
import http.server
import json
import os
import posixpath
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
DOCKERFILE = DOCKER / "Dockerfile"
DOCKERIGNORE = DOCKER / "Dockerfile.dockerignore"
COMPOSE = DOCKER / "compose.yaml"
K8S = DOCKER / "k8s"

# Measured figures (docs/performance.md "Memory per open stream", bench/streams.py).
PER_STREAM_KIB = 19
TLS_UPSTREAM_CONN_KIB = 32
BASE_WORKER_KIB = 2.5 * 1024
ROOTFS = DOCKER / "rootfs.sh"
# What a 25 MB image may weigh, the limit docker/image.sh enforces on the built image.
IMAGE_MAX_BYTES = 25_000_000


# ---------------------------------------------------------------- helpers

def config_vars():
    """{name: default or None} from the variable table in src/core/config.c."""
    text = (REPO / "src" / "core" / "config.c").read_text()
    table = {}
    for m in re.finditer(r'\{\s*"([A-Z][A-Z0-9_]*)"\s*,\s*T_[A-Z]+\s*,\s*OFF\(\s*\w+\s*\)\s*,\s*'
                         r'("(?:[^"\\]|\\.)*"|NULL)', text):
        table[m.group(1)] = None if m.group(2) == "NULL" else m.group(2)[1:-1]
    return table


def parse_dockerfile(text):
    """[(stage index, INSTRUCTION, arguments)], continuation lines joined."""
    out, buf, stage = [], "", -1
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#") or (not buf and not line):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        instr, _, args = buf.strip().partition(" ")
        instr = instr.upper()
        if instr == "FROM":
            stage += 1
        out.append((stage, instr, args.strip()))
        buf = ""
    if buf.strip():
        instr, _, args = buf.strip().partition(" ")
        out.append((stage, instr.upper(), args.strip()))
    return out


def split_args(args):
    """Exec (JSON) form or shell words."""
    if args.startswith("["):
        return json.loads(args)
    return shlex.split(args)


def parse_env(args):
    words = shlex.split(args)
    if words and "=" not in words[0]:
        return {words[0]: " ".join(words[1:])}
    return dict(w.split("=", 1) for w in words)


def shell_commands(text):
    return [c.strip() for c in re.split(r"&&|\|\||;|\n", text) if c.strip()]


def ci_commands():
    cmds = []
    for line in (REPO / ".ci" / "run").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or re.match(r"(set|cd)\b", line):
            continue
        cmds.append(" ".join(line.split()))
    return cmds


def split_addr(addr):
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


def dockerignore_patterns():
    pats = []
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        pat = posixpath.normpath(line.lstrip("!").strip("/"))
        rx, i = "", 0
        while i < len(pat):
            if pat.startswith("**/", i):
                rx, i = rx + "(?:.*/)?", i + 3
            elif pat.startswith("**", i):
                rx, i = rx + ".*", i + 2
            elif pat[i] == "*":
                rx, i = rx + "[^/]*", i + 1
            elif pat[i] == "?":
                rx, i = rx + "[^/]", i + 1
            else:
                rx, i = rx + re.escape(pat[i]), i + 1
        pats.append((re.compile(rx + r"\Z"), neg))
    return pats


def ignored(rel, pats):
    """Docker's rule: the last matching pattern decides; a pattern that
    matches a parent directory excludes everything below it."""
    parts = rel.strip("/").split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    result = False
    for rx, neg in pats:
        if any(rx.match(p) for p in prefixes):
            result = not neg
    return result


def k8s_quantity(q):
    """A Kubernetes quantity in base units (bytes, cores)."""
    m = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(q))
    if not m:
        raise ValueError(f"bad quantity {q!r}")
    mult = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
            "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3, "Ti": 1024 ** 4}[m.group(2)]
    return float(m.group(1)) * mult


def compose_seconds(d):
    if isinstance(d, (int, float)):
        return float(d)
    total, pos = 0.0, 0
    for m in re.finditer(r"([0-9.]+)(h|ms|m|s|us)", d):
        if m.start() != pos:
            break
        total += float(m.group(1)) * {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6}[m.group(2)]
        pos = m.end()
    if pos != len(d) or pos == 0:
        raise ValueError(f"bad duration {d!r}")
    return total


def prestop_sleep_s(container):
    cmd = container.get("lifecycle", {}).get("preStop", {})
    if "sleep" in cmd:
        return float(cmd["sleep"]["seconds"])
    words = cmd.get("exec", {}).get("command", [])
    if words and words[0] in ("sleep", "/bin/sleep", "/usr/bin/sleep") and len(words) == 2:
        return float(words[1])
    return 0.0


def citegate_bin():
    b = os.environ.get("CITEGATE_BIN") or str(REPO / "build" / "citegate")
    return b if os.access(b, os.X_OK) else None


class Dockerfile:
    def __init__(self):
        self.instrs = parse_dockerfile(DOCKERFILE.read_text())
        self.froms = [a for _, i, a in self.instrs if i == "FROM"]

    def stage(self, n, instr=None):
        return [a for s, i, a in self.instrs if s == n and (instr is None or i == instr)]

    def stage_name(self, n):
        words = self.froms[n].split()
        return words[2] if len(words) == 3 and words[1].upper() == "AS" else None

    def env(self, n):
        env = {}
        for a in self.stage(n, "ENV"):
            env.update(parse_env(a))
        return env

    def copies(self, n):
        """[(flags, sources, dest)] of COPY/ADD in stage n."""
        out = []
        for s, i, a in self.instrs:
            if s != n or i not in ("COPY", "ADD"):
                continue
            words = shlex.split(a)
            flags = {}
            while words and words[0].startswith("--"):
                k, _, v = words.pop(0)[2:].partition("=")
                flags[k] = v
            if words and words[0].startswith("["):
                words = json.loads(" ".join(words))
            out.append((flags, words[:-1], words[-1]))
        return out

    def user(self, n):
        users = self.stage(n, "USER")
        return users[-1] if users else None


def k8s_docs():
    docs = []
    for f in sorted(K8S.glob("*.yaml")) + sorted(K8S.glob("*.yml")):
        with open(f) as fh:
            for d in yaml.safe_load_all(fh):
                if d is not None:
                    docs.append((f.name, d))
    return docs


def find(docs, kind, name):
    for _, d in docs:
        if d.get("kind") == kind and d.get("metadata", {}).get("name") == name:
            return d
    return None


def secret_data(secret):
    import base64
    data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    data.update(secret.get("stringData") or {})
    return data


def is_citegate(container):
    return container.get("image", "").split(":")[0].split("/")[-1] == "citegate"


def all_containers(spec):
    """Init containers (native sidecars among them), then the main containers."""
    return list(spec.get("initContainers") or []) + list(spec["containers"])


def is_native_sidecar(spec, container):
    """An init container with restartPolicy Always: a sidecar (Kubernetes >= 1.29)."""
    return (any(c is container for c in spec.get("initContainers") or [])
            and container.get("restartPolicy") == "Always")


def pods(docs):
    """(file, workload, pod spec) for every pod template."""
    for f, d in docs:
        if d.get("kind") in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
            yield f, d, d["spec"]["template"]["spec"]
        elif d.get("kind") == "Pod":
            yield f, d, d["spec"]


def k8s_env(docs, container, image_env):
    """Effective environment: config.c defaults < image ENV < envFrom < env.
    Also returns the names that come from the manifests."""
    env = {k: v for k, v in config_vars().items() if v is not None}
    env.update(image_env)
    names = set()
    for src in container.get("envFrom", []):
        prefix = src.get("prefix", "")
        if "configMapRef" in src:
            cm = find(docs, "ConfigMap", src["configMapRef"]["name"])
            if cm is None:
                raise AssertionError(f"ConfigMap {src['configMapRef']['name']} not defined")
            data = cm.get("data") or {}
        else:
            sec = find(docs, "Secret", src["secretRef"]["name"])
            if sec is None:
                raise AssertionError(f"Secret {src['secretRef']['name']} not defined")
            data = secret_data(sec)
        for k, v in data.items():
            env[prefix + k] = v
            names.add(prefix + k)
    for e in container.get("env", []):
        names.add(e["name"])
        if "value" in e:
            env[e["name"]] = str(e["value"])
        elif "valueFrom" in e:
            vf = e["valueFrom"]
            if "secretKeyRef" in vf:
                sec = find(docs, "Secret", vf["secretKeyRef"]["name"])
                if sec is None:
                    raise AssertionError(f"Secret {vf['secretKeyRef']['name']} not defined")
                data = secret_data(sec)
                key = vf["secretKeyRef"]["key"]
            elif "configMapKeyRef" in vf:
                cm = find(docs, "ConfigMap", vf["configMapKeyRef"]["name"])
                if cm is None:
                    raise AssertionError(f"ConfigMap {vf['configMapKeyRef']['name']} not defined")
                data, key = cm.get("data") or {}, vf["configMapKeyRef"]["key"]
            else:
                continue
            if key not in data:
                raise AssertionError(f"{e['name']}: key {key} not in the referenced object")
            env[e["name"]] = data[key]
    return env, names


def container_port(container, port):
    if isinstance(port, int):
        return port
    for p in container.get("ports", []):
        if p.get("name") == port:
            return p["containerPort"]
    raise AssertionError(f"container {container['name']} has no port named {port}")


def compose_env(svc):
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) for e in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def compose_mounts(svc):
    """[(source, target)]: source is a host path (relative to docker/) or a volume name."""
    out = []
    for v in svc.get("volumes", []):
        if isinstance(v, dict):
            out.append((v.get("source"), v["target"]))
        else:
            parts = v.split(":")
            out.append((parts[0], parts[1]))
    return out


def run_check(env):
    """`citegate --check` with exactly this environment; the SQLite path is
    moved into a temporary folder (the image's /var/lib/citegate is not here)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(env, SEMANTIC_MEMORY_DB_PATH=os.path.join(tmp, "m.db"),
                   PATH=os.environ.get("PATH", "/usr/bin:/bin"))
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
            if k in os.environ:
                env[k] = os.environ[k]
        return subprocess.run([citegate_bin(), "--check"], env=env, capture_output=True,
                              text=True, timeout=30)


# ---------------------------------------------------------------- tests

class VariableTable(unittest.TestCase):
    def test_table_parses(self):
        table = config_vars()
        self.assertGreaterEqual(len(table), 20, "the variable table of src/core/config.c was not found")
        for name in ("CITEGATE_LISTEN", "CITEGATE_ADMIN_LISTEN", "CITEGATE_SHUTDOWN_GRACE_MS",
                     "AZURE_AI_DATA_SOURCES", "SEMANTIC_MEMORY_DB_PATH"):
            self.assertIn(name, table)
        self.assertEqual(table["CITEGATE_SHUTDOWN_GRACE_MS"], "30000")


class DockerfileTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.df = Dockerfile()

    def test_two_stages(self):
        self.assertEqual(len(self.df.froms), 2, self.df.froms)
        self.assertEqual(self.df.froms[0].split()[0], "debian:bookworm")
        self.assertIsNotNone(self.df.stage_name(0), "the build stage needs a name for COPY --from")
        self.assertEqual(self.df.froms[1].split(), ["scratch"], "the runtime stage starts empty")

    def test_runtime_stage_runs_nothing(self):
        """No shell in the image: nothing in the runtime stage may need one."""
        self.assertEqual(self.df.stage(1, "RUN"), [])
        for instr in ("CMD", "ENTRYPOINT"):
            for a in self.df.stage(1, instr):
                self.assertTrue(a.startswith("["), f"{instr} {a}: the shell form needs /bin/sh")

    def test_build_stage_runs_what_ci_tests(self):
        ci = ci_commands()
        self.assertIn("make test", ci, ".ci/run does not run the suite")
        tests = [c for c in ci if c != "make image"]
        instrs = [(i, a) for s, i, a in self.df.instrs if s == 0]
        # With its build arguments at their defaults (ARG CHECK=test: the whole suite).
        defaults = dict(a.split("=", 1) for i, a in instrs if i == "ARG" and "=" in a)
        def expand(a):
            for k, v in defaults.items():
                a = a.replace('"$%s"' % k, v).replace("${%s}" % k, v).replace("$" + k, v)
            return a
        run_cmds = [(n, c) for n, (i, a) in enumerate(instrs) if i == "RUN"
                    for c in shell_commands(expand(a))]
        self.assertEqual(defaults.get("CHECK"), "test", "the build stage's default is not the suite")
        full_copy = [n for n, (i, a) in enumerate(instrs)
                     if i == "COPY" and not a.startswith("--from") and shlex.split(a)[0] == "."]
        self.assertTrue(full_copy, "the build stage does not COPY the whole context")
        for cmd in tests:
            at = [n for n, c in run_cmds if " ".join(c.split()) == cmd]
            self.assertTrue(at, f"the build stage does not RUN `{cmd}` (from .ci/run)")
            self.assertGreater(at[-1], full_copy[0], f"`{cmd}` runs before the sources are copied")

    def test_ci_builds_the_image_after_the_suite(self):
        ci = ci_commands()
        self.assertIn("make image", ci, ".ci/run does not build the image")
        self.assertGreater(ci.index("make image"), ci.index("make test"))
        make = (REPO / "Makefile").read_text()
        self.assertRegex(make, r"(?m)^image:.*\n\tbash docker/image\.sh$")

    def test_copy_sources_exist_and_are_in_the_context(self):
        pats = dockerignore_patterns()
        for n in (0, 1):
            for flags, srcs, dest in self.df.copies(n):
                if "from" in flags:
                    continue
                for src in srcs:
                    self.assertTrue((REPO / src).exists(), f"COPY {src}: not in the repository")
                    if src != ".":
                        self.assertFalse(ignored(src, pats), f"COPY {src}: excluded by the dockerignore")

    def rootfs_run(self):
        """(binary, root, data) of the build stage's `bash docker/rootfs.sh BINARY ROOT DATA`."""
        runs = [c for a in self.df.stage(0, "RUN") for c in shell_commands(a)]
        calls = [shlex.split(c) for c in runs if "docker/rootfs.sh" in c]
        self.assertEqual(len(calls), 1, "the build stage runs docker/rootfs.sh once")
        words = calls[0]
        self.assertEqual(words[:2], ["bash", "docker/rootfs.sh"])
        self.assertEqual(len(words), 5, words)
        return words[2:]

    def test_runtime_root_is_built_from_the_tested_binary(self):
        build = re.search(r"^BUILD\s*\?=\s*(\S+)", (REPO / "Makefile").read_text(), re.M).group(1)
        binary, root, data = self.rootfs_run()
        self.assertEqual(binary, posixpath.join(build, "citegate"), "not the binary `make` built")
        instrs = [(i, a) for s, i, a in self.df.instrs if s == 0]
        make_at = [n for n, (i, a) in enumerate(instrs) if i == "RUN" and a == 'make "$CHECK"']
        root_at = [n for n, (i, a) in enumerate(instrs) if i == "RUN" and "docker/rootfs.sh" in a]
        self.assertTrue(make_at and root_at and root_at[0] > make_at[0],
                        "the root is assembled before the binary is built and tested")
        name = self.df.stage_name(0)
        froms = [(f, s, d) for f, s, d in self.df.copies(1) if f.get("from") == name]
        self.assertEqual([(srcs, dest) for _, srcs, dest in froms],
                         [([root.rstrip("/") + "/"], "/"), ([data.rstrip("/") + "/"], "/var/lib/")])
        self.assertEqual(self.df.copies(1), [(f, s, d) for f, s, d in froms], "only the built root is copied")
        script = ROOTFS.read_text()
        entry = split_args(self.df.stage(1, "ENTRYPOINT")[-1])
        self.assertEqual(entry, ["/usr/local/bin/citegate"])
        self.assertRegex(script, r'strip --strip-debug -o "\$root/usr/local/bin/citegate" "\$bin"')

    def test_rootfs_takes_the_libraries_from_ldd(self):
        """The list of shared objects is ldd's at build time, loader included, checked by
        running the binary inside the root; nothing else goes in but the listed files."""
        script = ROOTFS.read_text()
        self.assertRegex(script, r'ldd "\$bin"')
        self.assertIn('*"not found"*) fail', script, "a library ldd cannot find must fail the build")
        self.assertRegex(script, r'chroot --userspec=\$uid:\$uid "\$root" /usr/local/bin/citegate')
        self.assertIn("/etc/ssl/certs/ca-certificates.crt", script)
        for f in ("passwd", "group", "nsswitch.conf"):
            self.assertIn(f'>"$root/etc/{f}"', script, f"rootfs.sh does not write /etc/{f}")
        # What the TLS code loads as the system bundle is what the image ships.
        tls = (REPO / "src" / "io" / "tls.c").read_text()
        self.assertIn('"/etc/ssl/certs/ca-certificates.crt"', tls)
        r = subprocess.run(["bash", "-n", str(ROOTFS)], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_user_is_not_root(self):
        user = self.df.user(1)
        self.assertIsNotNone(user, "no USER in the runtime stage")
        uid, _, gid = user.partition(":")
        self.assertNotIn(uid, ("root", "0"))
        self.assertRegex(uid, r"^[0-9]+$", "a numeric USER lets Kubernetes verify runAsNonRoot")
        script = ROOTFS.read_text()
        self.assertIn(f"uid={uid}\n", script, "rootfs.sh writes another uid into /etc/passwd")
        self.assertEqual(gid, uid)
        self.assertIn("printf 'citegate:x:%d:%d:citegate:/var/lib/citegate:", script)

    def test_healthcheck_is_citegate_health(self):
        hc = self.df.stage(1, "HEALTHCHECK")
        self.assertEqual(len(hc), 1)
        m = re.fullmatch(r"((?:--\S+\s+)*)CMD\s+(.+)", hc[0], re.S | re.I)
        self.assertIsNotNone(m, f"HEALTHCHECK {hc[0]}: no CMD")
        self.assertTrue(m.group(2).startswith("["), "the shell form needs /bin/sh, which is not there")
        cmd = split_args(m.group(2))
        self.assertEqual(cmd, split_args(self.df.stage(1, "ENTRYPOINT")[-1]) + ["health"])
        opts = dict(o[2:].split("=", 1) for o in m.group(1).split())
        self.assertGreater(compose_seconds(opts["timeout"]), 1, "the probe itself gives up at 1 s")

    def test_listeners_exposed(self):
        env = self.df.env(1)
        listen, admin = split_addr(env["CITEGATE_LISTEN"]), split_addr(env["CITEGATE_ADMIN_LISTEN"])
        self.assertEqual(listen[0], "0.0.0.0")
        self.assertEqual(admin[0], "0.0.0.0", "the admin port must be reachable for probes")
        exposed = {int(p.split("/")[0]) for a in self.df.stage(1, "EXPOSE") for p in a.split()}
        self.assertEqual(exposed, {listen[1], admin[1]})
        self.assertEqual(exposed, {8080, 9901})

    def test_stopsignal(self):
        self.assertIn(self.df.stage(1, "STOPSIGNAL"), (["SIGTERM"], ["15"]))

    def test_semantic_memory_on_writable_volume(self):
        env = self.df.env(1)
        db_dir = posixpath.dirname(env["SEMANTIC_MEMORY_DB_PATH"])
        vols = [v for a in self.df.stage(1, "VOLUME") for v in split_args(a)]
        self.assertIn(db_dir, vols)
        uid = self.df.user(1).split(":")[0]
        _, _, data = self.rootfs_run()
        copies = [(f, s, d) for f, s, d in self.df.copies(1) if s == [data.rstrip("/") + "/"]]
        self.assertEqual(len(copies), 1, "the data folder is not copied")
        flags, _, dest = copies[0]
        self.assertEqual(flags.get("chown"), f"{uid}:{uid}", f"{db_dir} is not owned by uid {uid}")
        self.assertEqual(posixpath.join(dest, posixpath.basename(db_dir)), db_dir)
        self.assertIn(f'install -d -m 0750 "$data/{posixpath.basename(db_dir)}"', ROOTFS.read_text())
        self.assertEqual(self.df.stage(1, "WORKDIR")[-1], db_dir,
                         "SQLite's last temporary folder is the working directory: keep it writable")

    def test_env_names_known(self):
        table = config_vars()
        for n in (0, 1):
            for name in self.df.env(n):
                if name == "DEBIAN_FRONTEND":
                    continue
                self.assertIn(name, table, f"ENV {name} is not a citegate variable")


class DockerignoreTest(unittest.TestCase):
    def test_excludes_local_output(self):
        pats = dockerignore_patterns()
        for p in ("build", "build/citegate", "build-asan/CMakeCache.txt", "build-fuzz",
                  "data/semantic-memory.db", "node_modules", "tests/sdk/node_modules/openai/package.json",
                  "tests/webchat/node_modules/x/index.js"):
            self.assertTrue(ignored(p, pats), f"{p} is sent to the build context")

    def test_keeps_sources(self):
        pats = dockerignore_patterns()
        paths = ["Makefile", "CMakeLists.txt", ".ci/run", "src/core/config.c", "include/citegate/config.h",
                 "third_party/llhttp/CMakeLists.txt", "tests/fixtures/azure_oyd_stream.sse",
                 "tests/sdk/package-lock.json", "tests/integration/test_deploy.py",
                 "docker/Dockerfile", "docker/rootfs.sh", "README.md"]
        if shutil.which("git") and (REPO / ".git").exists():
            r = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True)
            if r.returncode == 0:
                paths += r.stdout.split()
        for p in paths:
            self.assertFalse(ignored(p, pats), f"{p} is missing from the build context")


class ComposeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(COMPOSE) as f:
            docs = list(yaml.safe_load_all(f))
        assert len(docs) == 1
        cls.c = docs[0]
        cls.svcs = cls.c["services"]
        cls.cg = [s for s in cls.svcs.values() if "build" in s]
        cls.df = Dockerfile()

    def citegate(self):
        self.assertEqual(len(self.cg), 1, "one service is built from docker/Dockerfile")
        return self.cg[0]

    def env(self):
        env = {k: v for k, v in config_vars().items() if v is not None}
        env.update(self.df.env(1))
        env.update(compose_env(self.citegate()))
        return env

    def upstream_service(self):
        m = re.fullmatch(r"http://([^:/]+):([0-9]+)/?", self.env()["CITEGATE_UPSTREAM"])
        self.assertIsNotNone(m, "CITEGATE_UPSTREAM is not http://SERVICE:PORT")
        self.assertIn(m.group(1), self.svcs, "CITEGATE_UPSTREAM does not name a compose service")
        return self.svcs[m.group(1)], int(m.group(2))

    def test_build(self):
        svc = self.citegate()
        ctx = (DOCKER / svc["build"]["context"]).resolve()
        self.assertEqual(ctx, REPO, "the build context is the repository root")
        self.assertEqual((ctx / svc["build"]["dockerfile"]).resolve(), DOCKERFILE)
        self.assertEqual(svc["image"], "citegate:latest")

    def test_ports_on_loopback_match_listeners(self):
        env = self.env()
        want = {split_addr(env["CITEGATE_LISTEN"])[1], split_addr(env["CITEGATE_ADMIN_LISTEN"])[1]}
        got = set()
        for p in self.citegate()["ports"]:
            if isinstance(p, dict):
                ip, target = p.get("host_ip"), int(p["target"])
            else:
                parts = str(p).split(":")
                self.assertEqual(len(parts), 3, f"{p}: give the host address")
                ip, target = parts[0], int(parts[2])
            self.assertEqual(ip, "127.0.0.1", f"{p} is published beyond loopback")
            got.add(target)
        self.assertEqual(got, want)
        self.assertEqual(got, {8080, 9901})

    def test_upstream_is_the_mock(self):
        mock, port = self.upstream_service()
        self.assertIn(mock, [s for n, s in self.svcs.items() if n in (self.citegate().get("depends_on") or {})])
        cmd = mock["command"]
        cmd = shlex.split(cmd) if isinstance(cmd, str) else [str(w) for w in cmd]
        script = next(w for w in cmd if w.endswith("mock_upstream.py"))
        mounts = compose_mounts(mock)

        def host_path(cpath):
            for src, target in mounts:
                if cpath == target or cpath.startswith(target.rstrip("/") + "/"):
                    return (DOCKER / src / os.path.relpath(cpath, target)).resolve()
            self.fail(f"{cpath} is not in a mounted folder")

        host_script = host_path(script)
        self.assertTrue(host_script.is_file(), f"{script} -> {host_script} does not exist")
        self.assertTrue(str(host_script).startswith(str(REPO / "tests" / "tools")))
        known = set(re.findall(r'add_argument\(\s*"(--[a-z-]+)"', host_script.read_text()))
        opts = {}
        i = cmd.index(script) + 1
        while i < len(cmd):
            self.assertIn(cmd[i], known, f"mock_upstream.py has no option {cmd[i]}")
            opts[cmd[i]] = cmd[i + 1]
            i += 2
        self.assertEqual(opts.get("--host"), "0.0.0.0", "the mock must listen beyond its own loopback")
        self.assertEqual(int(opts["--port"]), port)
        if "--fixtures" in opts:
            fx = host_path(opts["--fixtures"])
            self.assertTrue((fx / "azure_oyd_stream.sse").is_file(), f"{fx} has no fixtures")
        for src, target in mounts:
            self.assertTrue((DOCKER / src).exists(), f"mounted {src} does not exist")

    def test_drain_fits(self):
        grace_ms = int(self.env()["CITEGATE_SHUTDOWN_GRACE_MS"])
        self.assertGreater(compose_seconds(self.citegate().get("stop_grace_period", "10s")) * 1000, grace_ms)

    def test_data_volume(self):
        mounts = compose_mounts(self.citegate())
        for src, _ in mounts:
            if "/" not in src and not src.startswith("."):
                self.assertIn(src, self.c.get("volumes") or {}, f"volume {src} not declared")
        if self.env().get("CITEGATE_TRACKING_DSN"):
            return  # PostgreSQL: nothing is stored in the container
        db_dir = posixpath.dirname(self.env()["SEMANTIC_MEMORY_DB_PATH"])
        self.assertIn(db_dir, [t for _, t in mounts])

    def test_replicas_share_postgres(self):
        """Two or more replicas of the image, one DSN naming the compose PostgreSQL
        service with its own user, password and database, ports apart and on loopback."""
        replicas = {n: s for n, s in self.svcs.items() if s.get("image") == self.citegate()["image"]}
        self.assertGreaterEqual(len(replicas), 2, "the demo runs two replicas")
        for n, s in replicas.items():
            if "build" not in s:
                self.assertEqual(s.get("pull_policy"), "never", f"{n}: citegate:latest is built here, not pulled")
        dsns = {compose_env(s).get("CITEGATE_TRACKING_DSN") for s in replicas.values()}
        self.assertEqual(len(dsns), 1, "the replicas must share one database")
        dsn = dsns.pop()
        m = re.fullmatch(r"postgresql://([^:@/]+):([^@/]+)@([^:/]+):([0-9]+)/([^?]+)", dsn or "")
        self.assertIsNotNone(m, f"CITEGATE_TRACKING_DSN {dsn!r} is not postgresql://USER:PASSWORD@SERVICE:PORT/DB")
        user, password, host, port, db = m.groups()
        self.assertIn(host, self.svcs, "the DSN does not name a compose service")
        pg = self.svcs[host]
        self.assertTrue(pg["image"].startswith("postgres:"), pg["image"])
        pe = compose_env(pg)
        self.assertEqual((pe.get("POSTGRES_USER"), pe.get("POSTGRES_PASSWORD"), pe.get("POSTGRES_DB")),
                         (user, password, db))
        self.assertEqual(int(port), 5432)
        self.assertIn("pg_isready", " ".join(pg["healthcheck"]["test"]))
        self.assertIn("/var/lib/postgresql/data", [t for _, t in compose_mounts(pg)])
        self.assertFalse(pg.get("ports"), "the database is not published")
        published = []
        for n, s in replicas.items():
            self.assertEqual(s["depends_on"][host]["condition"], "service_healthy", n)
            for p in s["ports"]:
                ip, hport, _ = str(p).split(":")
                self.assertEqual(ip, "127.0.0.1", f"{n}: {p} is published beyond loopback")
                published.append(int(hport))
            self.assertGreater(compose_seconds(s.get("stop_grace_period", "10s")) * 1000,
                               int(self.env()["CITEGATE_SHUTDOWN_GRACE_MS"]), n)
        self.assertEqual(len(published), len(set(published)), "two replicas publish one port")

    def test_env_names_known(self):
        table = config_vars()
        for name in compose_env(self.citegate()):
            self.assertIn(name, table)

    def test_citegate_check(self):
        if not citegate_bin():
            self.skipTest("no built citegate")
        r = run_check(self.env())
        self.assertEqual(r.returncode, 0, r.stderr)


class KubernetesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = k8s_docs()
        cls.df = Dockerfile()

    def citegate_pods(self):
        """(file, workload, pod spec, citegate container) for every pod running citegate."""
        out = []
        for f, w, spec in pods(self.docs):
            cs = [c for c in all_containers(spec) if is_citegate(c)]
            if cs:
                self.assertEqual(len(cs), 1, f"{f}: two citegate containers in one pod")
                out.append((f, w, spec, cs[0]))
        return out

    def env(self, c):
        return k8s_env(self.docs, c, self.df.env(1))[0]

    def test_files_and_objects(self):
        names = {f for f, _ in self.docs}
        self.assertEqual(names, {"sidecar.yaml", "sidecar-native.yaml", "standalone.yaml", "fleet.yaml",
                                 "config.yaml"})
        for f, d in self.docs:
            for k in ("apiVersion", "kind", "metadata"):
                self.assertIn(k, d, f"{f}: object without {k}")
            self.assertTrue(d["metadata"].get("name"), f"{f}: object without a name")
        self.assertEqual(len(self.citegate_pods()), 4)

    def test_selectors(self):
        for f, d in self.docs:
            if d["kind"] == "Deployment":
                labels = d["spec"]["template"]["metadata"]["labels"]
                sel = d["spec"]["selector"]["matchLabels"]
                self.assertLessEqual(sel.items(), labels.items(), f"{f}: selector does not match the pods")
            if d["kind"] == "Service":
                sel = d["spec"]["selector"]
                targets = [w for _, w, _ in pods(self.docs)
                           if sel.items() <= w["spec"]["template"]["metadata"]["labels"].items()]
                self.assertEqual(len(targets), 1, f"{f}: Service {d['metadata']['name']} selects {len(targets)} workloads")

    def test_image(self):
        with open(COMPOSE) as f:
            compose_image = [s["image"] for s in yaml.safe_load(f)["services"].values() if "build" in s][0]
        for f, _, _, c in self.citegate_pods():
            self.assertEqual(c["image"], compose_image, f"{f}: not the image docker/Dockerfile builds")
            self.assertIn(c.get("imagePullPolicy"), ("IfNotPresent", "Never"),
                          f"{f}: a locally built :latest image must not be pulled")

    def check_ready_probe(self, f, c, name, admin_host, admin_port):
        """`citegate health` in the container, or GET /readyz on the admin port."""
        probe = c[name]
        where = f"{f}: {c['name']} {name}"
        entry = split_args(self.df.stage(1, "ENTRYPOINT")[-1])
        if "exec" in probe:
            cmd = probe["exec"]["command"]
            self.assertEqual(cmd[:len(entry) + 1], entry + ["health"], f"{where}: not `citegate health`")
            rest = cmd[len(entry) + 1:]
            if rest:  # the flag, when given, names the admin listener
                self.assertEqual(len(rest), 2, f"{where}: {rest}")
                self.assertEqual(rest[0], "--admin-listen", where)
                self.assertEqual(split_addr(rest[1])[1], admin_port, where)
            self.assertGreater(probe.get("timeoutSeconds", 1), 1, f"{where}: the probe itself waits 1 s")
        else:
            get = probe.get("httpGet")
            self.assertIsNotNone(get, f"{where}: neither `citegate health` nor an HTTP probe")
            self.assertEqual(get["path"], "/readyz", where)
            self.assertEqual(container_port(c, get["port"]), admin_port, f"{where}: port")
            self.assertNotIn(admin_host, ("127.0.0.1", "localhost", "::1"),
                             f"{where}: the kubelet cannot reach {admin_host}")

    def test_probes(self):
        """Readiness (and a native sidecar's startup) through `citegate health` or
        GET /readyz on the admin port; liveness on /healthz, which stays 200 while
        draining, so that a draining container is not restarted."""
        for f, _, spec, c in self.citegate_pods():
            host, admin = split_addr(self.env(c)["CITEGATE_ADMIN_LISTEN"])
            self.check_ready_probe(f, c, "readinessProbe", host, admin)
            if is_native_sidecar(spec, c):
                self.assertIn("startupProbe", c, f"{f}: a native sidecar holds the pod's start with a startupProbe")
            if "startupProbe" in c:
                self.check_ready_probe(f, c, "startupProbe", host, admin)
            get = c["livenessProbe"].get("httpGet")
            self.assertIsNotNone(get, f"{f}: liveness must not be /readyz (503 while draining)")
            self.assertEqual(get["path"], "/healthz", f"{f}: livenessProbe")
            self.assertEqual(container_port(c, get["port"]), admin, f"{f}: livenessProbe port")
            self.assertNotIn(host, ("127.0.0.1", "localhost", "::1"), f"{f}: kubelet probes cannot reach {host}")

    def test_service_targets(self):
        """A Service that reaches citegate targets its client listener, on an address
        beyond the pod's loopback; the native sidecar's Service targets the frontend."""
        for f, d in self.docs:
            if d["kind"] != "Service":
                continue
            spec = [sp for _, w, sp in pods(self.docs)
                    if d["spec"]["selector"].items() <= w["spec"]["template"]["metadata"]["labels"].items()][0]
            for p in d["spec"]["ports"]:
                target = p.get("targetPort", p["port"])
                owners = [c for c in all_containers(spec)
                          if any(target in (q.get("name"), q["containerPort"]) for q in c.get("ports", []))]
                self.assertEqual(len(owners), 1, f"{f}: Service port {p} matches {len(owners)} containers")
                c = owners[0]
                if not is_citegate(c):
                    continue
                host, listen = split_addr(self.env(c)["CITEGATE_LISTEN"])
                self.assertEqual(container_port(c, target), listen, f"{f}: Service port")
                self.assertNotIn(host, ("127.0.0.1", "localhost", "::1"), f"{f}: a Service cannot reach {host}")

    def test_drain_fits_in_grace_period(self):
        """Classic: citegate's preStop sleep (the Service forgets the pod), then its drain.
        Native sidecar: the main containers' preStop, then their requests run out through
        citegate (given the drain's time), and only then citegate's SIGTERM."""
        for f, _, spec, c in self.citegate_pods():
            grace_ms = int(self.env(c)["CITEGATE_SHUTDOWN_GRACE_MS"])
            tgps = spec.get("terminationGracePeriodSeconds", 30)
            if is_native_sidecar(spec, c):
                pre = max(prestop_sleep_s(m) for m in spec["containers"])
                self.assertEqual(prestop_sleep_s(c), 0, f"{f}: a native sidecar needs no preStop")
                what = "the main containers' preStop"
            else:
                pre = prestop_sleep_s(c)
                what = "preStop"
            self.assertGreater(pre, 0, f"{f}: no preStop sleep before SIGTERM")
            self.assertGreater(tgps * 1000, grace_ms + pre * 1000,
                               f"{f}: terminationGracePeriodSeconds {tgps} <= {what} {pre} s + drain {grace_ms} ms")

    def test_native_sidecar(self):
        """sidecar-native.yaml: citegate in initContainers with restartPolicy Always,
        listening on the pod's loopback, and a main container that calls it there."""
        native = [(f, spec, c) for f, _, spec, c in self.citegate_pods() if is_native_sidecar(spec, c)]
        self.assertEqual([f for f, _, _ in native], ["sidecar-native.yaml"])
        f, spec, c = native[0]
        self.assertFalse([m for m in spec["containers"] if is_citegate(m)])
        host, port = split_addr(self.env(c)["CITEGATE_LISTEN"])
        self.assertEqual(host, "127.0.0.1", f"{f}: only the pod's own frontend calls it")
        urls = [e.get("value", "") for m in spec["containers"] for e in m.get("env", [])]
        self.assertTrue([u for u in urls if re.match(rf"https?://127\.0\.0\.1:{port}(/|$)", u)],
                        f"{f}: no main container calls citegate on 127.0.0.1:{port}")
        for other in spec["containers"]:
            for q in other.get("ports", []):
                self.assertNotEqual(q["containerPort"], port, f"{f}: {other['name']} shares citegate's port")

    def test_sidecar_upstream_outlives_drain(self):
        seen = 0
        for f, _, spec, c in self.citegate_pods():
            env, _ = k8s_env(self.docs, c, self.df.env(1))
            m = re.fullmatch(r"https?://(127\.0\.0\.1|localhost|\[::1\])(?::([0-9]+))?/?.*", env["CITEGATE_UPSTREAM"])
            if not m:
                continue
            seen += 1
            others = [o for o in all_containers(spec) if o is not c]
            self.assertTrue(others, f"{f}: upstream on localhost but no backend container in the pod")
            need = prestop_sleep_s(c) + int(env["CITEGATE_SHUTDOWN_GRACE_MS"]) / 1000
            for o in others:
                self.assertGreaterEqual(prestop_sleep_s(o), need,
                                        f"{f}: {o['name']} gets SIGTERM while citegate still drains")
        self.assertEqual(seen, 1, "sidecar.yaml: CITEGATE_UPSTREAM is not the pod's own backend")

    def test_memory_sized_for_streams(self):
        for f, _, _, c in self.citegate_pods():
            env, _ = k8s_env(self.docs, c, self.df.env(1))
            workers = int(env["CITEGATE_WORKERS"])
            streams = int(env["CITEGATE_UPSTREAM_MAX_CONNECTIONS"])
            per = PER_STREAM_KIB + (TLS_UPSTREAM_CONN_KIB if env["CITEGATE_UPSTREAM"].startswith("https:") else 0)
            need = workers * (BASE_WORKER_KIB + streams * per) * 1024
            res = c["resources"]
            req = k8s_quantity(res["requests"]["memory"])
            self.assertGreaterEqual(req, need, f"{f}: memory request {res['requests']['memory']} < "
                                               f"{need / 2**20:.1f} MiB")
            self.assertGreaterEqual(k8s_quantity(res["limits"]["memory"]), req)

    def test_security_and_data_volume(self):
        uid = int(self.df.user(1).split(":")[0])
        for f, _, spec, c in self.citegate_pods():
            sc = c.get("securityContext", {})
            pod_sc = spec.get("securityContext", {})
            self.assertTrue(sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")), f"{f}: runAsNonRoot")
            self.assertEqual(sc.get("runAsUser", pod_sc.get("runAsUser", uid)), uid, f"{f}: not the image's user")
            self.assertIs(sc.get("readOnlyRootFilesystem"), True, f"{f}: readOnlyRootFilesystem")
            self.assertIs(sc.get("allowPrivilegeEscalation"), False, f"{f}: allowPrivilegeEscalation")
            self.assertEqual([d.upper() for d in sc.get("capabilities", {}).get("drop", [])], ["ALL"],
                             f"{f}: capabilities not all dropped")
            self.assertFalse(sc.get("capabilities", {}).get("add"), f"{f}: capabilities added")
            seccomp = sc.get("seccompProfile", pod_sc.get("seccompProfile", {}))
            self.assertEqual(seccomp.get("type"), "RuntimeDefault", f"{f}: seccompProfile")
            env, _ = k8s_env(self.docs, c, self.df.env(1))
            if env.get("CITEGATE_TRACKING_DSN"):
                continue  # PostgreSQL: nothing is stored in the pod
            db_dir = posixpath.dirname(env["SEMANTIC_MEMORY_DB_PATH"])
            mounts = [m for m in c.get("volumeMounts", [])
                      if db_dir == m["mountPath"] or db_dir.startswith(m["mountPath"].rstrip("/") + "/")]
            self.assertTrue(mounts, f"{f}: {db_dir} is not on a volume")
            vols = {v["name"] for v in spec.get("volumes", [])}
            self.assertIn(mounts[0]["name"], vols)
            self.assertFalse(mounts[0].get("readOnly"), f"{f}: {db_dir} is read-only")

    def test_env_names_known_and_refs_resolve(self):
        table = config_vars()
        for f, _, _, c in self.citegate_pods():
            _, names = k8s_env(self.docs, c, self.df.env(1))  # raises on a dangling reference
            self.assertTrue(names)
            for n in names:
                self.assertIn(n, table, f"{f}: {n} is not a citegate variable")
            self.assertTrue(any("secretRef" in s for s in c.get("envFrom", [])), f"{f}: no Secret loaded")
        for f, d in self.docs:
            if d["kind"] == "ConfigMap":
                for k, v in (d.get("data") or {}).items():
                    self.assertIn(k, table, f"{f}: ConfigMap key {k}")
                    self.assertIsInstance(v, str, f"{f}: {k} must be a string")
            if d["kind"] == "Secret":
                for k in secret_data(d):
                    self.assertIn(k, table, f"{f}: Secret key {k}")

    def test_search_key_only_in_secret(self):
        cms = [d for _, d in self.docs if d["kind"] == "ConfigMap"]
        secrets = [d for _, d in self.docs if d["kind"] == "Secret"]
        self.assertTrue(cms and secrets)
        for cm in cms:
            self.assertNotIn("AZURE_AI_DATA_SOURCES", cm.get("data") or {})
            self.assertNotRegex(json.dumps(cm.get("data")), r'\\"key\\"', "a key in the ConfigMap")
        values = [secret_data(s)["AZURE_AI_DATA_SOURCES"] for s in secrets if "AZURE_AI_DATA_SOURCES" in secret_data(s)]
        self.assertEqual(len(values), 1)
        sources = json.loads(values[0])
        sources = sources if isinstance(sources, list) else [sources]
        fixture = json.loads((REPO / "tests" / "fixtures" / "azure_data_sources.json").read_text())[0]
        for s in sources:
            self.assertEqual(s.keys(), fixture.keys())
            self.assertLessEqual(fixture["parameters"].keys(), s["parameters"].keys())
            auth = s["parameters"]["authentication"]
            self.assertIn("type", auth)
            if auth["type"] == "api_key":
                self.assertTrue(auth.get("key"), "api_key authentication without a key")

    def test_hpa_targets_deployment(self):
        hpas = [(f, d) for f, d in self.docs if d["kind"] == "HorizontalPodAutoscaler"]
        self.assertEqual(len(hpas), 2)
        kinds = set()
        for f, hpa in hpas:
            self.assertEqual(hpa["apiVersion"], "autoscaling/v2")
            ref = hpa["spec"]["scaleTargetRef"]
            self.assertEqual((ref["apiVersion"], ref["kind"]), ("apps/v1", "Deployment"))
            dep = [d for g, d in self.docs if g == f and d["kind"] == "Deployment" and d["metadata"]["name"] == ref["name"]]
            self.assertEqual(len(dep), 1, f"{f}: HPA target {ref['name']} is not a Deployment in the same file")
            self.assertLessEqual(hpa["spec"].get("minReplicas", 1), hpa["spec"]["maxReplicas"])
            for m in hpa["spec"]["metrics"]:
                if m["type"] == "Resource" and m["resource"]["name"] == "cpu":
                    kinds.add("cpu")
                    for c in dep[0]["spec"]["template"]["spec"]["containers"]:
                        self.assertIn("cpu", c.get("resources", {}).get("requests", {}),
                                      f"{c['name']}: CPU utilization needs a CPU request")
                elif m["type"] == "Pods":
                    kinds.add(m["pods"]["metric"]["name"])
                    self.check_streams_target(f, dep[0], m["pods"])
                else:
                    self.fail(f"{f}: HPA metric {m} is neither CPU nor a citegate gauge")
        self.assertEqual(kinds, {"cpu", "citegate_active_streams"})

    def check_streams_target(self, f, dep, pods_metric):
        """The streams target is a gauge of /metrics and below what a pod is sized for."""
        self.assertEqual(pods_metric["metric"]["name"], "citegate_active_streams")
        self.assertEqual(pods_metric["target"]["type"], "AverageValue")
        c = [c for c in dep["spec"]["template"]["spec"]["containers"] if is_citegate(c)][0]
        env, _ = k8s_env(self.docs, c, self.df.env(1))
        cap = int(env["CITEGATE_WORKERS"]) * int(env["CITEGATE_UPSTREAM_MAX_CONNECTIONS"])
        target = k8s_quantity(pods_metric["target"]["averageValue"])
        self.assertGreater(target, 0)
        self.assertLess(target, cap, f"{f}: scaling at {target} streams per pod, sized for {cap}")
        src = (REPO / "src" / "io" / "metrics.c").read_text()
        self.assertIn('"active_streams", "gauge"', src.replace("\n", " "))

    def test_fleet_shares_one_database(self):
        """Replicas of fleet.yaml take the DSN from a Secret and scale beyond one."""
        fleet = [(f, w, c) for f, w, _, c in self.citegate_pods()
                 if k8s_env(self.docs, c, self.df.env(1))[0].get("CITEGATE_TRACKING_DSN")]
        self.assertEqual([f for f, _, _ in fleet], ["fleet.yaml"])
        f, w, c = fleet[0]
        self.assertGreaterEqual(w["spec"]["replicas"], 2)
        refs = [e["valueFrom"]["secretKeyRef"] for e in c.get("env", [])
                if e["name"] == "CITEGATE_TRACKING_DSN" and "secretKeyRef" in e.get("valueFrom", {})]
        self.assertEqual(len(refs), 1, f"{f}: CITEGATE_TRACKING_DSN does not come from a Secret")
        for _, d in self.docs:
            if d["kind"] == "ConfigMap":
                self.assertNotIn("CITEGATE_TRACKING_DSN", d.get("data") or {}, "a DSN (with its password) in a ConfigMap")
        dsn = secret_data(find(self.docs, "Secret", refs[0]["name"]))[refs[0]["key"]]
        self.assertRegex(dsn, r"^postgresql://[^:@/]+:[^@/]+@[^/]+/[^?]+")
        hpa = [d for g, d in self.docs if g == f and d["kind"] == "HorizontalPodAutoscaler"]
        self.assertEqual(len(hpa), 1)
        self.assertGreaterEqual(hpa[0]["spec"]["minReplicas"], 2)
        self.assertFalse(c.get("volumeMounts"), f"{f}: nothing is stored in the pod with PostgreSQL")

    def test_citegate_check(self):
        if not citegate_bin():
            self.skipTest("no built citegate")
        for f, _, _, c in self.citegate_pods():
            env, _ = k8s_env(self.docs, c, self.df.env(1))
            r = run_check(env)
            self.assertEqual(r.returncode, 0, f"{f}: {r.stderr}")


if __name__ == "__main__":
    unittest.main()
