/*
 * th_clock_gettime in a SIGPROF handler, as a profiler's would call it: a
 * POSIX timer on CLOCK_MONOTONIC signals the process RATE times a second
 * from before its first read, while two threads call malloc and
 * th_clock_gettime for MS milliseconds. POSIX lets a handler call
 * clock_gettime; a drop-in must be as safe there. A process hangs when its
 * reading threads make no progress at all (a read waiting for what never
 * comes): the main thread watches their count of rounds, and one that has
 * not moved for 5 s while they should read ends the process (exit 3,
 * "hung"). A slow one (a debug build at 20 kHz) moves, and is waited for;
 * the alarm is the last resort, should the watching thread hang too. One
 * that returns 0 passed.
 *
 * Usage: signals RATE MS
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "timehands.h"

/* What the handler read, kept so that no read is left out. */
static volatile unsigned long sink;

static void read_every_clock(int signal) {
    static const clockid_t ids[] = {
        CLOCK_MONOTONIC, CLOCK_MONOTONIC_COARSE, CLOCK_REALTIME,
        CLOCK_REALTIME_COARSE, CLOCK_BOOTTIME, CLOCK_MONOTONIC_RAW, CLOCK_TAI,
    };
    struct timespec ts;
    (void)signal;
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        if (th_clock_gettime(ids[i], &ts) == 0) {
            sink += (unsigned long)ts.tv_nsec;
        }
    }
}

static struct timespec end;

/* Rounds the reading threads made, and how many of them are done. */
static volatile unsigned long rounds;
static volatile int done;

static int before_end(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec < end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec < end.tv_nsec);
}

static void *allocate_and_read(void *unused) {
    (void)unused;
    while (before_end()) {
        struct timespec ts;
        unsigned long *stamps = malloc(64 * sizeof *stamps);
        if (stamps == NULL) {
            abort();
        }
        for (int i = 0; i < 64; i++) {
            th_clock_gettime(CLOCK_MONOTONIC, &ts);
            stamps[i] = (unsigned long)ts.tv_nsec;
        }
        sink += stamps[63];
        free(stamps);
        __atomic_add_fetch(&rounds, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* CLOCK_MONOTONIC in ns, from the kernel: the watch's own time. */
static long long kernel_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Joins the two `readers` while watching the rounds: exits 3 once they
 * stood for 5 s by the kernel's clock while a reader still read (a sleep
 * the signals cut short counts for what it slept). */
static void join_watching(pthread_t readers[2]) {
    unsigned long seen = rounds;
    long long moved = kernel_ns();
    while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) < 2) {
        struct timespec tenth = {0, 100000000L};
        nanosleep(&tenth, NULL);
        unsigned long now = __atomic_load_n(&rounds, __ATOMIC_RELAXED);
        if (now != seen) {
            seen = now;
            moved = kernel_ns();
        } else if (kernel_ns() - moved >= 5000000000LL) {
            fprintf(stderr, "hung: no reading thread made a round for 5 s\n");
            _exit(3);
        }
    }
    pthread_join(readers[0], NULL);
    pthread_join(readers[1], NULL);
}

static void *read_then_say_done(void *unused) {
    allocate_and_read(unused);
    __atomic_add_fetch(&done, 1, __ATOMIC_RELEASE);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3 || atol(argv[1]) <= 0 || atol(argv[2]) <= 0) {
        fprintf(stderr, "usage: signals RATE MS (both above 0)\n");
        return 2;
    }
    long rate = atol(argv[1]), ms = atol(argv[2]);
    alarm(600);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = read_every_clock;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGPROF, &action, NULL);
    struct sigevent event;
    memset(&event, 0, sizeof event);
    event.sigev_notify = SIGEV_SIGNAL;
    event.sigev_signo = SIGPROF;
    timer_t timer;
    if (timer_create(CLOCK_MONOTONIC, &event, &timer) != 0) {
        perror("timer_create");
        return 1;
    }
    long period = 1000000000L / rate;
    struct itimerspec spec = {
        .it_interval = {period / 1000000000L, period % 1000000000L},
        .it_value = {period / 1000000000L, period % 1000000000L},
    };
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += ms / 1000;
    end.tv_nsec += (ms % 1000) * 1000000L;
    if (end.tv_nsec >= 1000000000L) {
        end.tv_sec += 1;
        end.tv_nsec -= 1000000000L;
    }
    timer_settime(timer, 0, &spec, NULL);
    pthread_t readers[2];
    if (pthread_create(&readers[0], NULL, read_then_say_done, NULL) != 0 ||
        pthread_create(&readers[1], NULL, read_then_say_done, NULL) != 0) {
        return 1;
    }
    join_watching(readers);
    timer_delete(timer);
    return 0;
}
