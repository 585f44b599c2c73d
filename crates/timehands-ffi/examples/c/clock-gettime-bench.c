/*
 * clock-gettime-bench.c
 *
 * The clock_gettime(2) benchmark of Scott Cheloha's 2021 OpenBSD patch
 * (public domain), adapted for timehands: the same loop, `count` reads of
 * CLOCK_MONOTONIC, runs over the C library's clock_gettime and then over
 * libtimehands' th_clock_gettime, each timed by the kernel's CLOCK_MONOTONIC.
 * So that both meet the same machine (a loaded one changes by the second), the
 * loops take turns: ROUNDS slices of count/ROUNDS reads each, the one going
 * first alternating. Each clock prints as the original's one line does (count,
 * then elapsed seconds, summed over the slices), with its name first and the
 * cost of one call last; a last line gives the ratio of the two.
 *
 * Public domain, as the original.
 */

#define _POSIX_C_SOURCE 200809L

#include <err.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <timehands.h>

#define NSEC_PER_SEC 1000000000LL
#define ROUNDS 10

/* The original's loop over one clock_gettime-shaped function; elapsed ns. */
static long long
bench(int (*gettime)(clockid_t, struct timespec *), long long count)
{
	struct timespec begin, end, now;
	long long i;

	clock_gettime(CLOCK_MONOTONIC, &begin);
	for (i = 0; i < count; i++)
		gettime(CLOCK_MONOTONIC, &now);
	clock_gettime(CLOCK_MONOTONIC, &end);

	return (end.tv_sec - begin.tv_sec) * NSEC_PER_SEC +
	    (end.tv_nsec - begin.tv_nsec);
}

static void
report(const char *name, long long count, long long elapsed)
{
	printf("%-16s\t%lld\t%lld.%09lld\t%.2f ns/call\n", name, count,
	    elapsed / NSEC_PER_SEC, elapsed % NSEC_PER_SEC,
	    (double)elapsed / (double)count);
}

int
main(int argc, char *argv[])
{
	struct timespec first;
	long long count, slice, libc_ns = 0, th_ns = 0;
	char *end;
	int round;

	if (argc != 2) {
		fprintf(stderr, "usage: %s count\n", argv[0]);
		return 1;
	}
	/* The original's strtonum(argv[1], 1, LLONG_MAX), which glibc lacks. */
	errno = 0;
	count = strtoll(argv[1], &end, 10);
	if (end == argv[1] || *end != '\0')
		errx(1, "count is invalid: %s", argv[1]);
	if (errno == ERANGE)
		errx(1, "count is too large: %s", argv[1]);
	if (count < 1)
		errx(1, "count is too small: %s", argv[1]);

	/*
	 * The first th_clock_gettime starts the clock (it chooses the counter
	 * and may measure its frequency): neither loop pays for a first call.
	 */
	if (th_clock_gettime(CLOCK_MONOTONIC, &first) != 0)
		err(1, "th_clock_gettime");
	clock_gettime(CLOCK_MONOTONIC, &first);

	for (round = 0; round < ROUNDS; round++) {
		/* The first slice takes the remainder: count reads in all. */
		slice = count / ROUNDS + (round == 0 ? count % ROUNDS : 0);
		if (round % 2 == 0) {
			libc_ns += bench(clock_gettime, slice);
			th_ns += bench(th_clock_gettime, slice);
		} else {
			th_ns += bench(th_clock_gettime, slice);
			libc_ns += bench(clock_gettime, slice);
		}
	}

	report("clock_gettime", count, libc_ns);
	report("th_clock_gettime", count, th_ns);
	printf("th_clock_gettime / clock_gettime: %.2f\n",
	    (double)th_ns / (double)libc_ns);
	return 0;
}
