/* hier_model_machine.c: machine descriptions, "key = value" text. */
#include "model/hier_model.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_log.h"

/* The namespace cluster's node on the development machine (2 vCPUs; see
 * contrib/machines/netns-1g.machine for where each figure comes from). */
void hier_model_machine_default(hier_model_machine_t *m)
{
    *m = (hier_model_machine_t){.rails = 1, .rail_gbps = 1.0, .latency_us = 60.0, .msg_us = 5.0, .copy_gbs = 11.6,
                                .node_copy_gbs = 15.9, .reduce_gbs = 8.0, .barrier_us = 5.0, .cores = 2};
    snprintf(m->name, sizeof(m->name), "%s", "default");
    snprintf(m->provider, sizeof(m->provider), "%s", "tcp");
}

typedef struct {
    const char *key;
    size_t off;
    int is_int;
} hier_model_key_t;

#define HIER_MODEL_KEY(field, is_int) {#field, offsetof(hier_model_machine_t, field), is_int}
static const hier_model_key_t hier_model_keys[] = {
    HIER_MODEL_KEY(rails, 1),      HIER_MODEL_KEY(rail_gbps, 0),     HIER_MODEL_KEY(latency_us, 0),
    HIER_MODEL_KEY(msg_us, 0),     HIER_MODEL_KEY(copy_gbs, 0),      HIER_MODEL_KEY(node_copy_gbs, 0),
    HIER_MODEL_KEY(reduce_gbs, 0), HIER_MODEL_KEY(barrier_us, 0),    HIER_MODEL_KEY(cores, 1),
    HIER_MODEL_KEY(cache_mb, 0),   HIER_MODEL_KEY(cache_copy_gbs, 0), HIER_MODEL_KEY(cache_reduce_gbs, 0),
};

static char *hier_model_trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
    return s;
}

/* One "key = value" line (comments and blanks already gone). */
static hier_status_t hier_model_set(hier_model_machine_t *m, char *key, char *val, int line)
{
    if (!strcmp(key, "name")) {
        snprintf(m->name, sizeof(m->name), "%s", val);
        return HIER_OK;
    }
    if (!strcmp(key, "provider")) {
        if (!*val || strlen(val) >= sizeof(m->provider)) {
            HIER_ERROR("machine description, line %d: provider = \"%s\" is not a provider's name", line, val);
            return HIER_ERR_INVALID_ARG;
        }
        snprintf(m->provider, sizeof(m->provider), "%s", val);
        return HIER_OK;
    }
    for (size_t i = 0; i < sizeof(hier_model_keys) / sizeof(hier_model_keys[0]); i++) {
        if (strcmp(key, hier_model_keys[i].key)) continue;
        char *end;
        errno = 0;
        double v = strtod(val, &end);
        if (errno || end == val || *hier_model_trim(end) || v <= 0 || (hier_model_keys[i].is_int && v != (int)v)) {
            HIER_ERROR("machine description, line %d: %s = \"%s\" is not a positive %s", line, key, val,
                       hier_model_keys[i].is_int ? "integer" : "number");
            return HIER_ERR_INVALID_ARG;
        }
        char *field = (char *)m + hier_model_keys[i].off;
        if (hier_model_keys[i].is_int) *(int *)field = (int)v;
        else *(double *)field = v;
        return HIER_OK;
    }
    HIER_ERROR("machine description, line %d: unknown key \"%s\"", line, key);
    return HIER_ERR_INVALID_ARG;
}

hier_status_t hier_model_machine_parse(const char *text, hier_model_machine_t *m_p)
{
    hier_model_machine_t m = *m_p;
    char *copy = strdup(text);
    if (!copy) return HIER_ERR_NO_MEMORY;
    hier_status_t st = HIER_OK;
    int line = 0;
    for (char *l = copy, *next; l && st == HIER_OK; l = next) {
        line++;
        next = strchr(l, '\n');
        if (next) *next++ = '\0';
        char *hash = strchr(l, '#');
        if (hash) *hash = '\0';
        char *s = hier_model_trim(l), *eq = strchr(s, '=');
        if (!*s) continue;
        if (!eq) {
            HIER_ERROR("machine description, line %d: \"%s\" is not key = value", line, s);
            st = HIER_ERR_INVALID_ARG;
            break;
        }
        *eq = '\0';
        st = hier_model_set(&m, hier_model_trim(s), hier_model_trim(eq + 1), line);
    }
    free(copy);
    if (st == HIER_OK) *m_p = m;
    return st;
}
