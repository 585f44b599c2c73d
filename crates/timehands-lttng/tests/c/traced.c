/*
 * The LTTng test's traced program: two threads, on two CPUs where the process
 * may use two, take turns at firing the tracepoint timehands_test:tick with
 * seq = 0, 1, 2, ... (each fires when the other has fired the one before), so
 * that a trace sorted by timestamp must list the seqs in order. It prints
 * CLOCK_MONOTONIC and CLOCK_REALTIME in ns, read 1 ms before the first event
 * and 1 ms after the last, and the two CPUs:
 *
 *     monotonic BEFORE AFTER
 *     realtime BEFORE AFTER
 *     cpus A B
 *
 * Usage: traced EVENTS
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tp.h"

static atomic_int next_seq;
static int events;
static int cpus[2] = {-1, -1};

static long long nanos(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *player(void *arg)
{
	int parity = (int) (intptr_t) arg;

	if (cpus[parity] >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(cpus[parity], &set);
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	for (;;) {
		int seq = atomic_load_explicit(&next_seq, memory_order_acquire);

		if (seq >= events)
			return NULL;
		if (seq % 2 != parity)
			continue;
		tracepoint(timehands_test, tick, seq);
		atomic_store_explicit(&next_seq, seq + 1, memory_order_release);
	}
}

int main(int argc, char **argv)
{
	const struct timespec pad = {0, 1000000};
	cpu_set_t allowed;
	pthread_t threads[2];
	long long monotonic_before, realtime_before, monotonic_after, realtime_after;
	int cpu, found = 0;

	if (argc != 2 || (events = atoi(argv[1])) <= 0) {
		fprintf(stderr, "usage: %s EVENTS (a positive count)\n", argv[0]);
		return 2;
	}
	if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
		for (cpu = 0; cpu < CPU_SETSIZE && found < 2; cpu++)
			if (CPU_ISSET(cpu, &allowed))
				cpus[found++] = cpu;
	}
	if (found < 2)
		cpus[0] = cpus[1] = -1;

	monotonic_before = nanos(CLOCK_MONOTONIC);
	realtime_before = nanos(CLOCK_REALTIME);
	nanosleep(&pad, NULL);
	for (int i = 0; i < 2; i++)
		if (pthread_create(&threads[i], NULL, player, (void *) (intptr_t) i)) {
			perror("pthread_create");
			return 1;
		}
	for (int i = 0; i < 2; i++)
		pthread_join(threads[i], NULL);
	nanosleep(&pad, NULL);
	monotonic_after = nanos(CLOCK_MONOTONIC);
	realtime_after = nanos(CLOCK_REALTIME);

	printf("monotonic %lld %lld\n", monotonic_before, monotonic_after);
	printf("realtime %lld %lld\n", realtime_before, realtime_after);
	printf("cpus %d %d\n", cpus[0], cpus[1]);
	return 0;
}
