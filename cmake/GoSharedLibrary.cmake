# GoSharedLibrary.cmake: build a Go package with -buildmode=c-shared and expose it
# as an IMPORTED shared library target.
#
#   memtier_go_shared_library(
#     TARGET   memtier::memtier      # imported target to create
#     NAME     libmemtier.so         # output file (also the SONAME)
#     PACKAGE  ./capi                # Go package, relative to SOURCE_DIR
#     SOURCE_DIR <dir>               # module root where `go build` runs
#     SOURCE_DIRS capi runtime gpu   # folders whose *.go *.c *.h are DEPENDS
#     INCLUDE_DIR <dir>              # hand-written public headers
#     TAGS tag1 tag2 ...)            # Go build tags (may be empty)
#
# The custom command writes exactly the OUTPUT it declares (the .so) plus the
# cgo-generated header as a BYPRODUCT. It reruns only when a Go/C source, go.mod,
# go.sum or the public header changed; Go's own build cache keeps reruns cheap.
# The generated header is never installed: include/memtier.h is the contract.
#
# This is the one place the library's Go invocation and link flags live: ctest
# links against this output, and setup.py builds the wheel's copy by running
# this target (memtier_go) in its own build directory. `-B gobuildid` writes a
# GNU build-id note derived from Go's build ID, which hashes the inputs (not
# the output path), so two builds of the same sources with the same flags carry
# the same ID: the package_same_library test compares them. The linker version
# script cmake/libmemtier.map exports only the memtier_* API.

function(memtier_go_shared_library)
  cmake_parse_arguments(ARG "" "TARGET;NAME;PACKAGE;SOURCE_DIR;INCLUDE_DIR" "SOURCE_DIRS;TAGS" ${ARGN})
  foreach(req TARGET NAME PACKAGE SOURCE_DIR INCLUDE_DIR)
    if(NOT ARG_${req})
      message(FATAL_ERROR "memtier_go_shared_library: ${req} is required")
    endif()
  endforeach()

  find_program(GO_EXECUTABLE NAMES go
    HINTS ENV GOROOT PATH_SUFFIXES bin
    DOC "Go toolchain (go build -buildmode=c-shared builds libmemtier.so)")
  if(NOT GO_EXECUTABLE)
    message(FATAL_ERROR
      "Go was not found: MemTier's library is written in Go and needs the `go` "
      "command (Go >= 1.26, with cgo and a C compiler). Install Go and put it on "
      "PATH, or pass -DGO_EXECUTABLE=/path/to/go.")
  endif()
  execute_process(COMMAND "${GO_EXECUTABLE}" version
    OUTPUT_VARIABLE _go_version OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _go_rc)
  if(NOT _go_rc EQUAL 0)
    message(FATAL_ERROR "`${GO_EXECUTABLE} version` failed: is this a working Go install?")
  endif()
  message(STATUS "Go: ${_go_version} (${GO_EXECUTABLE})")

  set(_deps)
  foreach(dir IN LISTS ARG_SOURCE_DIRS)
    file(GLOB_RECURSE _found CONFIGURE_DEPENDS
      "${ARG_SOURCE_DIR}/${dir}/*.go"
      "${ARG_SOURCE_DIR}/${dir}/*.c"
      "${ARG_SOURCE_DIR}/${dir}/*.h")
    list(APPEND _deps ${_found})
  endforeach()
  foreach(f go.mod go.sum)
    if(EXISTS "${ARG_SOURCE_DIR}/${f}")
      list(APPEND _deps "${ARG_SOURCE_DIR}/${f}")
    endif()
  endforeach()
  file(GLOB _headers CONFIGURE_DEPENDS "${ARG_INCLUDE_DIR}/*.h")
  list(APPEND _deps ${_headers})

  set(_out "${CMAKE_BINARY_DIR}/${ARG_NAME}")
  string(REGEX REPLACE "\\.so$" ".h" _cgo_header "${_out}")
  list(JOIN ARG_TAGS "," _tags)

  # cgo's default CGO_CFLAGS is "-O2 -g"; keep it and add the public headers.
  set(_cgo_cflags "-O2 -g -I${ARG_INCLUDE_DIR}")
  if(DEFINED ENV{CGO_CFLAGS} AND NOT "$ENV{CGO_CFLAGS}" STREQUAL "")
    set(_cgo_cflags "$ENV{CGO_CFLAGS} -I${ARG_INCLUDE_DIR}")
  endif()

  # The version script exports only the public memtier_* API and keeps the
  # rest local (cmake/libmemtier.map says why). One -Wl argument, comma
  # separated, so -extldflags needs no quoting; the path must therefore hold
  # no comma or space.
  set(_map "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/libmemtier.map")
  if(_map MATCHES "[, ]")
    message(FATAL_ERROR "memtier_go_shared_library: the version script path '${_map}' "
      "holds a comma or a space, which -extldflags cannot carry unquoted")
  endif()
  list(APPEND _deps "${_map}")
  set(_ldflags "-B gobuildid -extldflags=-Wl,-soname,${ARG_NAME},--version-script,${_map}")

  # Through RunGo.cmake so the public header's hash keys Go's build cache
  # (HEADER there says why). STEPS must not contain spaces inside an argument
  # or '|'; LDFLAGS is passed whole.
  add_custom_command(
    OUTPUT "${_out}"
    BYPRODUCTS "${_cgo_header}"
    # go build skips the link when the output's build ID matches, and that ID
    # does not hash the version script's contents: remove the old output so
    # an edit of libmemtier.map relinks.
    COMMAND "${CMAKE_COMMAND}" -E rm -f "${_out}"
    COMMAND "${CMAKE_COMMAND}"
            "-DGO=${GO_EXECUTABLE}"
            -DCGO=1
            "-DCGO_CFLAGS=${_cgo_cflags}"
            "-DTAGS=${_tags}"
            "-DHEADER=${ARG_INCLUDE_DIR}/memtier.h"
            "-DLDFLAGS=${_ldflags}"
            "-DSTEPS=build -buildmode=c-shared -trimpath -o ${_out} ${ARG_PACKAGE}"
            -P "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/RunGo.cmake"
    WORKING_DIRECTORY "${ARG_SOURCE_DIR}"
    DEPENDS ${_deps}
    COMMENT "go build -buildmode=c-shared ${ARG_PACKAGE} -> ${ARG_NAME} (tags: ${_tags})"
    VERBATIM)

  add_custom_target(memtier_go ALL DEPENDS "${_out}")

  add_library(${ARG_TARGET} SHARED IMPORTED GLOBAL)
  set_target_properties(${ARG_TARGET} PROPERTIES
    IMPORTED_LOCATION "${_out}"
    IMPORTED_SONAME "${ARG_NAME}"
    INTERFACE_INCLUDE_DIRECTORIES "${ARG_INCLUDE_DIR}")
  add_dependencies(${ARG_TARGET} memtier_go)

  set(MEMTIER_GO_TARGET memtier_go PARENT_SCOPE)
  set(MEMTIER_GO_LIBRARY "${_out}" PARENT_SCOPE)
  set(MEMTIER_CGO_HEADER "${_cgo_header}" PARENT_SCOPE)
  set(GO_EXECUTABLE "${GO_EXECUTABLE}" PARENT_SCOPE)
endfunction()
