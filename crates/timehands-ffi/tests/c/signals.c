/*
 * th_clock_gettime in a SIGPROF handler, as a profiler's would call it: a
 * POSIX timer on CLOCK_MONOTONIC signals the process RATE times a second
 * from before its first read, while two threads call malloc and
 * th_clock_gettime for MS milliseconds. POSIX lets a handler call
 * clock_gettime; a drop-in must be as safe there. The alarm ends a process
 * that hangs (it dies of SIGALRM); one that returns 0 passed.
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
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3 || atol(argv[1]) <= 0 || atol(argv[2]) <= 0) {
        fprintf(stderr, "usage: signals RATE MS (both above 0)\n");
        return 2;
    }
    long rate = atol(argv[1]), ms = atol(argv[2]);
    alarm(5);
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
    pthread_t other;
    if (pthread_create(&other, NULL, allocate_and_read, NULL) != 0) {
        return 1;
    }
    allocate_and_read(NULL);
    pthread_join(other, NULL);
    timer_delete(timer);
    return 0;
}
