# RunGo.cmake: run `go <step>` for each |-separated step in STEPS in the current
# directory, stopping at the first failure (used by the go_test ctest entries).
#   cmake -DGO=<go> -DCGO=0|1 [-DCGO_CFLAGS=...] [-DTAGS=a,b] [-DHEADER=<file>]
#         [-DLDFLAGS=<linker flags>] "-DSTEPS=vet ./...|test ./..." -P RunGo.cmake
# TAGS, when not empty, is passed as -tags to every step.
# LDFLAGS, when not empty, is passed as one -ldflags argument to every step
# (it may contain spaces, which STEPS may not).
# HEADER: a C header that cgo code includes from outside its package folder.
# Go's build cache does not hash such headers, so after a header edit it would
# reuse objects compiled against the old one (a stale version string, old
# struct layouts). Its SHA-256 goes into CGO_CFLAGS as a define, which is part
# of the cache key.
if(NOT GO OR NOT DEFINED STEPS)
  message(FATAL_ERROR "RunGo.cmake: GO and STEPS are required")
endif()
set(ENV{CGO_ENABLED} "${CGO}")
set(ENV{GOFLAGS} "-buildvcs=false")
if(DEFINED HEADER AND NOT HEADER STREQUAL "")
  file(SHA256 "${HEADER}" _hash)
  string(SUBSTRING "${_hash}" 0 16 _hash)
  if(NOT DEFINED CGO_CFLAGS)
    set(CGO_CFLAGS "-O2 -g")
  endif()
  set(CGO_CFLAGS "${CGO_CFLAGS} -DMEMTIER_H_SHA256_16=0x${_hash}")
endif()
if(DEFINED CGO_CFLAGS)
  set(ENV{CGO_CFLAGS} "${CGO_CFLAGS}")
endif()
string(REPLACE "|" ";" _steps "${STEPS}")
foreach(step IN LISTS _steps)
  separate_arguments(_args UNIX_COMMAND "${step}")
  if(DEFINED TAGS AND NOT TAGS STREQUAL "")
    list(INSERT _args 1 "-tags=${TAGS}")
  endif()
  if(DEFINED LDFLAGS AND NOT LDFLAGS STREQUAL "")
    list(INSERT _args 1 "-ldflags=${LDFLAGS}")
  endif()
  list(JOIN _args " " _shown)
  message(STATUS "CGO_ENABLED=${CGO} go ${_shown}")
  execute_process(COMMAND "${GO}" ${_args} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "go ${step} failed (${rc})")
  endif()
endforeach()
