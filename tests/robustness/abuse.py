#!/usr/bin/python3
"""Control-plane abuse against a live sumcastd (tests/robustness/abuse_test.sh); stdlib only.

  abuse.py HOST PORT TOKEN_FILE LIVE_JOB_NAME IO_TIMEOUT_MS MAX_CONNECTIONS

Each case opens its own connection(s) and checks the appliance's answer (docs/protocol.md §8):
  wrong_token       HELLO with a wrong token -> AUTH_FAIL, then the connection is closed
  register_first    REGISTER before HELLO -> REFUSE not_authenticated, closed
  bad_magic         a header with a wrong magic -> closed, no answer
  oversized         a header announcing a 64 KiB body -> closed before any body is sent
  truncated         half a HELLO, then nothing -> closed within IO_TIMEOUT_MS (+ slack)
  slow_loris        a HELLO trickled one byte every IO_TIMEOUT_MS / 4 -> closed within 2x IO_TIMEOUT_MS
  bad_world_size    world 1 -> REFUSE bad_world_size
  job_running       the live job's name -> REFUSE job_running
  rank_twice        a pending job (world 3): rank 0 twice -> REFUSE rank_taken
  world_mismatch    the same pending job with world 4 -> REFUSE job_mismatch
  max_connections   authenticated idle connections opened until one is answered REFUSE
                    too_many_connections (within MAX_CONNECTIONS of them), then all closed
Prints one line per case ("ok CASE: detail"); exits 1 at the first case that does not hold.
"""
import socket
import struct
import sys
import time

MAGIC = 0x53554D43
HELLO, AUTH_OK, AUTH_FAIL, REGISTER, GRANT, REFUSE = 1, 2, 3, 4, 5, 6
CODES = {2: "not_authenticated", 5: "bad_world_size", 10: "job_mismatch", 11: "job_running", 12: "rank_taken", 15: "too_many_connections"}


def msg(t, body):
    return struct.pack("!IBBHI", MAGIC, 1, t, 0, len(body)) + body


def hello(token):
    return msg(HELLO, struct.pack("!HH", len(token), 0) + token)


def register(name, world, rank):
    n = name.encode()
    body = struct.pack("!HHBBHH6sIHIBB", world, rank, 0, 0, 1024, 0, b"\x02\x00\x00\x00\x00\x01",
                       0x0A4D0063, 4791, 0x100 + rank, len(n), 0) + n
    return msg(REGISTER, body)


class Conn:
    def __init__(self, host, port, timeout):
        self.s = socket.create_connection((host, port), timeout=timeout)

    def read_msg(self):
        """(type, body), or None when the appliance closed the connection."""
        h = self._read(12)
        if h is None:
            return None
        magic, _, t, _, n = struct.unpack("!IBBHI", h)
        assert magic == MAGIC, "bad magic from the appliance"
        b = self._read(n)
        return None if b is None else (t, b)

    def _read(self, n):
        out = b""
        while len(out) < n:
            try:
                c = self.s.recv(n - len(out))
            except ConnectionResetError:
                return None
            if not c:
                return None
            out += c
        return out

    def closed_within(self, secs):
        """True when the appliance closes the connection (EOF/reset) within secs; data is read and ignored."""
        self.s.settimeout(secs)
        t0 = time.monotonic()
        try:
            while time.monotonic() - t0 < secs:
                c = self.s.recv(4096)
                if not c:
                    return True
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False
        return False


def refuse_code(reply):
    if reply is None or reply[0] != REFUSE:
        return None
    return CODES.get(reply[1][0], str(reply[1][0]))


def main(argv):
    host, port, token_file, live, io_ms = argv[1], int(argv[2]), argv[3], argv[4], int(argv[5])
    max_conn = int(argv[6])
    with open(token_file, "rb") as f:
        token = f.readline().strip()
    io_s = io_ms / 1000.0
    failures = []

    def check(case, cond, detail):
        print("%s %s: %s" % ("ok" if cond else "FAIL", case, detail), flush=True)
        if not cond:
            failures.append(case)

    def authed():
        c = Conn(host, port, 5)
        c.s.sendall(hello(token))
        r = c.read_msg()
        assert r is not None and r[0] == AUTH_OK, "the right token was not accepted: %r" % (r,)
        return c

    # First, while the live job certainly still runs (the cases below take seconds, and on an idle
    # machine the live job may finish before they do): its name cannot be registered again.
    c = authed()
    c.s.sendall(register(live, 4, 0))
    code = refuse_code(c.read_msg())
    check("job_running", code == "job_running", "the live job's name: REFUSE %s" % code)

    c = Conn(host, port, 5)
    c.s.sendall(hello(b"x" * len(token)))
    r = c.read_msg()
    check("wrong_token", r is not None and r[0] == AUTH_FAIL and c.closed_within(2), "AUTH_FAIL, closed")

    c = Conn(host, port, 5)
    c.s.sendall(register("intruder", 2, 0))
    r = c.read_msg()
    check("register_first", refuse_code(r) == "not_authenticated" and c.closed_within(2),
          "REFUSE %s, closed" % refuse_code(r))

    c = Conn(host, port, 5)
    c.s.sendall(struct.pack("!IBBHI", 0xDEADBEEF, 1, HELLO, 0, 8) + b"\0" * 8)
    check("bad_magic", c.closed_within(2), "closed")

    c = Conn(host, port, 5)
    c.s.sendall(struct.pack("!IBBHI", MAGIC, 1, HELLO, 0, 65536))
    check("oversized", c.closed_within(2), "64 KiB body announced: closed before the body")

    c = Conn(host, port, 5)
    t0 = time.monotonic()
    c.s.sendall(hello(token)[:7])
    closed = c.closed_within(io_s + 2)
    check("truncated", closed, "closed after %.2f s (io_timeout %.2f s)" % (time.monotonic() - t0, io_s))

    c = Conn(host, port, 5)
    data = hello(token)
    t0 = time.monotonic()
    closed = False
    for i in range(len(data)):
        try:
            c.s.sendall(data[i:i + 1])
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
        if c.closed_within(io_s / 4):
            closed = True
            break
    took = time.monotonic() - t0
    check("slow_loris", closed and took <= 2 * io_s + 1, "closed after %.2f s" % took)

    c = authed()
    c.s.sendall(register("robust-w1", 1, 0))
    check("bad_world_size", refuse_code(c.read_msg()) == "bad_world_size", "world 1")

    a = authed()
    a.s.sendall(register("robust-pending", 3, 0))
    b = authed()
    b.s.sendall(register("robust-pending", 3, 0))
    code = refuse_code(b.read_msg())
    check("rank_twice", code == "rank_taken", "REFUSE %s" % code)
    d = authed()
    d.s.sendall(register("robust-pending", 4, 1))
    code = refuse_code(d.read_msg())
    check("world_mismatch", code == "job_mismatch", "REFUSE %s" % code)
    a.s.close()  # withdraws the pending registration
    for x in (b, d):
        x.s.close()

    held = []
    refused = None
    for i in range(max_conn + 1):
        c = Conn(host, port, 5)
        c.s.sendall(hello(token))
        r = c.read_msg()
        if r is None or r[0] != AUTH_OK:
            refused = (i, refuse_code(r))
            break
        held.append(c)
    check("max_connections", refused is not None and refused[1] == "too_many_connections",
          "connection %s of this client refused: %s" % refused if refused else "never refused")
    for c in held:
        c.s.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
