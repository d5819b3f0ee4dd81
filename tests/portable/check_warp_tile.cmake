# tests/portable/check_warp_tile.cmake — no portable-agent file but kernels/warp_tile.cuh makes a
# cross-lane operation or lane arithmetic of its own (issue 18: the BI-V100's warps have 64 lanes;
# warp_tile.cuh's 32-lane tiles are right on 32- and 64-lane hardware, a raw full-warp shuffle is not).
#   cmake -DROOT=<include dir> -P check_warp_tile.cmake
# Flags, in code (comments and string literals removed first), as far as a line-by-line grep
# can tell: the warp intrinsics (__shfl*, __ballot*, __any_sync, __all_sync, __activemask,
# __syncwarp, __match_*_sync, __reduce_*_sync), warpSize, full-warp masks (0xffffffff, ~0u) and
# lane math with a literal warp width (/ 32, % 32, & 31, & 0x1f, >> 5, 32 *, * 32).
# FILES is the portable agent: the two kernel headers and everything they include from muh/,
# listed explicitly; the check also fails when a listed file includes a muh/ header that is not
# listed (a new include must be added here, and so gets checked).
# Self-test (tests/portable/CMakeLists.txt): FILES / ENTRY overridden to a fixture and EXPECT=n,
# the number of violations the fixture holds; then the check passes only if it finds exactly n.
cmake_minimum_required(VERSION 3.20)  # IN_LIST and friends in script mode
if(NOT DEFINED ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<include dir> [-DFILES=a;b] [-DEXPECT=n] -P check_warp_tile.cmake")
endif()
set(EXEMPT muh/kernels/warp_tile.cuh)  # the one file that may spell them
if(NOT DEFINED FILES)
  set(FILES
      muh/kernels/variant.cuh            # the attention-variant hooks (muh/variant.hpp)
      muh/kernels/decode_portable.cuh    # the portable decode agent
      muh/kernels/prefill_portable.cuh   # the portable prefill agent
      muh/kernels/decode_common.cuh      # decode args, schedule, stores, the V2 merge kernel
      muh/kernels/decode_variant.cuh     # the general kind's steps around the decode loops
      muh/kernels/prefill_common.cuh     # prefill args, schedule, causal ranges
      muh/kernels/prefill_kv.cuh         # paged prefill K/V rows (the block table)
      muh/kernels/numeric.cuh            # element types and conversions
      muh/kernels/online_softmax.hpp     # the (m, l) state and its merge
      muh/kernels/input_guard.cuh        # the flag stores of the device-side input guard
      muh/kernels/fast_div.hpp           # n / page_size by multiply and shift
      muh/kernels/fp8_widen.cuh          # fp8 KV-cache codes widened (the decode agent's fp8 caches)
      muh/kernels/warp_tile.cuh)         # the tiles (exempt)
endif()
# Headers from outside kernels/ that the agent includes: host-side tables and types, checked for
# the intrinsics, warpSize and masks but not for lane arithmetic (their 32s are tile sizes and
# head-dim multiples, e.g. tuning/policy.hpp's validate()).
if(NOT DEFINED HOST_FILES)
  set(HOST_FILES muh/tuning/policy.hpp muh/dtype.hpp muh/paged_kv.hpp muh/kv_quant.hpp muh/host_device.hpp
                 muh/input_errors.hpp muh/status.hpp muh/variant.hpp)
endif()

set(intrinsic_patterns
    "__shfl" "__ballot" "__any_sync" "__all_sync" "__activemask" "__syncwarp" "__match_[a-z]+_sync"
    "__reduce_[a-z]+_sync" "warpSize" "0[xX][fF][fF][fF][fF][fF][fF][fF][fF]" "~0[uU]")
set(lane_math_patterns
    "[/%][ ]*3[12]([^0-9A-Za-z_.]|$)" "&[ ]*(31|0[xX]1[fF])([^0-9A-Za-z_]|$)" ">>[ ]*5([^0-9A-Za-z_]|$)"
    "(^|[^0-9A-Za-z_.])32[ ]*[*]" "[*][ ]*32([^0-9A-Za-z_.]|$)")

set(found 0)
set(all_files ${FILES} ${HOST_FILES})
foreach(f IN LISTS all_files)
  set(patterns ${intrinsic_patterns})
  if(f IN_LIST FILES)
    list(APPEND patterns ${lane_math_patterns})
  endif()
  set(path ${ROOT}/${f})
  if(NOT EXISTS ${path})
    message("${f}: listed but missing")
    math(EXPR found "${found} + 1")
    continue()
  endif()
  file(READ ${path} text)
  # One list element per line: protect ; [ ] first (CMake's list separators and its brackets).
  string(REPLACE ";" "<sc>" text "${text}")
  string(REPLACE "[" "<lb>" text "${text}")
  string(REPLACE "]" "<rb>" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(n 0)
  foreach(line IN LISTS lines)
    math(EXPR n "${n} + 1")
    # Includes: every muh/ header a listed file includes is listed itself.
    if(line MATCHES "^[ ]*#[ ]*include[ ]*\"(muh/[^\"]+)\"")
      set(inc ${CMAKE_MATCH_1})
      if(NOT inc IN_LIST all_files)
        message("${f}:${n}: includes ${inc}, which the portable-agent list of check_warp_tile.cmake lacks")
        math(EXPR found "${found} + 1")
      endif()
      continue()
    endif()
    if(f IN_LIST EXEMPT)
      continue()
    endif()
    string(REPLACE "<lb>" "[" code "${line}")
    string(REPLACE "<rb>" "]" code "${code}")
    string(REGEX REPLACE "\"([^\"\\\\]|\\\\.)*\"" "\"\"" code "${code}")  # string literals
    string(REGEX REPLACE "'([^'\\\\]|\\\\.)*'" "''" code "${code}")        # character literals
    string(REGEX REPLACE "/[*].*[*]/" "" code "${code}")                   # /* ... */ on one line
    string(REGEX REPLACE "//.*$" "" code "${code}")                        # // comments
    foreach(p IN LISTS patterns)
      if(code MATCHES "${p}")
        string(REGEX REPLACE "<(s(c>?)?)?$" "" hit "${CMAKE_MATCH_0}")  # a cut-off ; placeholder
        string(REPLACE "<sc>" ";" hit "${hit}")
        string(REPLACE "<sc>" ";" shown "${line}")
        string(STRIP "${shown}" shown)
        message("${f}:${n}: '${hit}' outside warp_tile.cuh: ${shown}")
        math(EXPR found "${found} + 1")
        break()
      endif()
    endforeach()
  endforeach()
endforeach()

list(LENGTH all_files nfiles)
if(DEFINED EXPECT)
  if(NOT found EQUAL EXPECT)
    message(FATAL_ERROR "self-test: ${found} violations found, the fixture holds ${EXPECT}")
  endif()
  message("self-test: the ${EXPECT} violations of the fixture found")
elseif(found GREATER 0)
  message(FATAL_ERROR "${found} cross-lane operations or lane arithmetic outside kernels/warp_tile.cuh "
                      "(use its tile32:: primitives)")
else()
  message("portable agent: ${nfiles} files, every cross-lane operation through kernels/warp_tile.cuh")
endif()
