# Fails if an ISA-specific kernels object (kernels_avx2 / kernels_avx512) defines a symbol with
# vague linkage (weak "W"/"V", GNU unique "u"): the linker keeps one copy of such a symbol for the
# whole program, so an inline function or template instantiated there with -mavx512* could end
# up called from the scalar path on a CPU without AVX-512 (see dataplane/kernels/src/scalar_ops.h).
# Usage: cmake -DNM=<nm> -DOBJECTS=<obj;obj;...> -P check_isa_objects.cmake
set(_checked 0)
foreach(_obj IN LISTS OBJECTS)
  if(NOT _obj MATCHES "kernels_avx")
    continue()
  endif()
  math(EXPR _checked "${_checked} + 1")
  execute_process(COMMAND ${NM} -C ${_obj} OUTPUT_VARIABLE _syms RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${NM} failed on ${_obj}")
  endif()
  string(REGEX MATCHALL "[^\n]* [WVu] [^\n]*" _shared "${_syms}")
  # typeinfo objects are data, the same whatever the ISA flags: merging them is harmless (clang's
  # -fsanitize=function emits them for function types, CMake preset "fuzz").
  list(FILTER _shared EXCLUDE REGEX " typeinfo (name )?for ")
  if(_shared)
    string(REPLACE ";" "\n  " _list "${_shared}")
    message(FATAL_ERROR "${_obj} defines symbols the linker may merge with other objects:\n  ${_list}")
  endif()
endforeach()
if(_checked EQUAL 0)
  message(FATAL_ERROR "no kernels_avx* object among: ${OBJECTS}")
endif()
message(STATUS "${_checked} ISA-specific objects checked")
