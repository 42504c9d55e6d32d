/* Soak producer: THREADS threads each emit spans through the C ABI at RATE
 * spans/s (0: as fast as they can) for SECONDS, every span carrying its
 * thread's sequence number in `arg` and the thread's own name "soak.c.<i>".
 * Prints one line per thread: "producer <i> tid=<tid> emitted=<n>". */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "stallprof/client.h"

static double g_seconds;
static double g_rate;

typedef struct {
  int index;
  long tid;
  unsigned long long emitted;
} producer;

static void* run(void* arg) {
  producer* p = arg;
  p->tid = syscall(SYS_gettid);
  char name[32];
  snprintf(name, sizeof(name), "soak.c.%d", p->index);
  const uint32_t id = stallprof_name(name);
  const uint64_t start = stallprof_now_ns();
  const uint64_t end = start + (uint64_t)(g_seconds * 1e9);
  uint64_t seq = 0;
  for (;;) {
    const uint64_t now = stallprof_now_ns();
    if (now >= end) break;
    if (g_rate > 0) {
      /* Pace: emit up to where the schedule says, then sleep 1 ms. */
      const uint64_t due = (uint64_t)((double)(now - start) * g_rate / 1e9);
      if (seq >= due) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        continue;
      }
    }
    stallprof_span_complete(id, now, 100, seq, 0);
    ++seq;
  }
  p->emitted = seq;
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: soak_producer THREADS RATE SECONDS\n");
    return 2;
  }
  const int threads = atoi(argv[1]);
  g_rate = atof(argv[2]);
  g_seconds = atof(argv[3]);
  stallprof_attach();
  pthread_t t[256];
  producer p[256];
  for (int i = 0; i < threads && i < 256; ++i) {
    p[i].index = i;
    pthread_create(&t[i], NULL, run, &p[i]);
  }
  for (int i = 0; i < threads && i < 256; ++i) pthread_join(t[i], NULL);
  for (int i = 0; i < threads && i < 256; ++i) printf("producer %d tid=%ld emitted=%llu\n", i, p[i].tid, p[i].emitted);
  return 0;
}
