/* hier_log.h: verbosity-gated logging. The check happens before any formatting. */
#ifndef HIER_LOG_H
#define HIER_LOG_H

#include <stdarg.h>

/* Verbosity levels used across the library. */
enum {
    HIER_LOG_ERROR = 0,   /* always printed */
    HIER_LOG_COMM = 1,    /* one line per communicator */
    HIER_LOG_CHOICE = 2,  /* one line per rule a communicator's calls are chosen by */
    HIER_LOG_DEBUG = 5,
    HIER_LOG_CALL = 10,   /* one line per collective call */
};

extern int hier_log_level;

/* Where lines go; the glue points this at opal_output. Default: stderr. */
typedef void (*hier_log_sink_fn_t)(const char *line);
void hier_log_set_sink(hier_log_sink_fn_t sink);

void hier_log_emit(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define HIER_LOG(level, ...)                                              \
    do {                                                                  \
        if ((level) <= hier_log_level) hier_log_emit((level), __VA_ARGS__); \
    } while (0)
#define HIER_ERROR(...) hier_log_emit(HIER_LOG_ERROR, __VA_ARGS__)

/* Print at most once per call site for the process lifetime. */
#define HIER_LOG_ONCE(level, ...)                                  \
    do {                                                           \
        static int hier_log_once_done_;                            \
        if ((level) <= hier_log_level && !hier_log_once_done_) {   \
            hier_log_once_done_ = 1;                               \
            hier_log_emit((level), __VA_ARGS__);                   \
        }                                                          \
    } while (0)

#endif
