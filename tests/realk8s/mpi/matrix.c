/* The MPI program of the MPI matrix (tests/realk8s/test_mpi.py,
 * bench/bench_mpi.py): built with each MPI's own compiler wrapper and run by
 * Flux in the pods of a MiniCluster.
 *
 * Every rank prints where it runs; rank 0 prints the world size it sees, the
 * result of an allreduce, and two point-to-point exchanges - with a rank in
 * its own pod (shared memory, where the MPI uses it) and with the last rank,
 * in another pod (the network) - each checked word for word, with the
 * bandwidth of 4 MiB ping-pongs. "finalized" is printed by rank 0 after
 * MPI_Finalize returns, so a hang there is told apart from a hang before.
 * The exit code is 0 only if every check passed.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BIG (4u << 20)
#define ROUNDS 8

static char host[MPI_MAX_PROCESSOR_NAME];

/* A ping-pong between ranks a and b: checks the data, returns MB/s per direction. */
static double pingpong(int rank, int a, int b, char *buf, int *ok)
{
    if (rank != a && rank != b)
        return 0.0;
    int other = rank == a ? b : a;
    int mine = 1000 + rank, theirs = -1;
    MPI_Sendrecv(&mine, 1, MPI_INT, other, 1, &theirs, 1, MPI_INT, other, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (theirs != 1000 + other)
        *ok = 0;
    double start = MPI_Wtime();
    for (int i = 0; i < ROUNDS; i++) {
        if (rank == a) {
            memset(buf, 'a' + i, BIG);
            MPI_Send(buf, BIG, MPI_CHAR, other, 2, MPI_COMM_WORLD);
            MPI_Recv(buf, BIG, MPI_CHAR, other, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (buf[0] != 'A' + i || buf[BIG - 1] != 'A' + i)
                *ok = 0;
        } else {
            MPI_Recv(buf, BIG, MPI_CHAR, other, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (buf[0] != 'a' + i || buf[BIG - 1] != 'a' + i)
                *ok = 0;
            memset(buf, 'A' + i, BIG);
            MPI_Send(buf, BIG, MPI_CHAR, other, 3, MPI_COMM_WORLD);
        }
    }
    return 2.0 * ROUNDS * BIG / (MPI_Wtime() - start) / 2e6;
}

/* The first rank after 0 whose host (pod) is rank 0's, or -1. */
static int same_pod_peer(int size)
{
    char *all = malloc((size_t)size * MPI_MAX_PROCESSOR_NAME);
    MPI_Allgather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                  MPI_COMM_WORLD);
    int peer = -1;
    for (int r = 1; r < size && peer < 0; r++)
        if (strcmp(all + (size_t)r * MPI_MAX_PROCESSOR_NAME, all) == 0)
            peer = r;
    free(all);
    return peer;
}

/* A barrier that sleeps while it waits: the ranks not in a ping-pong leave
 * the cores to the two that are (a blocking MPI call polls, and 8 ranks
 * polling on a small machine would measure the scheduler, not the MPI). */
static void quiet_barrier(void)
{
    MPI_Request request;
    int done = 0;
    MPI_Ibarrier(MPI_COMM_WORLD, &request);
    while (!done) {
        MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        if (!done)
            usleep(1000);
    }
}

static void exchange(int rank, int a, int b, const char *what, char *buf, int *ok)
{
    int good = 1;
    quiet_barrier();
    double rate = pingpong(rank, a, b, buf, &good);
    if (rank == a)
        printf("p2p %s %d-%d %s %.1f MB/s\n", what, a, b, good ? "ok" : "BAD", rate);
    if (!good)
        *ok = 0;
    quiet_barrier();
}

int main(int argc, char **argv)
{
    int rank, size, len, ok = 1;
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    setvbuf(stdout, NULL, _IOLBF, 0);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    printf("rank %d of %d on %s\n", rank, size, host);

    int one = rank + 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("allreduce %s %d\n", sum == size * (size + 1) / 2 ? "ok" : "BAD", sum);

    char *buf = malloc(BIG);
    int peer = same_pod_peer(size);
    if (peer > 0)
        exchange(rank, 0, peer, "same-pod", buf, &ok);
    if (size > 1 && size - 1 != peer)
        exchange(rank, 0, size - 1, "other-pod", buf, &ok);
    free(buf);

    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Get_library_version(version, &len);
        version[strcspn(version, "\n,")] = '\0';
        printf("world %d %s; %s\n", size, all_ok ? "ok" : "BAD", version);
    }
    MPI_Finalize();
    if (rank == 0)
        printf("finalized\n");
    return all_ok && sum == size * (size + 1) / 2 ? 0 : 1;
}
