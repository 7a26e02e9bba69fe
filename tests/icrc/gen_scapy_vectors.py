#!/usr/bin/python3
"""Writes random RoCEv2 frames with scapy-computed ICRCs, for tests/icrc/icrc_scapy_test.cc.

Run with /usr/bin/python3 (the system Python that has scapy). Output, one frame per line:
    <frame hex> <icrc hex>
The frame is the whole Ethernet frame (no FCS), sometimes followed by Ethernet padding; the ICRC
is the 4 bytes scapy's BTH layer wrote at the end of the IPv4 packet, in wire order. Lines
starting with '#' are comments. Deterministic for a given --seed.
"""

import argparse
import random
import sys

from scapy.compat import raw
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.contrib.roce import BTH, _bth_opcodes  # noqa: F401 (BTH binds UDP 4791)

KNOWN_OPCODES = sorted(_bth_opcodes)


def random_mac(rng):
    return ":".join("%02x" % rng.randrange(256) for _ in range(6))


def random_ip(rng):
    return ".".join(str(rng.randrange(256)) for _ in range(4))


def payload_len(rng):
    r = rng.random()
    if r < 0.4:
        return rng.randrange(0, 65)
    if r < 0.8:
        return rng.randrange(0, 1025)
    return rng.randrange(0, 4097)


def random_frame(rng):
    opcode = rng.choice(KNOWN_OPCODES) if rng.random() < 0.8 else rng.randrange(256)
    bth = BTH(
        opcode=opcode,
        solicited=rng.randrange(2),
        migreq=rng.randrange(2),
        padcount=rng.randrange(4),
        version=rng.randrange(16) if rng.random() < 0.1 else 0,
        pkey=0xFFFF if rng.random() < 0.5 else rng.randrange(65536),
        fecn=rng.randrange(2),
        becn=rng.randrange(2),
        resv6=rng.randrange(64) if rng.random() < 0.2 else 0,
        dqpn=rng.randrange(1 << 24),
        ackreq=rng.randrange(2),
        resv7=rng.randrange(128) if rng.random() < 0.2 else 0,
        psn=rng.randrange(1 << 24),
    )
    udp_chksum = rng.choice([None, 0, rng.randrange(65536)])
    pkt = (
        Ether(src=random_mac(rng), dst=random_mac(rng))
        / IP(
            tos=rng.randrange(256),  # DSCP and ECN
            ttl=rng.randrange(256),
            id=rng.randrange(65536),
            flags=rng.choice([0, "DF"]),
            src=random_ip(rng),
            dst=random_ip(rng),
        )
        / UDP(sport=rng.randrange(65536), dport=4791, chksum=udp_chksum)
        / bth
        / Raw(rng.randbytes(payload_len(rng)))
    )
    frame = raw(pkt)
    icrc = frame[-4:]
    if rng.random() < 0.1:
        frame += rng.randbytes(rng.randrange(1, 17))  # Ethernet padding, outside the ICRC
    return frame, icrc


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=4791)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with open(args.out, "w") as f:
        f.write("# gen_scapy_vectors.py --count %d --seed %d\n" % (args.count, args.seed))
        for _ in range(args.count):
            frame, icrc = random_frame(rng)
            f.write("%s %s\n" % (frame.hex(), icrc.hex()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
