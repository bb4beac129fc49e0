/* A small persistent pool: cpu_nthreads() - 1 workers, started on first
 * use, sleeping on a condition variable between jobs.  A job is a counter
 * of items that the caller and the workers take from until none are left;
 * the caller returns once every worker that joined has left the job.
 *
 * Workers start on CPUs other than the starting thread's, then may run
 * anywhere it may: left to itself, Linux often put the new worker beside
 * the caller, already busy with the first job's items, and moved one of
 * them only milliseconds later (seen on a 2-CPU VM in about half the
 * processes: 2 to 6 ms on one core; a process's first 1024^3 product then
 * scaled x1.4 to x1.75 on 2 threads, and x1.9 once workers started apart). */
#define _GNU_SOURCE
#include "threads.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS 64

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake, idle;
    int nworkers;
    /* the current job, valid while `active` */
    uint64_t generation;
    cpu_item_fn fn;
    void *ctx;
    int64_t nitems;
    int seats; /* workers that may still join */
    int inside; /* workers in the job */
    atomic_int_fast64_t next;
    bool active;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER,
          .idle = PTHREAD_COND_INITIALIZER};

static _Thread_local bool in_item; /* this thread is running an item */
static pthread_once_t started = PTHREAD_ONCE_INIT;
static int nthreads = 1;

int cpu_nthreads(void)
{
    static int n;
    if (!n) {
        const char *env = getenv("TL_NUM_THREADS");
        long v = env && atol(env) > 0 ? atol(env) : sysconf(_SC_NPROCESSORS_ONLN);
        n = v < 1 ? 1 : v > MAX_THREADS ? MAX_THREADS : (int)v;
    }
    return n;
}

static void take_items(cpu_item_fn fn, void *ctx, int64_t nitems)
{
    in_item = true;
    for (;;) {
        int64_t i = atomic_fetch_add(&pool.next, 1);
        if (i >= nitems)
            break;
        fn(ctx, i);
    }
    in_item = false;
}

#ifdef __linux__
static cpu_set_t allowed; /* the process's CPUs when the pool started */
static bool placed;       /* workers were started away from the starter */
#endif

static void *worker(void *unused)
{
    (void)unused;
#ifdef __linux__
    if (placed)
        pthread_setaffinity_np(pthread_self(), sizeof allowed, &allowed);
#endif
    uint64_t seen = 0;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (!(pool.active && pool.generation != seen && pool.seats > 0))
            pthread_cond_wait(&pool.wake, &pool.lock);
        seen = pool.generation;
        pool.seats--;
        pool.inside++;
        cpu_item_fn fn = pool.fn;
        void *ctx = pool.ctx;
        int64_t n = pool.nitems;
        pthread_mutex_unlock(&pool.lock);
        take_items(fn, ctx, n);
        pthread_mutex_lock(&pool.lock);
        if (--pool.inside == 0)
            pthread_cond_broadcast(&pool.idle);
    }
    return NULL;
}

static void start(void)
{
    nthreads = cpu_nthreads();
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
#ifdef __linux__
    int self = sched_getcpu();
    if (self >= 0 && sched_getaffinity(0, sizeof allowed, &allowed) == 0 &&
        CPU_ISSET(self, &allowed) && CPU_COUNT(&allowed) > 1) {
        cpu_set_t others = allowed;
        CPU_CLR(self, &others);
        placed = pthread_attr_setaffinity_np(&at, sizeof others, &others) == 0;
    }
#endif
    for (int i = 1; i < nthreads; i++) {
        pthread_t t;
        if (pthread_create(&t, &at, worker, NULL) == 0)
            pool.nworkers++;
    }
    pthread_attr_destroy(&at);
}

void cpu_parallel(int64_t nitems, int want, cpu_item_fn fn, void *ctx)
{
    if (nitems <= 0)
        return;
    if (want > nitems)
        want = (int)(nitems < MAX_THREADS ? nitems : MAX_THREADS);
    if (want > 1 && !in_item)
        pthread_once(&started, start);
    if (want <= 1 || in_item || pool.nworkers == 0) {
        for (int64_t i = 0; i < nitems; i++)
            fn(ctx, i);
        return;
    }
    pthread_mutex_lock(&pool.lock);
    while (pool.active) /* another thread's job: wait for it (rare) */
        pthread_cond_wait(&pool.idle, &pool.lock);
    pool.active = true;
    pool.generation++;
    pool.fn = fn;
    pool.ctx = ctx;
    pool.nitems = nitems;
    pool.seats = want - 1 < pool.nworkers ? want - 1 : pool.nworkers;
    atomic_store(&pool.next, 0);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    take_items(fn, ctx, nitems);
    pthread_mutex_lock(&pool.lock);
    pool.seats = 0; /* late workers stay out */
    while (pool.inside > 0)
        pthread_cond_wait(&pool.idle, &pool.lock);
    pool.active = false;
    pthread_cond_broadcast(&pool.idle);
    pthread_mutex_unlock(&pool.lock);
}
