// kernels/input_guard.cuh — how a kernel reports a bad device-side input (muh/input_errors.hpp):
// one store of 1 into the word of its kind. No atomics (the words may be mapped pinned host
// memory, where a device atomic is not atomic for the host), and stores of the same value race
// harmlessly. Only ever on the path of a bad input, so a valid call never writes the flags.
#pragma once

#include <cstdint>

#include "muh/input_errors.hpp"

namespace muh::kernels {

__device__ __forceinline__ void flag_input_error(int* words, InputError e) {
  if (words != nullptr) words[static_cast<int>(e)] = 1;
}

// Every kind of `mask` (bit k: InputError k).
__device__ __forceinline__ void flag_input_errors(int* words, std::uint32_t mask) {
  if (words == nullptr) return;
  for (int k = 0; k < kInputErrorKinds; ++k)
    if (mask & (1u << k)) words[k] = 1;
}

}  // namespace muh::kernels
