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
 * malloc, not from here.  Only anonymous maps of 32 MiB and more. */
#define _GNU_SOURCE
#include <sys/mman.h>

#include "backends/tensor.h"

void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    void *p = __real_mmap(addr, len, prot, flags, fd, off);
#ifdef MADV_HUGEPAGE
    if (p != MAP_FAILED && (flags & MAP_ANONYMOUS) && len >= ((size_t)32 << 20) && tl_huge_pages_chosen())
        (void)madvise(p, len, MADV_HUGEPAGE);
#endif
    return p;
}
