/*
 * api.c: libtimehands from C. tests/c_api.rs compiles this with the system's
 * cc against include/timehands.h and libtimehands.a, and runs it.
 *
 * Each failed check prints one line to stderr; the last line counts the
 * checks, and the exit status is 1 if any failed. The bounds against the
 * kernel are loose (milliseconds, around a bracket of kernel reads): they
 * catch a wrong clock, never a slow or loaded machine.
 */
/* _GNU_SOURCE for CLOCK_TAI and the alarm clocks' ids. */
#define _GNU_SOURCE

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "timehands.h"

#define NSEC_PER_SEC 1000000000LL
/* How far outside the kernel's bracket a clock may read. */
#define LOOSE_NS (100 * 1000000LL)
/* Reads per clock in the single-threaded loop: some hundreds of windups. */
#define LOOP_READS 1000000L
#define THREADS 2
#define THREAD_READS 500000L

static int checks, failures;

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		checks++;                                                     \
		if (!(cond)) {                                                \
			failures++;                                           \
			fprintf(stderr, "%s:%d: not %s: ", __FILE__,          \
			    __LINE__, #cond);                                 \
			fprintf(stderr, __VA_ARGS__);                         \
			fputc('\n', stderr);                                  \
		}                                                             \
	} while (0)

static const struct {
	clockid_t id;
	const char *name;
	int coarse;
} served[] = {
	{ CLOCK_REALTIME, "CLOCK_REALTIME", 0 },
	{ CLOCK_MONOTONIC, "CLOCK_MONOTONIC", 0 },
	{ CLOCK_BOOTTIME, "CLOCK_BOOTTIME", 0 },
	{ CLOCK_MONOTONIC_RAW, "CLOCK_MONOTONIC_RAW", 0 },
	{ CLOCK_REALTIME_COARSE, "CLOCK_REALTIME_COARSE", 1 },
	{ CLOCK_MONOTONIC_COARSE, "CLOCK_MONOTONIC_COARSE", 1 },
	{ CLOCK_TAI, "CLOCK_TAI", 0 },
};
#define SERVED (sizeof served / sizeof served[0])

static long long
ns(struct timespec ts)
{
	return (long long)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

static long long
kernel_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return ns(ts);
}

/* Whether `ours` lies within LOOSE_NS of the kernel's bracket [before, after]. */
static int
near(long long before, long long ours, long long after)
{
	return before - LOOSE_NS <= ours && ours <= after + LOOSE_NS;
}

/* A reader of nanoseconds on CLOCK_MONOTONIC agrees with the kernel's. */
static void
nanoseconds_agree(uint64_t (*read)(void), const char *name)
{
	long long before, after;
	uint64_t now;

	before = kernel_ns(CLOCK_MONOTONIC);
	now = read();
	after = kernel_ns(CLOCK_MONOTONIC);
	CHECK(near(before, (long long)now, after),
	    "%s: %llu ns, CLOCK_MONOTONIC %lld to %lld ns", name,
	    (unsigned long long)now, before, after);
}

static void
every_clock_agrees_with_the_kernel(void)
{
	struct timespec ts;
	long long before, after;
	size_t i;
	int rc;

	for (i = 0; i < SERVED; i++) {
		before = kernel_ns(served[i].id);
		rc = th_clock_gettime(served[i].id, &ts);
		after = kernel_ns(served[i].id);
		CHECK(rc == 0, "%s: returned %d, errno %d", served[i].name, rc,
		    errno);
		CHECK(ts.tv_nsec >= 0 && ts.tv_nsec < NSEC_PER_SEC,
		    "%s: tv_nsec %ld", served[i].name, (long)ts.tv_nsec);
		CHECK(near(before, ns(ts), after),
		    "%s: ours %lld ns, the kernel's %lld to %lld ns",
		    served[i].name, ns(ts), before, after);
	}

	nanoseconds_agree(th_now_ns, "th_now_ns");
	nanoseconds_agree(th_now_unordered_ns, "th_now_unordered_ns");
}

/*
 * On one thread, over a long loop: the monotonic clocks never step back, the
 * nanosecond readers are the same clock as CLOCK_MONOTONIC, and the coarse
 * clock is never ahead of a precise read that follows it.
 */
static void
one_thread_never_sees_time_go_back(void)
{
	struct timespec ts;
	long long precise, coarse, last_precise = 0, last_coarse = 0;
	uint64_t now, unordered, last_now = 0, last_unordered = 0;
	long i, back_precise = 0, back_now = 0, back_unordered = 0,
		back_coarse = 0, now_before_gettime = 0, coarse_ahead = 0;

	for (i = 0; i < LOOP_READS; i++) {
		th_clock_gettime(CLOCK_MONOTONIC, &ts);
		precise = ns(ts);
		now = th_now_ns();
		unordered = th_now_unordered_ns();
		th_clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
		coarse = ns(ts);

		back_precise += precise < last_precise;
		back_now += now < last_now;
		now_before_gettime += (long long)now < precise;
		back_unordered += unordered < last_unordered;
		back_coarse += coarse < last_coarse;
		coarse_ahead += (long long)th_now_ns() < coarse;

		last_precise = precise;
		last_now = now;
		last_unordered = unordered;
		last_coarse = coarse;
	}
	CHECK(back_precise == 0, "CLOCK_MONOTONIC went back %ld times",
	    back_precise);
	CHECK(back_now == 0, "th_now_ns went back %ld times", back_now);
	CHECK(now_before_gettime == 0,
	    "th_now_ns read before a CLOCK_MONOTONIC read before it, %ld times",
	    now_before_gettime);
	CHECK(back_unordered == 0, "th_now_unordered_ns went back %ld times",
	    back_unordered);
	CHECK(back_coarse == 0, "CLOCK_MONOTONIC_COARSE went back %ld times",
	    back_coarse);
	CHECK(coarse_ahead == 0,
	    "CLOCK_MONOTONIC_COARSE was ahead of th_now_ns %ld times",
	    coarse_ahead);
}

/* The latest time any thread has read, and how often a read was earlier. */
static _Atomic uint64_t latest;
static atomic_long back_across_threads;

static void *
reader(void *unused)
{
	uint64_t seen, now;
	long i;

	(void)unused;
	for (i = 0; i < THREAD_READS; i++) {
		seen = atomic_load_explicit(&latest, memory_order_acquire);
		now = th_now_ns();
		if (now < seen)
			atomic_fetch_add(&back_across_threads, 1);
		while (seen < now && !atomic_compare_exchange_weak_explicit(
		    &latest, &seen, now, memory_order_release,
		    memory_order_relaxed))
			;
	}
	return NULL;
}

/* A time one thread has published is never later than another's next read. */
static void
threads_never_see_time_go_back(void)
{
	pthread_t threads[THREADS];
	int i, started = 0;

	for (i = 0; i < THREADS; i++)
		started += pthread_create(&threads[i], NULL, reader, NULL) == 0;
	CHECK(started == THREADS, "started %d of %d threads", started,
	    THREADS);
	for (i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	CHECK(atomic_load(&back_across_threads) == 0,
	    "th_now_ns read earlier than another thread's read %ld times",
	    atomic_load(&back_across_threads));
}

static void
resolution_and_accuracy_are_stated(void)
{
	struct timespec res, accuracy;
	size_t i;

	for (i = 0; i < SERVED; i++) {
		CHECK(th_clock_getres(served[i].id, &res) == 0, "%s: errno %d",
		    served[i].name, errno);
		CHECK(ns(res) > 0 && ns(res) <= NSEC_PER_SEC,
		    "%s: resolution %lld ns", served[i].name, ns(res));
		CHECK(th_clock_getaccuracy(served[i].id, &accuracy) == 0,
		    "%s: errno %d", served[i].name, errno);
		CHECK(ns(accuracy) >= 0 && ns(accuracy) < 2 * NSEC_PER_SEC,
		    "%s: accuracy %lld ns", served[i].name, ns(accuracy));
		if (served[i].coarse)
			CHECK(ns(accuracy) >= ns(res),
			    "%s: a coarse clock lags by up to its resolution "
			    "(%lld ns) but claims %lld ns",
			    served[i].name, ns(res), ns(accuracy));
	}
}

/* Checks that `call`, given clock `id`, fails as clock_gettime does. */
#define FAILS_WITH(code, call, id)                                            \
	do {                                                                  \
		int rc_;                                                      \
		errno = 0;                                                    \
		rc_ = (call);                                                 \
		CHECK(rc_ == -1 && errno == (code),                           \
		    "id %d: returned %d, errno %d", (int)(id), rc_, errno);   \
	} while (0)

/*
 * Every id timehands does not serve is the kernel's: th_clock_gettime and
 * th_clock_getres answer as clock_gettime and clock_getres do (the same
 * return, errno, and a time within the kernel's bracket or the same
 * resolution), for the clocks the kernel has and those it refuses: the
 * CPU-time clocks (also a process's and a thread's dynamic ids), the alarm
 * clocks, the ids 10 and 12 to 15 (removed or unused), the auxiliary
 * clocks of Linux 6.17 (16 to 23: refused by older kernels or when not
 * enabled), and ids no kernel has. th_clock_getaccuracy states only
 * timehands' clocks' error.
 */
static void
every_other_id_is_the_kernels(void)
{
	clockid_t ids[64];
	size_t count = 0, i;
	clockid_t id;

	ids[count++] = CLOCK_PROCESS_CPUTIME_ID;
	ids[count++] = CLOCK_THREAD_CPUTIME_ID;
	ids[count++] = CLOCK_REALTIME_ALARM;
	ids[count++] = CLOCK_BOOTTIME_ALARM;
	for (id = 10; id <= 23; id++)
		if (id != CLOCK_TAI)
			ids[count++] = id;
	ids[count++] = -1;
	ids[count++] = 4096;
	CHECK(clock_getcpuclockid(getpid(), &ids[count]) == 0,
	    "clock_getcpuclockid: errno %d", errno);
	count++;
	CHECK(pthread_getcpuclockid(pthread_self(), &ids[count]) == 0,
	    "pthread_getcpuclockid failed");
	count++;

	for (i = 0; i < count; i++) {
		struct timespec before, ours, after, kernel_res, our_res;
		int kernel_rc, kernel_errno, rc, our_errno;

		id = ids[i];
		errno = 0;
		kernel_rc = clock_gettime(id, &before);
		kernel_errno = errno;
		errno = 0;
		ours.tv_sec = 12345;
		ours.tv_nsec = 678;
		rc = th_clock_gettime(id, &ours);
		our_errno = errno;
		clock_gettime(id, &after);
		CHECK(rc == kernel_rc && our_errno == kernel_errno,
		    "id %d: returned %d errno %d, the kernel %d errno %d",
		    (int)id, rc, our_errno, kernel_rc, kernel_errno);
		if (kernel_rc == 0) {
			CHECK(near(ns(before), ns(ours), ns(after)),
			    "id %d: %lld ns, the kernel [%lld, %lld]", (int)id,
			    ns(ours), ns(before), ns(after));
			FAILS_WITH(EFAULT, th_clock_gettime(id, NULL), id);
		} else {
			CHECK(ours.tv_sec == 12345 && ours.tv_nsec == 678,
			    "id %d: a failed call wrote the timespec", (int)id);
			FAILS_WITH(kernel_errno, th_clock_gettime(id, NULL), id);
		}

		errno = 0;
		kernel_rc = clock_getres(id, &kernel_res);
		kernel_errno = errno;
		errno = 0;
		rc = th_clock_getres(id, &our_res);
		our_errno = errno;
		CHECK(rc == kernel_rc && our_errno == kernel_errno,
		    "getres id %d: returned %d errno %d, the kernel %d errno %d",
		    (int)id, rc, our_errno, kernel_rc, kernel_errno);
		if (kernel_rc == 0)
			CHECK(ns(our_res) == ns(kernel_res),
			    "getres id %d: %lld ns, the kernel %lld", (int)id,
			    ns(our_res), ns(kernel_res));
		CHECK(th_clock_getres(id, NULL) == clock_getres(id, NULL),
		    "getres id %d, NULL", (int)id);
		FAILS_WITH(EINVAL, th_clock_getaccuracy(id, &our_res), id);
	}
}

/*
 * th_clock_getbounds: around our CLOCK_REALTIME (read between two of the
 * kernel's), by at least the kernel's own bound where the kernel is the
 * source; no bound, and the reading, where no source bounds real time.
 */
static void
realtime_is_bounded_or_said_unsynchronized(void)
{
	struct th_realtime_bounds b;
	struct timespec before, after;

	clock_gettime(CLOCK_REALTIME, &before);
	CHECK(th_clock_getbounds(&b) == 0, "th_clock_getbounds: errno %d", errno);
	clock_gettime(CLOCK_REALTIME, &after);
	CHECK(near(ns(before), ns(b.realtime), ns(after)),
	    "bounds read %lld ns, the kernel [%lld, %lld]", ns(b.realtime),
	    ns(before), ns(after));
	if (b.synchronized) {
		CHECK(ns(b.earliest) <= ns(b.realtime) &&
		    ns(b.realtime) <= ns(b.latest),
		    "bounds [%lld, %lld] around %lld", ns(b.earliest),
		    ns(b.latest), ns(b.realtime));
		CHECK(b.status == 1 || b.status == 2, "status %d", b.status);
		CHECK(b.source >= 0 && b.source <= 2, "source %d", b.source);
		if (b.source == 0)
			CHECK(ns(b.latest) - ns(b.realtime) >=
			    (long long)b.kernel_max_error_ns,
			    "bound %lld ns under the kernel's %llu",
			    ns(b.latest) - ns(b.realtime),
			    (unsigned long long)b.kernel_max_error_ns);
	} else {
		CHECK(ns(b.earliest) == 0 && ns(b.latest) == 0 &&
		    b.status == 0,
		    "unsynchronized, yet bounds [%lld, %lld], status %d",
		    ns(b.earliest), ns(b.latest), b.status);
	}
	FAILS_WITH(EFAULT, th_clock_getbounds(NULL), -1);
}

/*
 * TrueTime's verbs: an instant long past is surely past and one far ahead
 * surely not yet where a source bounds real time, neither where none does;
 * a commit wait returns with its instant surely past, or EAGAIN without a
 * bound; NULL and invalid instants are refused.
 */
static void
the_verbs_hold_and_refuse_bad_instants(void)
{
	struct th_realtime_bounds b;
	struct timespec long_ago = { 1, 0 }, far_ahead = { 4000000000, 0 };
	struct timespec bad = { 1, 1000000000 }, stamp;
	int synchronized, rc;

	CHECK(th_clock_getbounds(&b) == 0, "th_clock_getbounds: errno %d", errno);
	synchronized = b.synchronized;
	CHECK(th_clock_surely_past(&long_ago) == synchronized,
	    "surely past 1 s after the epoch, synchronized %d", synchronized);
	CHECK(th_clock_surely_not_yet(&far_ahead) == synchronized,
	    "surely not yet in 2096, synchronized %d", synchronized);
	CHECK(th_clock_surely_past(&far_ahead) == 0, "2096 surely past");
	CHECK(th_clock_surely_not_yet(&long_ago) == 0, "1970 surely not yet");
	stamp = b.realtime;
	stamp.tv_nsec = stamp.tv_nsec / 2;
	errno = 0;
	rc = th_clock_commit_wait(&stamp, &b);
	if (synchronized)
		CHECK(rc == 0 && ns(b.earliest) > ns(stamp),
		    "commit wait returned %d, errno %d, earliest %lld, stamp %lld",
		    rc, errno, ns(b.earliest), ns(stamp));
	else
		CHECK(rc == -1 && errno == EAGAIN,
		    "commit wait without a bound: %d, errno %d", rc, errno);
	FAILS_WITH(EFAULT, th_clock_surely_past(NULL), -1);
	FAILS_WITH(EINVAL, th_clock_surely_not_yet(&bad), -1);
	FAILS_WITH(EINVAL, th_clock_commit_wait(&bad, NULL), -1);
	FAILS_WITH(EFAULT, th_clock_commit_wait(NULL, &b), -1);
}

/* The errors of clock_gettime: EFAULT for NULL, after the id. */
static void
errors_are_those_of_clock_gettime(void)
{
	clockid_t id;
	size_t i;

	for (i = 0; i < SERVED; i++) {
		id = served[i].id;
		FAILS_WITH(EFAULT, th_clock_gettime(id, NULL), id);
		/* As clock_getres(2): a NULL result pointer only checks the id. */
		CHECK(th_clock_getres(id, NULL) == 0, "getres %s, NULL: errno %d",
		    served[i].name, errno);
		CHECK(th_clock_getaccuracy(id, NULL) == 0,
		    "getaccuracy %s, NULL: errno %d", served[i].name, errno);
	}

	FAILS_WITH(EFAULT, th_info(NULL), 0);
	FAILS_WITH(EFAULT, th_clock_description_ctf(NULL, 16), 0);
}

/* Returns whether `*info` was filled, for the checks that use it. */
static int
info_says_what_the_clock_runs_on(struct th_info *info)
{
	struct th_info again;
	size_t i;
	int hardware;

	if (th_info(info) != 0) {
		CHECK(0, "th_info failed, errno %d", errno);
		return 0;
	}
	if (info->counter == NULL || info->counter[0] == '\0') {
		CHECK(0, "th_info names no counter");
		return 0;
	}
	CHECK(info->frequency_hz >= 1000000, "frequency %llu Hz",
	    (unsigned long long)info->frequency_hz);
	CHECK(info->frequency_source != NULL && info->frequency_source[0],
	    "no frequency source");
	CHECK(info->frequency_uncertainty_ppb >= -1, "uncertainty %lld ppb",
	    (long long)info->frequency_uncertainty_ppb);
	CHECK(info->windups >= 1, "%llu windups",
	    (unsigned long long)info->windups);
	CHECK(info->verdict_count == 0 || info->verdicts != NULL,
	    "%zu verdicts at NULL", info->verdict_count);
	for (i = 0; info->verdicts != NULL && i < info->verdict_count; i++)
		CHECK(info->verdicts[i].check != NULL &&
		    info->verdicts[i].check[0] != '\0' &&
		    info->verdicts[i].detail != NULL,
		    "verdict %zu is incomplete", i);
	hardware = strcmp(info->counter, "CLOCK_MONOTONIC") != 0;
	CHECK(hardware == (info->fallback == NULL),
	    "counter %s, fallback %s", info->counter,
	    info->fallback ? info->fallback : "(none)");

	CHECK(info->time_from != NULL && info->time_from[0] != '\0',
	    "no word of where the time comes from");
	printf("time from %s\n", info->time_from ? info->time_from : "(none)");

	CHECK(th_info(&again) == 0, "errno %d", errno);
	CHECK(again.counter == info->counter &&
	    again.verdicts == info->verdicts,
	    "the texts are made once and kept for the process");
	return 1;
}

static void
the_ctf_description_is_copied_like_snprintf(const struct th_info *info)
{
	char buf[1024], small[8], one[1] = { 'x' };
	int whole, len, cut;

	whole = th_clock_description_ctf(NULL, 0);
	CHECK(whole > 0, "returned %d", whole);

	len = th_clock_description_ctf(buf, sizeof buf);
	CHECK(len > 0 && (size_t)len < sizeof buf, "returned %d", len);
	if (len <= 0 || (size_t)len >= sizeof buf)
		return;
	CHECK(strlen(buf) == (size_t)len, "strlen %zu, returned %d",
	    strlen(buf), len);
	CHECK(strncmp(buf, "clock {\n", 8) == 0, "%s", buf);
	CHECK(strstr(buf, "\tfreq = 1000000000;\n") != NULL, "%s", buf);
	CHECK(strstr(buf, info->counter) != NULL,
	    "does not name the counter %s: %s", info->counter, buf);
	CHECK(len >= 3 && strcmp(buf + len - 3, "};\n") == 0, "%s", buf);

	cut = th_clock_description_ctf(small, sizeof small);
	CHECK(cut >= (int)sizeof small, "returned %d for a cut text", cut);
	CHECK(strcmp(small, "clock {") == 0, "cut to \"%s\"", small);

	CHECK(th_clock_description_ctf(one, sizeof one) > 0 && one[0] == '\0',
	    "a one-byte buffer holds only the NUL");
}

int
main(void)
{
	struct th_info info;

	every_clock_agrees_with_the_kernel();
	one_thread_never_sees_time_go_back();
	threads_never_see_time_go_back();
	resolution_and_accuracy_are_stated();
	every_other_id_is_the_kernels();
	errors_are_those_of_clock_gettime();
	realtime_is_bounded_or_said_unsynchronized();
	the_verbs_hold_and_refuse_bad_instants();
	if (info_says_what_the_clock_runs_on(&info))
		the_ctf_description_is_copied_like_snprintf(&info);

	printf("%d passed, %d failed\n", checks - failures, failures);
	return failures != 0;
}
