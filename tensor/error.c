/*
 * error.c - the thread-local error message: how a function that failed says why. See error.h
 * for the two kinds of trouble and how each is reported; the argument checks that store most
 * of the messages are checks.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

#define SNN_ERROR_CAPACITY 1024

static _Thread_local char error_message[SNN_ERROR_CAPACITY];
static _Thread_local snn_status error_status = SNN_OK;

/* Formats into a local buffer first: a message may quote snn_last_error() to wrap an inner
 * error ("%s: bad metadata: %s", path, snn_last_error()), and vsnprintf from a buffer into
 * itself is undefined (it garbled those messages). */
static void store(snn_status status, const char *fmt, va_list args)
{
    char message[SNN_ERROR_CAPACITY];
    vsnprintf(message, sizeof message, fmt, args);
    memcpy(error_message, message, sizeof message);
    error_status = status;
}

snn_status snn_error(snn_status status, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    store(status, fmt, args);
    va_end(args);
    return status;
}

void *snn_error_null(snn_status status, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    store(status, fmt, args);
    va_end(args);
    return NULL;
}

int snn_error_pending(void) { return error_status != SNN_OK; }
const char *snn_last_error(void) { return error_message; }
snn_status snn_last_status(void) { return error_status; }

void snn_clear_error(void)
{
    error_message[0] = '\0';
    error_status = SNN_OK;
}
