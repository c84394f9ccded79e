# CheckSameLibrary.cmake: the library ctest tests and the one the Python
# package loads are the same build: their GNU build IDs (readelf -n) match.
#   cmake -DREADELF=<readelf> -DCTEST_LIBRARY=<so> -DWHEEL_LIBRARY=<so> -P CheckSameLibrary.cmake
# GoSharedLibrary.cmake links with `-B gobuildid`, so the ID is a hash of the
# build's inputs: two builds of one tree by the memtier_go target agree, and a
# library built another way, or from other sources, does not.
foreach(v READELF CTEST_LIBRARY WHEEL_LIBRARY)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "CheckSameLibrary.cmake: ${v} is required")
  endif()
endforeach()
if(NOT EXISTS "${READELF}")
  message(FATAL_ERROR "readelf (binutils) was not found; it reads the build IDs")
endif()
if(NOT EXISTS "${CTEST_LIBRARY}")
  message(FATAL_ERROR "${CTEST_LIBRARY} does not exist: build the memtier_go target first")
endif()
if(NOT EXISTS "${WHEEL_LIBRARY}")
  message(FATAL_ERROR "${WHEEL_LIBRARY} does not exist: run scripts/python_env.sh "
                      "(pip install -e builds it), or ctest -R 'python_tests|package_same_library'")
endif()

function(_build_id lib out)
  execute_process(COMMAND "${READELF}" -n "${lib}"
    OUTPUT_VARIABLE _notes RESULT_VARIABLE _rc ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "readelf -n ${lib} failed (${_rc}): ${_err}")
  endif()
  if(NOT _notes MATCHES "Build ID: ([0-9a-f]+)")
    message(FATAL_ERROR "${lib} has no GNU build-id note (NT_GNU_BUILD_ID); "
                        "was it linked with -ldflags=-B gobuildid (cmake/GoSharedLibrary.cmake)?")
  endif()
  set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()

_build_id("${CTEST_LIBRARY}" _ctest_id)
_build_id("${WHEEL_LIBRARY}" _wheel_id)
message(STATUS "ctest library  ${CTEST_LIBRARY}: build ID ${_ctest_id}")
message(STATUS "Python library ${WHEEL_LIBRARY}: build ID ${_wheel_id}")
if(NOT _ctest_id STREQUAL _wheel_id)
  message(FATAL_ERROR "the library ctest tests and the one the Python package loads differ "
                      "(build IDs ${_ctest_id} and ${_wheel_id}): built from different sources "
                      "or flags. Rerun scripts/python_env.sh after the build, with no edits in between.")
endif()
message(STATUS "same library: build ID ${_ctest_id}")
