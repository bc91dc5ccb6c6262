/**
 * @file
 * version.h - which snn.c this is: the version the headers were installed with (macros, for
 * the preprocessor) and snn_version() (the version of the library actually linked).
 *
 * Versions follow semantic versioning, MAJOR.MINOR.PATCH. While MAJOR is 0 the API and ABI
 * may change with any MINOR release; that is why the shared library's soname carries both
 * numbers (libsnn.so.0.1) and why the CMake package accepts only the same MAJOR.MINOR.
 * CMakeLists.txt reads the three numbers from this file: bump them here, and add the release to
 * CHANGELOG.md.
 *
 *     #include <snn/snn.h>
 *     #if SNN_VERSION_NUMBER < 100   // older than 0.1.0
 *     #error "needs snn.c 0.1 or later"
 *     #endif
 *     if (strcmp(snn_version(), SNN_VERSION_STRING) != 0)
 *         fprintf(stderr, "headers %s but library %s\n", SNN_VERSION_STRING, snn_version());
 */
#ifndef SNN_VERSION_H
#define SNN_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

/** Incremented for changes that break the API or ABI (from 1.0 on). */
#define SNN_VERSION_MAJOR 0
/** Incremented for new features; while MAJOR is 0, also for breaking changes. */
#define SNN_VERSION_MINOR 1
/** Incremented for fixes that change no interface. */
#define SNN_VERSION_PATCH 0

/** Turns a macro's value into a string literal (helper of SNN_VERSION_STRING). */
#define SNN_VERSION_STR_(x) #x
/** Expands its argument, then makes it a string literal (helper of SNN_VERSION_STRING). */
#define SNN_VERSION_XSTR_(x) SNN_VERSION_STR_(x)

/** "MAJOR.MINOR.PATCH" of these headers, e.g. "0.1.0". */
#define SNN_VERSION_STRING                                                              \
    SNN_VERSION_XSTR_(SNN_VERSION_MAJOR) "." SNN_VERSION_XSTR_(SNN_VERSION_MINOR) "." \
    SNN_VERSION_XSTR_(SNN_VERSION_PATCH)

/** One number for `#if` comparisons: MAJOR * 10000 + MINOR * 100 + PATCH (0.1.0 is 100). */
#define SNN_VERSION_NUMBER (SNN_VERSION_MAJOR * 10000 + SNN_VERSION_MINOR * 100 + SNN_VERSION_PATCH)

/**
 * The version of the library linked into the program, "MAJOR.MINOR.PATCH": a static string,
 * never NULL, not to be freed. It differs from SNN_VERSION_STRING only when a program was built
 * against other headers than the library it runs with.
 */
const char *snn_version(void);

#ifdef __cplusplus
}
#endif

#endif /* SNN_VERSION_H */
