// variant_spec.hpp — an attention variant (muh/variant.hpp) of a check case as host values, and
// its device copy: shared by the prefill and decode checks (prefill_check.hpp, decode_case.hpp).
// Host code only (CUDA runtime API).
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "device_buffer.hpp"
#include "muh/variant.hpp"

namespace muh::check {

// A case's attention variant (muh/variant.hpp) as host values: sinks and alibi are per q head,
// or empty (off). host() is the Variant the reference takes (host pointers into this spec).
struct VariantSpec {
  int window_left = -1, window_right = -1;
  float softcap = 0.f;
  std::vector<float> sinks, alibi;
  bool queries_after_keys = false;
  Variant host() const {
    Variant v;
    v.window_left = window_left;
    v.window_right = window_right;
    v.softcap = softcap;
    v.use_sinks = !sinks.empty();
    v.sinks = sinks.empty() ? nullptr : sinks.data();
    v.use_alibi = !alibi.empty();
    v.alibi_slopes = alibi.empty() ? nullptr : alibi.data();
    v.queries_after_keys = queries_after_keys;
    return v;
  }
};

// The device copy of a VariantSpec's arrays and the Variant a call passes (device pointers).
struct DeviceVariant {
  DevBuf sinks, alibi;
  Variant v;
  cudaError_t upload(const VariantSpec& s) {
    v = s.host();
    cudaError_t err = cudaSuccess;
    auto put = [&](DevBuf& b, const std::vector<float>& x, const float** ptr) {
      if (x.empty() || err != cudaSuccess) return;
      if (!b.alloc(x.size() * 4)) {
        err = cudaErrorMemoryAllocation;
        return;
      }
      err = cudaMemcpy(b.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice);
      *ptr = static_cast<const float*>(b.p);
    };
    put(sinks, s.sinks, &v.sinks);
    put(alibi, s.alibi, &v.alibi_slopes);
    return err;
  }
};

}  // namespace muh::check
