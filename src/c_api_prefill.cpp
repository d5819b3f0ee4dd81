// c_api_prefill.cpp — muh_prefill() and muh_prefill_workspace_size() of the C ABI (muh.h): raw
// device pointers → muh::prefill().
#include "c_api_common.hpp"
#include "muh/attention.hpp"

namespace {

muh::Status check_dtype(int dtype, const char* fn) {
  if (dtype < MUH_FP16 || dtype > MUH_FP32)
    return muh::invalid_argument(std::string(fn) + ": dtype " + std::to_string(dtype) +
                                 " is not MUH_FP16, MUH_BF16 or MUH_FP32");
  return muh::Status::Ok();
}

muh::PrefillParams shape(int dtype, int batch, int total_q, int total_k, int max_seqlen_q, int max_seqlen_k,
                         int num_q_heads, int num_kv_heads, int head_dim, int causal) {
  muh::PrefillParams p;
  p.dtype = static_cast<muh::DType>(dtype);
  p.batch = batch;
  p.total_q = total_q;
  p.total_k = total_k;
  p.max_seqlen_q = max_seqlen_q;
  p.max_seqlen_k = max_seqlen_k;
  p.num_q_heads = num_q_heads;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = head_dim;
  p.causal = causal != 0;
  return p;
}

}  // namespace

extern "C" int muh_prefill(int dtype, const void* q, const void* k, const void* v, void* out, float* lse,
                           const int* cu_seqlens_q, const int* cu_seqlens_k, int batch, int total_q,
                           int total_k, int max_seqlen_q, int max_seqlen_k, int num_q_heads,
                           int num_kv_heads, int head_dim, float softmax_scale, int causal,
                           void* workspace, size_t workspace_bytes, int force_target, void* stream) {
  if (muh::Status s = check_dtype(dtype, "muh_prefill"); !s.ok()) return muh::capi::report(s);
  muh::PrefillParams p = shape(dtype, batch, total_q, total_k, max_seqlen_q, max_seqlen_k, num_q_heads,
                               num_kv_heads, head_dim, causal);
  p.q = q;
  p.k = k;
  p.v = v;
  p.out = out;
  p.lse = lse;
  p.cu_seqlens_q = cu_seqlens_q;
  p.cu_seqlens_k = cu_seqlens_k;
  p.softmax_scale = softmax_scale;
  p.workspace = workspace;
  p.workspace_bytes = workspace_bytes;
  muh::RunOptions opt;
  opt.force_target = force_target;
  opt.stream = static_cast<cudaStream_t>(stream);
  return muh::capi::report(muh::prefill(p, opt));
}

extern "C" int muh_prefill_workspace_size(int dtype, int batch, int total_q, int total_k, int max_seqlen_q,
                                          int max_seqlen_k, int num_q_heads, int num_kv_heads, int head_dim,
                                          int causal, int force_target, size_t* workspace_bytes) {
  if (muh::Status s = check_dtype(dtype, "muh_prefill_workspace_size"); !s.ok()) return muh::capi::report(s);
  muh::RunOptions opt;
  opt.force_target = force_target;
  return muh::capi::report(muh::prefill_workspace_size(
      shape(dtype, batch, total_q, total_k, max_seqlen_q, max_seqlen_k, num_q_heads, num_kv_heads, head_dim, causal),
      opt, workspace_bytes));
}
