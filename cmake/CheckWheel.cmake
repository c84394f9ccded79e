# CheckWheel.cmake: `python -m build` gives an sdist and a wheel built from it,
# and `auditwheel show` accepts the wheel with the manylinux tag it carries.
#   cmake -DBASH=<bash> -DSOURCE_DIR=<repo> -DOUT_DIR=<dir> [-DPYTHON=<python>] -P CheckWheel.cmake
# The Python is PYTHON, else the test venv's (scripts/python_env.sh); it needs
# the `build` and `auditwheel` packages (and setuptools and wheel). Building the wheel from the sdist, not from the
# tree, proves the sdist carries every file the build reads.
foreach(v BASH SOURCE_DIR OUT_DIR)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "CheckWheel.cmake: ${v} is required")
  endif()
endforeach()

if(DEFINED PYTHON AND NOT PYTHON STREQUAL "")
  set(PY "${PYTHON}")
else()
  execute_process(COMMAND "${BASH}" "${SOURCE_DIR}/scripts/python_env.sh"
    OUTPUT_VARIABLE _env_out RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "scripts/python_env.sh failed (${_rc}); its messages are above")
  endif()
  string(STRIP "${_env_out}" _env_out)
  string(REGEX REPLACE "^.*\n" "" PY "${_env_out}")
endif()
message(STATUS "python: ${PY}")

foreach(mod build auditwheel setuptools wheel)
  execute_process(COMMAND "${PY}" -c "import ${mod}" RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "the Python package `${mod}` is not installed in the test venv (${PY}); "
                        "add it to python/requirements-test.txt and rerun scripts/python_env.sh "
                        "(package_wheel needs build, auditwheel, setuptools and wheel)")
  endif()
endforeach()

file(REMOVE_RECURSE "${OUT_DIR}")
file(MAKE_DIRECTORY "${OUT_DIR}")
# No isolation: the venv already has setuptools and wheel, so nothing is
# downloaded. Without --sdist/--wheel, build makes the sdist and then the
# wheel from the unpacked sdist.
execute_process(COMMAND "${PY}" -m build --no-isolation --outdir "${OUT_DIR}" "${SOURCE_DIR}"
  RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "python -m build failed (${_rc})")
endif()
file(GLOB _sdists "${OUT_DIR}/*.tar.gz")
file(GLOB _wheels "${OUT_DIR}/*.whl")
list(LENGTH _sdists _ns)
list(LENGTH _wheels _nw)
if(NOT _ns EQUAL 1 OR NOT _nw EQUAL 1)
  message(FATAL_ERROR "want one sdist and one wheel in ${OUT_DIR}, got: ${_sdists} ${_wheels}")
endif()
get_filename_component(_wheel_name "${_wheels}" NAME)
message(STATUS "sdist: ${_sdists}")
message(STATUS "wheel: ${_wheel_name}")
# cp311-abi3 (cp310-cp310 from Python 3.10): the wheel carries the compiled
# fast path memtier._fast; a py3-none wheel would mean its build failed and
# the package fell back to cffi ABI mode only (setup.py then warns).
if(NOT _wheel_name MATCHES "-(cp311-abi3|cp310-cp310)-(manylinux_[0-9]+_[0-9]+_[a-z0-9_]+)\\.whl$")
  message(FATAL_ERROR "${_wheel_name}: want a cp311-abi3-manylinux_<glibc>_<arch> wheel (with the "
                      "compiled memtier._fast; a py3-none wheel means it was not built: see the "
                      "'memtier: warning' line of the build above)")
endif()
set(_tag "${CMAKE_MATCH_2}")

execute_process(COMMAND "${PY}" -m auditwheel show "${_wheels}"
  OUTPUT_VARIABLE _show ERROR_VARIABLE _show_err RESULT_VARIABLE _rc)
message(STATUS "auditwheel show:\n${_show}${_show_err}")
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "auditwheel show failed (${_rc})")
endif()
# auditwheel wraps its sentences; compare with the white space folded.
string(REGEX REPLACE "[ \t\r\n]+" " " _flat "${_show}")
if(NOT _flat MATCHES "consistent with the following platform tag: \"([a-z0-9_]+)\"")
  message(FATAL_ERROR "auditwheel show names no platform tag")
endif()
if(NOT CMAKE_MATCH_1 STREQUAL _tag)
  message(FATAL_ERROR "the wheel is tagged ${_tag} but auditwheel says its glibc floor gives ${CMAKE_MATCH_1}")
endif()
message(STATUS "wheel tag ${_tag} matches auditwheel show")
