/*
 * version.c - snn_version(): the version compiled into the library (tensor/version.h).
 * Test: tests/test_version.c (ctest -R version).
 */
#include "version.h"

const char *snn_version(void) { return SNN_VERSION_STRING; }
