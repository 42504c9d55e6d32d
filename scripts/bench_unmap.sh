#!/usr/bin/env bash
# What freeing memory costs a process whose other threads run on other CPUs
# (docs/validation.md, the text classification tutorial): the kernel flushes
# the TLBs of every CPU the process's threads may be on, by an interrupt to
# each, and on a virtual machine such an interrupt is dear. Freeing a batch
# received from a DataLoader worker unmaps its shared memory in the step,
# and with workers the main process has threads of its own (queue feeders).
# Prints, per 4 KiB page: a first-touch fault, an unmap of it
# (madvise(MADV_DONTNEED)) and the fault after it, in a process alone, beside
# a thread of its own that sleeps 100 us at a time, and beside one that
# spins. Asserts nothing.
# Usage: scripts/bench_unmap.sh [pages] (default 50000)
set -euo pipefail
PAGES=${1:-50000}
DIR=$(mktemp -d /tmp/stallprof-bench-unmap.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
cat >"$DIR/unmap.c" <<'C'
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static volatile int stop;
static void* sibling(void* arg) {
  const long sleep_us = (long)arg;
  while (!stop) {
    if (sleep_us) usleep(sleep_us);
  }
  return 0;
}
static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(int argc, char** argv) {
  const int mode = atoi(argv[1]);  // 0 alone, 1 a sleeping sibling, 2 a spinning one
  const long pages = atol(argv[2]);
  pthread_t t;
  if (mode) pthread_create(&t, 0, sibling, (void*)(mode == 1 ? 100L : 0L));
  usleep(10000);
  char* mem = mmap(0, pages * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  madvise(mem, pages * 4096, MADV_NOHUGEPAGE);
  double start = cpu_s();
  for (long i = 0; i < pages; i++) mem[i * 4096] = 1;
  const double fault = (cpu_s() - start) / pages;
  start = cpu_s();
  for (long i = 0; i < pages; i++) madvise(mem + i * 4096, 4096, MADV_DONTNEED);
  const double unmap = (cpu_s() - start) / pages;
  start = cpu_s();
  for (long i = 0; i < pages; i++) mem[i * 4096] = 1;
  const double refault = (cpu_s() - start) / pages;
  static const char* names[] = {"alone", "beside a sleeping thread", "beside a spinning thread"};
  printf("%-26s fault %6.2f us, unmap %6.2f us, fault again %6.2f us a page\n", names[mode], fault * 1e6,
         unmap * 1e6, refault * 1e6);
  stop = 1;
  return 0;
}
C
cc -O2 -pthread "$DIR/unmap.c" -o "$DIR/unmap"
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores; $PAGES pages"
for mode in 0 1 2 0 1 2; do "$DIR/unmap" "$mode" "$PAGES"; done
