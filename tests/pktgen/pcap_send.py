#!/usr/bin/python3
"""Sends the frames of a pcap file once, in order, from a network interface (a raw AF_PACKET
socket): the real sender behind pktgen_mock.lua in pcap_replay_test.sh.

  pcap_send.py IFACE PCAP PROGRESS [SKIP]

PROGRESS receives the number of frames handled so far (rewritten every 64 frames and at the end).
SKIP (an index into the file) is a frame lost on the way: counted as sent, never sent.
"""
import os
import socket
import struct
import sys


def frames(path):
    with open(path, "rb") as f:
        head = f.read(24)
        magic = struct.unpack_from("<I", head)[0]
        order = {0xA1B2C3D4: "<", 0xA1B23C4D: "<", 0xD4C3B2A1: ">", 0x4D3CB2A1: ">"}.get(magic)
        if order is None:
            raise SystemExit("%s: not a pcap file" % path)
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            incl = struct.unpack_from(order + "I", rec, 8)[0]
            yield f.read(incl)


def progress(path, n):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % n)
    os.replace(tmp, path)


def main(argv):
    if len(argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    iface, pcap, prog = argv[1:4]
    skip = int(argv[4]) if len(argv) == 5 else -1
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    n = 0
    for i, frame in enumerate(frames(pcap)):
        if i != skip:
            s.send(frame)
        n += 1
        if n % 64 == 0:
            progress(prog, n)
    progress(prog, n)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
