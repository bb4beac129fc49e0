/* Compiles the body of a `map` node into a scalar register program
 * (backends/mprog.h) at load time, so a body with a non-elementwise op is
 * rejected before anything runs.  The program is owned by the node. */
#ifndef TL_MAPC_H
#define TL_MAPC_H

#include "backends/mprog.h"
#include "graph.h"

/* Fills n->flow->prog, ncap and cap_slots (names of enclosing scopes the
 * body reads: the program's inputs after the map's own args). */
tl_code tl_map_compile(const tl_graph *g, tl_node *n, tl_status *st);
void tl_mprog_free(tl_mprog *p);

#endif
