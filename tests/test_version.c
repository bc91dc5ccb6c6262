/*
 * test_version.c - the version macros of tensor/version.h agree with each other and with
 * snn_version(), the string compiled into the library; CMakeLists.txt reads the same numbers
 * (PROJECT_VERSION, passed in as SNN_PROJECT_VERSION), so the three cannot drift apart.
 * Run: ctest --test-dir build -R '^version$'
 */
#include <stdio.h>
#include <string.h>

#include "snn.h"
#include "test.h"

static void test_version_agrees(void)
{
    char expect[64];
    snprintf(expect, sizeof expect, "%d.%d.%d", SNN_VERSION_MAJOR, SNN_VERSION_MINOR,
             SNN_VERSION_PATCH);
    CHECK(strcmp(SNN_VERSION_STRING, expect) == 0);
    CHECK(snn_version() != NULL && strcmp(snn_version(), SNN_VERSION_STRING) == 0);
    CHECK(strcmp(SNN_PROJECT_VERSION, SNN_VERSION_STRING) == 0);
    CHECK(SNN_VERSION_NUMBER ==
          SNN_VERSION_MAJOR * 10000 + SNN_VERSION_MINOR * 100 + SNN_VERSION_PATCH);
    CHECK(SNN_VERSION_MINOR < 100 && SNN_VERSION_PATCH < 100);   /* or NUMBER is ambiguous */
}

int main(void)
{
    RUN(test_version_agrees);
    return test_finish();
}
