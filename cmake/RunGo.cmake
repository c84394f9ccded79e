# RunGo.cmake: run `go <step>` for each |-separated step in STEPS in the current
# directory, stopping at the first failure (used by the go_test ctest entries).
#   cmake -DGO=<go> -DCGO=0|1 [-DCGO_CFLAGS=...] [-DTAGS=a,b]
#         "-DSTEPS=vet ./...|test ./..." -P RunGo.cmake
# TAGS, when not empty, is passed as -tags to every step.
if(NOT GO OR NOT DEFINED STEPS)
  message(FATAL_ERROR "RunGo.cmake: GO and STEPS are required")
endif()
set(ENV{CGO_ENABLED} "${CGO}")
set(ENV{GOFLAGS} "-buildvcs=false")
if(DEFINED CGO_CFLAGS)
  set(ENV{CGO_CFLAGS} "${CGO_CFLAGS}")
endif()
string(REPLACE "|" ";" _steps "${STEPS}")
foreach(step IN LISTS _steps)
  separate_arguments(_args UNIX_COMMAND "${step}")
  if(DEFINED TAGS AND NOT TAGS STREQUAL "")
    list(INSERT _args 1 "-tags=${TAGS}")
  endif()
  list(JOIN _args " " _shown)
  message(STATUS "CGO_ENABLED=${CGO} go ${_shown}")
  execute_process(COMMAND "${GO}" ${_args} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "go ${step} failed (${rc})")
  endif()
endforeach()
