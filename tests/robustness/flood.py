#!/usr/bin/python3
"""Flood generator for tests/robustness/flood_test.sh (run with /usr/bin/python3, which has scapy).

  flood.py selftest
      Checks that patching the live job's id and Q_Key into a prebuilt frame (and its ICRC) gives
      the frame scapy builds with them.
  flood.py sniff IFACE SECS
      Waits (bounded) for one RoCEv2 contribution on IFACE (an on-path observer, e.g. the switch's
      port of the appliance) and prints "JOB_ID QKEY SRC_QP" from it.
  flood.py flood IFACE DST_MAC DST_IP SRC_IP PEER_IP KEYFILE COUNT SECS [PPS]
      Builds every frame (the live job's for job 0), prints "ready" (stderr), waits (75 s at most)
      for KEYFILE to hold "JOB_ID QKEY" (the live job's, from sniff), patches them into the live
      job's frames (patch_job), then sends up to COUNT
      frames (for at most SECS seconds, or until SIGTERM) from IFACE through a raw AF_PACKET socket,
      round-robin over five classes (paced to PPS frames/s when given, > 0), and prints one JSON
      object: frames sent per class, the seconds it flooded and the rate. It prints "flooding"
      (stderr) when it starts sending.
        not_ipv4        random bytes under an unknown EtherType
        bad_opcode      IPv4/UDP 4791 with garbage after the UDP header (first BTH byte 0)
        unknown_job     well-formed contributions (valid ICRC) for a job id nobody registered
        bad_qkey        the live job's id with a wrong Q_Key
        foreign_source  the live job's id and its real Q_Key (as seen on the wire) from a forged
                        source: this host's IPv4 or PEER_IP (a real member's) with a wrong QPN
      The frames are built once with scapy (scapy.contrib.roce computes the ICRC) and then sent as
      bytes, so that the rate is the socket's, not scapy's.
  flood.py burst IFACE DST_MAC COUNT
      Sends COUNT 60-byte frames under an unknown EtherType (not_ipv4 to the appliance) to DST_MAC
      from IFACE as fast as the socket takes them, and prints {"sent": N, "send_failed": K}.
"""
import json
import os
import random
import signal
import socket
import struct
import sys
import time
import zlib

CLASSES = ["not_ipv4", "bad_opcode", "unknown_job", "bad_qkey", "foreign_source"]
VARIANTS = 32  # distinct frames per class


def sniff(iface, secs):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))  # ETH_P_ALL: also frames the port sends
    s.bind((iface, 0))
    print("listening", file=sys.stderr, flush=True)
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        s.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            f = s.recv(4096)
        except socket.timeout:
            break
        # Ethernet 14 | IPv4 20 | UDP 8 | BTH 12 | DETH 8 | Sumcast header 32
        if len(f) < 94 or f[23] != 17 or struct.unpack_from("!H", f, 36)[0] != 4791:
            continue
        if f[42] != 0x64 or f[94 - 32 + 1] != 1:  # UD SEND_ONLY, contribution
            continue
        qkey = struct.unpack_from("!I", f, 54)[0]
        src_qp = struct.unpack_from("!I", f, 58)[0] & 0xFFFFFF
        job = struct.unpack_from("!I", f, 62 + 4)[0]
        print(job, qkey, src_qp)
        return 0
    print("sniff: no contribution seen", file=sys.stderr)
    return 1


def build(cls, rnd, dst_mac, dst_ip, src_mac, src_ip, peer_ip, job, qkey):
    from scapy.layers.l2 import Ether
    from scapy.layers.inet import IP, UDP
    from scapy.packet import Raw
    from scapy.contrib.roce import BTH

    if cls == "not_ipv4":
        return bytes(Ether(dst=dst_mac, src=src_mac, type=0x88B6) / Raw(rnd.randbytes(rnd.randint(46, 200))))
    if cls == "bad_opcode":
        junk = b"\x00" + rnd.randbytes(rnd.randint(20, 200))
        return bytes(Ether(dst=dst_mac, src=src_mac) / IP(src=src_ip, dst=dst_ip) /
                     UDP(sport=rnd.randint(1024, 65535), dport=4791) / Raw(junk))
    count = 16
    rank = rnd.randint(0, 3)
    src = src_ip
    qp = rnd.randint(1, 0xFFFFFF)
    if cls == "unknown_job":
        job_id = rnd.randint(0, 0xFFFFFFFF)  # the live job's id is known: rebuilt if equal
        key = rnd.randint(0, 0xFFFFFFFF)
    elif cls == "bad_qkey":
        job_id = job
        key = qkey ^ rnd.randint(1, 0xFFFFFFFF)  # patch_job() xors the live key in: stays wrong
    else:  # foreign_source
        job_id = job
        key = qkey
        if rnd.random() < 0.5:
            src = peer_ip  # a member's address, but not its QPN (the QPN is 24 random bits: miss)
    deth = struct.pack("!IBBH", key, 0, qp >> 16, qp & 0xFFFF)
    hdr = struct.pack("!BBBBIHHIIHBBQ", 1, 1, 0, 0, job_id, rank, rnd.randint(0, 63),
                      rnd.randint(0, 1000), rnd.randint(0, 1000), count, 0, 0, 0)
    payload = struct.pack("!%df" % count, *([1.0e6] * count))
    pkt = (Ether(dst=dst_mac, src=src_mac) / IP(src=src, dst=dst_ip, flags="DF") /
           UDP(sport=rnd.randint(1024, 65535), dport=4791, chksum=0) /
           BTH(opcode=0x64, pkey=0xFFFF, dqpn=1, psn=rnd.randint(0, 0xFFFFFF)) / Raw(deth + hdr + payload))
    return bytes(pkt)


JOB_AT = 66   # Ethernet 14 | IPv4 20 | UDP 8 | BTH 12 | DETH (Q_Key at 54) | Sumcast header: job id at +4
QKEY_AT = 54
IP_AT = 14


def patch_job(frame, job, qkey):
    """The frame with JOB written over its job id (0 in the template) and QKEY xored into its Q_Key,
    and its ICRC updated. The ICRC is CRC-32 (zlib's) over 8 bytes of 0xFF and the frame from the IPv4
    header to the ICRC, with a few header fields masked (none of them changed here); CRC-32 is affine,
    so for messages of equal length crc(a ^ d) = crc(a) ^ crc(d) ^ crc(0...0)."""
    out = bytearray(frame)
    struct.pack_into("!I", out, JOB_AT, struct.unpack_from("!I", frame, JOB_AT)[0] ^ job)
    struct.pack_into("!I", out, QKEY_AT, struct.unpack_from("!I", frame, QKEY_AT)[0] ^ qkey)
    n = 8 + len(frame) - 4 - IP_AT
    delta = bytearray(n)
    for at in (JOB_AT, QKEY_AT):
        for k in range(4):
            delta[8 + at - IP_AT + k] = frame[at + k] ^ out[at + k]
    icrc = int.from_bytes(frame[-4:], "little") ^ zlib.crc32(bytes(delta)) ^ zlib.crc32(bytes(n))
    out[-4:] = icrc.to_bytes(4, "little")
    return bytes(out)


def selftest():
    """patch_job() against frames scapy builds with the job and key in place."""
    rnd = random.Random(1)
    args = ("02:00:00:00:00:01", "10.0.0.2", "02:00:00:00:00:02", "10.0.0.9", "10.0.0.10")
    for cls in CLASSES[3:]:
        for _ in range(20):
            job, qkey = rnd.randint(0, 0xFFFFFFFF), rnd.randint(0, 0xFFFFFFFF)
            state = rnd.getstate()
            want = build(cls, rnd, *args, job, qkey)
            rnd.setstate(state)
            got = patch_job(build(cls, rnd, *args, 0, 0), job, qkey)
            if got != want:
                print("selftest: %s job %#x qkey %#x: patched frame differs" % (cls, job, qkey), file=sys.stderr)
                return 1
    print("selftest: ok")
    return 0


def flood(iface, dst_mac, dst_ip, src_ip, peer_ip, keyfile, count, secs, pps):
    with open("/sys/class/net/%s/address" % iface) as f:
        src_mac = f.read().strip()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    rnd = random.Random(6)
    args = (dst_mac, dst_ip, src_mac, src_ip, peer_ip)
    early = {c: [build(c, rnd, *args, 0, 0) for _ in range(VARIANTS)] for c in CLASSES[:3]}
    # The live job's frames are built now for job 0 (Q_Key 0 for foreign_source, a random nonzero x
    # for bad_qkey) and patched once the key is known: the flood then starts within milliseconds.
    templates = {c: [build(c, rnd, *args, 0, 0) for _ in range(VARIANTS)] for c in CLASSES[3:]}
    print("ready", file=sys.stderr, flush=True)
    deadline = time.monotonic() + 75
    while not os.path.exists(keyfile):
        if stop or time.monotonic() >= deadline:
            print("flood: no key file", file=sys.stderr)
            return 1
        time.sleep(0.01)  # polling a bounded wait, not synchronisation
    with open(keyfile) as f:
        job, qkey = (int(x) for x in f.read().split()[:2])
    for k, b in enumerate(early["unknown_job"]):
        if struct.unpack_from("!I", b, 66)[0] == job:
            early["unknown_job"][k] = build("unknown_job", rnd, *args, job, qkey)
    late = {c: [patch_job(b, job, qkey) for b in templates[c]] for c in CLASSES[3:]}
    by_class = {**early, **late}
    frames = []  # (class index, bytes), round-robin order
    for v in range(VARIANTS):
        for i, cls in enumerate(CLASSES):
            frames.append((i, by_class[cls][v]))
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    # Paced, the sender needs a few percent of a CPU; at a lower priority than the job's processes it
    # would hardly run while they do (CFS), and the flood would miss the job it is meant to hit.
    print("flooding", file=sys.stderr, flush=True)
    sent = [0] * len(CLASSES)
    failed = 0
    n = 0
    t0 = time.monotonic()
    deadline = t0 + secs
    nf = len(frames)
    while n < count:
        if (n & 63) == 0:
            now = time.monotonic()
            if stop or now >= deadline:
                break
            if pps > 0 and n > (now - t0) * pps:  # ahead of the schedule: pace (the rate bound)
                time.sleep(n / pps - (now - t0))
        i, b = frames[n % nf]
        n += 1
        try:
            s.send(b)
            sent[i] += 1
        except OSError:  # ENOBUFS: not sent, not counted
            failed += 1
    elapsed = time.monotonic() - t0
    out = {c: sent[k] for k, c in enumerate(CLASSES)}
    out["total"] = sum(sent)
    out["send_failed"] = failed
    out["seconds"] = round(elapsed, 3)
    out["pps"] = int(sum(sent) / elapsed) if elapsed > 0 else 0
    print(json.dumps(out))
    return 0


def burst(iface, dst_mac, count):
    with open("/sys/class/net/%s/address" % iface) as f:
        src_mac = f.read().strip()
    frame = bytes.fromhex(dst_mac.replace(":", "")) + bytes.fromhex(src_mac.replace(":", "")) + b"\x88\xb5"
    frame += bytes(60 - len(frame))
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    sent = failed = 0
    for _ in range(count):
        try:
            s.send(frame)
            sent += 1
        except OSError:  # ENOBUFS: not sent, not counted
            failed += 1
    print(json.dumps({"sent": sent, "send_failed": failed}))
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == "selftest":
        return selftest()
    if len(argv) >= 3 and argv[1] == "sniff":
        return sniff(argv[2], float(argv[3]))
    if len(argv) in (10, 11) and argv[1] == "flood":
        return flood(argv[2], argv[3], argv[4], argv[5], argv[6], argv[7], int(argv[8]), float(argv[9]),
                     float(argv[10]) if len(argv) == 11 else 0)
    if len(argv) == 5 and argv[1] == "burst":
        return burst(argv[2], argv[3], int(argv[4]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
