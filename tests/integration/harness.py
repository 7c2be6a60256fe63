"""Integration-test harness for citegate (Python 3 standard library only).

- make_cert(dir): self-signed cert/key for localhost / 127.0.0.1 (openssl CLI)
- MockUpstream: runs tests/tools/mock_upstream.py (plain or TLS) in a subprocess
- H2MockUpstream: runs the h2c mock (tests/tools/h2mock.c, H2MOCK_BIN) and reads the
  requests it recorded
- Citegate: runs build/citegate with a clean environment, waits for /healthz,
  stops it with SIGTERM (kill after a timeout), keeps its stderr in a file
- DaemonCase: the TestCase every module that starts citegate derives from; at the end of
  its class it stops every citegate started since and fails unless each exited as expected
  (0, or what cg.expect_exit() said) without a sanitizer report (daemon_problems())
- request(): a small HTTP/1.1 client on http.client
- RawClient / RawResponse: raw-socket HTTP/1.1 client that decodes the response
  body incrementally and records the arrival time of every read
- sanitizer_reports(): the ASan/UBSan/LSan reports in a stderr text (first line,
  first frames, SUMMARY)

Everything is bounded by timeouts; nothing here waits forever.
"""
import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOLS = os.path.join(ROOT, "tests", "tools")
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
EXPECTED = os.path.join(FIXTURES, "expected")
MOCK = os.path.join(TOOLS, "mock_upstream.py")

if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)
import client_view  # noqa: E402,F401  (re-exported for the tests)
from sockend import SocketEnd  # noqa: E402

DEFAULT_TIMEOUT = 10.0


def citegate_bin():
    """CITEGATE_BIN, else the first argv entry that names an executable, else build/citegate."""
    b = os.environ.get("CITEGATE_BIN")
    if b:
        return b
    for a in sys.argv[1:]:
        if os.path.basename(a).startswith("citegate") and os.access(a, os.X_OK):
            return a
    return os.path.join(ROOT, "build", "citegate")


def fixture_bytes(name):
    with open(os.path.join(FIXTURES, name), "rb") as f:
        return f.read()


def expected(name):
    with open(os.path.join(EXPECTED, name), encoding="utf-8") as f:
        return json.load(f)


def expected_files():
    return sorted(n for n in os.listdir(EXPECTED) if n.endswith(".json"))


# Ports handed out, claimed by a file each, across every test process of the machine.
# citegate binds with SO_REUSEPORT (its workers share ports), so two daemons of two tests
# running side by side could both bind a port free_port() gave each of them, with no
# "address already in use", and the kernel would then deal one's clients to the other. A
# claim older than PORT_CLAIM_S is a finished run's, and may be taken again.
PORT_DIR = os.path.join(tempfile.gettempdir(), "citegate-test-ports-%d" % os.getuid())
PORT_CLAIM_S = 900


def free_port():
    os.makedirs(PORT_DIR, exist_ok=True)
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        claim = os.path.join(PORT_DIR, str(port))
        try:
            os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return port
        except FileExistsError:
            try:
                if time.time() - os.path.getmtime(claim) > PORT_CLAIM_S:
                    os.utime(claim)
                    return port
            except OSError:
                pass


def slow_reader(port, rcvbuf=16384, timeout=30):
    """A client socket with a small receive buffer, so the kernel cannot
    absorb an answer its reader leaves unread. The size is set before
    connect, as tcp(7) asks: set after, the window already offered (from the
    default buffer) outgrows the buffer, the kernel drops what it offered
    room for, and the retransmission timer, backing off while the reader
    pauses, stalls the stream for a minute and more after it reads again."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(timeout)
    sock.connect(("127.0.0.1", port))
    return sock


def read_to_eof(sock):
    """Everything sock receives until the peer closes; closes sock."""
    data = bytearray()
    while True:
        piece = sock.recv(1 << 16)
        if not piece:
            break
        data += piece
    sock.close()
    return bytes(data)


def wait_for(pred, timeout, interval=0.02):
    """Poll pred() until it returns a truthy value or timeout; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


def make_cert(directory):
    cert = os.path.join(directory, "cert.pem")
    key = os.path.join(directory, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", key, "-out", cert],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def _die_with_parent():
    """preexec_fn: SIGKILL the child when the test process dies (Linux), so that a killed
    test run (ctest timeout, ^C) leaves no daemon or mock behind."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001
        pass


def _stop_process(proc, timeout=10.0, sig=signal.SIGTERM):
    if proc.poll() is not None:
        return proc.returncode
    try:
        proc.send_signal(sig)
    except ProcessLookupError:
        pass
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(timeout=5)


# --------------------------------------------------------------------------- mock

class MockUpstream:
    def __init__(self, tls_cert=None, tls_key=None, fixtures=FIXTURES):
        self.tls = bool(tls_cert)
        self.cert, self.key, self.fixtures = tls_cert, tls_key, fixtures
        self.proc = None
        self.port = None
        self.dir = tempfile.mkdtemp(prefix="cg-mock-")

    def start(self, timeout=DEFAULT_TIMEOUT):
        ready = os.path.join(self.dir, "ready")
        cmd = [sys.executable, MOCK, "--port", "0", "--fixtures", self.fixtures, "--ready-file", ready]
        if self.tls:
            cmd += ["--tls-cert", self.cert, "--tls-key", self.key]
        self.log = open(os.path.join(self.dir, "mock.log"), "wb")
        self.proc = subprocess.Popen(cmd + ["--parent-pid", str(os.getpid())], stdout=self.log,
                                     stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        ok = wait_for(lambda: os.path.exists(ready) or self.proc.poll() is not None, timeout)
        if not ok or not os.path.exists(ready):
            self.stop()
            raise RuntimeError("mock upstream did not start: " + self.output())
        with open(ready) as f:
            self.port = int(f.read().strip())
        return self

    def output(self):
        try:
            with open(os.path.join(self.dir, "mock.log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    @property
    def url(self):
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def hostport(self):
        return f"127.0.0.1:{self.port}"

    def ssl_context(self):
        ctx = ssl.create_default_context(cafile=self.cert)
        return ctx

    def raw(self, timeout=DEFAULT_TIMEOUT):
        """A RawClient connected to the mock directly (TLS when the mock is TLS)."""
        return RawClient(self.port, timeout=timeout,
                         ssl_context=self.ssl_context() if self.tls else None)

    def request(self, method, path, body=None, headers=None, timeout=DEFAULT_TIMEOUT):
        """Talk to the mock directly (not through citegate)."""
        return request(self.port, method, path, body=body, headers=headers, timeout=timeout,
                       ssl_context=self.ssl_context() if self.tls else None)

    def requests(self):
        st, _, body = self.request("GET", "/__mock/requests")
        assert st == 200, st
        return json.loads(body)

    def reset(self):
        st, _, _ = self.request("POST", "/__mock/reset", body=b"")
        assert st == 200, st

    def stats(self):
        st, _, body = self.request("GET", "/__mock/stats")
        assert st == 200, st
        return json.loads(body)

    def find(self, header, value):
        """Recorded requests whose header `header` equals value."""
        out = []
        for r in self.requests():
            for k, v in r["headers"]:
                if k.lower() == header.lower() and v == value:
                    out.append(r)
                    break
        return out

    def stop(self):
        if self.proc is not None:
            _stop_process(self.proc, timeout=5)
            self.proc = None
        if getattr(self, "log", None):
            self.log.close()
            self.log = None

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class H2MockUpstream:
    """The h2c mock (tests/tools/h2mock.c): answers every request with X-Mock-Fixture
    (a path under `fixtures`), records each request's header fields and body."""

    BIN = os.environ.get("H2MOCK_BIN", os.path.join(ROOT, "build", "tests", "h2mock"))

    def __init__(self, fixtures=FIXTURES, args=()):
        self.fixtures, self.args = fixtures, list(args)
        self.dir = tempfile.mkdtemp(prefix="cg-h2mock-")
        self.requests_file = os.path.join(self.dir, "requests.jsonl")
        self.proc = None
        self.port = None

    def start(self, timeout=DEFAULT_TIMEOUT):
        ready = os.path.join(self.dir, "ready")
        self.proc = subprocess.Popen([self.BIN, "--fixtures", self.fixtures, "--ready-file", ready,
                                      "--requests-file", self.requests_file] + self.args,
                                     preexec_fn=_die_with_parent)
        if not wait_for(lambda: os.path.exists(ready) and os.path.getsize(ready) > 0, timeout):
            self.cleanup()
            raise RuntimeError("h2mock did not start")
        with open(ready) as f:
            self.port = int(f.read())
        return self

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def requests(self):
        """[{"headers": [[name, value], ...], "body": str}] in arrival order."""
        if not os.path.exists(self.requests_file):
            return []
        with open(self.requests_file, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def reset(self):
        if os.path.exists(self.requests_file):
            os.remove(self.requests_file)

    def cleanup(self):
        if self.proc is not None:
            _stop_process(self.proc, timeout=5)
            self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)


def ensure_npm(directory, timeout=300):
    """`npm ci` in directory unless every dependency of its package.json is installed
    (a lockfile that gained a package makes an older node_modules stale)."""
    with open(os.path.join(directory, "package.json")) as f:
        deps = json.load(f).get("dependencies", {})
    mods = os.path.join(directory, "node_modules")
    if all(os.path.isfile(os.path.join(mods, name, "package.json")) for name in deps):
        return
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=directory,
                   check=True, timeout=timeout)


# --------------------------------------------------------------------------- citegate

class StartError(RuntimeError):
    pass


class Citegate:
    """One citegate process with a clean environment (no CITEGATE_*/AZURE_AI_*/... inherited)."""

    CLEAN_PREFIXES = ("CITEGATE_", "AZURE_AI_", "ENABLE_", "SEMANTIC_MEMORY_")

    def __init__(self, upstream=None, env=None, args=(), binary=None, workdir=None):
        self.binary = binary or citegate_bin()
        self.dir = workdir or tempfile.mkdtemp(prefix="cg-citegate-")
        self.port = free_port()
        self.admin_port = free_port()
        while self.admin_port == self.port:
            self.admin_port = free_port()
        # Ports picked here may be taken by someone else before citegate binds them
        # (tests run side by side): start() then picks new ones, unless env fixed them.
        self.own_ports = not {"CITEGATE_LISTEN", "CITEGATE_ADMIN_LISTEN"} & set(env or {})
        e = {k: v for k, v in os.environ.items() if not k.startswith(self.CLEAN_PREFIXES)}
        e.update({
            "CITEGATE_LISTEN": f"127.0.0.1:{self.port}",
            "CITEGATE_ADMIN_LISTEN": f"127.0.0.1:{self.admin_port}",
            "CITEGATE_LOG_FORMAT": "json",
            "SEMANTIC_MEMORY_DB_PATH": os.path.join(self.dir, "data", "semantic-memory.db"),
        })
        if upstream:
            e["CITEGATE_UPSTREAM"] = upstream
        e.update(env or {})
        self.env = {k: v for k, v in e.items() if v is not None}
        self.args = list(args)
        self.proc = None
        self.stderr_path = os.path.join(self.dir, "stderr.log")
        self.stdout_path = os.path.join(self.dir, "stdout.log")
        self.expected_exit = 0
        self.exits = []  # one ExitRecord per process of this instance that ended (stop() keeps it)

    def expect_exit(self, status):
        """Says that this instance's process is meant to end with `status` (an exit code, or
        -N when a test kills it with signal N) rather than with 0 after SIGTERM: a start that
        must fail with a configuration error (2), a test's own SIGKILL (-9). The shared check
        (daemon_problems(), DaemonCase) then requires exactly that status; a sanitizer report
        in its stderr fails all the same. Returns self."""
        self.expected_exit = status
        return self

    def start(self, timeout=DEFAULT_TIMEOUT):
        _require_daemon_case()
        if self.proc is not None:
            self.stop()  # a second start: the first process is kept in self.exits
        for attempt in range(3):
            try:
                return self._start(timeout)
            except StartError as e:
                if not (self.own_ports and attempt < 2 and "address already in use" in str(e)):
                    raise
            self.port = free_port()
            self.admin_port = free_port()
            while self.admin_port == self.port:
                self.admin_port = free_port()
            self.env["CITEGATE_LISTEN"] = f"127.0.0.1:{self.port}"
            self.env["CITEGATE_ADMIN_LISTEN"] = f"127.0.0.1:{self.admin_port}"

    def _start(self, timeout):
        if not os.access(self.binary, os.X_OK):
            raise StartError(f"citegate binary not found or not executable: {self.binary}")
        self._err = open(self.stderr_path, "wb")
        self._out = open(self.stdout_path, "wb")
        self.proc = subprocess.Popen([self.binary] + self.args, env=self.env, cwd=self.dir,
                                     stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._err,
                                     preexec_fn=_die_with_parent)
        _register(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                rc = self.proc.returncode
                self._close_files()
                raise StartError(f"citegate exited with {rc} during start-up; stderr: "
                                 f"{self.stderr()[-2000:]!r} stdout: {self.stdout()[-500:]!r}")
            try:
                st, _, _ = request(self.admin_port, "GET", "/healthz", timeout=1.0)
                if st == 200:
                    return self
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.05)
        self.stop(timeout=2)
        raise StartError(f"citegate /healthz not 200 within {timeout}s; stderr: {self.stderr()[-2000:]!r}")

    def restarted(self, timeout=DEFAULT_TIMEOUT):
        """A new Citegate with the same environment and arguments (fresh ports), started."""
        self.stop(timeout=2)
        if not os.environ.get("CG_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)
        env = {k: v for k, v in self.env.items()
               if k not in ("CITEGATE_LISTEN", "CITEGATE_ADMIN_LISTEN", "SEMANTIC_MEMORY_DB_PATH")}
        new = Citegate(env=env, args=self.args, binary=self.binary)
        new.env["CITEGATE_UPSTREAM"] = self.env.get("CITEGATE_UPSTREAM")
        new.env = {k: v for k, v in new.env.items() if v is not None}
        return new.start(timeout)

    def _close_files(self):
        for f in (getattr(self, "_err", None), getattr(self, "_out", None)):
            if f:
                f.close()
        self._err = self._out = None

    def stderr(self):
        try:
            with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stdout(self):
        try:
            with open(self.stdout_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def log_lines(self):
        """stderr lines parsed as JSON where possible (CITEGATE_LOG_FORMAT=json)."""
        out = []
        for line in self.stderr().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append(line)
        return out

    def signal(self, sig):
        self.proc.send_signal(sig)

    def pause(self, timeout=2.0):
        """SIGSTOP, and wait until the kernel shows the process stopped."""
        self.proc.send_signal(signal.SIGSTOP)
        if not wait_for(lambda: process_state(self.proc.pid) in ("T", "t", None), timeout, 0.001):
            raise RuntimeError("citegate did not stop")

    def resume(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def sanitizer_reports(self):
        return sanitizer_reports(self.stderr())

    def wait(self, timeout=10.0):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, timeout=10.0):
        rc = None
        if self.proc is not None:
            rc = _stop_process(self.proc, timeout=timeout)
        self._close_files()
        self._keep_exit()
        return rc

    def _keep_exit(self):
        """Keeps what the exit check needs of a process that ended (its status, its sanitizer
        reports, the tail of its stderr), once per process: cleanup() removes the file, and
        another citegate started in the same workdir truncates it."""
        p = self.proc
        if p is None or p.returncode is None or any(r.proc is p for r in self.exits):
            return
        err = self.stderr()
        self.exits.append(ExitRecord(p, p.returncode, sanitizer_reports(err), err[-3000:]))

    def describe(self):
        """Which citegate this is, for a failure message."""
        up = self.env.get("CITEGATE_UPSTREAM") or "the demo upstream"
        args = " ".join(self.args)
        return f"citegate{' ' + args if args else ''} in front of {up} ({self.dir})"

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    # conveniences
    def request(self, method, path, body=None, headers=None, timeout=DEFAULT_TIMEOUT):
        return request(self.port, method, path, body=body, headers=headers, timeout=timeout)

    def admin(self, method, path, timeout=DEFAULT_TIMEOUT):
        return request(self.admin_port, method, path, timeout=timeout)

    def raw(self, timeout=DEFAULT_TIMEOUT):
        return RawClient(self.port, timeout=timeout)


def describe_exit(rc):
    if rc is None:
        return "running"
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit status {rc}"


SANITIZER_MARKS = ("ERROR: AddressSanitizer", "runtime error:", "LeakSanitizer",
                   "ERROR: UndefinedBehaviorSanitizer")
# Any sanitizer's own error or warning line ("==PID==WARNING: AddressSanitizer failed to
# allocate ...", a MemorySanitizer or ThreadSanitizer report), beside the marks above.
SANITIZER_LINE = re.compile(r"(?:ERROR|WARNING): \w*Sanitizer\b")


def sanitizer_reports(text, frames=6):
    """The sanitizer reports in a stderr text, each as its first line, the first `frames`
    frames of its stack and its SUMMARY line ([] when there is none)."""
    out, cur, nframes = [], None, 0
    for line in text.splitlines():
        if ((any(m in line for m in SANITIZER_MARKS) or SANITIZER_LINE.search(line))
                and not line.startswith("SUMMARY:")):
            cur, nframes = [line.strip()], 0
            out.append(cur)
        elif cur is not None and line.startswith("SUMMARY:"):
            cur.append(line.strip())
            cur = None
        elif cur is not None and line.lstrip().startswith("#") and nframes < frames:
            cur.append(line.strip())
            nframes += 1
        elif cur is not None and nframes and not line.strip():
            nframes = frames  # the first stack ended: keep only the SUMMARY
    return ["\n".join(r) for r in out]


class ExitRecord:
    """How one citegate process ended: status (Popen.returncode), its sanitizer reports,
    the tail of its stderr."""

    def __init__(self, proc, status, reports, tail):
        self.proc, self.pid, self.status, self.reports, self.tail = proc, proc.pid, status, reports, tail


# Every Citegate started in this process whose exit has not been checked yet, in start
# order. Citegate._start() adds to it; daemon_problems() takes from it.
_unchecked = []
_unchecked_lock = threading.Lock()


def _require_daemon_case():
    """Refuses a start from a test class that is not a DaemonCase: nothing would check how
    that citegate ends. (Scripts outside unittest, such as bench/, are not concerned.)"""
    f = sys._getframe(2)
    while f is not None:
        for name in ("self", "cls"):
            obj = f.f_locals.get(name)
            cls = obj if isinstance(obj, type) else type(obj)
            if isinstance(cls, type) and issubclass(cls, unittest.TestCase):
                if not issubclass(cls, DaemonCase):
                    raise StartError(f"{cls.__module__}.{cls.__qualname__} starts citegate but is not "
                                     "a harness.DaemonCase: derive it from DaemonCase, which checks "
                                     "every citegate's exit status and sanitizer reports")
                return
        f = f.f_back


def _register(cg):
    with _unchecked_lock:
        if not any(c is cg for c in _unchecked):
            _unchecked.append(cg)


def daemon_problems(daemons=None, timeout=15.0):
    """Stops each citegate of `daemons` (default: every one started and not checked yet)
    that still runs (SIGCONT, then SIGTERM; SIGKILL after `timeout`), latest started first,
    and returns what is wrong with how each of its processes ended: an exit status other
    than its expected one (0, or what cg.expect_exit() said), and every sanitizer report
    (ASan, UBSan, LeakSanitizer) in its stderr, whatever its status. Each citegate is
    checked once: it leaves the unchecked list. Removes their directories unless CG_KEEP
    is set (the messages hold the stderr tails)."""
    with _unchecked_lock:
        if daemons is None:
            daemons = list(_unchecked)
        daemons = list(daemons)
        _unchecked[:] = [c for c in _unchecked if not any(c is d for d in daemons)]
    problems = []
    for cg in reversed(daemons):  # a front instance before the back instance it uses
        cg.resume()
        cg.stop(timeout=timeout)
        for r in cg.exits:
            if r.status != cg.expected_exit:
                problems.append(f"{cg.describe()}, pid {r.pid}: {describe_exit(r.status)}, "
                                f"expected {describe_exit(cg.expected_exit)}; stderr tail:\n{r.tail}")
            if r.reports:
                problems.append(f"{cg.describe()}, pid {r.pid} ({describe_exit(r.status)}): "
                                f"{len(r.reports)} sanitizer report(s):\n" + "\n\n".join(r.reports))
        if not os.environ.get("CG_KEEP"):
            cg.cleanup()
    return problems


def check_daemons(daemons=None, timeout=15.0):
    """daemon_problems(), raised as one AssertionError when there is any."""
    problems = daemon_problems(daemons, timeout)
    if problems:
        raise AssertionError(f"{len(problems)} citegate exit problem(s):\n\n" + "\n\n".join(problems))


class DaemonCase(unittest.TestCase):
    """The base of every test class that starts citegate. When the class ends, every
    citegate started since the last check (its setUpClass's, its tests', restarted ones)
    is stopped if it still runs and checked (check_daemons()): exit status 0 after SIGTERM
    (SPEC §9) or the status the test declared with cg.expect_exit(), and no sanitizer report
    in its stderr. That covers a citegate a test stopped itself, and one that died during
    the class, even if a test reported it already. The class fails otherwise.

    A subclass that has its own tearDownClass calls super().tearDownClass() (first, so that
    citegate stops before the mocks it talks to). Whatever a tearDownClass left unchecked,
    or a setUpClass that raised (no tearDownClass then), is checked by doClassCleanups."""

    @classmethod
    def tearDownClass(cls):
        check_daemons()

    @classmethod
    def doClassCleanups(cls):
        cls.addClassCleanup(check_daemons)
        super().doClassCleanups()


def process_state(pid):
    """The state letter of /proc/PID/stat ('R', 'S', 'T' (stopped), ...), None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return None


def run_citegate(args, env=None, timeout=20.0, binary=None):
    """Run citegate to completion (e.g. --check, --version); returns CompletedProcess."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(Citegate.CLEAN_PREFIXES)}
    e.update(env or {})
    e = {k: v for k, v in e.items() if v is not None}
    return subprocess.run([binary or citegate_bin()] + list(args), env=e, capture_output=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


# --------------------------------------------------------------------------- http.client

class Headers(list):
    """List of (name, value); get() is case-insensitive."""

    def get(self, name, default=None):
        name = name.lower()
        for k, v in self:
            if k.lower() == name:
                return v
        return default

    def get_all(self, name):
        name = name.lower()
        return [v for k, v in self if k.lower() == name]


def request(port, method, path, body=None, headers=None, timeout=DEFAULT_TIMEOUT,
            ssl_context=None, host="127.0.0.1", conn=None):
    """One request; returns (status, Headers, body bytes). Pass conn to reuse a connection."""
    own = conn is None
    if own:
        conn = (http.client.HTTPSConnection(host, port, timeout=timeout, context=ssl_context)
                if ssl_context else http.client.HTTPConnection(host, port, timeout=timeout))
    try:
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        hdrs = dict(headers or {})
        if body is not None and not any(k.lower() in ("content-type", "transfer-encoding") for k in hdrs):
            hdrs["Content-Type"] = "application/json"
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, Headers(resp.getheaders()), data
    finally:
        if own:
            conn.close()


def dechunk(body):
    """The payload of a chunked HTTP/1.1 body (stops at the last chunk)."""
    out, i = bytearray(), 0
    while i < len(body):
        j = body.index(b"\r\n", i)
        size = int(body[i:j], 16)
        if size == 0:
            break
        out += body[j + 2:j + 2 + size]
        i = j + 2 + size + 2
    return bytes(out)


def chat_body(name="chat_request.json", **overrides):
    obj = json.loads(fixture_bytes(name))
    obj.update(overrides)
    return json.dumps(obj).encode()


# --------------------------------------------------------------------------- raw socket client

class RawResponse:
    """A response read from a raw socket. Body decoding (chunked / Content-Length / close)
    is incremental; self.reads holds (monotonic time, raw bytes) per recv, self.body_reads
    (monotonic time, decoded body bytes) per recv that produced body bytes."""

    def __init__(self, client, t_sent):
        self.c = client
        self.t_sent = t_sent
        self.status = None
        self.reason = None
        self.headers = Headers()
        self.body = bytearray()
        self.body_reads = []
        self.done = False
        self._mode = None
        self._remaining = None
        self._cstate = "size"  # size | data | data_crlf | trailers
        self._cbuf = b""

    # --- head
    def read_head(self):
        buf, self.c.buf = self.c.buf, b""
        while b"\r\n\r\n" not in buf:
            chunk = self.c.recv_raw()
            if not chunk:
                raise ConnectionError("connection closed before response head")
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        self.version, self.status = parts[0], int(parts[1])
        self.reason = parts[2] if len(parts) > 2 else ""
        for line in lines[1:]:
            k, _, v = line.partition(":")
            self.headers.append((k.strip(), v.strip()))
        if 100 <= self.status < 200:
            self.c.buf = rest
            self.headers = Headers()
            return self.read_head()
        self.c.buf = b""
        te = (self.headers.get("transfer-encoding") or "").lower()
        cl = self.headers.get("content-length")
        if self.c.last_method == "HEAD" or self.status in (204, 304):
            self._mode = "none"
        elif "chunked" in te:
            self._mode = "chunked"
        elif cl is not None:
            self._mode = "length"
            self._remaining = int(cl)
        else:
            self._mode = "close"
        if self._mode == "none" or (self._mode == "length" and self._remaining == 0):
            self.done = True
        if rest:
            self._feed(rest, time.monotonic())
        return self

    # --- body
    def _feed(self, data, t):
        out = bytearray()
        if self._mode == "length":
            take = data[:self._remaining]
            out += take
            self._remaining -= len(take)
            if self._remaining == 0:
                self.done = True
            self.c.buf = data[len(take):]
        elif self._mode == "close":
            out += data
        elif self._mode == "chunked":
            buf = self._cbuf + data
            while buf and not self.done:
                if self._cstate == "size":
                    i = buf.find(b"\r\n")
                    if i < 0:
                        break
                    size = int(buf[:i].split(b";")[0].strip() or b"0", 16)
                    buf = buf[i + 2:]
                    if size == 0:
                        self._cstate = "trailers"
                    else:
                        self._remaining = size
                        self._cstate = "data"
                elif self._cstate == "data":
                    take = buf[:self._remaining]
                    out += take
                    self._remaining -= len(take)
                    buf = buf[len(take):]
                    if self._remaining == 0:
                        self._cstate = "data_crlf"
                elif self._cstate == "data_crlf":
                    if len(buf) < 2:
                        break
                    buf = buf[2:]
                    self._cstate = "size"
                elif self._cstate == "trailers":
                    i = buf.find(b"\r\n")
                    if i < 0:
                        break
                    line, buf = buf[:i], buf[i + 2:]
                    if line == b"":
                        self.done = True
            if self.done:
                self.c.buf = buf
                self._cbuf = b""
            else:
                self._cbuf = buf
        if out:
            self.body += out
            self.body_reads.append((t, bytes(out)))
        return bytes(out)

    def read_some(self):
        """Read once from the socket; returns the decoded body bytes it produced (may be b'').
        Returns None at end of body (or connection closed)."""
        if self.done:
            return None
        data = self.c.recv_raw()
        if not data:
            self.eof = True
            if self._mode == "close":
                self.done = True
            self.truncated = self._mode != "close"
            return None
        return self._feed(data, time.monotonic())

    def read_until(self, pred, timeout=DEFAULT_TIMEOUT):
        """Read until pred(bytes(self.body)) is true; returns whether it became true."""
        deadline = time.monotonic() + timeout
        while not pred(bytes(self.body)):
            if time.monotonic() > deadline:
                return False
            if self.read_some() is None:
                return pred(bytes(self.body))
        return True

    def read_all(self, timeout=DEFAULT_TIMEOUT):
        """Read to the end of the body (or until the peer closes); returns bytes(body).
        Raises socket.timeout if it does not end within timeout."""
        deadline = time.monotonic() + timeout
        while not self.done:
            if time.monotonic() > deadline:
                raise socket.timeout(f"response not finished within {timeout}s")
            try:
                if self.read_some() is None:
                    break
            except (ConnectionResetError, BrokenPipeError):
                self.eof = True
                self.truncated = True
                break
        return bytes(self.body)

    @property
    def text(self):
        return bytes(self.body).decode("utf-8", "replace")

    @property
    def complete(self):
        """True when the body ended by its framing (or close for close-delimited)."""
        return self.done


class RawClient(SocketEnd):
    """Raw-socket HTTP/1.1 client on one connection (keep-alive capable)."""

    def __init__(self, port, host="127.0.0.1", timeout=DEFAULT_TIMEOUT, ssl_context=None):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        if ssl_context is not None:
            self.sock = ssl_context.wrap_socket(self.sock, server_hostname=host)
        self.sock.settimeout(timeout)
        self.host = f"{host}:{port}"
        self.buf = b""
        self.reads = []
        self.last_method = None

    def recv_raw(self, n=65536):
        if self.buf:
            data, self.buf = self.buf, b""
            return data
        data = self.sock.recv(n)
        self.reads.append((time.monotonic(), data))
        return data

    def send_request(self, method, path, body=None, headers=None, head_only=False):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        hdrs = list((headers or {}).items()) if isinstance(headers, dict) else list(headers or [])
        names = {k.lower() for k, _ in hdrs}
        if "host" not in names:
            hdrs.insert(0, ("Host", self.host))
        if body is not None and "content-length" not in names and "transfer-encoding" not in names:
            hdrs.append(("Content-Length", str(len(body))))
        if body is not None and "content-type" not in names:
            hdrs.append(("Content-Type", "application/json"))
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs) + "\r\n"
        self.last_method = method
        t = time.monotonic()
        self.sock.sendall(head.encode("latin-1") + (body or b""))
        return t

    def request(self, method, path, body=None, headers=None):
        """Send a request and read the response head; the body is read by the caller."""
        t = self.send_request(method, path, body, headers)
        return RawResponse(self, t).read_head()


def send_oversized(port, head_prefix, filler, piece=16384, timeout=DEFAULT_TIMEOUT):
    """Send head_prefix + filler + CRLF CRLF in pieces, stopping early when the server answers
    or closes; returns (status or None, raw response bytes)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.settimeout(timeout)
    data = head_prefix + filler + b"\r\n\r\n"
    got = b""
    try:
        for i in range(0, len(data), piece):
            r, _, _ = select.select([sock], [], [], 0)
            if r:
                break
            try:
                sock.sendall(data[i:i + piece])
            except (BrokenPipeError, ConnectionResetError):
                break
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            got += chunk
            if b"\r\n\r\n" in got:
                head, _, rest = got.partition(b"\r\n\r\n")
                cl = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
                if cl and len(rest) >= int(cl[0].split(b":")[1]):
                    break
    finally:
        sock.close()
    status = None
    if got.startswith(b"HTTP/1."):
        try:
            status = int(got.split(b" ", 2)[1])
        except (IndexError, ValueError):
            pass
    return status, got
