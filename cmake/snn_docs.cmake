# The API reference: `cmake --build build --target docs` runs Doxygen (Debian package doxygen)
# over the public headers with docs/Doxyfile, writing build/docs/html/index.html. Warnings
# (an undocumented public function, type or field, a broken reference) are errors, as in CI.
# `make docs` does the same into build-docs/html/, installing Doxygen first when it is missing.
#
# The target exists in every build folder. It looks for Doxygen when it runs, not when CMake
# configures, so installing Doxygen later (SNN_WITH_DOCS=1 tools/install_deps.sh) needs no new
# configure; without Doxygen it fails and says how to install it.
#
# This file is both: included by CMakeLists.txt, it defines the target; run as a script by the
# target (cmake -DSNN_DOXYFILE=... -P cmake/snn_docs.cmake), it finds Doxygen and runs it.
if(CMAKE_SCRIPT_MODE_FILE)
  find_program(snn_doxygen doxygen)
  if(NOT snn_doxygen)
    message(FATAL_ERROR "docs: doxygen not found; install it with "
                        "`SNN_WITH_DOCS=1 tools/install_deps.sh` (Debian: apt-get install "
                        "doxygen), or run `make docs`, which does")
  endif()
  execute_process(COMMAND ${snn_doxygen} ${SNN_DOXYFILE} WORKING_DIRECTORY ${SNN_SOURCE_DIR}
                  RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "docs: doxygen failed (${result}); its warnings above are errors")
  endif()
  message(STATUS "docs: the API reference is in ${SNN_OUTPUT_DIR}/html/index.html")
  return()
endif()

# docs/Doxyfile with the output moved into the build tree
file(WRITE ${PROJECT_BINARY_DIR}/Doxyfile.build
     "@INCLUDE = ${PROJECT_SOURCE_DIR}/docs/Doxyfile\n"
     "OUTPUT_DIRECTORY = ${PROJECT_BINARY_DIR}/docs\n")
add_custom_target(docs
  COMMAND ${CMAKE_COMMAND} -DSNN_DOXYFILE=${PROJECT_BINARY_DIR}/Doxyfile.build
          -DSNN_SOURCE_DIR=${PROJECT_SOURCE_DIR} -DSNN_OUTPUT_DIR=${PROJECT_BINARY_DIR}/docs
          -P ${PROJECT_SOURCE_DIR}/cmake/snn_docs.cmake
  COMMENT "API reference (Doxygen) -> ${PROJECT_BINARY_DIR}/docs/html/index.html"
  VERBATIM)
