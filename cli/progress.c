/* The progress line of long runs, drawn by a timer thread of its own: the
 * run only stores how far it got (a few relaxed stores per node, no clock
 * read, no system call), so the line comes after a second however few
 * nodes the run has, even in the middle of one long kernel call. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "cli.h"

enum { FIRST_MS = 1000, EVERY_MS = 200 };

/* Sleeps until the monotonic time ms (milliseconds) or until the run
 * ends; true when it ended.  Called with p->lock held. */
static bool wait_until(cli_progress *p, double ms)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1e3);
    ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1e3) * 1e6) % 1000000000L;
    while (!p->stop)
        if (pthread_cond_timedwait(&p->wake, &p->lock, &ts) != 0) /* timed out (or failed): draw */
            break;
    return p->stop;
}

static void draw(cli_progress *p)
{
    const char *phase = atomic_load_explicit(&p->phase, memory_order_relaxed);
    const char *unit = atomic_load_explicit(&p->unit, memory_order_relaxed);
    long long done = atomic_load_explicit(&p->done, memory_order_relaxed);
    long long total = atomic_load_explicit(&p->total, memory_order_relaxed);
    double s = (cli_now_ms() - p->t0) / 1e3;
    if (unit && total > 0)
        fprintf(stderr, "\rtl: %s: %lld of %lld %s, %.1f s\033[K", phase, done, total, unit, s);
    else if (unit)
        fprintf(stderr, "\rtl: %s: %lld %s, %.1f s\033[K", phase, done, unit, s);
    else
        fprintf(stderr, "\rtl: %s: %.1f s\033[K", phase, s);
    fflush(stderr);
    p->shown = true;
}

static void *timer(void *arg)
{
    cli_progress *p = arg;
    pthread_mutex_lock(&p->lock);
    for (double at = p->t0 + FIRST_MS; !wait_until(p, at); at = cli_now_ms() + EVERY_MS)
        draw(p);
    if (p->shown) /* the thread that drew the line clears it */
        fputs("\r\033[K", stderr);
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

void cli_progress_start(cli_progress *p, bool on, double t0, const char *name)
{
    p->running = p->stop = p->shown = false;
    p->t0 = t0;
    atomic_init(&p->phase, name);
    atomic_init(&p->unit, NULL);
    atomic_init(&p->done, 0);
    atomic_init(&p->total, -1);
    if (!on)
        return;
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca))
        return;
    bool made = !pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) && !pthread_cond_init(&p->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (!made)
        return;
    if (pthread_mutex_init(&p->lock, NULL)) {
        pthread_cond_destroy(&p->wake);
        return;
    }
    /* without a thread there is no line, and the run goes on */
    if (!(p->running = !pthread_create(&p->thread, NULL, timer, p))) {
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->wake);
    }
}

void cli_progress_end(cli_progress *p)
{
    if (!p->running)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    p->running = false;
}
