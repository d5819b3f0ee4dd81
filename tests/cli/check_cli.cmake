# check_cli.cmake — runs the `muh` program once and checks what it did (one ctest case).
#
#   cmake -DMUH=<exe> -DARGS=a@@b@@c [-DRC=2] [-DSTDERR_LINES=1] [-DSTDERR=re1@@re2]
#         [-DSTDOUT=re1@@re2] [-DJSON=configs/0/prefill/block_m=32@@model/name~^qwen]
#         [-DALLOW_NO_DEVICE=ON] -P check_cli.cmake
#
# Lists are "@@"-separated (regexes may hold ';'). JSON checks read stdout as JSON: a '/'-path,
# then '=' (exact value; booleans read ON/OFF) or '~' (regex); '!path': the path must not exist.
# RC defaults to 0.
# A bad input must exit 2 with exactly one line on stderr, "muh: error: ...": RC=2 STDERR_LINES=1.
# ALLOW_NO_DEVICE: on a machine without a GPU the command may instead exit 2 with one line that
# says "no CUDA device"; with a GPU it must pass every other check.
cmake_minimum_required(VERSION 3.25)

function(split out in)
  string(REPLACE "@@" ";" l "${in}")
  set(${out} "${l}" PARENT_SCOPE)
endfunction()

split(args "${ARGS}")
execute_process(COMMAND ${MUH} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REPLACE ";" " " shown "${args}")
message(STATUS "muh ${shown}\n--- exit ${rc}; stdout:\n${out}--- stderr:\n${err}---")

if(NOT DEFINED RC)
  set(RC 0)
endif()

string(REGEX MATCHALL "\n" nl "${err}")
list(LENGTH nl err_lines)
string(LENGTH "${err}" err_len)

if(ALLOW_NO_DEVICE AND rc EQUAL 2)
  if(NOT err_lines EQUAL 1 OR NOT err MATCHES "^muh: error: .*no CUDA device")
    message(FATAL_ERROR "without a device: expected one stderr line saying 'no CUDA device', got ${err_lines} lines")
  endif()
  message(STATUS "no CUDA device: the clear one-line error was checked")
  return()
endif()

if(NOT rc EQUAL RC)
  message(FATAL_ERROR "expected exit code ${RC}, got ${rc}")
endif()
if(DEFINED STDERR_LINES)
  if(NOT err_lines EQUAL STDERR_LINES)
    message(FATAL_ERROR "expected ${STDERR_LINES} line(s) on stderr, got ${err_lines}")
  endif()
  if(STDERR_LINES EQUAL 1 AND NOT err MATCHES "^muh: error: [^\n]+\n$")
    message(FATAL_ERROR "stderr is not one 'muh: error: ...' line")
  endif()
  if(STDERR_LINES EQUAL 0 AND NOT err_len EQUAL 0)
    message(FATAL_ERROR "expected nothing on stderr")
  endif()
endif()

split(res "${STDERR}")
foreach(re IN LISTS res)
  if(NOT err MATCHES "${re}")
    message(FATAL_ERROR "stderr does not match: ${re}")
  endif()
endforeach()
split(res "${STDOUT}")
foreach(re IN LISTS res)
  if(NOT out MATCHES "${re}")
    message(FATAL_ERROR "stdout does not match: ${re}")
  endif()
endforeach()

split(checks "${JSON}")
foreach(c IN LISTS checks)
  if(c MATCHES "^!(.+)$")  # the path must not exist
    string(REPLACE "/" ";" keys "${CMAKE_MATCH_1}")
    string(JSON got ERROR_VARIABLE jerr GET "${out}" ${keys})
    if(NOT jerr)
      message(FATAL_ERROR "JSON ${CMAKE_MATCH_1} exists (= '${got}'), expected none")
    endif()
    continue()
  endif()
  if(c MATCHES "^([^=~]+)([=~])(.*)$")
    set(path "${CMAKE_MATCH_1}")
    set(op "${CMAKE_MATCH_2}")
    set(want "${CMAKE_MATCH_3}")
  else()
    message(FATAL_ERROR "bad JSON check '${c}'")
  endif()
  string(REPLACE "/" ";" keys "${path}")
  string(JSON got ERROR_VARIABLE jerr GET "${out}" ${keys})
  if(jerr)
    message(FATAL_ERROR "JSON ${path}: ${jerr}")
  endif()
  if(op STREQUAL "=" AND NOT got STREQUAL want)
    message(FATAL_ERROR "JSON ${path} = '${got}', expected '${want}'")
  elseif(op STREQUAL "~" AND NOT got MATCHES "${want}")
    message(FATAL_ERROR "JSON ${path} = '${got}', expected to match '${want}'")
  endif()
  message(STATUS "JSON ${path} = ${got} (ok)")
endforeach()
