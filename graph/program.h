/* Programs: ordinary calculations written as text, translated call for call
 * into the graph recipe (the JSON a graph file holds), which the graph
 * loader then validates and loads like any graph file.  There is no second
 * engine: a program is only ever another way of writing a graph.  The
 * graph keeps the program's text and where each name came from, so that
 * later errors, the executor's too, point at the text (tl_program_place).
 *
 * Ownership: every function returns memory its caller owns (free the text,
 * tl_graph_free the graph).  Nothing here prints; errors are values in the
 * tl_status, "PATH:LINE:COL: WHAT" for a place in the program, and the
 * place also in *pos. */
#ifndef TL_PROGRAM_H
#define TL_PROGRAM_H

#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Translates program text and loads the translation: the graph exactly as
 * tl_graph_parse_with loads the JSON that tl_program_compile returns.
 * path names the program in messages ("-e" for inline text) and anchors
 * relative file constants, as a graph file's path does. */
tl_graph *tl_program_load(const char *text, size_t len, const char *path, const tl_graph_options *o,
                          tl_srcpos *pos, tl_status *st);

/* Places an error about g at its program's text (g->source; nothing for
 * a graph file).  The loader and the executor name nodes by id, as in a
 * graph file: "P: node "y" (if): then branch: node "_1_7" (matmul): WHAT"
 * becomes "P:1:7: if at 1:3: then branch: matmul: WHAT", placed at the
 * innermost node (or constant) named, that place also in *pos.  A message
 * that names none stays as it is, *pos 0:0. */
void tl_program_place(const tl_graph *g, tl_status *st, tl_srcpos *pos);

/* When a program's one input without a tensor (in[i] NULL) looks like a
 * typo of a name the program has (a given input, a named value): the
 * error "P:LINE:COL: missing input "xx" (did you mean "x"?)" at its first
 * use, and true; else false, st untouched. */
bool tl_program_missing_input(const tl_graph *g, tl_tensor *const *in, tl_status *st);

/* The JSON text of a graph in the layout `tl compile` writes: version,
 * inputs, consts, then the nodes one per line (a block's nodes each on a
 * line of their own, indented under the node that owns the block), then
 * the outputs; keys in a fixed order; numbers as they read back bit for
 * bit.  `text` is a program when is_program, else a JSON graph, which is
 * laid out anew.  Either is loaded first, so only a valid graph is
 * written. */
char *tl_program_compile(const char *text, size_t len, const char *path, bool is_program,
                         const tl_graph_options *o, tl_srcpos *pos, tl_status *st);

/* That layout for a graph file's JSON as parsed (a cJSON tree, not
 * validated here): its keys version, doc, inputs, consts, nodes and
 * outputs; the text is the caller's to free (NULL, st set: out of
 * memory).  tl compile writes ONNX models' recipes with it too. */
struct cJSON;
char *tl_graph_layout(const struct cJSON *doc, tl_status *st);

#ifdef __cplusplus
}
#endif

#endif
