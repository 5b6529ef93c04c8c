/* Memory-read bandwidth probe for bench/run_ort_benchmarks.py.
 *
 * Usage: bandwidth_probe MIB THREADS PASSES
 * Allocates MIB MiB of floats, touches every page, then sums the whole buffer
 * PASSES times with THREADS threads (each thread its own contiguous slice,
 * 8 independent accumulators so the loop vectorizes and is bound by memory,
 * not by the add latency). Prints the median pass's read rate in GB/s
 * (10^9 bytes per second) and the sum (so the reads cannot be elided). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct slice {
  const float *p;
  size_t n;
  double sum;
};

static void *sum_slice(void *arg) {
  struct slice *s = arg;
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= s->n; i += 8)
    for (int k = 0; k < 8; ++k)
      acc[k] += s->p[i + k];
  double total = 0;
  for (int k = 0; k < 8; ++k)
    total += acc[k];
  for (; i < s->n; ++i)
    total += s->p[i];
  s->sum = total;
  return NULL;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s MIB THREADS PASSES\n", argv[0]);
    return 2;
  }
  size_t mib = (size_t)atol(argv[1]);
  int threads = atoi(argv[2]), passes = atoi(argv[3]);
  if (threads < 1 || threads > 64 || passes < 1 || passes > 1000)
    return 2;
  size_t n = mib * 1024 * 1024 / sizeof(float);
  float *buf = malloc(n * sizeof(float));
  if (!buf)
    return 1;
  for (size_t i = 0; i < n; ++i)
    buf[i] = (float)(i & 1023) * 0.001f;
  pthread_t tid[64];
  struct slice s[64];
  double *rates = malloc(sizeof(double) * (size_t)passes), check = 0;
  for (int r = 0; r < passes; ++r) {
    double t0 = now();
    for (int t = 0; t < threads; ++t) {
      size_t lo = n * (size_t)t / (size_t)threads;
      size_t hi = n * (size_t)(t + 1) / (size_t)threads;
      s[t].p = buf + lo;
      s[t].n = hi - lo;
      pthread_create(&tid[t], NULL, sum_slice, &s[t]);
    }
    for (int t = 0; t < threads; ++t) {
      pthread_join(tid[t], NULL);
      check += s[t].sum;
    }
    rates[r] = (double)(n * sizeof(float)) / (now() - t0) / 1e9;
  }
  qsort(rates, (size_t)passes, sizeof(double), cmp);
  printf("%.3f %g\n", rates[passes / 2], check);
  free(rates);
  free(buf);
  return 0;
}
