/* OpenMPI MPI_Allreduce baseline for perf/run (and, unmodified, for the MPI interposer tests):
 * a sweep of sizes, each timed over --iters calls after --warmup, with integer-valued inputs
 * checked exactly. Prints one line per size: bytes, time_us, algbw_gbs, busbw_gbs, errors.
 * No Sumcast header: it is an ordinary MPI program. --cpu-log PATH ("%r": the rank) has every rank
 * write, per size, "bytes iterations cpu_s": the CPU seconds (user + system, every thread of the
 * process) it spent inside its timed MPI_Allreduce calls (as sumcast-allreduce --cpu-log).
 *   allreduce_bench [--min-bytes N] [--max-bytes N] [--iters N] [--warmup N] [--dtype float|double|int]
 *                   [--cpu-log PATH] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long parse_size(const char* s) {
  char* end;
  long v = strtol(s, &end, 10);
  if (*end == 'K' || *end == 'k')
    v <<= 10;
  else if (*end == 'M' || *end == 'm')
    v <<= 20;
  else if (*end == 'G' || *end == 'g')
    v <<= 30;
  return v;
}

/* User + system CPU seconds of the whole process so far. */
static double process_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  long min_bytes = 1 << 20, max_bytes = 64 << 20;
  int iters = 5, warmup = 1;
  const char* dtype = "float";
  const char* cpu_log_arg = NULL;
  MPI_Init(&argc, &argv);
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--min-bytes"))
      min_bytes = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "--max-bytes"))
      max_bytes = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "--iters"))
      iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--warmup"))
      warmup = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--dtype"))
      dtype = argv[i + 1];
    else if (!strcmp(argv[i], "--cpu-log"))
      cpu_log_arg = argv[i + 1];
  }
  int rank, world;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  FILE* cpu_log = NULL;
  if (cpu_log_arg) {
    char path[4096];
    const char* at = strstr(cpu_log_arg, "%r");
    if (at)
      snprintf(path, sizeof(path), "%.*s%d%s", (int)(at - cpu_log_arg), cpu_log_arg, rank, at + 2);
    else
      snprintf(path, sizeof(path), "%s", cpu_log_arg);
    cpu_log = fopen(path, "w");
    if (!cpu_log) {
      fprintf(stderr, "allreduce_bench: rank %d: cannot write --cpu-log %s\n", rank, path);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  MPI_Datatype dt = !strcmp(dtype, "double") ? MPI_DOUBLE : !strcmp(dtype, "int") ? MPI_INT : MPI_FLOAT;
  int esize;
  MPI_Type_size(dt, &esize);
  char* send = malloc((size_t)max_bytes);
  char* recv = malloc((size_t)max_bytes);
  if (rank == 0) printf("# world %d dtype %s\n# bytes time_us algbw_GBs busbw_GBs errors\n", world, dtype);
  int failed = 0;
  for (long bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    long count = bytes / esize;
    /* element i of rank r: (i % 251) + r, exact in every dtype; the sum is world*(i%251) + world*(world-1)/2 */
    for (long i = 0; i < count; ++i) {
      double v = (double)(i % 251 + rank);
      if (dt == MPI_FLOAT)
        ((float*)send)[i] = (float)v;
      else if (dt == MPI_DOUBLE)
        ((double*)send)[i] = v;
      else
        ((int*)send)[i] = (int)v;
    }
    double t = 0, cpu = 0;
    for (int it = 0; it < warmup + iters; ++it) {
      MPI_Barrier(MPI_COMM_WORLD);
      double c0 = process_cpu_s();
      double t0 = MPI_Wtime();
      MPI_Allreduce(send, recv, (int)count, dt, MPI_SUM, MPI_COMM_WORLD);
      double t1 = MPI_Wtime();
      if (it >= warmup) {
        t += t1 - t0;
        cpu += process_cpu_s() - c0;
      }
    }
    if (cpu_log) fprintf(cpu_log, "%ld %d %.6f\n", bytes, iters, cpu);
    long errors = 0;
    for (long i = 0; i < count; ++i) {
      double want = (double)world * (double)(i % 251) + (double)world * (world - 1) / 2.0;
      double got = dt == MPI_FLOAT ? ((float*)recv)[i] : dt == MPI_DOUBLE ? ((double*)recv)[i] : ((int*)recv)[i];
      if (got != want) ++errors;
    }
    double tmax;
    t /= iters;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    long all_errors;
    MPI_Allreduce(&errors, &all_errors, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (all_errors) failed = 1;
    if (rank == 0) {
      double algbw = bytes / tmax / 1e9;
      printf("%ld %.1f %.4f %.4f %ld\n", bytes, tmax * 1e6, algbw, algbw * 2.0 * (world - 1) / world, all_errors);
      fflush(stdout);
    }
  }
  if (cpu_log && fclose(cpu_log) != 0) {
    fprintf(stderr, "allreduce_bench: rank %d: cannot write --cpu-log\n", rank);
    failed = 1;
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return failed;
}
