/*
 * One reader of one kind calls th_clock_gettime for MS milliseconds, as a
 * C program's threads would, then the program prints what th_info says
 * the clock became, and how many threads the process has before and after
 * (the library starts none). The kinds:
 *
 *   ordinary  a thread that reads;
 *   blocked   a thread that blocks every signal first, as many libraries'
 *             helper threads do;
 *   daemon    handlers for SIGHUP and SIGTERM, both blocked but around a
 *             ppoll, nginx's way;
 *   handler   a process whose only reads are in a SIGPROF handler at 1 kHz.
 *
 * Usage: callers KIND MS
 */
#define _GNU_SOURCE

#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "timehands.h"

static long ms;
static volatile unsigned long sink;

/* CLOCK_MONOTONIC in ns, from the kernel: the program's own timing. */
static long long kernel_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void read_every_clock(void) {
    static const clockid_t ids[] = {CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_MONOTONIC_COARSE};
    struct timespec ts;
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        if (th_clock_gettime(ids[i], &ts) == 0) {
            sink += (unsigned long)ts.tv_nsec;
        }
    }
}

/* Reads for MS milliseconds; with `daemon`, lets its handlers in between. */
static void reading(int daemon) {
    long long end = kernel_ns() + ms * 1000000LL;
    while (kernel_ns() < end) {
        for (int i = 0; i < 1000; i++) {
            read_every_clock();
        }
        if (daemon) {
            struct timespec none = {0, 0};
            sigset_t empty;
            sigemptyset(&empty);
            ppoll(NULL, 0, &none, &empty);
        }
    }
}

static void *ordinary(void *unused) {
    (void)unused;
    reading(0);
    return NULL;
}

static void *blocked(void *unused) {
    sigset_t all;
    (void)unused;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    reading(0);
    return NULL;
}

static void *daemon_thread(void *unused) {
    sigset_t set;
    (void)unused;
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    reading(1);
    return NULL;
}

static void ignore(int signal) { (void)signal; }

static volatile sig_atomic_t handled;

static void read_in_handler(int signal) {
    (void)signal;
    read_every_clock();
    handled = 1;
}

static void handle(int signal, void (*handler)(int)) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = handler;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(signal, &action, NULL);
}

/* The threads of this process, from /proc (-1 where it is not there). */
static int threads(void) {
    DIR *tasks = opendir("/proc/self/task");
    int count = 0;
    if (tasks == NULL) {
        return -1;
    }
    for (struct dirent *entry; (entry = readdir(tasks)) != NULL;) {
        count += entry->d_name[0] != '.';
    }
    closedir(tasks);
    return count;
}

int main(int argc, char **argv) {
    if (argc != 3 || atol(argv[2]) <= 0) {
        fprintf(stderr, "usage: callers ordinary|blocked|daemon|handler MS (above 0)\n");
        return 2;
    }
    const char *kind = argv[1];
    ms = atol(argv[2]);
    alarm(60);
    int before = threads();
    void *(*reader)(void *) = NULL;
    if (strcmp(kind, "ordinary") == 0) {
        reader = ordinary;
    } else if (strcmp(kind, "blocked") == 0) {
        reader = blocked;
    } else if (strcmp(kind, "daemon") == 0) {
        handle(SIGHUP, ignore);
        handle(SIGTERM, ignore);
        reader = daemon_thread;
    } else if (strcmp(kind, "handler") == 0) {
        handle(SIGPROF, read_in_handler);
        struct itimerval every = {{0, 1000}, {0, 1000}};
        setitimer(ITIMER_PROF, &every, NULL);
        /* The process's CPU time runs the timer; nothing here reads. */
        long long end = kernel_ns() + ms * 1000000LL;
        while (kernel_ns() < end) {
        }
        struct itimerval off = {{0, 0}, {0, 0}};
        setitimer(ITIMER_PROF, &off, NULL);
        if (!handled) {
            fprintf(stderr, "the SIGPROF handler never ran\n");
            return 1;
        }
    } else {
        fprintf(stderr, "callers: no reader kind %s (ordinary, blocked, daemon, handler)\n", kind);
        return 2;
    }
    if (reader != NULL) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, reader, NULL) != 0) {
            return 1;
        }
        pthread_join(thread, NULL);
    }
    int after = threads();
    struct th_info info;
    if (th_info(&info) != 0) {
        fprintf(stderr, "th_info failed\n");
        return 1;
    }
    printf("CALLER %s counter=%s accuracy_ns=%llu windups=%llu threads_before=%d threads_after=%d\n",
           kind, info.counter, (unsigned long long)info.accuracy_ns,
           (unsigned long long)info.windups, before, after);
    return 0;
}
