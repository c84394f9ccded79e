# CompileAndRun.cmake: compile one source with explicit flags at test time, link
# it against libmemtier.so, then run it. A compile warning (-Werror) or a
# non-zero exit fails the ctest entry.
#   cmake -DCOMPILER=cc "-DFLAGS=-std=c99|-Werror" -DSOURCE=x.c -DOUTPUT=bin
#         -DINCLUDES=dir1|dir2 -DLIBRARY=/path/libmemtier.so -P CompileAndRun.cmake
foreach(v COMPILER SOURCE OUTPUT LIBRARY)
  if(NOT ${v})
    message(FATAL_ERROR "CompileAndRun.cmake: ${v} is required")
  endif()
endforeach()
string(REPLACE "|" ";" _flags "${FLAGS}")
string(REPLACE "|" ";" _incs "${INCLUDES}")
set(_inc_args)
foreach(d IN LISTS _incs)
  list(APPEND _inc_args "-I${d}")
endforeach()
get_filename_component(_libdir "${LIBRARY}" DIRECTORY)
set(_cmd "${COMPILER}" ${_flags} ${_inc_args} "${SOURCE}" -o "${OUTPUT}"
         "-L${_libdir}" -lmemtier "-Wl,-rpath,${_libdir}")
list(JOIN _cmd " " _shown)
message(STATUS "${_shown}")
execute_process(COMMAND ${_cmd} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "compile failed (${rc}): ${SOURCE}")
endif()
execute_process(COMMAND "${OUTPUT}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${OUTPUT} exited with ${rc}")
endif()
