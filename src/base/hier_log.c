#include "base/hier_log.h"

#include <stdio.h>

int hier_log_level = 0;

static void hier_log_stderr(const char *line)
{
    fprintf(stderr, "%s\n", line);
}

static hier_log_sink_fn_t hier_log_sink = hier_log_stderr;

void hier_log_set_sink(hier_log_sink_fn_t sink)
{
    hier_log_sink = sink ? sink : hier_log_stderr;
}

void hier_log_emit(int level, const char *fmt, ...)
{
    char line[512];
    int n = snprintf(line, sizeof(line), "coll:hier:%s ", level == HIER_LOG_ERROR ? "error" : "info");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    hier_log_sink(line);
}
