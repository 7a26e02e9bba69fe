/* An ordinary MPI program for the interposer's failover test: ITERS in-place MPI_Allreduce calls
 * of COUNT floats (integer-valued, new values every call), each checked exactly against the
 * formula. Rank 0 prints "# iteration I" after each call (the test kills an appliance once it saw
 * a few) and, at the end, "all exact" when every element of every call on every rank was right.
 *   mpi_failover ITERS COUNT
 * With MPI_FAILOVER_LAST_RANK_BIND=IP in the environment, the last rank sets SUMCAST_MPI_BIND to
 * it before its first call (the interposer reads its settings then), so that the test can cut
 * that rank's results alone.
 * With MPI_FAILOVER_HOLD_AT=K and MPI_FAILOVER_HOLD_FIFO=PATH, rank 0 stops after printing
 * "# iteration K" until it reads a line from PATH (the test holds the FIFO open for writing, so
 * opening it does not block): the other ranks wait in call K + 1 meanwhile, so the test acts at a
 * known point of the run however fast the calls go.
 * Exit status: 0 when every check passed. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static float value(int rank, long i, int iter) { return (float)((rank + 1) * ((i + iter) % 13) - (i % 5)); }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  if (argc != 3) {
    fprintf(stderr, "usage: mpi_failover ITERS COUNT\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int iters = atoi(argv[1]);
  const long count = atol(argv[2]);
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const char* last_bind = getenv("MPI_FAILOVER_LAST_RANK_BIND");
  if (last_bind != NULL && rank == world - 1) setenv("SUMCAST_MPI_BIND", last_bind, 1);
  const char* hold_at = getenv("MPI_FAILOVER_HOLD_AT");
  const char* hold_fifo = getenv("MPI_FAILOVER_HOLD_FIFO");
  const int hold = (hold_at != NULL && hold_fifo != NULL) ? atoi(hold_at) : -1;
  float* buf = malloc(sizeof(float) * (size_t)count);
  if (buf == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
  long wrong = 0;
  for (int it = 0; it < iters; ++it) {
    for (long i = 0; i < count; ++i) buf[i] = value(rank, i, it);
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (long i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < world; ++r) want += value(r, i, it);
      if (buf[i] != want) ++wrong;
    }
    if (rank == 0) {
      printf("# iteration %d\n", it + 1);
      fflush(stdout);
      if (it + 1 == hold) {
        char line[16];
        FILE* f = fopen(hold_fifo, "r");
        if (f == NULL || fgets(line, sizeof line, f) == NULL) {
          fprintf(stderr, "mpi_failover: cannot read %s to go on after call %d\n", hold_fifo, hold);
          MPI_Abort(MPI_COMM_WORLD, 2);
        }
        fclose(f);
      }
    }
  }
  long total = 0;
  MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    if (total == 0) {
      printf("all exact: %d calls of %ld elements\n", iters, count);
    } else {
      printf("FAILED: %ld wrong elements\n", total);
    }
  }
  free(buf);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
