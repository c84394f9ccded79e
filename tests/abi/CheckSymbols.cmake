# CheckSymbols.cmake: every function memtier.h declares (a line
# "MEMTIER_API ... memtier_x(") must be exported by libmemtier.so, every
# memtier_* symbol the library exports must be declared in the header, and
# the library exports nothing else: the linker version script
# cmake/libmemtier.map keeps the cgo bridge (mtgo_*, _cgoexp_*, _cgo_*,
# x_cgo_*, crosscall*), the C helpers (mt_*) and the Go runtime local. The
# dynamic loader needs no exported symbol of its own from a shared library
# (the _init/_fini entry points are DT_INIT/DT_FINI entries, not symbols).
#   cmake -DHEADER=memtier.h -DLIBRARY=libmemtier.so -DNM=nm -P CheckSymbols.cmake
foreach(v HEADER LIBRARY NM)
  if(NOT ${v})
    message(FATAL_ERROR "CheckSymbols.cmake: ${v} is required")
  endif()
endforeach()

file(STRINGS "${HEADER}" _protos REGEX "^[ \t]*MEMTIER_API[^(]*[ *]memtier_[a-z0-9_]+[ \t]*\\(")
set(_declared)
foreach(line IN LISTS _protos)
  string(REGEX MATCH "memtier_[a-z0-9_]+[ \t]*\\(" _m "${line}")
  string(REGEX REPLACE "[ \t]*\\($" "" _m "${_m}")
  list(APPEND _declared "${_m}")
endforeach()
list(REMOVE_DUPLICATES _declared)
list(SORT _declared)
list(LENGTH _declared _nd)
if(_nd EQUAL 0)
  message(FATAL_ERROR "no MEMTIER_API prototypes found in ${HEADER}")
endif()

execute_process(COMMAND "${NM}" -D --defined-only "${LIBRARY}"
  OUTPUT_VARIABLE _nm RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIBRARY} failed (${rc})")
endif()
string(REPLACE "\n" ";" _nm_lines "${_nm}")
set(_exported)
set(_internal)
foreach(line IN LISTS _nm_lines)
  # "<address> <type> <name>[@version]"
  if(line MATCHES "^[0-9a-fA-F]* *[A-Za-z] (memtier_[A-Za-z0-9_]*)(@.*)?$")
    list(APPEND _exported "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^[0-9a-fA-F]* *[A-Za-z] ([^ ]+)$")
    list(APPEND _internal "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(REMOVE_DUPLICATES _exported)
list(SORT _exported)

set(_missing ${_declared})
if(_exported)
  list(REMOVE_ITEM _missing ${_exported})
endif()
set(_extra ${_exported})
if(_extra)
  list(REMOVE_ITEM _extra ${_declared})
endif()

list(LENGTH _exported _ne)
message(STATUS "memtier.h declares ${_nd} functions; libmemtier.so exports ${_ne} memtier_* symbols")
set(_fail FALSE)
if(_missing)
  list(JOIN _missing "\n  " _t)
  message(SEND_ERROR "declared in memtier.h but not exported by libmemtier.so:\n  ${_t}")
  set(_fail TRUE)
endif()
if(_extra)
  list(JOIN _extra "\n  " _t)
  message(SEND_ERROR "exported by libmemtier.so but not declared in memtier.h:\n  ${_t}")
  set(_fail TRUE)
endif()
if(_internal)
  list(REMOVE_DUPLICATES _internal)
  list(LENGTH _internal _ni)
  list(JOIN _internal "\n  " _t)
  message(SEND_ERROR "libmemtier.so exports ${_ni} symbols that are not memtier_* "
    "(is cmake/libmemtier.map passed to the linker?):\n  ${_t}")
  set(_fail TRUE)
endif()
if(_fail)
  message(FATAL_ERROR "header and library exports differ")
endif()
message(STATUS "symbols: header and exports match; nothing but memtier_* is exported")
