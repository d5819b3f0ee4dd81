// host_device.hpp — MUH_HOST_DEVICE / MUH_FORCEINLINE: code the CPU reference, the CPU tests and
// the GPU kernels share is compiled for both sides under nvcc and as plain C++ elsewhere.
#pragma once

#if defined(__CUDACC__)
#define MUH_HOST_DEVICE __host__ __device__
#define MUH_FORCEINLINE __forceinline__
#else
#define MUH_HOST_DEVICE
#define MUH_FORCEINLINE inline
#endif
