#!/usr/bin/python3
"""Summary tables of Sumcast's benchmarks, with the targets (README.md, Performance) checked.

  report.py engine ENGINE.json            Google Benchmark JSON of sumcast_bench_engine
  report.py memif  LINES|- OUT.json       JSON lines from perf/memif/run -> medians, ratio, OUT.json
  report.py cluster CLUSTER.json          perf/cluster/run's results
  report.py transport LINES|- OUT.json    JSON lines from perf/transport/run -> medians, ratios, OUT.json

Prints tables to stdout; exit status 0 (targets are reported, not enforced: these are benchmarks).
"""
import json
import statistics
import sys

import bench_json  # perf/bench_json.py, beside this script


def engine(path):
    ctx, rows = bench_json.read(path, keep_errors=True)
    print(f"Engine, one core, in memory (sumcast_bench_engine; {ctx.get('host_name', '?')}, "
          f"{ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz, load {ctx.get('load_avg', '?')})")
    print("CPU time of the thread; cycles = that time in TSC cycles; Gbit/s = gradient payload absorbed.")
    print("preempted = share of wall time the thread did not run (the machine's other load).\n")

    def cell(name, key):
        r = rows.get(name)
        if r is None or "error" in r or key not in r:
            return None
        return r[key]

    hdr = f"{'dtype':5} {'payload':>7} {'ICRC':4} |"
    for n in (2, 8, 64):
        hdr += f" {'n=' + str(n) + ' ns':>9} {'cyc':>5} {'Gbit/s':>6} |"
    hdr += f" {'floor ns':>8} {'Gbit/s':>6} | {'memcpy ns':>9} | {'n=8/floor':>9} {'floor/memcpy':>12}"
    print(hdr)
    print("-" * len(hdr))
    ratios = []  # (label, engine/floor, floor/memcpy)
    for dtype in ("fp32", "bf16"):
        for payload in (256, 1024, 4096):
            for icrc in ("on", "off"):
                tail = f"{dtype}/payload:{payload}/icrc:{icrc}"
                line = f"{dtype:5} {payload:7} {icrc:4} |"
                for n in (2, 8, 64):
                    name = f"engine/{tail}/n:{n}"
                    ns, cyc, g = cell(name, "ns_per_pkt"), cell(name, "cycles_per_pkt"), cell(name, "Gbps")
                    line += f" {ns:9.1f} {cyc:5.0f} {g:6.1f} |" if ns else f" {'-':>9} {'-':>5} {'-':>6} |"
                fl = f"floor/{tail}/n:8"
                fns, fg = cell(fl, "ns_per_pkt"), cell(fl, "Gbps")
                e8 = cell(f"engine/{tail}/n:8", "ns_per_pkt")
                mns = cell(f"memcpy/{dtype}/payload:{payload}/n:8", "ns_per_pkt")
                line += f" {fns:8.1f} {fg:6.1f} |" if fns else f" {'-':>8} {'-':>6} |"
                line += f" {mns:9.1f} |" if mns else f" {'-':>9} |"
                line += f" {e8 / fns:8.2f}x" if (fns and e8) else f" {'-':>9}"
                line += f" {fns / mns:11.2f}x" if (fns and mns) else f" {'-':>12}"
                if fns and e8 and mns:
                    ratios.append((f"{dtype} {payload} B ICRC {icrc}", e8 / fns, fns / mns))
                print(line)
    print("floor = ICRC verify + summation + result copy with no parsing or slot logic; memcpy = the same frames")
    print("copied once, nothing else; both measured in this run on this CPU (n=8).")
    if ratios:
        print(f"\nRatios on this CPU ({ctx.get('host_name', '?')}, {ctx.get('mhz_per_cpu', '?')} MHz): engine n=8 over "
              f"its floor and the floor over memcpy of the same bytes")
        for label, ef, fm in ratios:
            print(f"  {label:24} engine/floor {ef:5.2f}x   floor/memcpy {fm:5.2f}x   engine/memcpy {ef * fm:5.2f}x")
        print(f"  median                   engine/floor {statistics.median(r[1] for r in ratios):5.2f}x   "
              f"floor/memcpy {statistics.median(r[2] for r in ratios):5.2f}x")
    print()
    print("Target: >= 80 Gbit/s of 1 KiB fp32 payload per core with ICRC verification on:")
    for n in (2, 8, 64):
        g = cell(f"engine/fp32/payload:1024/icrc:on/n:{n}", "Gbps")
        ns = cell(f"engine/fp32/payload:1024/icrc:on/n:{n}", "ns_per_pkt")
        if g:
            print(f"  n={n:<3} {g:6.1f} Gbit/s ({ns:.1f} ns/packet) {'reached' if g >= 80 else 'NOT reached'}")

    def sweep(prefix, label, values):
        print(f"\nPer-packet cost vs {label} (1 KiB fp32, ICRC on):")
        got = []
        for v in values:
            name = f"scale/{prefix}:{v}"
            ns = cell(name, "ns_per_pkt")
            if ns is None:
                continue
            got.append(ns)
            extra = ""
            if prefix != "feed_KiB":
                extra = f" (frames {cell(name, 'feed_MiB'):.1f} MiB, slots {cell(name, 'slots'):.0f})"
            print(f"  {label} {v:>6}: {ns:7.1f} ns {cell(name, 'cycles_per_pkt'):6.0f} cycles "
                  f"{cell(name, 'Gbps'):6.1f} Gbit/s{extra}")
        if len(got) > 1:
            print(f"  max/min = {max(got) / min(got):.2f}")

    sweep("ranks", "ranks", (2, 4, 8, 16, 32, 64, 128, 256))
    sweep("slots", "slots", (8, 32, 128, 512, 1024))
    sweep("jobs", "jobs", (1, 4, 16, 64))
    sweep("feed_KiB", "frame set KiB", (512, 1024, 4096, 16384, 65536))

    print("\nUDP checksums on every result (dataplane.udp_checksum) vs none (fp32, ICRC on, n=8, same run):")
    for payload in (1024, 4096):
        c = cell(f"udp_checksum/fp32/payload:{payload}/icrc:on/n:8", "ns_per_pkt")
        e = cell(f"engine/fp32/payload:{payload}/icrc:on/n:8", "ns_per_pkt")
        if c and e:
            print(f"  {payload:4} B: {c:7.1f} ns/packet with, {e:7.1f} without: {c / e:.2f}x")

    nfu = cell("not_for_us/fp32/payload:1024/icrc:on/n:8", "ns_per_pkt")
    e8 = cell("engine/fp32/payload:1024/icrc:on/n:8", "ns_per_pkt")
    if nfu and e8:
        print(f"\nFrames for another appliance, dropped (not_for_us; 1 KiB fp32, n=8, same frames): {nfu:.1f} ns/frame, "
              f"{nfu / e8:.2f}x of summing them ({e8:.1f} ns/packet)")

    print("\nResults by multicast vs per-member replication (1 KiB fp32, ICRC on, same frames, passes alternating):")
    for n in (8, 64):
        name = f"multicast/fp32/payload:1024/icrc:on/n:{n}"
        m, r = cell(name, "ns_per_pkt"), cell(name, "ns_per_pkt_replicated")
        if m and r:
            print(f"  n={n:<3} multicast {m:7.1f} ns/packet, replication {r:7.1f} ns/packet: "
                  f"{cell(name, 'multicast_over_replicated'):.3f}x; tx frames per slot round 1 vs {n}")

    print("\nAppliance memory (bytes EngineOptions::allocate hands out; 1 KiB fp32 unless named):")
    mem = [(k, v) for k, v in rows.items() if k.startswith("memory/") and "bytes" in v]
    for k, v in mem:
        print(f"  {k[len('memory/'):]:45} {v['bytes'] / 1024:10.1f} KiB  ({v['bytes_per_job'] / 1024:.1f} KiB per job)")


def memif(src, out):
    runs = json_lines(src)
    by_n = {}
    for r in runs:
        by_n.setdefault(r["ranks"], []).append(r)
    summary = []
    print("memif: sumcastd vs dpdk-testpmd io forwarding, same generator, memif pair and CPUs")
    print("(sumcastd: contributions summed and answered per second; results per rank (unicast: as many frames")
    print(" out as in, as testpmd io sends) or by multicast (one result frame per slot round: 1/n of the frames")
    print(" out, as on a fabric whose switch replicates them); per CPU-s: packets per second of CPU time the")
    print(" peer got; on a shared machine a busy-polling peer gets only part of its CPU, and the two ratios")
    print(" differ when their shares did)")
    print(f"{'ranks':>5} {'payload':>7} {'results':>9} | {'sumcastd Mpps':>13} {'Gbit/s':>7} {'per CPU-s':>9} | "
          f"{'testpmd Mpps':>12} {'per CPU-s':>9} | {'ratio':>6} {'per CPU-s':>9} | tries")
    # (key in a run line, name in the table, prefix of the summary's fields)
    kinds = (("sumcastd", "unicast", "sumcastd"), ("sumcastd_multicast", "multicast", "sumcastd_multicast"))
    rate = lambda x: x.get("summed_pps", x["rx_pps"])

    def verdict(ratio, got):
        # A run without the ICRC check (MEMIF_VERIFY_ICRC=0) shows what the check costs; it does not
        # count against the target, which is for the appliance as deployed.
        if not all(x.get("verify_icrc", True) for x in got):
            return "(ICRC not verified: a diagnostic, not counted against the target)"
        return "(target >= 0.9: reached)" if ratio >= 0.9 else "(target 0.9: NOT reached)"
    per_cpu = lambda x, pps: pps / max(x.get("peer_cpu_share", 1), 1e-3)
    for n, rs in sorted(by_n.items()):
        pmd = [r["testpmd"]["rx_pps"] for r in rs]
        b = statistics.median(pmd)
        bn = statistics.median(per_cpu(r["testpmd"], r["testpmd"]["rx_pps"]) for r in rs)
        row = {"ranks": n, "testpmd_pps": b, "testpmd_pps_per_cpu_s": bn, "tries": len(rs),
               "burst": rs[0].get("burst", 32), "tx_coalesce": rs[0].get("tx_coalesce")}
        for key, name, field in kinds:
            got = [r[key] for r in rs if key in r]
            if not got:
                continue
            a = statistics.median(rate(x) for x in got)
            an = statistics.median(per_cpu(x, rate(x)) for x in got)
            payload = got[0]["payload"]
            ratio = a / b if b else 0
            suffix = "" if name == "unicast" else "_multicast"
            row.update({"payload": payload, f"{field}_verify_icrc": all(x.get("verify_icrc", True) for x in got),
                        f"{field}_pps": a, f"ratio{suffix}": ratio,
                        f"{field}_pps_per_cpu_s": an, f"ratio{suffix}_per_cpu_s": an / bn if bn else 0,
                        f"{field}_gbps_payload": a * payload * 8e-9})
            print(f"{n:5} {payload:7} {name:>9} | {a / 1e6:13.3f} {a * payload * 8e-9:7.2f} {an / 1e6:9.3f} | "
                  f"{b / 1e6:12.3f} {bn / 1e6:9.3f} | {ratio:6.2f} {an / bn if bn else 0:9.2f} | {len(got)} "
                  f"{verdict(ratio, got)}")
            # Each try's pair (the two peers run back to back): where the machine's speed moved
            # between tries, the pairs show it and the medians above hide it.
            pairs = [rate(r[key]) / r["testpmd"]["rx_pps"] for r in rs if key in r and r["testpmd"]["rx_pps"]]
            row[f"pair_ratios{suffix}"] = pairs
            if len(pairs) > 1:
                print(f"{'':24}   each try: sumcastd {min(rate(x) for x in got) / 1e6:.2f}-"
                      f"{max(rate(x) for x in got) / 1e6:.2f}, testpmd {min(pmd) / 1e6:.2f}-{max(pmd) / 1e6:.2f} Mpps;"
                      f" ratios {', '.join(f'{x:.2f}' for x in pairs)}")
        if len(rs) > 1 and max(pmd) > 1.3 * min(pmd):
            print(f"{'':24}   (testpmd's rate moved by {max(pmd) / min(pmd):.1f}x between tries: the machine's speed "
                  "changed during the run; read the pairs, not one median)")
        summary.append(row)
    bursts = sorted({r.get("burst", 32) for r in runs})
    print(f"(both peers' rx and tx burst: {', '.join(map(str, bursts))}; MEMIF_BURST)")
    coalesce = sorted({r["tx_coalesce"] for r in runs if "tx_coalesce" in r})
    if coalesce:
        print(f"(sumcastd's dataplane.tx_coalesce: {', '.join(map(str, coalesce))}; MEMIF_TX_COALESCE)")
    # The generator's own ceilings, measured in the same run: what it sends when nothing comes back
    # (testpmd rxonly) and what it receives when it sends nothing (testpmd txonly).
    ceil = [(n, rs) for n, rs in sorted(by_n.items()) if any("gen_tx_ceiling" in r or "gen_rx_ceiling" in r for r in rs)]
    if ceil:
        print("\nThe generator's ceiling (same run, same CPUs): sending to testpmd rxonly (nothing comes back), "
              "receiving from\ntestpmd txonly (it sends nothing); in the loops its one lcore does both for every "
              "packet, so the loop\nceiling is 1/(1/tx + 1/rx). sumcastd and testpmd io as a share of it: at >= 0.9 "
              "the comparison is bound\nby the generator, not by the peer")
        print("wait = share of the generator's loops in which the port did not take all it offered (it waited on")
        print("its peer: that run's rate is the peer's, and the generator's ceiling is higher than measured)")
        print("(multicast results: the generator receives one frame per n it sends, so its loop ceiling there is")
        print(" 1/(1/tx + 1/(n rx)), the mcast column's denominator)")
        print(f"{'ranks':>5} | {'gen tx Mpps':>11} {'wait':>5} {'gen rx Mpps':>11} {'loop ceil':>9} | "
              f"{'sumcastd/ceil':>13} {'wait':>5} {'mcast/ceil':>10} {'wait':>5} {'testpmd/ceil':>12} {'wait':>5}")
    for n, rs in ceil:
        row = next(x for x in summary if x["ranks"] == n)
        txs = [r["gen_tx_ceiling"]["tx_pps"] for r in rs if "gen_tx_ceiling" in r]
        rxs = [r["gen_rx_ceiling"]["rx_pps"] for r in rs if "gen_rx_ceiling" in r]
        tx = statistics.median(txs) if txs else None
        rx = statistics.median(rxs) if rxs else None
        # One lcore sends and receives the same rate in the loops: its ceiling there is
        # 1 / (1/tx + 1/rx) (each packet costs it a send and a receive); with one side missing, that side.
        top = 1 / (1 / tx + 1 / rx) if (tx and rx) else (tx or rx or 0)
        top_mc = 1 / (1 / tx + 1 / (n * rx)) if (tx and rx) else (tx or 0)
        row.update({"gen_tx_ceiling_pps": tx, "gen_rx_ceiling_pps": rx, "gen_ceiling_pps": top,
                    "gen_ceiling_multicast_pps": top_mc,
                    "sumcastd_over_ceiling": row.get("sumcastd_pps", 0) / top if top else 0,
                    "sumcastd_multicast_over_ceiling": row.get("sumcastd_multicast_pps", 0) / top_mc if top_mc else 0,
                    "testpmd_over_ceiling": row["testpmd_pps"] / top if top else 0})
        wait = lambda key: statistics.median(r[key].get("tx_wait_share", 0) for r in rs if key in r) \
            if any(key in r for r in rs) else None
        w_tx, w_a, w_m, w_b = wait("gen_tx_ceiling"), wait("sumcastd"), wait("sumcastd_multicast"), wait("testpmd")
        row.update({"gen_tx_ceiling_wait_share": w_tx, "sumcastd_gen_wait_share": w_a,
                    "sumcastd_multicast_gen_wait_share": w_m, "testpmd_gen_wait_share": w_b})
        f = lambda x: f"{x / 1e6:11.3f}" if x is not None else f"{'-':>11}"
        g = lambda x: f"{x:5.2f}" if x is not None else f"{'-':>5}"
        # The generator limits the io run when it never had to wait there and ran at its ceiling.
        bound = ("generator-bound" if (w_b is not None and w_b < 0.05 and row["testpmd_over_ceiling"] >= 0.9)
                 else "generator not the limit" if (w_b or 0) >= 0.05 else "undecided")
        print(f"{n:5} | {f(tx)} {g(w_tx)} {f(rx)} {top / 1e6:9.3f} | {row['sumcastd_over_ceiling']:12.2f}x {g(w_a)} "
              f"{row['sumcastd_multicast_over_ceiling']:9.2f}x {g(w_m)} "
              f"{row['testpmd_over_ceiling']:11.2f}x {g(w_b)}  testpmd io: {bound}")
    with open(out, "w") as f:
        json.dump({"summary": summary, "runs": runs}, f, indent=1)
    print(f"wrote {out}")


def json_lines(src):
    """The JSON lines of a file, or of stdin for "-"."""
    lines = sys.stdin if src == "-" else open(src)
    return [json.loads(line) for line in lines if line.strip()]


def transport(src, out):
    runs = json_lines(src)
    by_path = {}
    for r in runs:
        by_path.setdefault(r["path"], []).append(r)
    summary = []
    print("transport: the worker's kernel-UDP transport (open_transport, kind udp) vs one TCP stream, same path,")
    print("both ways at once, worker and reflector threads pinned to one CPU each; Gbit/s of gradient payload")
    print("received (TCP: stream bytes); the UDP transport's packets carry 1 payload each, no loss recovery here")
    print(f"{'path':>8} {'MTU':>5} {'payload':>7} | {'UDP w->r':>8} {'r->w':>6} {'lost%':>6} | {'TCP w->r':>8} "
          f"{'r->w':>6} | {'ratio w->r':>10} {'r->w':>5} | {'worker CPU':>10} | tries")
    for path, rs in by_path.items():
        med = lambda f: statistics.median(f(r) for r in rs)
        u_wr, u_rw = med(lambda r: r["udp"]["w2r"]["rx_gbps"]), med(lambda r: r["udp"]["r2w"]["rx_gbps"])
        t_wr, t_rw = med(lambda r: r["tcp"]["w2r"]["rx_gbps"]), med(lambda r: r["tcp"]["r2w"]["rx_gbps"])
        lost = med(lambda r: max(r["udp"]["w2r"]["lost_pct"], r["udp"]["r2w"]["lost_pct"], 0))
        cpu = med(lambda r: r["udp"]["worker_cpu_s"] / r["udp"]["seconds"])
        ratio_wr = u_wr / t_wr if t_wr else 0
        ratio_rw = u_rw / t_rw if t_rw else 0
        payload = rs[0]["udp"]["payload"]
        gso = bool(rs[0]["udp"].get("gso", False))
        trains = med(lambda r: r["udp"]["w2r"].get("tx_in_trains_share", 0))  # left in UDP_SEGMENT trains
        summary.append({"path": path, "mtu": rs[0].get("mtu"), "payload": payload, "gso": gso,
                        "udp_tx_in_trains_share": trains, "udp_w2r_gbps": u_wr,
                        "udp_r2w_gbps": u_rw, "tcp_w2r_gbps": t_wr, "tcp_r2w_gbps": t_rw, "udp_lost_pct": lost,
                        "ratio_w2r": ratio_wr, "ratio_r2w": ratio_rw, "udp_worker_cpu_share": cpu, "tries": len(rs)})
        worst = min(ratio_wr, ratio_rw)
        print(f"{path:>8} {rs[0].get('mtu', 0):5} {payload:7} | {u_wr:8.2f} {u_rw:6.2f} {lost:6.1f} | {t_wr:8.2f} "
              f"{t_rw:6.2f} | {ratio_wr:9.2f}x {ratio_rw:4.2f}x | {cpu:10.2f} | {len(rs)} "
              f"{'(target >= 0.7: reached)' if worst >= 0.7 else '(target 0.7: NOT reached)'}"
              + (f" UDP_SEGMENT trains: {100 * trains:.0f}% of the worker's packets" if gso else ""))
    print("worker CPU = CPU time the worker thread got over the window (1.00: all of one CPU; less: the machine's other load)")
    print("lost% = datagrams sent but not received in the window (the receiver fell behind; window edges "
          "differ by microseconds between threads)")
    with open(out, "w") as f:
        json.dump({"summary": summary, "runs": runs}, f, indent=1)
    print(f"wrote {out}")


# One round at `size`, as printed after the medians: its ratio (its Sumcast algbw over its better
# Open MPI algorithm's), and on a shaped bed (`R`: the link's rate in GB/s) its Sumcast algbw in R;
# "-" where a run of that round has no figure.
def round_text(round_rows, size, R=None):
    row = next((r for r in round_rows if r["bytes"] == size), {})
    s = row.get("sumcast")
    best = max([x for x in (row.get("mpi_default"), row.get("mpi_ring")) if x is not None], default=None)
    text = f"{s / best:.2f}x" if (s and best) else "-"
    return text + (f" ({s / R:.2f} R)" if (R and s) else "")


def size_label(size):
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def cluster(path):
    with open(path) as f:
        data = json.load(f)
    rate = data.get("rate_mbit", 0)
    shaped = bool(rate)
    # Results from before the run recorded its MTU and payload were all at 1500 and 1 KiB.
    links = f"MTU {data.get('mtu', 1500)}, {data.get('payload', 1024)} B payloads, {data.get('slots', 64)} slots per job"
    # The appliance: sumcastd (DPDK, a polling lcore) or sumcast-serve --udp-trains (kernel sockets).
    serve = data.get("appliance", "sumcastd") == "serve"
    app = "sumcast-serve (kernel UDP, UDP trains)" if serve else f"sumcastd on net_{data.get('pmd', 'af_packet')}"
    if rate:
        print(f"All-reduce on the emulated cluster: every worker link tbf {rate} Mbit/s each way "
              f"(R = {rate / 8000:.4f} GB/s), appliance link n x R; {app}, "
              f"{links}. algbw in GB/s (1e9 bytes/s).")
    else:
        print(f"All-reduce on the test bed WITHOUT shaping (the machine's CPU-bound ceiling); {app}, "
              f"{links}. algbw in GB/s (1e9 bytes/s); xR columns: "
              f"multiples of 200 Mbit/s.")
        rate = 200
    polling = "busy-polling" if data.get("idle_poll", "busy") == "busy" else "adaptive idle polling"
    if serve:
        polling = "woken by its socket"
    for case in data.get("cases", []):
        n, loss = case["ranks"], case["loss_pct"]
        pct = lambda key: f"{case.get(key) or 0:.0f}%"
        rounds = case.get("round_rows") or []
        print(f"\nn = {n}, loss {loss}% on every link; CPU idle (2 CPUs) during the runs: sumcast "
              f"{pct('idle_sumcast')} (the appliance itself {pct('appliance_cpu_sumcast')}, "
              f"{polling}), MPI default {pct('idle_mpi_default')}, "
              f"MPI ring {pct('idle_mpi_ring')} (no appliance running)"
              + (f"; medians of {len(rounds)} rounds, each round's ratio after them"
                 + (" (and its Sumcast algbw in R)" if shaped else "") if rounds else ""))
        print(f"{'size':>9} | {'sumcast':>8} {'xR':>5} {'wrong':>5} | {'MPI dflt':>8} {'MPI ring':>8} "
              f"{'best xR':>7} | {'ratio':>6}" + (" | ratio per round" if rounds else ""))
        for row in case["rows"]:
            s, d, g = row.get("sumcast"), row.get("mpi_default"), row.get("mpi_ring")
            best = max([x for x in (d, g) if x is not None], default=None)
            R = rate / 8000
            size = row["bytes"]
            label = size_label(size)
            fmt = lambda x: f"{x:8.4f}" if x is not None else f"{'-':>8}"
            per_round = [round_text(r, size, R if shaped else None) for r in rounds]
            print(f"{label:>9} | {fmt(s)} {s / R if s else 0:5.2f} {row.get('wrong', '-')!s:>5} | {fmt(d)} {fmt(g)} "
                  f"{best / R if best else 0:7.2f} | {s / best if (s and best) else 0:6.2f}x"
                  + (" | " + " ".join(per_round) if rounds else ""))
        f = lambda x: f"{x:7.2f}" if x is not None else f"{'-':>7}"  # CPU seconds per GB
        cpg = case.get("cpu_s_per_gb")
        if cpg:
            w, a = cpg.get("sumcast_workers"), cpg.get("appliance")
            mpis = [x for x in (cpg.get("mpi_default"), cpg.get("mpi_ring")) if x is not None]
            best = min(mpis, default=None)
            total = w + a if (w is not None and a is not None) else None
            print(f"CPU seconds per all-reduced GB (all ranks; appliance apart, {polling}): sumcast "
                  f"workers {f(w)}, appliance {f(a)}, together {f(total)} | MPI default {f(cpg.get('mpi_default'))}, "
                  f"ring {f(cpg.get('mpi_ring'))}")
            if best:
                print(f"  ratio to the better MPI ({best:.2f} s/GB): workers {w / best if w else 0:.2f}x, "
                      f"workers + appliance {total / best if total else 0:.2f}x")
        ccpg = case.get("call_cpu_s_per_gb") or {}
        if ccpg.get("sumcast_workers") is not None:
            w = ccpg["sumcast_workers"]
            mpis = [x for x in (ccpg.get("mpi_default"), ccpg.get("mpi_ring")) if x is not None]
            best = min(mpis, default=None)
            print(f"  inside the timed calls alone (all ranks, preparation and checks excluded): sumcast workers "
                  f"{f(w)} | MPI default {f(ccpg.get('mpi_default'))}, ring {f(ccpg.get('mpi_ring'))}"
                  + (f" | workers / the better MPI {w / best:.2f}x" if best else ""))
            per_size = []
            for row in case["rows"]:
                c = row.get("call_cpu_s_per_gb") or {}
                if c.get("sumcast") is None:
                    continue
                g = lambda x: f"{x:.2f}" if x is not None else "-"
                per_size.append(f"{size_label(row['bytes'])} {g(c['sumcast'])} / {g(c.get('mpi_default'))}, "
                                f"{g(c.get('mpi_ring'))}")
            if per_size:
                print("    by size (workers / MPI default, ring): " + "; ".join(per_size))
        port = case.get("appliance_port")
        if port and port.get("ipackets") is not None:
            # DPDK 22.11's net_af_packet counts its kernel ring's drops nowhere; sumcastd reads them
            # from the PMD's sockets as kernel_ring_drops (net_pcap's land in imissed).
            imissed = port.get("imissed") or 0
            ring = port.get("kernel_ring_drops") or 0
            missed = imissed + ring
            print(f"appliance port over the Sumcast runs: {port['ipackets']} frames received, {missed} missed "
                  f"({100 * missed / max(1, port['ipackets'] + missed):.2f}%: imissed {imissed}, kernel_ring_drops "
                  f"{ring}; the kernel's ring under the PMD overflowed, which the workers see as loss), "
                  f"rx_nombuf {port.get('rx_nombuf')}, ierrors {port.get('ierrors')}")
        resends = resends_text(case.get("per_rank") or [])
        if resends:
            print(resends)
        for k, q in enumerate(case.get("queues") or []):
            print(queues_text(q, f" (round {k + 1})" if len(case["queues"]) > 1 else ""))
    if data.get("notes"):
        print("\n" + "\n".join(data["notes"]))


def resends_text(ranks):
    """The workers' resend counters over a case's Sumcast runs (sumcast-allreduce's statistics, one
    record per rank; shim/communicator.h says what each counts): each as the smallest and largest
    over the ranks, and all resends together per 1000 packets the rank received (rx_packets: results,
    notices and duplicates alike, before validation). Empty where the result has none."""
    if not ranks:
        return ""

    def span(key):
        vals = [r.get(key) or 0 for r in ranks]
        return f"{min(vals)}-{max(vals)}"

    kinds = ("retransmissions", "fast_retransmissions", "notice_retransmissions")
    per_k = [1000 * sum(r.get(k) or 0 for k in kinds) / r["rx_packets"] for r in ranks if r.get("rx_packets")]
    rate = f"; all resends {min(per_k):.1f}-{max(per_k):.1f} per 1000 packets received" if per_k else ""
    return (f"workers' resends over the Sumcast runs (per rank, smallest-largest of {len(ranks)}): on timeouts "
            f"{span('retransmissions')} (stall probes {span('stall_probes')}), fast {span('fast_retransmissions')}, "
            f"on loss notices {span('notice_retransmissions')}{rate}; answered twice (spurious) "
            f"{span('spurious_retransmissions')}; send EAGAIN {span('tx_eagain')}, ENOBUFS {span('tx_enobufs')}, "
            f"receive overflows {span('rx_overflows')}")


def queues_text(q, label):
    """perf/cluster/queues.py's sampling of one Sumcast run (CLUSTER_QUEUES), one line per direction."""
    if not q:
        return f"queues{label}: not sampled"
    lines = []
    for key, name in (("up", "contributions (workers' egress)"), ("down", "results (switch ports)")):
        d = q.get(key) or {}
        if not d.get("active_intervals"):
            lines.append(f"queues{label}, {name}: no active interval")
            continue
        kib = lambda x: f"{x / 1024:.0f}"
        lines.append(f"queues{label}, {name}, {d['active_intervals']} active intervals of {1000 * q['interval_s']:.0f} ms: "
                     f"backlog mean {kib(d['backlog_mean'])} KiB, median {kib(d['backlog_p50'])}, p99 "
                     f"{kib(d['backlog_p99'])}, max {kib(d['backlog_max'])}; empty in {100 * d['empty_share']:.0f}% of "
                     f"samples; link use {d['use_mean']:.3f} R, under 0.9 R in {100 * d['under_0_9_share']:.0f}% "
                     f"of link-intervals")
    if q.get("sampler_cpu_s") is not None and q.get("seconds"):
        lines.append(f"queues{label}: the sampler's own CPU {q['sampler_cpu_s']:.2f} s over {q['seconds']:.1f} s "
                     f"of sampling ({100 * q['sampler_cpu_s'] / q['seconds']:.1f}% of one CPU, start-up included)")
    return "\n".join(lines)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    kind = sys.argv[1]
    if kind == "engine":
        engine(sys.argv[2])
    elif kind == "memif" and len(sys.argv) == 4:
        memif(sys.argv[2], sys.argv[3])
    elif kind == "cluster":
        cluster(sys.argv[2])
    elif kind == "transport" and len(sys.argv) == 4:
        transport(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
