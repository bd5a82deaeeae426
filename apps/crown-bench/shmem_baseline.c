// OpenSHMEM reference figures for `crown-bench onesided`:
//   oshrun -np 2 --oversubscribe crown-shmem-baseline [--smoke]
// PE 0 drives, PE 1 is the passive target (one direction), as in crown-bench. Each
// figure is the median of 11 batches (3 with --smoke) of seconds per operation; a put
// includes remote completion (shmem_quiet). PE 0 prints one line per figure:
//   shmem,<op>,<bytes>,<seconds per op>
// and nothing else on stdout. Open MPI 4.1.4's oshmem dies with SIGSEGV inside
// shmem_finalize (a memory hook left behind in the unloaded common UCX library);
// `--mca opal_common_ucx_opal_mem_hooks 0` avoids it, and consumers read the lines,
// not the exit code, either way.
#define _POSIX_C_SOURCE 200112L
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { max_batches = 11 };

typedef struct {
  int batches; // at most max_batches
  int smoke;
} options;

// What one timed operation needs; `bytes` is 0 for the atomic.
typedef struct {
  char* remote; // symmetric, addressed on PE 1
  char* src;    // private, PE 0
  char* dst;    // private, PE 0
  long long* counter;
  size_t bytes;
} operands;

typedef void (*op_fn)(const operands*);

static void put_op(const operands* a) {
  shmem_putmem(a->remote, a->src, a->bytes, 1);
  shmem_quiet();
}

static void get_op(const operands* a) { shmem_getmem(a->dst, a->remote, a->bytes, 1); }

static void fetch_add_op(const operands* a) { (void)shmem_atomic_fetch_add(a->counter, 1LL, 1); }

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int compare_doubles(const void* x, const void* y) {
  const double a = *(const double*)x, b = *(const double*)y;
  return (a > b) - (a < b);
}

// Median seconds per op over o->batches timed batches, after one untimed batch.
static double median_seconds(const options* o, int ops, op_fn f, const operands* a) {
  double t[max_batches];
  for (int i = 0; i < ops; ++i) f(a);
  for (int b = 0; b < o->batches; ++b) {
    const double start = now();
    for (int i = 0; i < ops; ++i) f(a);
    t[b] = (now() - start) / ops;
  }
  qsort(t, (size_t)o->batches, sizeof t[0], compare_doubles);
  return t[o->batches / 2];
}

// One figure: both PEs enter and leave together so PE 1 stays passive meanwhile.
static void figure(const options* o, const char* name, int ops, op_fn f, const operands* a) {
  shmem_barrier_all();
  if (shmem_my_pe() == 0) {
    const double s = median_seconds(o, ops, f, a);
    printf("shmem,%s,%zu,%.6e\n", name, a->bytes ? a->bytes : sizeof(long long), s);
    fflush(stdout);
  }
  shmem_barrier_all();
}

static int ops_for(size_t bytes, int smoke) {
  const size_t budget = smoke ? (size_t)8 << 20 : (size_t)256 << 20;
  const size_t most = smoke ? 200 : 5000;
  size_t n = budget / bytes;
  if (n < 4) n = 4;
  if (n > most) n = most;
  return (int)n;
}

int main(int argc, char** argv) {
  options o = {11, 0};
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--smoke") == 0) {
      o.batches = 3;
      o.smoke = 1;
    } else {
      fprintf(stderr, "usage: oshrun -np 2 %s [--smoke]\n", argv[0]);
      return 2;
    }
  }
  shmem_init();
  const int me = shmem_my_pe();
  if (shmem_n_pes() != 2) {
    if (me == 0) fprintf(stderr, "crown-shmem-baseline: run it on exactly 2 PEs\n");
    shmem_global_exit(2);
  }
  const size_t max_bytes = o.smoke ? (size_t)1 << 20 : (size_t)64 << 20;

  // shmem_malloc is collective; a NULL on any PE means the symmetric heap is too small.
  operands a = {0};
  a.remote = shmem_malloc(max_bytes);
  a.counter = shmem_malloc(sizeof *a.counter);
  if (!a.remote || !a.counter) {
    fprintf(stderr, "crown-shmem-baseline: shmem_malloc(%zu) failed on PE %d; raise "
            "SHMEM_SYMMETRIC_SIZE\n", max_bytes, me);
    shmem_global_exit(1);
  }
  memset(a.remote, 0, max_bytes);
  *a.counter = 0;
  if (me == 0) {
    // Private buffers, as crown-bench uses; touched so page faults stay out of timings.
    a.src = malloc(max_bytes);
    a.dst = malloc(max_bytes);
    if (!a.src || !a.dst) {
      fprintf(stderr, "crown-shmem-baseline: out of memory\n");
      shmem_global_exit(1);
    }
    memset(a.src, 1, max_bytes);
    memset(a.dst, 0, max_bytes);
  }
  shmem_barrier_all();

  // Self-check before any figure, so a broken transport prints no numbers.
  int bad = 0;
  if (me == 0) {
    shmem_putmem(a.remote, a.src, 4096, 1);
    shmem_quiet();
    bad = shmem_atomic_fetch_add(a.counter, 1LL, 1) != 0;
    shmem_getmem(a.dst, a.remote, 4096, 1);
    bad |= a.dst[0] != 1 || a.dst[4095] != 1;
  }
  shmem_barrier_all();
  if (me == 1) bad = *a.counter != 1 || a.remote[0] != 1 || a.remote[4095] != 1;
  if (bad) {
    fprintf(stderr, "crown-shmem-baseline: self-check failed on PE %d\n", me);
    shmem_global_exit(1);
  }
  shmem_barrier_all();

  const size_t small[] = {8, 64, 512, 4096};
  const int latency_ops = o.smoke ? 200 : 20000;
  for (size_t i = 0; i < sizeof small / sizeof small[0]; ++i) {
    a.bytes = small[i];
    figure(&o, "put_latency", latency_ops, put_op, &a);
  }
  for (size_t i = 0; i < sizeof small / sizeof small[0]; ++i) {
    a.bytes = small[i];
    figure(&o, "get_latency", latency_ops, get_op, &a);
  }
  const size_t step = o.smoke ? 16 : 4;
  for (a.bytes = 4096; a.bytes <= max_bytes; a.bytes *= step)
    figure(&o, "put_bw", ops_for(a.bytes, o.smoke), put_op, &a);
  for (a.bytes = 4096; a.bytes <= max_bytes; a.bytes *= step)
    figure(&o, "get_bw", ops_for(a.bytes, o.smoke), get_op, &a);
  a.bytes = 0;
  figure(&o, "fetch_add_latency", latency_ops, fetch_add_op, &a);

  free(a.src);
  free(a.dst);
  shmem_free(a.counter);
  shmem_free(a.remote);
  shmem_finalize();
  return 0;
}
