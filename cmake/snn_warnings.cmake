# Warnings, sanitizers and CPU tuning applied to every snn.c target.
#
# The CPU reference kernels are built without fast-math: reordering float sums would change
# results against the tests' plain loops and between the sparse and dense paths.
set(SNN_C_WARNINGS -Wall -Wextra -Wshadow -Wdouble-promotion -Wfloat-conversion
                   -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter)
if(SNN_WERROR)
  list(APPEND SNN_C_WARNINGS -Werror)
endif()

if(SNN_SANITIZE)
  set(SNN_SANITIZE_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer
                         -fno-sanitize-recover=undefined)
endif()

function(snn_target_warnings target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C>:${SNN_C_WARNINGS}>)
  # errno is never read after a math call; without this GCC keeps scalar sqrtf calls in
  # vectorisable loops (Adam: 3x slower). It changes no result, unlike -ffast-math.
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C>:-fno-math-errno>)
  # Nothing reads the floating-point exception flags either. Without this GCC will not turn a
  # float compare-and-select into branch-free code when the target has no mask registers, so
  # on AVX2 (no AVX-512) the neurons' fused forward loops stayed scalar (the LIF forward was 12%
  # of the main job's time). Like -fno-math-errno it changes no result: it allows no
  # reassociation, only computing both sides of a select.
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C>:-fno-trapping-math>)
  if(SNN_NATIVE)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C>:-march=native>)
  endif()
  if(SNN_COVERAGE)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C>:--coverage>)
    target_link_options(${target} PUBLIC --coverage)
  endif()
  if(SNN_SANITIZE)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C>:${SNN_SANITIZE_FLAGS}>)
    target_link_options(${target} PUBLIC ${SNN_SANITIZE_FLAGS})
  endif()
  if(SNN_CUDA)
    target_compile_definitions(${target} PUBLIC SNN_WITH_CUDA=1)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall --expt-relaxed-constexpr -lineinfo>)
  endif()
endfunction()

# A program under examples/, bench/ or tests/: one .c file, linked against libsnn.
function(snn_program name source)
  add_executable(${name} ${source})
  target_link_libraries(${name} PRIVATE snn m)
  snn_target_warnings(${name})
endfunction()
