/* Recipe equality: whether two loaded graphs (from JSON files or programs
 * alike) are the same recipe up to renaming of inputs, constants, nodes and
 * block parameters, whatever the listed order of independent nodes, and
 * never up to algebra.  Each graph is put in a canonical order once (a
 * depth-first walk from the outputs, in order, through each node's
 * arguments, in order; nodes that reach no output after, ordered by a
 * structural hash); the two orders are then compared record by record.
 *
 * Ownership: tl_recipe_compare fills a tl_recipe_diff whose strings the
 * caller frees with tl_recipe_diff_free; the graphs are only read (file
 * constants are read from disk to compare their bits). */
#ifndef TL_RECIPE_H
#define TL_RECIPE_H

#include "graph.h"

typedef struct tl_recipe_diff {
    bool equal;
    /* when not equal: the first difference, as a path from an output (or
     * an unused node) to the node at fault in each graph, e.g.
     * output "y" <- node "t" (add) arg 2 <- node "u" (mul) */
    char *a, *b;
} tl_recipe_diff;

/* TL_OK with *d filled, or an error (a file constant that cannot be read:
 * TL_EINPUT naming it; out of memory: TL_ERUNTIME). */
tl_code tl_recipe_compare(const tl_graph *a, const tl_graph *b, tl_recipe_diff *d, tl_status *st);
void tl_recipe_diff_free(tl_recipe_diff *d);

#endif
