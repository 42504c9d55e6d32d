/* Test helper: attaches to the ring through STALLPROF_RING (as an exec'd
 * program would) and records spans "seq" with arg = 0..N-1 from each of T
 * threads. Usage: ring_producer THREADS SPANS [hold]
 * Prints "attach=<result> dropped=<n>" and exits 0; with "hold" it announces
 * "ready" on stdout after writing and then sleeps until killed. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stallprof/client.h"

static long g_spans;

static void* produce(void* unused) {
  (void)unused;
  const uint32_t name = stallprof_name("seq");
  for (long i = 0; i < g_spans; ++i) stallprof_span_complete(name, stallprof_now_ns(), 1, (uint64_t)i, 3);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: ring_producer THREADS SPANS [hold]\n");
    return 2;
  }
  const int threads = atoi(argv[1]);
  g_spans = atol(argv[2]);
  const int result = stallprof_attach();
  pthread_t ids[64];
  for (int t = 0; t < threads && t < 64; ++t) pthread_create(&ids[t], NULL, produce, NULL);
  for (int t = 0; t < threads && t < 64; ++t) pthread_join(ids[t], NULL);
  printf("attach=%d dropped=%llu\n", result, (unsigned long long)stallprof_dropped());
  fflush(stdout);
  if (argc > 3 && strcmp(argv[3], "hold") == 0) {
    produce(NULL); /* main thread keeps its lane claimed */
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
  }
  return 0;
}
