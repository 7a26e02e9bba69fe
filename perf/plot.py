#!/usr/bin/python3
"""Draws PNGs of Sumcast's benchmark results (perf/run writes the JSON files they come from).

  plot.py RESULTS_DIR      engine.json -> engine.png, engine_scaling.png, engine_memory.png
                           kernels.json -> kernels.png; icrc.json -> icrc.png
                           memif.json -> memif.png; transport.json -> transport.png
                           cluster*.json -> cluster*.png
                           scaleout*.json -> scaleout*.png
Files that are absent are skipped. Needs matplotlib (python3-matplotlib) for /usr/bin/python3.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import bench_json  # noqa: E402  (perf/bench_json.py, beside this script)


def bench_rows(path):
    """name -> row of a Google Benchmark JSON (the median aggregate where there are repetitions)."""
    return bench_json.read(path)[1]


def save(fig, out):
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    print(f"plot: wrote {out}")


def engine(rows, outdir):
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8), sharey=True)
    ns = (2, 8, 64)
    for ax, dtype in zip(axes, ("fp32", "bf16")):
        labels, x = [], 0
        for payload in (256, 1024, 4096):
            for icrc in ("on", "off"):
                tail = f"{dtype}/payload:{payload}/icrc:{icrc}"
                for k, n in enumerate(ns):
                    r = rows.get(f"engine/{tail}/n:{n}")
                    if r:
                        ax.bar(x + k * 0.2, r["Gbps"], 0.2, color=f"C{k}", label=f"engine n={n}" if x == 0 else None)
                f = rows.get(f"floor/{tail}/n:8")
                if f:
                    ax.bar(x + 0.6, f["Gbps"], 0.2, color="0.7", label="floor (n=8)" if x == 0 else None)
                m = rows.get(f"memcpy/{dtype}/payload:{payload}/n:8")
                if m:
                    ax.bar(x + 0.8, m["Gbps"], 0.2, color="0.88", edgecolor="0.6",
                           label="memcpy of the frames" if x == 0 else None)
                labels.append((x + 0.4, f"{payload} B\nICRC {icrc}"))
                x += 1
        ax.axhline(80, color="r", ls="--", lw=1, label="target 80 Gbit/s (1 KiB fp32, ICRC on)")
        ax.set_xticks([p for p, _ in labels], [t for _, t in labels])
        ax.set_title(f"engine, one core, {dtype}")
        ax.set_ylabel("gradient payload absorbed (Gbit/s)")
        ax.legend(fontsize=8)
    save(fig, os.path.join(outdir, "engine.png"))

    fig, axes = plt.subplots(1, 4, figsize=(16, 4))
    for ax, (key, label) in zip(axes, (("ranks", "ranks (n)"), ("slots", "slots per job (n=2)"),
                                        ("jobs", "jobs (n=8)"), ("feed_KiB", "frame set (KiB, n=8)"))):
        pts = sorted((int(k.split(":")[1]), r["ns_per_pkt"]) for k, r in rows.items()
                     if k.startswith(f"scale/{key}:"))
        if not pts:
            continue
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-")
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, max(p[1] for p in pts) * 1.2)
        ax.set_xlabel(label)
        ax.set_ylabel("ns per packet (1 KiB fp32, ICRC on)")
        ax.grid(alpha=0.3)
    fig.suptitle("engine per-packet cost against scale")
    save(fig, os.path.join(outdir, "engine_scaling.png"))

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, (key, label) in zip(axes, (("ranks", "ranks (64 slots, 1 job)"), ("slots", "slots (8 ranks, 1 job)"),
                                        ("jobs", "jobs (8 ranks, 64 slots)"))):
        series = {"default": [], "deterministic": []}
        for k, r in rows.items():
            if not k.startswith("memory/") or not k.endswith("/fp32/payload:1024"):
                continue
            # memory/[deterministic/]ranks:R/slots:S/jobs:J/fp32/payload:B: only key:value parts
            f = dict(part.split(":", 1) for part in k.split("/")[1:] if ":" in part)
            mode = "deterministic" if "/deterministic/" in k else "default"
            others = {"ranks": ("slots", "64", "jobs", "1"), "slots": ("ranks", "8", "jobs", "1"),
                      "jobs": ("ranks", "8", "slots", "64")}[key]
            if key in f and f.get(others[0]) == others[1] and f.get(others[2]) == others[3]:
                series[mode].append((int(f[key]), r["bytes"] / 2**20))
        top = 0
        for mode, pts in series.items():
            if not pts:
                continue
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=mode)
            top = max(top, max(p[1] for p in pts))
        if top == 0:
            continue
        ax.legend(fontsize=8)
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, top * 1.15)
        ax.set_xlabel(label)
        ax.set_ylabel("appliance memory (MiB), 1 KiB fp32")
        ax.grid(alpha=0.3)
    save(fig, os.path.join(outdir, "engine_memory.png"))


def kernels(rows, outdir):
    sizes = ("16KiB", "256KiB", "64MiB")
    dtypes = ("fp32", "fp16", "bf16", "int32", "fp64")
    isas = ("scalar", "avx2", "avx512")
    fig, axes = plt.subplots(1, len(sizes), figsize=(15, 4.2))
    for ax, size in zip(axes, sizes):
        memcpy = rows.get(f"memcpy/{size}", {}).get("bytes_per_second")
        for k, isa in enumerate(isas):
            vals = [rows.get(f"accumulate_sum/{isa}/{d}/{size}", {}).get("bytes_per_second", 0) / 1e9 for d in dtypes]
            ax.bar([i + k * 0.27 for i in range(len(dtypes))], vals, 0.27, label=isa)
        if memcpy:
            ax.axhline(memcpy / 1e9, color="k", ls="--", lw=1, label="memcpy")
        ax.set_xticks([i + 0.27 for i in range(len(dtypes))], dtypes)
        ax.set_title(f"acc += x, {size}")
        ax.set_ylabel("GB/s of source")
        ax.legend(fontsize=8)
    save(fig, os.path.join(outdir, "kernels.png"))


def icrc(rows, outdir):
    sizes = (64, 256, 1024, 4096)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for k, (prefix, label) in enumerate((("bm_crc32_isal", "ISA-L"), ("bm_crc32_table", "table CRC"))):
        vals = [rows.get(f"{prefix}/{s}", {}).get("bytes_per_second", 0) / 1e9 for s in sizes]
        ax.bar([i + k * 0.4 for i in range(len(sizes))], vals, 0.4, label=label)
    ax.set_yscale("log")
    ax.set_xticks([i + 0.2 for i in range(len(sizes))], [f"{s} B" for s in sizes])
    ax.set_ylabel("GB/s (log)")
    ax.set_title("CRC-32: ISA-L vs a byte-wise table")
    ax.legend()
    save(fig, os.path.join(outdir, "icrc.png"))


def memif(path, outdir):
    with open(path) as f:
        data = json.load(f)
    s = data["summary"]
    if not s:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = range(len(s))
    # Bars: sumcastd with results per rank and by multicast (where run), then testpmd io.
    bars = [(key, label) for key, label in (("sumcastd_pps", "sumcastd, results per rank"),
                                            ("sumcastd_multicast_pps", "sumcastd, results by multicast"))
            if any(key in r for r in s)] + [("testpmd_pps", "testpmd io forwarding")]
    w = 0.8 / len(bars)
    for i, (key, label) in enumerate(bars):
        ax.bar([x + i * w for x in xs], [r.get(key, 0) / 1e6 for r in s], w, label=label)
        if key != "testpmd_pps":
            ratio = "ratio" + ("_multicast" if "multicast" in key else "")
            for x, r in zip(xs, s):
                if key in r:
                    ax.text(x + i * w, r[key] / 1e6 * 1.02, f"{r[ratio]:.2f}x", ha="center", fontsize=8)
    for x, r in zip(xs, s):
        if r.get("gen_ceiling_pps"):  # the generator's loop ceiling, measured in the same run
            ax.hlines(r["gen_ceiling_pps"] / 1e6, x - w / 2, x + 0.8 - w / 2, colors="k", linestyles="--",
                      label="generator's ceiling 1/(1/tx+1/rx)" if x == 0 else None)
    ax.set_xticks([x + 0.4 - w / 2 for x in xs], [f"{r['ranks']} ranks, {r['payload']} B" for r in s])
    ax.set_ylabel("Mpps through one core")
    ax.set_title("memif: sumcastd vs testpmd, same generator and CPUs")
    ax.legend(fontsize=8)
    save(fig, os.path.join(outdir, "memif.png"))


def transport(path, outdir):
    """Gbit/s each way: the worker's UDP transport vs one TCP stream, per path (perf/transport/run)."""
    with open(path) as f:
        s = json.load(f)["summary"]
    if not s:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    bars = (("udp_w2r_gbps", "UDP transport worker->reflector", "C0"), ("udp_r2w_gbps", "UDP transport reflector->worker", "C9"),
            ("tcp_w2r_gbps", "TCP worker->reflector", "C1"), ("tcp_r2w_gbps", "TCP reflector->worker", "C3"))
    for k, (key, label, color) in enumerate(bars):
        ax.bar([x + k * 0.2 for x in range(len(s))], [r[key] for r in s], 0.2, color=color, label=label)
    for x, r in enumerate(s):
        top = max(r[key] for key, _, _ in bars)
        ax.text(x + 0.3, top * 1.02, f"{min(r['ratio_w2r'], r['ratio_r2w']):.2f}x", ha="center")
    ax.set_xticks([x + 0.3 for x in range(len(s))], [f"{r['path']} (MTU {r['mtu']}), {r['payload']} B" for r in s])
    ax.set_ylim(0, max(r[key] for r in s for key, _, _ in bars) * 1.35)
    ax.set_ylabel("Gbit/s received (both ways at once)")
    ax.set_title("worker transport vs one TCP stream, one core each side")
    ax.legend(fontsize=7)
    save(fig, os.path.join(outdir, "transport.png"))


def cluster(path, out):
    with open(path) as f:
        data = json.load(f)
    cases = data.get("cases", [])
    if not cases:
        return
    R = (data["rate_mbit"] or 200) / 8000  # unshaped runs: in multiples of 200 Mbit/s
    ns = sorted({c["ranks"] for c in cases})
    losses = sorted({c["loss_pct"] for c in cases})
    fig, axes = plt.subplots(len(ns), len(losses), figsize=(4.6 * len(losses), 3.6 * len(ns)), sharey=True,
                             squeeze=False)
    for ax in axes.flat:
        ax.set_visible(False)
    for c in cases:
        ax = axes[ns.index(c["ranks"])][losses.index(c["loss_pct"])]
        ax.set_visible(True)
        rows = c["rows"]
        x = [r["bytes"] / 2**20 for r in rows]
        for key, label, style in (("sumcast", "Sumcast", "o-"), ("mpi_default", "MPI default", "s--"),
                                  ("mpi_ring", "MPI ring", "^--")):
            pts = [(xx, r[key] / R) for xx, r in zip(x, rows) if r.get(key)]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
        n = c["ranks"]
        ax.axhline(1.0, color="k", lw=0.8, label="R")
        ax.axhline(n / (2 * (n - 1)), color="0.5", ls=":", lw=1, label="ring bound n/(2(n-1))")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("MiB")
        ax.set_title(f"n={n}, loss {c['loss_pct']}%")
        cpg = c.get("cpu_s_per_gb") or {}
        mpi = [x for x in (cpg.get("mpi_default"), cpg.get("mpi_ring")) if x]
        if cpg.get("sumcast_workers") and mpi:  # CPU seconds per all-reduced GB, same run
            text = (f"CPU s/GB: Sumcast workers {cpg['sumcast_workers']:.1f} + appliance "
                    f"{cpg.get('appliance') or 0:.1f}; MPI best {min(mpi):.1f}")
            ccpg = c.get("call_cpu_s_per_gb") or {}
            cmpi = [x for x in (ccpg.get("mpi_default"), ccpg.get("mpi_ring")) if x]
            if ccpg.get("sumcast_workers") and cmpi:  # ... inside the timed calls alone (--cpu-log)
                text += f"\ninside the calls: workers {ccpg['sumcast_workers']:.1f}; MPI best {min(cmpi):.1f}"
            ax.text(0.02, 0.02, text, transform=ax.transAxes, fontsize=7)
        ax.grid(alpha=0.3)
    for row in axes:
        row[0].set_ylabel("algbw / R")
    shaping = f"R = {data['rate_mbit']} Mbit/s" if data["rate_mbit"] else "links unshaped, R := 200 Mbit/s"
    fig.suptitle(f"all-reduce algorithm bandwidth / R ({shaping}; sumcastd on {data.get('pmd', 'af_packet')})")
    axes[0][0].legend(fontsize=7)
    save(fig, out)


def scaleout(path, out):
    """Algorithm bandwidth per k (appliances) for n hosts aggregating too: measured (each size),
    BytePS' formula, and OpenMPI's best on the same links (perf/scaleout/run)."""
    with open(path) as f:
        data = json.load(f)
    cases = data.get("cases", [])
    if not cases:
        return
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    ks = [c["k"] for c in cases]
    sizes = sorted({r["bytes"] for c in cases for r in c["rows"]})
    width = 0.8 / (len(sizes) + 1)
    for i, size in enumerate(sizes):
        vals = [next((r["algbw_mbit"] for r in c["rows"] if r["bytes"] == size), 0) for c in cases]
        ax.bar([x + i * width for x in range(len(ks))], vals, width, color=f"C{i}",
               label=f"Sumcast {size / 2**20:g} MiB")
    ax.bar([x + len(sizes) * width for x in range(len(ks))], [c["formula_mbit"] for c in cases], width,
           color="0.75", label="formula 2n(n-1)/(n^2+kn-2k)")
    for m, style in zip(data.get("mpi", []), ("--", ":")):
        best = max((r["algbw_mbit"] for r in m["rows"] if r["bytes"] in sizes), default=None)
        if best:
            ax.axhline(best, color="k", ls=style, lw=1, label=f"OpenMPI {m['algorithm']} (best size)")
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(ks))])
    ax.set_xticklabels([f"k={k}" for k in ks])
    ax.set_ylabel("algbw (Mbit/s)")
    c0 = cases[0]
    payload = f", payload {c0['payload']} B" if "payload" in c0 else ", payload 1024 B"
    ax.set_title(f"scale-out: n={c0['ranks']} hosts + k appliances, every link {c0['rate_mbit']:g} Mbit/s (tbf)"
                 f"{payload}", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(axis="y", alpha=0.3)
    save(fig, out)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    p = lambda name: os.path.join(d, name)
    if os.path.exists(p("engine.json")):
        engine(bench_rows(p("engine.json")), d)
    if os.path.exists(p("kernels.json")):
        kernels(bench_rows(p("kernels.json")), d)
    if os.path.exists(p("icrc.json")):
        icrc(bench_rows(p("icrc.json")), d)
    if os.path.exists(p("memif.json")):
        memif(p("memif.json"), d)
    if os.path.exists(p("transport.json")):
        transport(p("transport.json"), d)
    for name in sorted(os.listdir(d)):
        if name.startswith("cluster") and name.endswith(".json"):
            cluster(p(name), p(name[:-len(".json")] + ".png"))
        if name.startswith("scaleout") and name.endswith(".json"):
            scaleout(p(name), p(name[:-len(".json")] + ".png"))


if __name__ == "__main__":
    main()
