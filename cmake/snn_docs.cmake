# The API reference: `cmake --build build --target docs` runs Doxygen (Debian package doxygen)
# over the public headers with docs/Doxyfile, writing build/docs/html/index.html. Warnings
# (an undocumented public function, type or field, a broken reference) are errors, as in CI.
# The target exists only when Doxygen is found; `make docs` and CI run docs/Doxyfile directly.
find_package(Doxygen QUIET)
if(DOXYGEN_FOUND)
  # docs/Doxyfile with the output moved into the build tree
  file(WRITE ${PROJECT_BINARY_DIR}/Doxyfile.build
       "@INCLUDE = ${PROJECT_SOURCE_DIR}/docs/Doxyfile\n"
       "OUTPUT_DIRECTORY = ${PROJECT_BINARY_DIR}/docs\n")
  add_custom_target(docs
    COMMAND ${DOXYGEN_EXECUTABLE} ${PROJECT_BINARY_DIR}/Doxyfile.build
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    COMMENT "API reference (Doxygen) -> ${PROJECT_BINARY_DIR}/docs/html/index.html"
    VERBATIM)
endif()
