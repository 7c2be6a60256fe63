"""How the tests' raw clients end their connection (harness.RawClient, h2frames.H2Client):
a plain close, or an abortive one that sends RST, as a client that resets does. A mixin for
a class that keeps its socket in self.sock; it closes on leaving a `with` block."""
import socket
import struct


class SocketEnd:
    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def abort(self):
        """Close with RST (SO_LINGER {1, 0})."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()
