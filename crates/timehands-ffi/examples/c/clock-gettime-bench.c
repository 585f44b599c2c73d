/*
 * clock-gettime-bench.c
 *
 * The clock_gettime(2) benchmark of Scott Cheloha's 2021 patch to OpenBSD's
 * user-space TSC clock, adapted for timehands: the same loop, `count` reads of
 * CLOCK_MONOTONIC, runs over the C library's clock_gettime and then over
 * libtimehands' th_clock_gettime, each timed by the kernel's CLOCK_MONOTONIC.
 * So that both meet the same machine (a loaded one changes by the second), the
 * loops take turns: ROUNDS slices of count/ROUNDS reads each, the one going
 * first alternating. Each clock prints as the original's one line does (count,
 * then elapsed seconds, summed over the slices), with its name first and the
 * cost of one call last; a last line gives the ratio of the two.
 *
 * With `rounds` and two files, it runs as that patch was judged: `rounds`
 * runs of `count` reads of each clock, taking turns, and each run's elapsed
 * seconds on a line of the clock's file, for `timehands stat` (or ministat)
 * to compare: `clock-gettime-bench 10000 1000 libc.dat th.dat`.
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

/* The original's strtonum(arg, 1, LLONG_MAX), which glibc lacks. */
static long long
positive(const char *what, const char *arg)
{
	long long value;
	char *end;

	errno = 0;
	value = strtoll(arg, &end, 10);
	if (end == arg || *end != '\0')
		errx(1, "%s is invalid: %s", what, arg);
	if (errno == ERANGE)
		errx(1, "%s is too large: %s", what, arg);
	if (value < 1)
		errx(1, "%s is too small: %s", what, arg);
	return value;
}

/* One run's elapsed seconds on a line of `out`, as the original prints them. */
static void
record(FILE *out, const char *path, long long elapsed)
{
	if (fprintf(out, "%lld.%09lld\n", elapsed / NSEC_PER_SEC,
	    elapsed % NSEC_PER_SEC) < 0)
		err(1, "%s", path);
}

/* `rounds` runs of `count` reads of each clock, taking turns. */
static void
runs(long long count, long long rounds, const char *libc_path,
    const char *th_path)
{
	FILE *libc_out, *th_out;
	long long round;

	if ((libc_out = fopen(libc_path, "w")) == NULL)
		err(1, "%s", libc_path);
	if ((th_out = fopen(th_path, "w")) == NULL)
		err(1, "%s", th_path);
	for (round = 0; round < rounds; round++) {
		if (round % 2 == 0) {
			record(libc_out, libc_path, bench(clock_gettime, count));
			record(th_out, th_path, bench(th_clock_gettime, count));
		} else {
			record(th_out, th_path, bench(th_clock_gettime, count));
			record(libc_out, libc_path, bench(clock_gettime, count));
		}
	}
	if (fclose(libc_out) != 0)
		err(1, "%s", libc_path);
	if (fclose(th_out) != 0)
		err(1, "%s", th_path);
}

int
main(int argc, char *argv[])
{
	struct timespec first;
	long long count, slice, libc_ns = 0, th_ns = 0;
	int round;

	if (argc != 2 && argc != 5) {
		fprintf(stderr, "usage: %s count [rounds libc-file th-file]\n",
		    argv[0]);
		return 1;
	}
	count = positive("count", argv[1]);

	/*
	 * The first th_clock_gettime starts the clock (it chooses the counter
	 * and may measure its frequency): neither loop pays for a first call.
	 */
	if (th_clock_gettime(CLOCK_MONOTONIC, &first) != 0)
		err(1, "th_clock_gettime");
	clock_gettime(CLOCK_MONOTONIC, &first);

	if (argc == 5) {
		runs(count, positive("rounds", argv[2]), argv[3], argv[4]);
		return 0;
	}
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
