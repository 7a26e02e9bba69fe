#!/usr/bin/python3
"""An ordinary Python MPI program (numpy, no Sumcast import) that checks reductions exactly, for
the MPI interposer's tests: run it with and without LD_PRELOAD=libsumcast_mpi.so and compare.

Python opens the MPI library only when the program imports it, long after a preloaded library
was loaded: this is what such programs (mpi4py, Horovod, PyTorch's MPI backend) look like.

  mpi_python.py [--threshold BYTES] [--mpi mpi4py|ctypes:LIBMPI.so]

--mpi mpi4py (default): Debian's mpi4py (built for Open MPI).
--mpi ctypes:PATH: the MPI library at PATH opened with ctypes (RTLD_GLOBAL) and called through the
  process's global scope, as a C extension module's references are; handles are MPICH's ABI
  constants (Debian has no mpi4py for MPICH).

Every check fills integer-valued inputs, reduces, compares every element with the sum computed
here (exact in every dtype, in any summation order) and prints one line on rank 0:
"check <what>: ok <hash of the result bytes>" (or "FAILED ..."). Covered: Allreduce of float32,
float64 and int32 (SUM, and MAX / MIN), in place and not, sizes from 3 elements to past 1 MiB
(across the threshold); Iallreduce overlapped with numpy work, completed by Wait and by Test
polling; a split and a dup communicator, used and freed. Also prints "# world N hosts H
ranks-per-host L" and "# eligible at threshold T: ..." (the calls a size threshold admits).
Exit status 0 when every check passed.
"""
import argparse
import ctypes
import hashlib
import os
import sys

import numpy as np

SUM, MAX, MIN = "sum", "max", "min"


class Mpi4pyBackend:
    def __init__(self):
        from mpi4py import MPI  # opens libmpi now
        self.MPI = MPI
        self.world = MPI.COMM_WORLD
        self.ops = {SUM: MPI.SUM, MAX: MPI.MAX, MIN: MPI.MIN}

    def rank(self, comm):
        return comm.Get_rank()

    def size(self, comm):
        return comm.Get_size()

    def allreduce(self, comm, send, recv, op):
        comm.Allreduce(self.MPI.IN_PLACE if send is None else send, recv, op=self.ops[op])

    def iallreduce(self, comm, send, recv, op):
        return comm.Iallreduce(self.MPI.IN_PLACE if send is None else send, recv, op=self.ops[op])

    def wait(self, req):
        req.Wait()

    def test(self, req):
        return req.Test()

    def split(self, comm, color, key):
        return comm.Split(color, key)

    def dup(self, comm):
        return comm.Dup()

    def free(self, comm):
        comm.Free()

    def allgather_int64(self, comm, value):
        out = np.zeros(self.size(comm), dtype=np.int64)
        comm.Allgather(np.array([value], dtype=np.int64), out)
        return out

    def barrier(self, comm):
        comm.Barrier()

    def finalize(self):
        pass  # mpi4py finalizes at exit


class CtypesBackend:
    """MPICH's ABI: integer handles (mpi.h of MPICH 4)."""
    COMM_WORLD = 0x44000000
    DTYPES = {np.float32: 0x4C00040A, np.float64: 0x4C00080B, np.int32: 0x4C000405, np.int64: 0x4C000809}
    OPS = {MAX: 0x58000001, MIN: 0x58000002, SUM: 0x58000003}
    IN_PLACE = ctypes.c_void_p(-1)
    STATUS_IGNORE = ctypes.c_void_p(1)

    def __init__(self, path):
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)  # opened now, after start-up
        self.lib = ctypes.CDLL(None)  # calls resolve through the global scope, as an extension's do
        self.world = self.COMM_WORLD
        rc = self.lib.MPI_Init(None, None)
        assert rc == 0, "MPI_Init: %d" % rc

    def _call(self, name, *args):
        rc = getattr(self.lib, name)(*args)
        if rc != 0:
            raise RuntimeError("%s returned %d" % (name, rc))

    def rank(self, comm):
        r = ctypes.c_int()
        self._call("MPI_Comm_rank", comm, ctypes.byref(r))
        return r.value

    def size(self, comm):
        r = ctypes.c_int()
        self._call("MPI_Comm_size", comm, ctypes.byref(r))
        return r.value

    def _args(self, send, recv, op):
        s = self.IN_PLACE if send is None else ctypes.c_void_p(send.ctypes.data)
        return (s, ctypes.c_void_p(recv.ctypes.data), recv.size, self.DTYPES[recv.dtype.type], self.OPS[op])

    def allreduce(self, comm, send, recv, op):
        self._call("MPI_Allreduce", *self._args(send, recv, op), comm)

    def iallreduce(self, comm, send, recv, op):
        req = ctypes.c_int()
        self._call("MPI_Iallreduce", *self._args(send, recv, op), comm, ctypes.byref(req))
        return req

    def wait(self, req):
        self._call("MPI_Wait", ctypes.byref(req), self.STATUS_IGNORE)

    def test(self, req):
        flag = ctypes.c_int()
        self._call("MPI_Test", ctypes.byref(req), ctypes.byref(flag), self.STATUS_IGNORE)
        return flag.value != 0

    def split(self, comm, color, key):
        out = ctypes.c_int()
        self._call("MPI_Comm_split", comm, color, key, ctypes.byref(out))
        return out.value

    def dup(self, comm):
        out = ctypes.c_int()
        self._call("MPI_Comm_dup", comm, ctypes.byref(out))
        return out.value

    def free(self, comm):
        c = ctypes.c_int(comm)
        self._call("MPI_Comm_free", ctypes.byref(c))

    def allgather_int64(self, comm, value):
        out = np.zeros(self.size(comm), dtype=np.int64)
        mine = np.array([value], dtype=np.int64)
        t = self.DTYPES[np.int64]
        self._call("MPI_Allgather", ctypes.c_void_p(mine.ctypes.data), 1, t, ctypes.c_void_p(out.ctypes.data), 1, t,
                   comm)
        return out

    def barrier(self, comm):
        self._call("MPI_Barrier", comm)

    def finalize(self):
        self._call("MPI_Finalize")


class Checker:
    def __init__(self, mpi, threshold):
        self.mpi = mpi
        self.threshold = threshold
        self.world_rank = mpi.rank(mpi.world)
        self.checks = 0
        self.failures = 0
        self.eligible = {"allreduce": 0, "iallreduce": 0}

    @staticmethod
    def inputs(dtype, n, rank, salt):
        i = np.arange(n, dtype=np.int64)
        return (((i * 7 + rank * 13 + salt * 31) % 1001) - 500).astype(dtype)

    def expected(self, dtype, n, ranks, salt, op):
        parts = np.stack([self.inputs(np.int64, n, r, salt) for r in ranks])
        red = {SUM: parts.sum(axis=0), MAX: parts.max(axis=0), MIN: parts.min(axis=0)}[op]
        return red.astype(dtype)

    def report(self, comm, what, ok, result):
        # Every rank must agree; rank 0 of the world prints (the result of world rank 0's comm).
        flags = self.mpi.allgather_int64(self.mpi.world, 1 if ok else 0)
        self.checks += 1
        if not flags.all():
            self.failures += 1
        if self.world_rank == 0:
            digest = hashlib.sha1(result.tobytes()).hexdigest()[:16]
            print("check %s: %s %s" % (what, "ok" if flags.all() else "FAILED on %d rank(s)" %
                                       int((flags == 0).sum()), digest), flush=True)

    def count(self, kind, comm, nbytes):
        if self.mpi.size(comm) >= 2 and nbytes >= self.threshold:
            self.eligible[kind] += 1

    def allreduce(self, comm, cname, ranks, dtype, n, op, in_place, salt):
        rank = self.mpi.rank(comm)
        data = self.inputs(dtype, n, ranks[rank], salt)
        if in_place:
            recv = data
            self.mpi.allreduce(comm, None, recv, op)
        else:
            recv = np.full(n, 77, dtype=dtype)
            self.mpi.allreduce(comm, data, recv, op)
            ok_send = np.array_equal(data, self.inputs(dtype, n, ranks[rank], salt))
        want = self.expected(dtype, n, ranks, salt, op)
        ok = np.array_equal(recv, want) and (in_place or ok_send)
        self.count("allreduce", comm, recv.nbytes)
        what = "allreduce/%s %s %s n=%d %s" % (cname, np.dtype(dtype).name, op, n,
                                               "in-place" if in_place else "out-of-place")
        self.report(comm, what, ok, recv)

    def iallreduce(self, comm, cname, ranks, dtype, n, op, by_test, salt):
        rank = self.mpi.rank(comm)
        data = self.inputs(dtype, n, ranks[rank], salt)
        recv = np.zeros(n, dtype=dtype)
        req = self.mpi.iallreduce(comm, data, recv, op)
        # Work overlapped with the reduction (bounded: a fixed amount of numpy arithmetic).
        m = np.arange(256 * 256, dtype=np.float64).reshape(256, 256) % 17
        acc = 0.0
        for _ in range(4):
            acc += float((m @ m).sum())
        if by_test:
            polls = 0
            while not self.mpi.test(req):
                polls += 1
                if polls > 50_000_000:
                    raise RuntimeError("MPI_Test never completed")
        else:
            self.mpi.wait(req)
        want = self.expected(dtype, n, ranks, salt, op)
        ok = np.array_equal(recv, want) and acc > 0
        self.count("iallreduce", comm, recv.nbytes)
        what = "iallreduce/%s %s %s n=%d %s" % (cname, np.dtype(dtype).name, op, n, "test" if by_test else "wait")
        self.report(comm, what, ok, recv)


def report_hosts(mpi):
    ino = os.stat("/proc/self/ns/net").st_ino
    all_ns = mpi.allgather_int64(mpi.world, ino)
    if mpi.rank(mpi.world) == 0:
        _, counts = np.unique(all_ns, return_counts=True)
        print("# world %d hosts %d ranks-per-host %d" % (len(all_ns), len(counts), int(counts.max())), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threshold", type=int, default=64 << 10)
    ap.add_argument("--mpi", default="mpi4py")
    args = ap.parse_args()
    if args.mpi == "mpi4py":
        mpi = Mpi4pyBackend()
    elif args.mpi.startswith("ctypes:"):
        mpi = CtypesBackend(args.mpi[len("ctypes:"):])
    else:
        ap.error("--mpi: mpi4py or ctypes:PATH, not %r" % args.mpi)
    report_hosts(mpi)
    c = Checker(mpi, args.threshold)
    world = mpi.world
    wsize, wrank = mpi.size(world), mpi.rank(world)
    everyone = list(range(wsize))
    salt = 0
    for dtype in (np.float32, np.float64, np.int32):
        for n in (3, 1000, 8191, 8192, 16383, 16384, 16385, 100_000, 300_001):
            for in_place in (False, True):
                salt += 1
                c.allreduce(world, "world", everyone, dtype, n, SUM, in_place, salt)
        salt += 1
        c.allreduce(world, "world", everyone, dtype, 50_000, MAX if dtype != np.int32 else MIN, False, salt)
    for by_test in (False, True):
        for dtype, n in ((np.float32, 200_000), (np.float64, 70_000), (np.int32, 1000)):
            salt += 1
            c.iallreduce(world, "world", everyone, dtype, n, SUM, by_test, salt)

    # A split (two halves, by rank parity) and a dup, used and freed.
    half = mpi.split(world, wrank % 2, wrank)
    members = [r for r in everyone if r % 2 == wrank % 2]
    dup = mpi.dup(world)
    for n in (5000, 40_000, 250_000):
        salt += 1
        c.allreduce(half, "split", members, np.float32, n, SUM, n % 2 == 0, salt)
        salt += 1
        c.allreduce(dup, "dup", everyone, np.float64, n, SUM, False, salt)
    salt += 1
    c.iallreduce(dup, "dup", everyone, np.float32, 120_000, SUM, False, salt)
    mpi.free(half)
    mpi.free(dup)
    salt += 1
    c.allreduce(world, "world-after-free", everyone, np.float32, 100_000, SUM, True, salt)

    if wrank == 0:
        e = c.eligible
        print("# eligible at threshold %d: allreduce %d iallreduce %d reduce_scatter_block 0" %
              (args.threshold, e["allreduce"], e["iallreduce"]), flush=True)
        print("mpi_python: %d checks, %s" % (c.checks, "all exact" if c.failures == 0 else
                                               "%d FAILED" % c.failures), flush=True)
    mpi.barrier(world)
    failures = c.failures
    mpi.finalize()
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
