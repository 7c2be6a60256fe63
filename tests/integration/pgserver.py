"""A throwaway PostgreSQL server for tests and benchmarks (Python standard library only).

PostgresServer: initdb into a temporary folder, postgres on 127.0.0.1 and a free port, trust
authentication for the superuser `postgres`, no fsync (the data is thrown away). Uses the
Debian package `postgresql` (/usr/lib/postgresql/NN/bin); the Makefile installs it. Run as
root, the server runs as the `postgres` user (PostgreSQL refuses root); otherwise as the
current user. The server dies with the process that started it (PR_SET_PDEATHSIG), so a
killed test run leaves none behind.

stop() is a fast shutdown (SIGINT: connections are ended), start() brings it back on the same
port and data; freeze()/thaw() stop and continue every process of the server (SIGSTOP): a
database that accepts connections and never answers.
"""
import ctypes
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time


def find_bindir():
    """The bin folder of the newest PostgreSQL server installed, or None."""
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                  key=lambda d: int(d.split("/")[-2]) if d.split("/")[-2].isdigit() else 0)
    dirs = [d for d in dirs if os.access(os.path.join(d, "postgres"), os.X_OK)]
    return dirs[-1] if dirs else None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self):
        self.bindir = find_bindir()
        if self.bindir is None:
            raise RuntimeError("PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin: "
                               "install the Debian package postgresql (`make deps` does)")
        if shutil.which("psql") is None:
            raise RuntimeError("psql not found: install the Debian package postgresql-client "
                               "(`make deps` installs postgresql, which brings it)")
        self.dir = tempfile.mkdtemp(prefix="cg-pg-")
        self.data = os.path.join(self.dir, "data")
        self.log_path = os.path.join(self.dir, "postgres.log")
        self.port = free_port()
        self.proc = None
        self.user = None  # (uid, gid) the server runs as, when not ourselves
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")  # created by the Debian package
            self.user = (pw.pw_uid, pw.pw_gid)
            os.chown(self.dir, *self.user)

    def _preexec(self):
        if self.user:
            os.setgroups([])
            os.setgid(self.user[1])
            os.setuid(self.user[0])
        # after the uid change, which would clear it
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGINT)  # PR_SET_PDEATHSIG

    def _run(self, *args):
        r = subprocess.run([os.path.join(self.bindir, args[0])] + list(args[1:]), cwd=self.dir,
                           preexec_fn=self._preexec, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"{args[0]} failed ({r.returncode}): {r.stderr[-2000:]}")
        return r.stdout

    def start(self, timeout=30.0):
        if not os.path.exists(self.data):
            self._run("initdb", "-D", self.data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
                      "--locale=C.UTF-8", "--no-sync")
        for attempt in range(3):
            self.log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(
                [os.path.join(self.bindir, "postgres"), "-D", self.data, "-p", str(self.port),
                 "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.dir}",
                 "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                 "-c", "logging_collector=off"],
                cwd=self.dir, stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=self._preexec)
            if self._wait_ready(timeout):
                return self
            self.stop()
            if "could not bind" not in self.output() or attempt == 2:
                break
            self.port = free_port()  # taken meanwhile by someone else
        raise RuntimeError(f"PostgreSQL did not start: {self.output()[-2000:]}")

    def _wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            r = subprocess.run([os.path.join(self.bindir, "pg_isready"), "-q", "-h", "127.0.0.1",
                                "-p", str(self.port)], capture_output=True)
            if r.returncode == 0:
                return True
            time.sleep(0.1)
        return False

    def output(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self, timeout=30.0):
        """Fast shutdown: the server ends its connections and exits."""
        if self.proc is not None and self.proc.poll() is None:
            self.thaw()
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None
        if getattr(self, "log", None):
            self.log.close()
            self.log = None

    def _pids(self):
        """The postmaster and its children (the backends and helpers)."""
        if self.proc is None:
            return []
        pids = [self.proc.pid]
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                with open(stat) as f:
                    fields = f.read().rpartition(")")[2].split()
                if int(fields[1]) == self.proc.pid:
                    pids.append(int(stat.split("/")[2]))
            except (OSError, IndexError, ValueError):
                continue
        return pids

    def freeze(self):
        for pid in self._pids():
            os.kill(pid, signal.SIGSTOP)

    def thaw(self):
        for pid in self._pids():
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def dsn(self, db="postgres", password=None):
        auth = "postgres" + (f":{password}" if password else "")
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{db}"

    def psql(self, sql, db="postgres", timeout=30):
        """Runs sql; returns the rows as lists of strings (unaligned, tuples only)."""
        r = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1",
                            "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", db,
                            "-c", sql], capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"psql {sql!r}: {r.stderr.strip()}")
        return [line.split("\t") for line in r.stdout.splitlines() if line]

    def create_db(self, name):
        self.psql(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
