// c_api_mixed.cpp — muh_paged_attention() and its workspace size of the C ABI (muh.h): a mixed
// batch over the paged cache, raw device pointers plus the host copies of the lengths →
// plan_mixed() on the stream's profile → muh::paged_attention().
#include "c_api_common.hpp"
#include "muh/attention.hpp"
#include "muh/mixed_plan.hpp"
#include "prefill_check.hpp"

namespace {

// The call's shape (pointers unset) and the plan's options; the C ABI's own argument checks.
muh::Status mixed_shape(int dtype, int layout, int batch, int total_q, int max_seqlen_q, int max_seqlen_k,
                        int num_q_heads, int num_kv_heads, int head_dim, int page_size, int num_pages,
                        int max_blocks_per_seq, int causal, int force_target, int force_split, int with_lse,
                        int cuda_graph, int graph_num_decodes, const char* fn, muh::PrefillParams* p,
                        muh::MixedPlanOptions* o) {
  MUH_TRY(muh::capi::paged_shape(dtype, layout, batch, total_q, max_seqlen_q, max_seqlen_k, num_q_heads, num_kv_heads,
                                 head_dim, page_size, num_pages, max_blocks_per_seq, causal, fn, p));
  o->force_target = force_target;
  o->force_split = force_split;
  o->with_lse = with_lse != 0;
  o->cuda_graph = cuda_graph != 0;
  o->graph_num_decodes = graph_num_decodes;
  return muh::Status::Ok();
}

muh::Status plan_on_stream(const muh::PrefillParams& p, const int* cu_host, const int* kv_host,
                           const muh::MixedPlanOptions& o, void* stream, muh::MixedPlan* plan) {
  muh::HardwareCapability hw;
  MUH_TRY(muh::stream_profile(static_cast<cudaStream_t>(stream), &hw));
  return muh::plan_mixed(p, cu_host, kv_host, hw, o, plan);
}

// muh_paged_attention{,_quant} once the cache's element type is known: the inputs first (no
// device needed), then the plan on the stream's profile, then the run.
int run_mixed(int dtype, int layout, const void* q, const void* k_cache, const void* v_cache, void* out, float* lse,
              const int* cu_seqlens_q, const int* block_table, const int* seqused_k, const int* cu_seqlens_q_host,
              const int* seqused_k_host, int batch, int total_q, int max_seqlen_q, int max_seqlen_k, int num_q_heads,
              int num_kv_heads, int head_dim, int page_size, int num_pages, int max_blocks_per_seq, float softmax_scale,
              int causal, void* workspace, size_t workspace_bytes, int force_target, int force_split, int cuda_graph,
              int graph_num_decodes, int debug_checks, void* stream, const muh_kv_quant* kv, const char* fn) {
  muh::PrefillParams p;
  muh::MixedPlanOptions o;
  if (muh::Status s = mixed_shape(dtype, layout, batch, total_q, max_seqlen_q, max_seqlen_k, num_q_heads, num_kv_heads,
                                  head_dim, page_size, num_pages, max_blocks_per_seq, causal, force_target, force_split,
                                  lse != nullptr, cuda_graph, graph_num_decodes, fn, &p, &o);
      !s.ok())
    return muh::capi::report(s);
  muh::capi::set_paged_pointers(&p, q, k_cache, v_cache, out, lse, cu_seqlens_q, block_table, seqused_k, softmax_scale);
  if (muh::Status s = muh::capi::kv_quant_of(kv, std::string(fn) + ": ", &p.kv); !s.ok())
    return muh::capi::report(s);
  if (muh::Status s = muh::detail::check_prefill_call(p); !s.ok()) return muh::capi::report(s);
  muh::MixedPlan plan;
  if (muh::Status s = plan_on_stream(p, cu_seqlens_q_host, seqused_k_host, o, stream, &plan); !s.ok())
    return muh::capi::report(s);
  muh::RunOptions opt;
  opt.stream = static_cast<cudaStream_t>(stream);
  opt.debug_checks = debug_checks != 0;
  return muh::capi::report(muh::paged_attention(p, plan, workspace, workspace_bytes, opt));
}

// muh_paged_attention_workspace_size{,_quant}: the plan is made for the cache's element type (an
// fp8 cache's prefill part runs a row that reads fp8 — the sm80 or portable agent's, never the
// sm90 agent's — so its workspace may differ); the scales do not enter it.
int mixed_workspace_size(int dtype, int layout, const int* cu_seqlens_q_host, const int* seqused_k_host, int batch,
                         int total_q, int max_seqlen_q, int max_seqlen_k, int num_q_heads, int num_kv_heads,
                         int head_dim, int page_size, int num_pages, int max_blocks_per_seq, int causal, int with_lse,
                         int force_target, int force_split, int cuda_graph, int graph_num_decodes, void* stream,
                         size_t* workspace_bytes, int kv_dtype, const char* fn) {
  if (workspace_bytes == nullptr)
    return muh::capi::report(muh::invalid_argument(std::string(fn) + ": workspace_bytes must not be null"));
  *workspace_bytes = 0;
  muh::PrefillParams p;
  muh::MixedPlanOptions o;
  if (muh::Status s = mixed_shape(dtype, layout, batch, total_q, max_seqlen_q, max_seqlen_k, num_q_heads, num_kv_heads,
                                  head_dim, page_size, num_pages, max_blocks_per_seq, causal, force_target, force_split,
                                  with_lse, cuda_graph, graph_num_decodes, fn, &p, &o);
      !s.ok())
    return muh::capi::report(s);
  if (muh::Status s = muh::capi::kv_dtype_of(kv_dtype, std::string(fn) + ": ", "kv_dtype", &p.kv.dtype); !s.ok())
    return muh::capi::report(s);
  muh::MixedPlan plan;
  const muh::Status s = plan_on_stream(p, cu_seqlens_q_host, seqused_k_host, o, stream, &plan);
  if (s.ok()) *workspace_bytes = plan.workspace_bytes;
  return muh::capi::report(s);
}

}  // namespace

extern "C" int muh_paged_attention(int dtype, int layout, const void* q, const void* k_cache, const void* v_cache,
                                   void* out, float* lse, const int* cu_seqlens_q, const int* block_table,
                                   const int* seqused_k, const int* cu_seqlens_q_host, const int* seqused_k_host,
                                   int batch, int total_q, int max_seqlen_q, int max_seqlen_k, int num_q_heads,
                                   int num_kv_heads, int head_dim, int page_size, int num_pages,
                                   int max_blocks_per_seq, float softmax_scale, int causal, void* workspace,
                                   size_t workspace_bytes, int force_target, int force_split, int cuda_graph,
                                   int graph_num_decodes, int debug_checks, void* stream) {
  return run_mixed(dtype, layout, q, k_cache, v_cache, out, lse, cu_seqlens_q, block_table, seqused_k,
                   cu_seqlens_q_host, seqused_k_host, batch, total_q, max_seqlen_q, max_seqlen_k, num_q_heads,
                   num_kv_heads, head_dim, page_size, num_pages, max_blocks_per_seq, softmax_scale, causal, workspace,
                   workspace_bytes, force_target, force_split, cuda_graph, graph_num_decodes, debug_checks, stream,
                   nullptr, "muh_paged_attention");
}

extern "C" int muh_paged_attention_quant(int dtype, int layout, const void* q, const void* k_cache,
                                         const void* v_cache, void* out, float* lse, const int* cu_seqlens_q,
                                         const int* block_table, const int* seqused_k, const int* cu_seqlens_q_host,
                                         const int* seqused_k_host, int batch, int total_q, int max_seqlen_q,
                                         int max_seqlen_k, int num_q_heads, int num_kv_heads, int head_dim,
                                         int page_size, int num_pages, int max_blocks_per_seq, float softmax_scale,
                                         int causal, void* workspace, size_t workspace_bytes, int force_target,
                                         int force_split, int cuda_graph, int graph_num_decodes, int debug_checks,
                                         void* stream, const muh_kv_quant* kv) {
  return run_mixed(dtype, layout, q, k_cache, v_cache, out, lse, cu_seqlens_q, block_table, seqused_k,
                   cu_seqlens_q_host, seqused_k_host, batch, total_q, max_seqlen_q, max_seqlen_k, num_q_heads,
                   num_kv_heads, head_dim, page_size, num_pages, max_blocks_per_seq, softmax_scale, causal, workspace,
                   workspace_bytes, force_target, force_split, cuda_graph, graph_num_decodes, debug_checks, stream, kv,
                   "muh_paged_attention_quant");
}

extern "C" int muh_paged_attention_workspace_size(int dtype, int layout, const int* cu_seqlens_q_host,
                                                  const int* seqused_k_host, int batch, int total_q, int max_seqlen_q,
                                                  int max_seqlen_k, int num_q_heads, int num_kv_heads, int head_dim,
                                                  int page_size, int num_pages, int max_blocks_per_seq, int causal,
                                                  int with_lse, int force_target, int force_split, int cuda_graph,
                                                  int graph_num_decodes, void* stream, size_t* workspace_bytes) {
  return mixed_workspace_size(dtype, layout, cu_seqlens_q_host, seqused_k_host, batch, total_q, max_seqlen_q,
                              max_seqlen_k, num_q_heads, num_kv_heads, head_dim, page_size, num_pages,
                              max_blocks_per_seq, causal, with_lse, force_target, force_split, cuda_graph,
                              graph_num_decodes, stream, workspace_bytes, MUH_KV_AUTO,
                              "muh_paged_attention_workspace_size");
}

extern "C" int muh_paged_attention_workspace_size_quant(int dtype, int layout, const int* cu_seqlens_q_host,
                                                        const int* seqused_k_host, int batch, int total_q,
                                                        int max_seqlen_q, int max_seqlen_k, int num_q_heads,
                                                        int num_kv_heads, int head_dim, int page_size, int num_pages,
                                                        int max_blocks_per_seq, int causal, int with_lse,
                                                        int force_target, int force_split, int cuda_graph,
                                                        int graph_num_decodes, void* stream, size_t* workspace_bytes,
                                                        int kv_dtype) {
  return mixed_workspace_size(dtype, layout, cu_seqlens_q_host, seqused_k_host, batch, total_q, max_seqlen_q,
                              max_seqlen_k, num_q_heads, num_kv_heads, head_dim, page_size, num_pages,
                              max_blocks_per_seq, causal, with_lse, force_target, force_split, cuda_graph,
                              graph_num_decodes, stream, workspace_bytes, kv_dtype,
                              "muh_paged_attention_workspace_size_quant");
}
