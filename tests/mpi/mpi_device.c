/* A CUDA-aware-style MPI program for the interposer's device-buffer path, whose "GPU" is the fake
 * CUDA driver (tests/cuda_driver/fake_cuda.h): its device memory faults on any CPU access, so the
 * program only runs to the end when nothing read a device pointer as host memory.
 *
 * Every call is above a 64 KiB threshold (smaller ones would go to plain MPI, which knows nothing
 * of the fake). Checks, fp32 sums of integer-valued data, read back through the fake's copies:
 * MPI_Allreduce with device send and receive, in place, device receive only, device send only,
 * device buffers on even ranks and host buffers on odd ones; MPI_Iallreduce on device buffers
 * (MPI_Wait); MPI_Reduce_scatter_block on device buffers, in place and not.
 * Prints "check <what>: ok" lines, "# calls C" (reductions made per rank) and
 * "mpi_device: N checks, all exact" on rank 0; exit status 0 when every check passed. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

static int rank, world, failures, checks, calls;

static float value(int r, long i) { return (float)((i * 7 + r * 3) % 1000); }

static void fill(float* host, long n, int r, long offset) {
  for (long i = 0; i < n; ++i) host[i] = value(r, offset + i);
}

/* A buffer of n floats, on the device or not, holding rank r's inputs (or zeros). */
static float* buffer(int device, long n, int r, int zero) {
  float* h = malloc((size_t)n * sizeof(float));
  if (zero)
    memset(h, 0, (size_t)n * sizeof(float));
  else
    fill(h, n, r, 0);
  if (!device) return h;
  float* d = fake_cuda_device_alloc((size_t)n * sizeof(float));
  fake_cuda_device_write(d, h, (size_t)n * sizeof(float));
  free(h);
  return d;
}

/* Compares n floats at buf (device or host) with the sum over ranks from element `first`. */
static void expect(const char* what, int device, const float* buf, long n, long first) {
  float* got = malloc((size_t)n * sizeof(float));
  if (device)
    fake_cuda_device_read(got, buf, (size_t)n * sizeof(float));
  else
    memcpy(got, buf, (size_t)n * sizeof(float));
  long bad = 0;
  for (long i = 0; i < n; ++i) {
    float want = 0;
    for (int r = 0; r < world; ++r) want += value(r, first + i);
    if (got[i] != want) ++bad;
  }
  free(got);
  long all = 0;
  MPI_Allreduce(&bad, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD); /* MPI_LONG: always passed to MPI */
  ++checks;
  if (all != 0) ++failures;
  if (rank == 0) printf("check %s: %s\n", what, all == 0 ? "ok" : "FAILED");
}

static void allreduce(const char* what, int send_dev, int recv_dev, int in_place, long n) {
  float* s = buffer(send_dev, n, rank, 0);
  float* r = in_place ? s : buffer(recv_dev, n, rank, 1);
  MPI_Allreduce(in_place ? MPI_IN_PLACE : s, r, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  ++calls;
  expect(what, in_place ? send_dev : recv_dev, r, n, 0);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const long n = 100000; /* 400 KB */
  allreduce("allreduce device->device", 1, 1, 0, n);
  allreduce("allreduce device in place", 1, 1, 1, n);
  allreduce("allreduce host->device", 0, 1, 0, n);
  allreduce("allreduce device->host", 1, 0, 0, n);
  allreduce("allreduce device on even ranks, host on odd", rank % 2 == 0, rank % 2 == 0, 0, 30000);

  float* s = buffer(1, n, rank, 0);
  float* r = buffer(1, n, rank, 1);
  MPI_Request req;
  MPI_Iallreduce(s, r, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  ++calls;
  expect("iallreduce device->device", 1, r, n, 0);

  const long block = 30000;
  float* whole = buffer(1, block * world, rank, 0);
  float* mine = buffer(1, block, rank, 1);
  MPI_Reduce_scatter_block(whole, mine, (int)block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  ++calls;
  expect("reduce_scatter_block device->device", 1, mine, block, block * rank);
  MPI_Reduce_scatter_block(MPI_IN_PLACE, whole, (int)block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  ++calls;
  expect("reduce_scatter_block device in place", 1, whole, block, block * rank);

  if (rank == 0) {
    printf("# calls %d\n", calls);
    printf("mpi_device: %d checks, %s\n", checks, failures == 0 ? "all exact" : "FAILED");
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
