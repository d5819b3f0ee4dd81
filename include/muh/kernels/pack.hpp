// kernels/pack.hpp — N elements moved as one memory access (16 bytes for N·sizeof(E) = 16: one
// LDG.128 / STG.128), host and device. The caller guarantees the alignment (N·sizeof(E) bytes).
#pragma once

#include "muh/host_device.hpp"

namespace muh::kernels {

template <class E, int N>
struct alignas(sizeof(E) * N) Pack {
  E v[N];
};

template <class E, int N>
MUH_HOST_DEVICE MUH_FORCEINLINE Pack<E, N> load_pack(const E* p) {
  return *reinterpret_cast<const Pack<E, N>*>(p);
}
template <class E, int N>
MUH_HOST_DEVICE MUH_FORCEINLINE void store_pack(E* p, const Pack<E, N>& x) {
  *reinterpret_cast<Pack<E, N>*>(p) = x;
}

}  // namespace muh::kernels
