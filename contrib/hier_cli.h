/* hier_cli.h: what the command-line tools share, so that hier_model's rows
 * line up with hier_bench's for the same -b/-e arguments. */
#ifndef HIER_CLI_H
#define HIER_CLI_H

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_params.h"

/* A byte count: a number (fractions allowed) with an optional K, M or G
 * (powers of 1024) and an optional B: "64K", "1.5M", "8", "2GB". 0, or -1
 * when the text is not one. */
static inline int hier_cli_parse_size(const char *s, size_t *bytes_p)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0) return -1;
    switch (toupper((unsigned char)*end)) {
    case 'G': v *= 1024.0; /* fall through */
    case 'M': v *= 1024.0; /* fall through */
    case 'K': v *= 1024.0; end++; break;
    case 0: break;
    default: return -1;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return -1;
    *bytes_p = (size_t)v;
    return 0;
}

/* --param NAME=VALUE: one of hier's parameters as coll_hier_NAME would set
 * it; 0, or -1 said on stderr in the tool's name. */
static inline int hier_cli_set_param(char *arg, const char *tool)
{
    char *eq = strchr(arg, '=');
    if (eq) *eq = '\0';
    if (eq && hier_params_set(&hier_params, arg, eq + 1) == 0) return 0;
    fprintf(stderr, "%s: --param %s: unknown parameter or value\n", tool, arg);
    return -1;
}

#endif
