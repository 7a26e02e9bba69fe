#!/usr/bin/python3
"""Where the bed's frames wait: samples the worker links' queues while a Sumcast run runs.

    queues.py OUT RATE_MBIT PREFIX N WORKER_IF

Every 200 ms until SIGTERM, through netlink (pyroute2: a socket opened in each namespace, all
read from this one process, one dump per namespace and sample), the root qdisc of each of the N
workers' links in both directions: the worker's own egress (its contributions, "up") and the
switch port toward it (its results, "down"), their backlog (bytes queued) and the bytes they
sent. On SIGTERM it writes OUT (JSON), which perf/cluster/run puts in its result and
perf/report.py prints, with the CPU the sampling itself took (it shares the bed's CPUs).

Only intervals in which the workers' links together sent at least a tenth of their rate count
("active": the timed calls, not start-up, checks or the gaps between sizes). Per direction: the
backlog's mean, median, 99th percentile and maximum over every link's active samples, the share
of them with an empty queue, and the link's use, the bytes it sent in an interval over what R
carries in it (mean, and the share of link-intervals under 0.9 R).
"""
import json
import resource
import signal
import sys
import time

from pyroute2 import IPRoute
from pyroute2.netns import popns, pushns

INTERVAL_S = 0.2


def open_in(ns):
    """A netlink socket of namespace ns, used from this process (no helper process per namespace)."""
    pushns(ns)
    try:
        return IPRoute()
    finally:
        popns()


def root_stats(handle):
    """{interface index: (backlog bytes, bytes sent)} of the root qdiscs in one dump."""
    out = {}
    for m in handle.get_qdiscs():
        if m["parent"] != 0xFFFFFFFF:
            continue
        s2 = m.get_attr("TCA_STATS2")
        out[m["index"]] = (s2.get_attr("TCA_STATS_QUEUE")["backlog"], s2.get_attr("TCA_STATS_BASIC")["bytes"])
    return out


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else None


def main():
    out, rate_mbit, prefix, n, worker_if = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
    rate_bps = rate_mbit * 1e6 / 8
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    sw = open_in(f"{prefix}-sw")
    handles = [sw]
    links = []  # (direction, rank, namespace handle, interface index)
    for r in range(n):
        w = open_in(f"{prefix}-w{r}")
        handles.append(w)
        links.append(("up", r, w, w.link_lookup(ifname=worker_if)[0]))
        links.append(("down", r, sw, sw.link_lookup(ifname=f"p{r}")[0]))
    samples = []  # per sample: its start and, per link, (backlog, bytes) or None (the dumps take ~1 ms)
    while not stop:
        t = time.monotonic()
        dumps = {id(h): root_stats(h) for h in handles}
        samples.append((t, [dumps[id(ns)].get(idx) for _, _, ns, idx in links]))
        time.sleep(max(0.0, INTERVAL_S - (time.monotonic() - t)))
    for h in handles:
        h.close()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    wall = samples[-1][0] - samples[0][0] if len(samples) > 1 else 0.0
    result = {"interval_s": INTERVAL_S, "samples": len(samples), "seconds": wall,
              "sampler_cpu_s": usage.ru_utime + usage.ru_stime}
    for direction in ("up", "down"):
        idx = [i for i, link in enumerate(links) if link[0] == direction]
        backlog, use, active = [], [], 0
        for (t0, a), (t1, b) in zip(samples, samples[1:]):
            if any(a[i] is None or b[i] is None for i in idx):
                continue
            sent = [b[i][1] - a[i][1] for i in idx]
            if sum(sent) < 0.1 * rate_bps * (t1 - t0) * len(idx):
                continue
            active += 1
            backlog += [b[i][0] for i in idx]
            use += [s / (rate_bps * (t1 - t0)) for s in sent]
        result[direction] = {
            "active_intervals": active,
            "backlog_mean": sum(backlog) / len(backlog) if backlog else None,
            "backlog_p50": percentile(backlog, 0.5),
            "backlog_p99": percentile(backlog, 0.99),
            "backlog_max": max(backlog) if backlog else None,
            "empty_share": sum(1 for x in backlog if x == 0) / len(backlog) if backlog else None,
            "use_mean": sum(use) / len(use) if use else None,
            "under_0_9_share": sum(1 for u in use if u < 0.9) / len(use) if use else None,
        }
    with open(out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
