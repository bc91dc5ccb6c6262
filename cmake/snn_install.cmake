# What `cmake --install <build>` puts where (GNUInstallDirs: Debian's layout under /usr, with the
# multiarch libdir), and the package files that let other projects build against snn.c:
#
#   include/snn/snn.h, include/snn/<folder>/<name>.h   the public headers, laid out as in the tree
#                                                         (include/snn/nir/nir.h with HDF5)
#   <libdir>/libsnn_{tensor,autograd,neurons,nn,data,sparse,distributed}.a  one per folder
#                                                         (libsnn_tensor.a holds kernels/ too)
#   <libdir>/libsnn_nir.a                                 NIR export / import, with HDF5
#   <libdir>/libsnn_cpu.a                                 the C code without CUDA or NIR, one
#                                                         archive (cmake/snn_cpu.cmake)
#   <libdir>/libsnn.so.X.Y.Z, .so.X.Y, .so                with -DSNN_SHARED=ON
#   <libdir>/cmake/snn/snn{Config,ConfigVersion,Targets}.cmake    find_package(snn CONFIG)
#   <libdir>/pkgconfig/snn.pc (and snn-shared.pc)         pkg-config --cflags --libs snn
#   <libdir>/pkgconfig/snn-cpu.pc                         the same for the CPU only: snn_cpu
#   bin/snn-train, snn-eval, snn-sparse, snn-make-cifar, snn-make-nmnist (and snn-export-nir
#                                                         with HDF5): the programs (examples/)
#   share/doc/snn/README.md, CHANGELOG.md, docs/          the docs (and api/ when built)
#
# Headers: a program includes <snn/snn.h> (or one module, <snn/nn/nn.h>) with only
# <prefix>/include on its include path. The public headers include each other by relative paths
# ("../tensor/tensor.h"), which resolve the same way in the source tree and in include/snn/, so
# no folder name of snn.c (tensor/, nn/, data/) lands on a user's include path.
#
# Targets exported under the namespace snn::
#   snn::snn          everything built, static (what a program links: target_link_libraries(app
#                     snn::snn)); with HDF5 that includes snn::snn_nir, so <snn/nir/nir.h> works
#   snn::snn_tensor, snn::snn_autograd, ...   the per-folder static libraries (snn::snn_nir too)
#   snn::snn_shared   libsnn.so, when built with SNN_SHARED (with the NIR objects, given HDF5)
#   snn::snn_cpu      for programs that run on the CPU only: no CUDA library on their link
#                     line (find_package(snn COMPONENTS cpu) needs no CUDA Toolkit), no NIR
# The static libraries carry their dependencies (OpenMP, zlib, threads, libm; CUDA::cudart and
# CUDA::cublas in a CUDA build; libnccl, by its path, with SNN_NCCL; HDF5::HDF5 for snn_nir),
# which snnConfig.cmake finds again with find_dependency. HDF5's own dependencies (curl,
# crypto, szip, ...) are Libs.private in snn.pc: a shared libhdf5 brings them itself.
#
# NIR is in snn::snn (and in snn.pc) rather than a separate opt-in target because snn::snn and
# snn.pc mean "the library as it was built": a program then needs no second name to call
# snn_nir_write, and `#ifdef SNN_WITH_NIR` (defined by both) tells it whether it can. The price
# is that HDF5 is on every link line of a build made with it.
include(CMakePackageConfigHelpers)
include(${CMAKE_CURRENT_LIST_DIR}/snn_cpu.cmake)  # snn_cpu

# snn_data_hdf5: the SHD / SSC reader (data/CMakeLists.txt), with HDF5 on its link line when
# built with it: the same condition as snn_nir, so snn.pc and snnConfig.cmake bring HDF5 then.
set(snn_libraries snn_tensor snn_autograd snn_neurons snn_nn snn_data snn_data_hdf5 snn_sparse
    snn_distributed)
# link order for a plain linker command line: users before what they use
set(snn_link_order snn_distributed snn_sparse snn_nn snn_neurons snn_autograd snn_data_hdf5
    snn_data snn_tensor)
if(TARGET snn_nir)   # built only with HDF5 (nir/CMakeLists.txt)
  list(APPEND snn_libraries snn_nir)
  list(PREPEND snn_link_order snn_nir)
endif()

# ---- the optional shared library: the static libraries' objects (built with -fPIC) in one .so
if(SNN_SHARED)
  set(objects)
  foreach(lib ${snn_libraries})
    list(APPEND objects $<TARGET_OBJECTS:${lib}>)
  endforeach()
  add_library(snn_shared SHARED ${objects})
  # While MAJOR is 0 every MINOR release may break the ABI, so the soname carries both numbers.
  set_target_properties(snn_shared PROPERTIES OUTPUT_NAME snn LINKER_LANGUAGE C
                        VERSION ${PROJECT_VERSION}
                        SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  target_include_directories(snn_shared PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                               $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(snn_shared PRIVATE OpenMP::OpenMP_C ZLIB::ZLIB Threads::Threads m)
  if(SNN_CUDA)
    target_link_libraries(snn_shared PRIVATE CUDA::cudart CUDA::cublas)
    target_compile_definitions(snn_shared INTERFACE SNN_WITH_CUDA=1)
  endif()
  if(SNN_NCCL)
    target_link_libraries(snn_shared PRIVATE ${SNN_NCCL_LIBRARY})
  endif()
  if(TARGET snn_nir)
    target_link_libraries(snn_shared PRIVATE HDF5::HDF5)
    target_compile_definitions(snn_shared INTERFACE SNN_WITH_NIR=1)
  endif()
  if(SNN_SANITIZE)
    target_link_options(snn_shared PUBLIC ${SNN_SANITIZE_FLAGS})
  endif()
  # every symbol resolved at link time: a missing dependency fails here, not in a user's program
  target_link_options(snn_shared PRIVATE "LINKER:--no-undefined")
  set(snn_shared_target snn_shared)
endif()

# ---- headers
set(snn_public_headers
    snn.h
    tensor/tensor.h tensor/version.h tensor/cuda_options.h
    kernels/kernels.h            # internal, but sparse/sparse.h needs its snn_conv2d_dims
    tensor/hash.h                # internal, included by kernels/kernels.h
    autograd/autograd.h
    neurons/neurons.h
    nn/nn.h nn/module.h nn/models.h nn/plan.h nn/optim.h nn/checkpoint.h nn/synops.h
    data/data.h
    sparse/sparse.h
    distributed/dist.h)
if(TARGET snn_nir)
  list(APPEND snn_public_headers nir/nir.h)
endif()
foreach(header ${snn_public_headers})
  get_filename_component(dir ${header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/snn/${dir})
endforeach()

# ---- libraries and the CMake package
install(TARGETS ${snn_libraries} snn snn_cpu ${snn_shared_target}
        EXPORT snnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set(snn_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/snn)
if(TARGET snn_nir)   # snnConfig.cmake's snn_NIR
  set(snn_NIR ON)
else()
  set(snn_NIR OFF)
endif()
install(EXPORT snnTargets NAMESPACE snn:: DESTINATION ${snn_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/snnConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/snnConfig.cmake
                              INSTALL_DESTINATION ${snn_cmake_dir})
# 0.x: a user asking for 0.1 gets 0.1.z only (the ABI may change with every MINOR release)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/snnConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/snnConfig.cmake ${PROJECT_BINARY_DIR}/snnConfigVersion.cmake
        DESTINATION ${snn_cmake_dir})

# ---- pkg-config. The static libraries need their dependencies on every link line, so they
# are in Libs (not Libs.private); what those dependencies need in turn only when they are
# static too (a shared libhdf5 brings its curl, crypto, szip, ... itself) is Libs.private
# (pkg-config --static). prefix is filled in at install time, so that
# `cmake --install build --prefix DIR` gives a snn.pc that points at DIR.
set(pc_cflags "")
set(pc_cpu_deps "${OpenMP_C_FLAGS} -lz ${CMAKE_THREAD_LIBS_INIT} -lm") # snn-cpu.pc's
set(pc_deps "${pc_cpu_deps}")
set(pc_private "")
if(SNN_CUDA)
  set(pc_cflags " -DSNN_WITH_CUDA=1")
  set(pc_deps "${pc_deps} -L${CUDAToolkit_LIBRARY_DIR} -lcublas -lcudart -lstdc++")
endif()
if(SNN_NCCL)
  get_filename_component(pc_nccl_dir ${SNN_NCCL_LIBRARY} DIRECTORY)
  set(pc_deps "${pc_deps} -L${pc_nccl_dir} -lnccl")
endif()
if(TARGET snn_nir)
  # FindHDF5 gives full paths (Debian: .../hdf5/serial/libhdf5.so plus what h5cc links);
  # pkg-config users get them as -L<dir> -l<name>, each directory once per field. libhdf5
  # itself (hdf5, hdf5_serial, hdf5_hl) goes to Libs; the rest to Libs.private when libhdf5
  # is a shared library.
  string(APPEND pc_cflags " -DSNN_WITH_NIR=1")
  set(pc_hdf5_shared OFF)
  foreach(lib ${HDF5_LIBRARIES})
    if(lib MATCHES "/libhdf5[^/]*\\.so")
      set(pc_hdf5_shared ON)
    endif()
  endforeach()
  set(pc_deps_dirs)
  set(pc_private_dirs)
  foreach(lib ${HDF5_LIBRARIES})
    set(dir "")
    if(lib MATCHES "^(.*)/lib([^/]+)\\.(so|a)(\\.[0-9.]+)?$")
      set(dir ${CMAKE_MATCH_1})
      set(name ${CMAKE_MATCH_2})
      set(flag "-l${name}")
    elseif(lib MATCHES "^-")
      set(name "")
      set(flag "${lib}")
    else()
      set(name ${lib})
      set(flag "-l${lib}")
    endif()
    if(name MATCHES "^hdf5" OR NOT pc_hdf5_shared)
      set(field pc_deps)
    else()
      set(field pc_private)
    endif()
    if(dir AND NOT dir IN_LIST ${field}_dirs)
      list(APPEND ${field}_dirs ${dir})
      string(APPEND ${field} " -L${dir}")
    endif()
    string(APPEND ${field} " ${flag}")
  endforeach()
endif()
foreach(field pc_deps pc_private pc_cpu_deps)
  string(REPLACE ";" " " ${field} "${${field}}")
  string(REGEX REPLACE "  +" " " ${field} "${${field}}")
  string(STRIP "${${field}}" ${field})
endforeach()
set(pc_static_libs "")
foreach(lib ${snn_link_order})
  string(APPEND pc_static_libs " -l${lib}")
endforeach()
set(pc_cpu_libs " -lsnn_cpu") # snn-cpu.pc's: one archive (cmake/snn_cpu.cmake)
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(pc_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(pc_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
set(prefix "@prefix@")   # kept as a placeholder until install time
set(pc_files snn snn-cpu)
if(SNN_SHARED)
  list(APPEND pc_files snn-shared)
endif()
foreach(pc ${pc_files})
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc.in @ONLY)
  install(CODE "set(prefix \"\${CMAKE_INSTALL_PREFIX}\")
    configure_file(\"${PROJECT_BINARY_DIR}/${pc}.pc.in\" \"${PROJECT_BINARY_DIR}/${pc}.pc\" @ONLY)")
  install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
unset(prefix)

# ---- docs: README's links into docs/ keep working from share/doc/snn/
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/CHANGELOG.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs
        PATTERN Doxyfile EXCLUDE)
# the API reference, when `cmake --build build --target docs` made it (cmake/snn_docs.cmake)
install(DIRECTORY ${PROJECT_BINARY_DIR}/docs/html/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/api
        OPTIONAL)
