/* OpenBLAS's work buffers in huge pages where they are cheaper.  The tl
 * program links OpenBLAS statically, with -Wl,--wrap=mmap, so the mmap
 * calls of its objects and of the archives it links (OpenBLAS's buffers
 * among them: 128 MiB of address space a thread, of which a product packs
 * its operands into the first few MiB) come here first.  Fresh memory is
 * what a first product waits for on a machine whose page faults are dear:
 * on the Zen 5 VM a 1024^3 f32 product's first run took 15.5 ms in small
 * pages (1170 faults) and 11.7 ms with huge pages advised (700), the
 * same bits.  The advice follows the choice tensor.c measured for the
 * process (backends/tensor.h: tl_huge_pages_chosen), so a machine where
 * huge pages cost more keeps small ones; tensor.c's own blocks come from
 * malloc, not from here.  Only anonymous maps of 32 MiB and more.
 *
 * OpenBLAS 0.3.21 retries a work buffer whose map fails, forever (under a
 * ulimit -v, a product spun at full CPU with no word): the same large
 * anonymous map failing many times in a row is that loop, and ends the
 * process with one line and exit status 3, its temporary files removed,
 * as any other allocation that fails. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backends/tensor.h"
#include "cli/cli.h"

void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);

enum { BLAS_RETRIES = 64 };

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    static size_t failed_len;
    static int failures;
    void *p = __real_mmap(addr, len, prot, flags, fd, off);
    if (p == MAP_FAILED && errno == ENOMEM && (flags & MAP_ANONYMOUS) && len >= ((size_t)32 << 20)) {
        failures = len == failed_len ? failures + 1 : 1;
        failed_len = len;
        if (failures >= BLAS_RETRIES) {
            char msg[256];
            int n = snprintf(msg, sizeof msg,
                             "tl: error: out of memory: the BLAS library cannot map its %zu MiB work buffer "
                             "(a memory limit such as ulimit -v is too low for it)\n", len >> 20);
            cli_remove_pending();
            ssize_t w = write(2, msg, n > 0 && (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
            (void)w;
            _exit(3);
        }
    } else if (p != MAP_FAILED) {
        failures = 0;
    }
#ifdef MADV_HUGEPAGE
    if (p != MAP_FAILED && (flags & MAP_ANONYMOUS) && len >= ((size_t)32 << 20) && tl_huge_pages_chosen())
        (void)madvise(p, len, MADV_HUGEPAGE);
#endif
    return p;
}
