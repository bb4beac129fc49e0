/* The command line: option parsing, tensor arguments, and writing results.
 * The only layer that prints or exits.  Everything here is owned by the
 * running command and freed before it returns. */
#ifndef TL_CLI_H
#define TL_CLI_H

#include <stdio.h>

#include "exec/exec.h"

#define TL_VERSION "0.1.0"

/* Reads a NAME=TENSOR value: file.npy, file.npz:key, '-' (stdin), or a
 * literal with an optional dtype prefix. */
tl_tensor *cli_read_tensor(const char *spec, tl_status *st);

typedef struct cli_out {
    const char *path;   /* -o, or NULL for stdout text/json */
    bool json, full;
    const char *device; /* effective device name */
    int n;              /* tensors to write */
    const char **names; /* "y", "grad/x" */
    const tl_tensor **ts;
    int noutputs;       /* the first noutputs are outputs, the rest grads */
} cli_out;

/* Writes every tensor: a file (complete or absent) or standard output. */
tl_code cli_write(const cli_out *o, tl_status *st);

#endif
