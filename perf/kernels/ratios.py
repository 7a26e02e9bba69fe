#!/usr/bin/env python3
"""Prints sumcast_bench_kernels results as GB/s of source consumed and the ratio to memcpy of the
same bytes in the same run, then checks the targets (summation must keep up with copying the bytes):
AVX-512 fp32 sum >= 0.8x memcpy and fp16/bf16 sum >= 0.5x memcpy on L2-resident (256 KiB) chunks.

Usage: ratios.py results.json   (from --benchmark_out=results.json; with --benchmark_repetitions
the median is used). Exit status 1 when a target is missed or its row is absent.
"""
import json
import sys

TARGETS = [  # (benchmark name, minimum ratio to memcpy of the same size)
    ("accumulate_sum/avx512/fp32/256KiB", 0.8),
    ("accumulate_sum/avx512/fp16/256KiB", 0.5),
    ("accumulate_sum/avx512/bf16/256KiB", 0.5),
]


def load(path):
    with open(path) as f:
        data = json.load(f)
    rates = {}
    for b in data["benchmarks"]:
        name = b.get("run_name", b["name"])
        if "bytes_per_second" not in b:
            continue
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") != "median":
                continue
            rates[name] = b["bytes_per_second"]
        else:
            rates.setdefault(name, b["bytes_per_second"])  # first repetition when not aggregated
    return rates


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rates = load(sys.argv[1])
    print(f"{'benchmark':44} {'GB/s':>8} {'x memcpy':>9}")
    for name, rate in rates.items():
        size = name.rsplit("/", 1)[-1]
        base = rates.get(f"memcpy/{size}")
        ratio = f"{rate / base:9.2f}" if base and not name.startswith("memcpy/") else ""
        print(f"{name:44} {rate / 1e9:8.2f} {ratio}")
    failed = False
    print()
    for name, minimum in TARGETS:
        size = name.rsplit("/", 1)[-1]
        if name not in rates or f"memcpy/{size}" not in rates:
            print(f"MISSING {name}")
            failed = True
            continue
        ratio = rates[name] / rates[f"memcpy/{size}"]
        ok = ratio >= minimum
        failed |= not ok
        print(f"{'PASS' if ok else 'FAIL'} {name}: {ratio:.2f}x memcpy (target >= {minimum}x)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
