"""A minimal HTTP/2 client written frame by frame (Python standard library only).

It exists so that a test controls exactly when a stream's frames go out and when
the socket is reset, which no ready-made client offers:

- frame builders: PREFACE, settings(), headers() (HPACK literal header fields
  without indexing, no Huffman), data(), rst_stream(), goaway(), window_update(),
  ping()
- H2Client: prior knowledge h2c (or h2 over a TLS socket that negotiated "h2"),
  one socket, any number of streams; collects each stream's response (status,
  DATA bytes, end, reset) and answers SETTINGS and PING; sync() is a PING round
  trip; abort() resets the TCP connection (SO_LINGER 0).

Response headers are decoded only as far as the tests need: the client announces
SETTINGS_HEADER_TABLE_SIZE 0, so the server's encoder uses no dynamic table, and
:status is read from the static table or from a literal (raw or Huffman-coded
digits). Other header fields are skipped, not decoded.

Everything is bounded by a timeout; nothing here waits forever.
"""
import socket
import struct
import time

from sockend import SocketEnd

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, \
    CONTINUATION = range(10)

END_STREAM = 0x1
ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20

SETTINGS_HEADER_TABLE_SIZE = 0x1
SETTINGS_ENABLE_PUSH = 0x2
SETTINGS_INITIAL_WINDOW_SIZE = 0x4

NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, CANCEL = 0x0, 0x1, 0x2, 0x8

# --------------------------------------------------------------------------- frames


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", sid & 0x7FFFFFFF) + payload


def settings(pairs=(), ack=False):
    return frame(SETTINGS, ACK if ack else 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def _hpack_int(value, prefix_bits, first=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _hpack_str(s):
    if isinstance(s, str):
        s = s.encode("latin-1")
    return _hpack_int(len(s), 7) + s


def encode_headers(fields):
    """HPACK block: every field a literal without indexing with a literal name."""
    return b"".join(b"\x00" + _hpack_str(k.lower() if isinstance(k, str) else k) + _hpack_str(v)
                    for k, v in fields)


def headers(sid, fields, end_stream=False):
    return frame(HEADERS, END_HEADERS | (END_STREAM if end_stream else 0), sid, encode_headers(fields))


def data(sid, payload, end_stream=False):
    return frame(DATA, END_STREAM if end_stream else 0, sid, payload)


def rst_stream(sid, code=CANCEL):
    return frame(RST_STREAM, 0, sid, struct.pack(">I", code))


def goaway(last_sid=0, code=NO_ERROR):
    return frame(GOAWAY, 0, 0, struct.pack(">II", last_sid, code))


def window_update(sid, increment):
    return frame(WINDOW_UPDATE, 0, sid, struct.pack(">I", increment))


def ping(payload=b"\0" * 8, ack=False):
    return frame(PING, ACK if ack else 0, 0, payload)


# --------------------------------------------------------------------------- HPACK (just :status)

# RFC 7541 Appendix A: the static table entries that are :status.
_STATIC_STATUS = {8: 200, 9: 204, 10: 206, 11: 304, 12: 400, 13: 404, 14: 500}
# RFC 7541 Appendix B: the Huffman codes of the digits (code, bit length).
_HUFF_DIGITS = {(0x0, 5): "0", (0x1, 5): "1", (0x2, 5): "2", (0x19, 6): "3", (0x1a, 6): "4",
                (0x1b, 6): "5", (0x1c, 6): "6", (0x1d, 6): "7", (0x1e, 6): "8", (0x1f, 6): "9"}


def _read_int(buf, i, prefix_bits):
    limit = (1 << prefix_bits) - 1
    v = buf[i] & limit
    i += 1
    if v < limit:
        return v, i
    m = 0
    while True:
        b = buf[i]
        i += 1
        v += (b & 0x7F) << m
        m += 7
        if not b & 0x80:
            return v, i


def _huff_digits(raw):
    bits = "".join(f"{b:08b}" for b in raw)
    out, i = "", 0
    while i < len(bits):
        for n in (5, 6):
            if i + n <= len(bits) and (int(bits[i:i + n], 2), n) in _HUFF_DIGITS:
                out += _HUFF_DIGITS[(int(bits[i:i + n], 2), n)]
                i += n
                break
        else:
            if set(bits[i:]) <= {"1"} and len(bits) - i < 8:  # EOS padding
                return out
            return None
    return out


def _read_str(buf, i):
    huff = bool(buf[i] & 0x80)
    n, i = _read_int(buf, i, 7)
    raw = bytes(buf[i:i + n])
    return (_huff_digits(raw) if huff else raw.decode("latin-1")), i + n


def status_of(block):
    """:status of a response header block (None when it is coded in a way not handled here)."""
    i = 0
    try:
        while i < len(block):
            b = block[i]
            if b & 0x80:  # indexed field
                idx, i = _read_int(block, i, 7)
                if idx in _STATIC_STATUS:
                    return _STATIC_STATUS[idx]
                continue
            if b & 0xE0 == 0x20:  # dynamic table size update
                _, i = _read_int(block, i, 5)
                continue
            prefix = 6 if b & 0x40 else 4
            idx, i = _read_int(block, i, prefix)
            if idx == 0:
                name, i = _read_str(block, i)
            else:
                name = ":status" if idx in _STATIC_STATUS else None
            value, i = _read_str(block, i)
            if name == ":status":
                return int(value) if value and value.isdigit() else None
    except (IndexError, ValueError):
        return None
    return None


# --------------------------------------------------------------------------- client

class Stream:
    def __init__(self, sid):
        self.sid = sid
        self.status = None
        self.header_block = b""
        self.body = bytearray()
        self.ended = False  # END_STREAM seen
        self.reset = None   # RST_STREAM error code
        self.first_data_at = None

    @property
    def closed(self):
        return self.ended or self.reset is not None


class H2Client(SocketEnd):
    """One HTTP/2 connection. With a plain socket: h2c with prior knowledge; pass
    ssl_context (with ALPN "h2") for h2 over TLS."""

    def __init__(self, port, host="127.0.0.1", timeout=10.0, ssl_context=None, server_hostname=None,
                 handshake=True, rcvbuf=None, window_updates=True):
        if rcvbuf is None:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        else:  # a small receive buffer, set before connect (harness.slow_reader says why)
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.sock.settimeout(timeout)
            self.sock.connect((host, port))
        # No Nagle: a frame written right after another must leave at once, not wait for
        # the first one's ACK (a reset would then discard it unsent).
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:
            self.sock = ssl_context.wrap_socket(self.sock, server_hostname=server_hostname or host)
        self.sock.settimeout(timeout)
        self.timeout = timeout
        self.authority = f"{host}:{port}"
        self.scheme = "https" if ssl_context is not None else "http"
        self.buf = b""
        self.streams = {}
        self.next_sid = 1
        self.goaway = None
        self.eof = False
        self.server_settings = False
        # One WINDOW_UPDATE per DATA frame, as the simplest client does; off, the handshake's
        # windows (16 MiB a stream, 1 GiB more for the connection) are all there is.
        self.window_updates = window_updates
        if handshake:
            self.handshake()

    def send(self, b):
        self.sock.sendall(b)

    def handshake(self):
        """Preface and SETTINGS (no dynamic table, big windows)."""
        self.send(PREFACE + settings([(SETTINGS_HEADER_TABLE_SIZE, 0), (SETTINGS_ENABLE_PUSH, 0),
                                      (SETTINGS_INITIAL_WINDOW_SIZE, (1 << 24))])
                  + window_update(0, (1 << 30)))

    def wait_settings(self, timeout=None):
        """Reads until the server's SETTINGS arrived (the server is serving this connection)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while not self.server_settings:
            if time.monotonic() > deadline:
                raise socket.timeout("no SETTINGS from the server")
            if not self.pump_once(deadline):
                raise ConnectionError("connection closed before SETTINGS")

    def sync(self, timeout=None):
        """A PING round trip: once its ACK is back, the server has handled everything sent
        before it (and flushed what that produced)."""
        self.ping_seq = getattr(self, "ping_seq", 0) + 1
        token = struct.pack(">Q", self.ping_seq)
        self.pongs = getattr(self, "pongs", set())
        self.send(ping(token))
        if not self.read_until(lambda: token in self.pongs, timeout):
            raise socket.timeout("no PING ACK from the server")

    def request_frames(self, method, path, body=None, hdrs=None):
        """(sid, bytes) of one request's HEADERS (+ DATA) frames, not yet sent."""
        sid = self.next_sid
        self.next_sid += 2
        self.streams[sid] = Stream(sid)
        fields = [(":method", method), (":scheme", self.scheme), (":path", path),
                  (":authority", self.authority)]
        items = list(hdrs.items()) if isinstance(hdrs, dict) else list(hdrs or [])
        if body is not None and not any(k.lower() == "content-type" for k, _ in items):
            items.append(("content-type", "application/json"))
        fields += [(k.lower(), str(v)) for k, v in items]
        if body is None:
            return sid, headers(sid, fields, end_stream=True)
        out = headers(sid, fields)
        for i in range(0, len(body), 16384):
            out += data(sid, body[i:i + 16384])
        return sid, out + data(sid, b"", end_stream=True)

    def request(self, method, path, body=None, hdrs=None):
        sid, b = self.request_frames(method, path, body, hdrs)
        self.send(b)
        return sid

    # --- reading
    def _recv(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("h2 read timed out")
        self.sock.settimeout(min(left, self.timeout))
        chunk = self.sock.recv(65536)
        if not chunk:
            self.eof = True
        return chunk

    def read_frame(self, deadline):
        """(type, flags, sid, payload), or None at end of connection."""
        while len(self.buf) < 9 or len(self.buf) < 9 + int.from_bytes(self.buf[:3], "big"):
            chunk = self._recv(deadline)
            if not chunk:
                return None
            self.buf += chunk
        n = int.from_bytes(self.buf[:3], "big")
        ftype, flags = self.buf[3], self.buf[4]
        sid = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
        payload = self.buf[9:9 + n]
        self.buf = self.buf[9 + n:]
        return ftype, flags, sid, payload

    def _strip(self, flags, payload, ftype):
        if flags & PADDED:
            pad = payload[0]
            payload = payload[1:len(payload) - pad]
        if ftype == HEADERS and flags & PRIORITY_FLAG:
            payload = payload[5:]
        return payload

    def pump_once(self, deadline):
        """Handles one frame; False at end of connection."""
        f = self.read_frame(deadline)
        if f is None:
            return False
        ftype, flags, sid, payload = f
        st = self.streams.get(sid)
        if ftype == SETTINGS and not flags & ACK:
            self.server_settings = True
            self.send(settings(ack=True))
        elif ftype == PING and not flags & ACK:
            self.send(ping(payload, ack=True))
        elif ftype == PING:
            self.pongs = getattr(self, "pongs", set()) | {bytes(payload)}
        elif ftype == GOAWAY:
            self.goaway = struct.unpack(">II", payload[:8])
        elif ftype in (HEADERS, CONTINUATION) and st is not None:
            st.header_block += self._strip(flags, payload, ftype)
            if flags & END_HEADERS and st.status is None:
                st.status = status_of(st.header_block)
            if ftype == HEADERS and flags & END_STREAM:
                st.ended = True
        elif ftype == DATA and st is not None:
            body = self._strip(flags, payload, ftype)
            if body and st.first_data_at is None:
                st.first_data_at = time.monotonic()
            st.body += body
            if len(payload) and self.window_updates:  # keep both windows open
                self.send(window_update(0, len(payload)) + window_update(sid, len(payload)))
            if flags & END_STREAM:
                st.ended = True
        elif ftype == RST_STREAM and st is not None:
            st.reset = struct.unpack(">I", payload[:4])[0]
        return True

    def read_until(self, pred, timeout=None):
        """Pumps frames until pred() is true; returns pred() (False at EOF or timeout)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        try:
            while not pred():
                if not self.pump_once(deadline):
                    return bool(pred())
        except socket.timeout:
            return bool(pred())
        except (ConnectionResetError, BrokenPipeError):
            self.eof = True
            return bool(pred())
        return True

    def response(self, sid, timeout=None):
        """The stream once it ended or was reset (raises socket.timeout otherwise)."""
        st = self.streams[sid]
        if not self.read_until(lambda: st.closed, timeout) and not st.closed:
            raise socket.timeout(f"stream {sid} not finished (eof={self.eof})")
        return st

    def first_data(self, sid, timeout=None):
        st = self.streams[sid]
        return self.read_until(lambda: len(st.body) > 0 or st.closed, timeout) and len(st.body) > 0
