# snn_cpu: the library for programs that run on the CPU only, which link no CUDA library and so
# start on a machine without libcudart and libcublas. Installed as snn::snn_cpu (CMake:
# find_package(snn COMPONENTS cpu)) and as snn-cpu.pc (pkg-config --libs snn-cpu); the NIR
# library (HDF5) is not in it.
#
# Why a library of its own. In a CUDA build every folder's static library is compiled with
# SNN_WITH_CUDA: the dispatch (tensor/dispatch.c), the neuron tables, the plan's conv-path rule,
# the inference graphs and the sparse module call into the CUDA objects, which the linker then
# pulls in, and with them cudart and cuBLAS, even for a program that never asks for a GPU. So a
# CUDA build compiles the libraries' C sources a second time, as a CPU build would (no
# SNN_WITH_CUDA, no .cu files, no NCCL), into one archive, libsnn_cpu.a. It costs that second
# compile of the C code and no change to it; the CPU kernels are the same files with the same
# flags, so a program gets the same results through either library.
# In a build without CUDA the folder libraries are already that, and libsnn_cpu.a holds their
# own objects (archived once more, not compiled again). One archive either way: a linker needs
# no order among the folders, and pkg-config, which drops a repeated -l, cannot break one.
set(snn_cpu_folder_libraries)
foreach(lib snn_tensor snn_autograd snn_neurons snn_nn snn_data snn_sparse snn_distributed)
  if(TARGET ${lib})
    get_target_property(type ${lib} TYPE)
    if(type STREQUAL "STATIC_LIBRARY")
      list(APPEND snn_cpu_folder_libraries ${lib})
    endif()
  endif()
endforeach()

# The C sources of a folder library `lib`, compiled again as in a CPU build, as an object
# library lib_cpu_objects with lib's include paths.
function(snn_cpu_objects lib)
  set(SNN_CUDA OFF) # for snn_target_warnings in this function only: no SNN_WITH_CUDA
  get_target_property(sources ${lib} SOURCES)
  list(FILTER sources INCLUDE REGEX "\\.c$")
  list(FILTER sources EXCLUDE REGEX "/comm_nccl\\.c$") # the NCCL process group: CUDA only
  get_target_property(includes ${lib} INCLUDE_DIRECTORIES)
  add_library(${lib}_cpu_objects OBJECT ${sources})
  set_target_properties(${lib}_cpu_objects PROPERTIES INCLUDE_DIRECTORIES "${includes}")
  # their usage requirements (-fopenmp, zlib.h), not their link: the archive below links them
  target_link_libraries(${lib}_cpu_objects PRIVATE OpenMP::OpenMP_C ZLIB::ZLIB Threads::Threads)
  snn_target_warnings(${lib}_cpu_objects)
endfunction()

set(snn_cpu_objects)
foreach(lib ${snn_cpu_folder_libraries})
  if(SNN_CUDA)
    snn_cpu_objects(${lib})
    list(APPEND snn_cpu_objects $<TARGET_OBJECTS:${lib}_cpu_objects>)
  else()
    list(APPEND snn_cpu_objects $<TARGET_OBJECTS:${lib}>)
  endif()
endforeach()
add_library(snn_cpu STATIC ${snn_cpu_objects})
set_target_properties(snn_cpu PROPERTIES LINKER_LANGUAGE C)
target_include_directories(snn_cpu INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                             $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(snn_cpu PUBLIC OpenMP::OpenMP_C ZLIB::ZLIB Threads::Threads m)
if(SNN_SANITIZE)
  target_link_options(snn_cpu PUBLIC ${SNN_SANITIZE_FLAGS})
endif()
if(SNN_COVERAGE)
  target_link_options(snn_cpu PUBLIC --coverage)
endif()
