# run_consumer_test.cmake — installs the muh build into WORK_DIR/prefix, then configures, builds
# and runs the consumer project (CONSUMER_SRC) against that prefix only, and runs the installed
# `muh` program. ctest: install_and_consume.
#   cmake -DMUH_BUILD_DIR=... -DCONSUMER_SRC=... -DWORK_DIR=... -DCUDA_ARCHS=... -P run_consumer_test.cmake
cmake_minimum_required(VERSION 3.25)

foreach(v MUH_BUILD_DIR CONSUMER_SRC WORK_DIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_consumer_test.cmake: -D${v}=... is required")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
set(build ${WORK_DIR}/build)
file(REMOVE_RECURSE ${prefix} ${build})

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${what}: exit ${rc}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (exit ${rc}):\n${out}\n${err}")
  endif()
  set(step_out "${out}" PARENT_SCOPE)
endfunction()

step("install" ${CMAKE_COMMAND} --install ${MUH_BUILD_DIR} --prefix ${prefix})
foreach(f include/muh/config.hpp include/muh/build_config.hpp include/muh/kernels/online_softmax.hpp bin/muh)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
file(GLOB_RECURSE pkg ${prefix}/*/muhConfig.cmake)  # lib/cmake/muh, or lib/<multiarch>/cmake/muh
if(NOT pkg)
  message(FATAL_ERROR "not installed: muhConfig.cmake")
endif()

# Only the prefix: CMAKE_PREFIX_PATH points there and nowhere else, no build-tree paths.
step("configure consumer" ${CMAKE_COMMAND} -S ${CONSUMER_SRC} -B ${build} -DCMAKE_PREFIX_PATH=${prefix}
     -DCMAKE_BUILD_TYPE=Release -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
step("build consumer" ${CMAKE_COMMAND} --build ${build})
step("run consumer" ${build}/app)
message(STATUS "${step_out}")
if(NOT step_out MATCHES "consumer: block 32x32, 4 warps, 1 stage, partition 512, v1_v2_threshold 100001")
  message(FATAL_ERROR "consumer printed something else: ${step_out}")
endif()

# The installed program finds its library (RPATH $ORIGIN/../lib) and runs the default job.
step("run installed muh" ${prefix}/bin/muh config --json)
string(JSON block GET "${step_out}" configs 0 prefill block_m)
if(NOT block EQUAL 32)
  message(FATAL_ERROR "installed muh config --json: block_m ${block}, expected 32")
endif()
message(STATUS "installed muh config: block_m ${block} (ok)")
