// c_api_decode.cpp — the decode entry points of the C ABI (muh.h): plan + run over raw device
// pointers, planned on the present device's cached profile (hardware.hpp, device_profile()).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "c_api_common.hpp"
#include "decode_check.hpp"
#include "muh/attention.hpp"
#include "muh/plan.hpp"

namespace muh::capi {
namespace {

// C ints → DecodeParams; the enum values are range-checked first (an int cast to the 8-bit
// enums could otherwise wrap onto a valid value).
Status make_params(int dtype, int layout, int num_seqs, int num_q_heads, int num_kv_heads, int head_dim,
                   int page_size, int max_seq_len, DecodeParams* p) {
  MUH_TRY(capi::dtype_of(dtype, "", &p->dtype));
  MUH_TRY(capi::layout_of(layout, "", &p->layout));
  p->num_seqs = num_seqs;
  p->num_q_heads = num_q_heads;
  p->num_kv_heads = num_kv_heads;
  p->head_dim = head_dim;
  p->page_size = page_size;
  p->max_seq_len = max_seq_len;
  return Status::Ok();
}

// The plan paged_decode runs on the current device (called once every input is checked).
// The plan on the profile of `stream` (its green context's SMs, if any; stream_profile()).
Status current_plan(const DecodeParams& p, int force_target, int force_splits, int cuda_graph, cudaStream_t stream,
                    DecodePlan* plan) {
  HardwareCapability hw;
  MUH_TRY(stream_profile(stream, &hw));
  return detail::plan_decode_unchecked(p, hw, PlanOptions{force_target, force_splits, cuda_graph != 0}, plan);
}

}  // namespace
}  // namespace muh::capi

extern "C" int muh_decode_workspace_size(int dtype, int layout, int num_seqs, int num_q_heads, int num_kv_heads,
                                         int head_dim, int page_size, int max_seq_len, int force_target,
                                         int force_splits, int cuda_graph, size_t* workspace_bytes) {
  return muh_decode_workspace_size_on_stream(dtype, layout, num_seqs, num_q_heads, num_kv_heads, head_dim, page_size,
                                             max_seq_len, force_target, force_splits, cuda_graph, nullptr,
                                             workspace_bytes);
}

extern "C" int muh_decode_workspace_size_on_stream(int dtype, int layout, int num_seqs, int num_q_heads,
                                                   int num_kv_heads, int head_dim, int page_size, int max_seq_len,
                                                   int force_target, int force_splits, int cuda_graph, void* stream,
                                                   size_t* workspace_bytes) {
  return muh_decode_workspace_size_quant(dtype, layout, num_seqs, num_q_heads, num_kv_heads, head_dim, page_size,
                                         max_seq_len, force_target, force_splits, cuda_graph, stream, workspace_bytes,
                                         MUH_KV_AUTO);
}

// The plan is made for the cache's element type (an fp8 cache's CTAs are slower per token and
// its plan may take more partitions: plan.cpp); the scales do not enter it.
extern "C" int muh_decode_workspace_size_quant(int dtype, int layout, int num_seqs, int num_q_heads, int num_kv_heads,
                                               int head_dim, int page_size, int max_seq_len, int force_target,
                                               int force_splits, int cuda_graph, void* stream,
                                               size_t* workspace_bytes, int kv_dtype) {
  using namespace muh;
  if (workspace_bytes == nullptr)
    return capi::report(invalid_argument("muh_decode_workspace_size: workspace_bytes must not be null"));
  DecodeParams p;
  Status s = capi::make_params(dtype, layout, num_seqs, num_q_heads, num_kv_heads, head_dim, page_size,
                               max_seq_len, &p);
  if (!s.ok()) return capi::report(s);
  s = capi::kv_dtype_of(kv_dtype, "muh_decode_workspace_size: ", "kv_dtype", &p.kv.dtype);
  if (!s.ok()) return capi::report(s);
  // Only the plan's inputs matter here: a block table that exactly covers max_seq_len.
  p.max_blocks_per_seq = page_size > 0 ? std::max(1, (max_seq_len + page_size - 1) / page_size) : 1;
  p.num_pages = 1;
  s = detail::check_decode_shape(p);  // every input error before any CUDA call
  if (!s.ok()) return capi::report(s);
  DecodePlan plan;
  s = capi::current_plan(p, force_target, force_splits, cuda_graph, static_cast<cudaStream_t>(stream), &plan);
  if (s.ok()) *workspace_bytes = plan.workspace_bytes;
  return capi::report(s);
}

extern "C" int muh_paged_decode(int dtype, int layout, const void* q, const void* k_cache, const void* v_cache,
                                void* out, float* lse, const int* block_table, const int* seq_lens, int num_seqs,
                                int num_q_heads, int num_kv_heads, int head_dim, int page_size, int num_pages,
                                int max_blocks_per_seq, int max_seq_len, float softmax_scale, void* workspace,
                                size_t workspace_bytes, int force_target, int force_splits, int cuda_graph,
                                void* stream) {
  return muh_paged_decode_variant(dtype, layout, q, k_cache, v_cache, out, lse, block_table, seq_lens, num_seqs,
                                  num_q_heads, num_kv_heads, head_dim, page_size, num_pages, max_blocks_per_seq,
                                  max_seq_len, softmax_scale, workspace, workspace_bytes, force_target, force_splits,
                                  cuda_graph, stream, nullptr);
}

extern "C" int muh_paged_decode_variant(int dtype, int layout, const void* q, const void* k_cache,
                                        const void* v_cache, void* out, float* lse, const int* block_table,
                                        const int* seq_lens, int num_seqs, int num_q_heads, int num_kv_heads,
                                        int head_dim, int page_size, int num_pages, int max_blocks_per_seq,
                                        int max_seq_len, float softmax_scale, void* workspace,
                                        size_t workspace_bytes, int force_target, int force_splits, int cuda_graph,
                                        void* stream, const muh_variant* variant) {
  return muh_paged_decode_quant(dtype, layout, q, k_cache, v_cache, out, lse, block_table, seq_lens, num_seqs,
                                num_q_heads, num_kv_heads, head_dim, page_size, num_pages, max_blocks_per_seq,
                                max_seq_len, softmax_scale, workspace, workspace_bytes, force_target, force_splits,
                                cuda_graph, stream, variant, nullptr);
}

extern "C" int muh_paged_decode_quant(int dtype, int layout, const void* q, const void* k_cache,
                                      const void* v_cache, void* out, float* lse, const int* block_table,
                                      const int* seq_lens, int num_seqs, int num_q_heads, int num_kv_heads,
                                      int head_dim, int page_size, int num_pages, int max_blocks_per_seq,
                                      int max_seq_len, float softmax_scale, void* workspace, size_t workspace_bytes,
                                      int force_target, int force_splits, int cuda_graph, void* stream,
                                      const muh_variant* variant, const muh_kv_quant* kv) {
  using namespace muh;
  DecodeParams p;
  Status s = capi::make_params(dtype, layout, num_seqs, num_q_heads, num_kv_heads, head_dim, page_size,
                               max_seq_len, &p);
  if (!s.ok()) return capi::report(s);
  p.q = q;
  p.k_cache = k_cache;
  p.v_cache = v_cache;
  p.out = out;
  p.lse = lse;
  p.block_table = block_table;
  p.seq_lens = seq_lens;
  p.num_pages = num_pages;
  p.max_blocks_per_seq = max_blocks_per_seq;
  p.softmax_scale = softmax_scale;
  p.variant = capi::variant_of(variant);
  s = capi::kv_quant_of(kv, "paged_decode: ", &p.kv);
  if (!s.ok()) return capi::report(s);
  s = detail::check_decode_call(p);  // every input error before any CUDA call
  if (!s.ok()) return capi::report(s);
  DecodePlan plan;
  s = capi::current_plan(p, force_target, force_splits, cuda_graph, static_cast<cudaStream_t>(stream), &plan);
  if (!s.ok()) return capi::report(s);
  RunOptions opt;
  opt.stream = static_cast<cudaStream_t>(stream);
  return capi::report(detail::paged_decode_unchecked(p, plan, workspace, workspace_bytes, opt));
}
