// c_api_prefill.cpp — muh_prefill() of the C ABI (muh.h): raw device pointers → muh::prefill().
#include "c_api_common.hpp"
#include "muh/attention.hpp"

extern "C" int muh_prefill(int dtype, const void* q, const void* k, const void* v, void* out, float* lse,
                           const int* cu_seqlens_q, const int* cu_seqlens_k, int batch, int total_q,
                           int total_k, int max_seqlen_q, int max_seqlen_k, int num_q_heads,
                           int num_kv_heads, int head_dim, float softmax_scale, int causal,
                           int force_target, void* stream) {
  if (dtype < MUH_FP16 || dtype > MUH_FP32)
    return muh::capi::report(muh::invalid_argument("muh_prefill: dtype " + std::to_string(dtype) +
                                                   " is not MUH_FP16, MUH_BF16 or MUH_FP32"));
  muh::PrefillParams p;
  p.dtype = static_cast<muh::DType>(dtype);
  p.q = q;
  p.k = k;
  p.v = v;
  p.out = out;
  p.lse = lse;
  p.cu_seqlens_q = cu_seqlens_q;
  p.cu_seqlens_k = cu_seqlens_k;
  p.batch = batch;
  p.total_q = total_q;
  p.total_k = total_k;
  p.max_seqlen_q = max_seqlen_q;
  p.max_seqlen_k = max_seqlen_k;
  p.num_q_heads = num_q_heads;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = head_dim;
  p.softmax_scale = softmax_scale;
  p.causal = causal != 0;
  muh::RunOptions opt;
  opt.force_target = force_target;
  opt.stream = static_cast<cudaStream_t>(stream);
  return muh::capi::report(muh::prefill(p, opt));
}
