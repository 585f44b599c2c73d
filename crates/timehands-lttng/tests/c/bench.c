/*
 * The LTTng benchmark's traced program: fires the tracepoint
 * timehands_test:tick EVENTS times in a loop on one thread, and prints the
 * ns per event (CLOCK_MONOTONIC around the loop). The clock LTTng timestamps
 * the events with is the one LTTNG_UST_CLOCK_PLUGIN names, or its own.
 *
 * Usage: bench EVENTS
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tp.h"

static double seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long events;
	double start;

	if (argc != 2 || (events = atol(argv[1])) <= 0) {
		fprintf(stderr, "usage: %s EVENTS (a positive count)\n", argv[0]);
		return 2;
	}
	start = seconds();
	for (long seq = 0; seq < events; seq++)
		tracepoint(timehands_test, tick, (int) seq);
	printf("%.2f\n", (seconds() - start) * 1e9 / events);
	return 0;
}
