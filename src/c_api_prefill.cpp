// c_api_prefill.cpp — muh_prefill(), muh_paged_prefill() and their workspace sizes of the C ABI (muh.h): raw
// device pointers → plan_prefill() on the current device's cached profile → muh::prefill().
#include "c_api_common.hpp"
#include "muh/attention.hpp"
#include "prefill_check.hpp"

namespace {

muh::Status check_dtype(int dtype, const char* fn) {
  muh::DType t;
  return muh::capi::dtype_of(dtype, std::string(fn) + ": ", &t);
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

// The plan muh_prefill() runs: the profile of the stream (its green context's SMs, if any), the
// forced target, and the tail split only when the caller gives a workspace (without one every q
// tile runs whole). The C ABI checks the inputs once, first (check_prefill_call), then plans and
// runs unchecked.
muh::Status current_plan(const muh::PrefillParams& p, int force_target, bool with_workspace, cudaStream_t stream,
                         muh::PrefillPlan* plan) {
  muh::HardwareCapability hw;
  MUH_TRY(muh::stream_profile(stream, &hw));
  return muh::detail::plan_prefill_unchecked(p, hw, muh::PrefillPlanOptions{force_target, with_workspace ? muh::kPrefillTailAuto : muh::kPrefillTailOff},
                           plan);
}

// The rest of a muh_prefill() / muh_paged_prefill() call once its parameters are filled in: the
// one input check, then plan and run unchecked.
int run_call(const muh::PrefillParams& p, int force_target, void* workspace, size_t workspace_bytes, void* stream,
             bool debug_checks) {
  if (muh::Status s = muh::detail::check_prefill_call(p); !s.ok()) return muh::capi::report(s);
  if (p.batch == 0 || p.total_q == 0) return muh::capi::report(muh::Status::Ok());
  muh::PrefillPlan plan;
  if (muh::Status s = current_plan(p, force_target, workspace != nullptr, static_cast<cudaStream_t>(stream), &plan);
      !s.ok())
    return muh::capi::report(s);
  muh::RunOptions opt;
  opt.stream = static_cast<cudaStream_t>(stream);
  opt.debug_checks = debug_checks;
  return muh::capi::report(muh::detail::prefill_unchecked(p, plan, workspace, workspace_bytes, opt));
}

// The rest of a *_workspace_size() call: the shape checks, then the plan's workspace.
int workspace_size(const muh::PrefillParams& p, int force_target, void* stream, size_t* workspace_bytes) {
  if (muh::Status s = muh::detail::check_prefill_shape(p, "prefill: "); !s.ok()) return muh::capi::report(s);
  if (p.batch == 0 || p.total_q == 0) return muh::capi::report(muh::Status::Ok());
  if (muh::Status s = muh::detail::check_prefill_compiled(p); !s.ok()) return muh::capi::report(s);
  muh::PrefillPlan plan;
  const muh::Status s = current_plan(p, force_target, true, static_cast<cudaStream_t>(stream), &plan);
  if (s.ok()) *workspace_bytes = plan.workspace_bytes;
  return muh::capi::report(s);
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
  return run_call(p, force_target, workspace, workspace_bytes, stream, false);
}

muh::Variant muh::capi::variant_of(const muh_variant* v) {
  muh::Variant r;
  if (v == nullptr) return r;
  r.window_left = v->window_left;
  r.window_right = v->window_right;
  r.softcap = v->softcap;
  r.use_sinks = v->use_sinks != 0;
  r.sinks = v->sinks;
  r.use_alibi = v->use_alibi != 0;
  r.alibi_slopes = v->alibi_slopes;
  return r;
}

extern "C" int muh_prefill_variant(int dtype, const void* q, const void* k, const void* v, void* out, float* lse,
                                   const int* cu_seqlens_q, const int* cu_seqlens_k, int batch, int total_q,
                                   int total_k, int max_seqlen_q, int max_seqlen_k, int num_q_heads,
                                   int num_kv_heads, int head_dim, float softmax_scale, int causal,
                                   void* workspace, size_t workspace_bytes, int force_target, void* stream,
                                   const muh_variant* variant) {
  if (muh::Status s = check_dtype(dtype, "muh_prefill_variant"); !s.ok()) return muh::capi::report(s);
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
  p.variant = muh::capi::variant_of(variant);
  return run_call(p, force_target, workspace, workspace_bytes, stream, false);
}

extern "C" int muh_prefill_workspace_size(int dtype, int batch, int total_q, int total_k, int max_seqlen_q,
                                          int max_seqlen_k, int num_q_heads, int num_kv_heads, int head_dim,
                                          int causal, int force_target, size_t* workspace_bytes) {
  return muh_prefill_workspace_size_on_stream(dtype, batch, total_q, total_k, max_seqlen_q, max_seqlen_k, num_q_heads,
                                              num_kv_heads, head_dim, causal, force_target, nullptr, workspace_bytes);
}

extern "C" int muh_prefill_workspace_size_on_stream(int dtype, int batch, int total_q, int total_k, int max_seqlen_q,
                                                    int max_seqlen_k, int num_q_heads, int num_kv_heads, int head_dim,
                                                    int causal, int force_target, void* stream,
                                                    size_t* workspace_bytes) {
  if (muh::Status s = check_dtype(dtype, "muh_prefill_workspace_size"); !s.ok()) return muh::capi::report(s);
  if (workspace_bytes == nullptr)
    return muh::capi::report(muh::invalid_argument("muh_prefill_workspace_size: workspace_bytes must not be null"));
  *workspace_bytes = 0;
  const muh::PrefillParams p =
      shape(dtype, batch, total_q, total_k, max_seqlen_q, max_seqlen_k, num_q_heads, num_kv_heads, head_dim, causal);
  return workspace_size(p, force_target, stream, workspace_bytes);
}

// ---- Paged prefill: K/V from the paged cache (muh::PrefillParams::kv_source) ------------------

muh::Status muh::capi::paged_shape(int dtype, int layout, int batch, int total_q, int max_seqlen_q, int max_seqlen_k,
                                   int num_q_heads, int num_kv_heads, int head_dim, int page_size, int num_pages,
                                   int max_blocks_per_seq, int causal, const char* fn, muh::PrefillParams* p) {
  MUH_TRY(check_dtype(dtype, fn));
  muh::KVLayout l;
  MUH_TRY(muh::capi::layout_of(layout, std::string(fn) + ": ", &l));
  *p = muh::make_paged_prefill(
      shape(dtype, batch, total_q, 0, max_seqlen_q, max_seqlen_k, num_q_heads, num_kv_heads, head_dim, causal), l,
      nullptr, nullptr, nullptr, nullptr, page_size, num_pages, max_blocks_per_seq);
  return muh::Status::Ok();
}

void muh::capi::set_paged_pointers(muh::PrefillParams* p, const void* q, const void* k_cache, const void* v_cache,
                                   void* out, float* lse, const int* cu_seqlens_q, const int* block_table,
                                   const int* seqused_k, float softmax_scale) {
  p->q = q;
  p->out = out;
  p->lse = lse;
  p->cu_seqlens_q = cu_seqlens_q;
  p->k_cache = k_cache;
  p->v_cache = v_cache;
  p->block_table = block_table;
  p->seqused_k = seqused_k;
  p->softmax_scale = softmax_scale;
}

using muh::capi::paged_shape;

extern "C" int muh_paged_prefill(int dtype, int layout, const void* q, const void* k_cache, const void* v_cache,
                                 void* out, float* lse, const int* cu_seqlens_q, const int* block_table,
                                 const int* seqused_k, int batch, int total_q, int max_seqlen_q, int max_seqlen_k,
                                 int num_q_heads, int num_kv_heads, int head_dim, int page_size, int num_pages,
                                 int max_blocks_per_seq, float softmax_scale, int causal, void* workspace,
                                 size_t workspace_bytes, int force_target, int debug_checks, void* stream) {
  muh::PrefillParams p;
  if (muh::Status s = paged_shape(dtype, layout, batch, total_q, max_seqlen_q, max_seqlen_k, num_q_heads, num_kv_heads,
                                  head_dim, page_size, num_pages, max_blocks_per_seq, causal, "muh_paged_prefill", &p);
      !s.ok())
    return muh::capi::report(s);
  muh::capi::set_paged_pointers(&p, q, k_cache, v_cache, out, lse, cu_seqlens_q, block_table, seqused_k, softmax_scale);
  return run_call(p, force_target, workspace, workspace_bytes, stream, debug_checks != 0);
}

extern "C" int muh_paged_prefill_variant(int dtype, int layout, const void* q, const void* k_cache,
                                         const void* v_cache, void* out, float* lse, const int* cu_seqlens_q,
                                         const int* block_table, const int* seqused_k, int batch, int total_q,
                                         int max_seqlen_q, int max_seqlen_k, int num_q_heads, int num_kv_heads,
                                         int head_dim, int page_size, int num_pages, int max_blocks_per_seq,
                                         float softmax_scale, int causal, void* workspace, size_t workspace_bytes,
                                         int force_target, int debug_checks, void* stream,
                                         const muh_variant* variant) {
  muh::PrefillParams p;
  if (muh::Status s = paged_shape(dtype, layout, batch, total_q, max_seqlen_q, max_seqlen_k, num_q_heads, num_kv_heads,
                                  head_dim, page_size, num_pages, max_blocks_per_seq, causal,
                                  "muh_paged_prefill_variant", &p);
      !s.ok())
    return muh::capi::report(s);
  muh::capi::set_paged_pointers(&p, q, k_cache, v_cache, out, lse, cu_seqlens_q, block_table, seqused_k, softmax_scale);
  p.variant = muh::capi::variant_of(variant);
  return run_call(p, force_target, workspace, workspace_bytes, stream, debug_checks != 0);
}

extern "C" int muh_paged_prefill_quant(int dtype, int layout, const void* q, const void* k_cache,
                                       const void* v_cache, void* out, float* lse, const int* cu_seqlens_q,
                                       const int* block_table, const int* seqused_k, int batch, int total_q,
                                       int max_seqlen_q, int max_seqlen_k, int num_q_heads, int num_kv_heads,
                                       int head_dim, int page_size, int num_pages, int max_blocks_per_seq,
                                       float softmax_scale, int causal, void* workspace, size_t workspace_bytes,
                                       int force_target, int debug_checks, void* stream, const muh_variant* variant,
                                       const muh_kv_quant* kv) {
  const char* fn = "muh_paged_prefill_quant";
  muh::PrefillParams p;
  if (muh::Status s = paged_shape(dtype, layout, batch, total_q, max_seqlen_q, max_seqlen_k, num_q_heads, num_kv_heads,
                                  head_dim, page_size, num_pages, max_blocks_per_seq, causal, fn, &p);
      !s.ok())
    return muh::capi::report(s);
  muh::capi::set_paged_pointers(&p, q, k_cache, v_cache, out, lse, cu_seqlens_q, block_table, seqused_k, softmax_scale);
  p.variant = muh::capi::variant_of(variant);
  if (muh::Status s = muh::capi::kv_quant_of(kv, std::string(fn) + ": ", &p.kv); !s.ok())
    return muh::capi::report(s);
  return run_call(p, force_target, workspace, workspace_bytes, stream, debug_checks != 0);
}

namespace {

// muh_paged_prefill_workspace_size{,_quant}: the plan is made for the cache's element type (an fp8
// cache runs the sm80 agent's row, never the sm90 agent's, so its tail split, and with it the
// workspace, may differ from a 16-bit cache's). The scales do not enter the plan.
int paged_workspace_size(const char* fn, int dtype, int layout, int batch, int total_q, int max_seqlen_q,
                         int max_seqlen_k, int num_q_heads, int num_kv_heads, int head_dim, int page_size,
                         int num_pages, int max_blocks_per_seq, int causal, int force_target, void* stream,
                         int kv_dtype, size_t* workspace_bytes) {
  if (workspace_bytes == nullptr)
    return muh::capi::report(muh::invalid_argument(std::string(fn) + ": workspace_bytes must not be null"));
  *workspace_bytes = 0;
  muh::PrefillParams p;
  if (muh::Status s = paged_shape(dtype, layout, batch, total_q, max_seqlen_q, max_seqlen_k, num_q_heads, num_kv_heads,
                                  head_dim, page_size, num_pages, max_blocks_per_seq, causal, fn, &p);
      !s.ok())
    return muh::capi::report(s);
  if (muh::Status s = muh::capi::kv_dtype_of(kv_dtype, std::string(fn) + ": ", "kv_dtype", &p.kv.dtype); !s.ok())
    return muh::capi::report(s);
  return workspace_size(p, force_target, stream, workspace_bytes);
}

}  // namespace

extern "C" int muh_paged_prefill_workspace_size(int dtype, int layout, int batch, int total_q, int max_seqlen_q,
                                                int max_seqlen_k, int num_q_heads, int num_kv_heads, int head_dim,
                                                int page_size, int num_pages, int max_blocks_per_seq, int causal,
                                                int force_target, void* stream, size_t* workspace_bytes) {
  return paged_workspace_size("muh_paged_prefill_workspace_size", dtype, layout, batch, total_q, max_seqlen_q,
                              max_seqlen_k, num_q_heads, num_kv_heads, head_dim, page_size, num_pages,
                              max_blocks_per_seq, causal, force_target, stream, MUH_KV_AUTO, workspace_bytes);
}

extern "C" int muh_paged_prefill_workspace_size_quant(int dtype, int layout, int batch, int total_q,
                                                      int max_seqlen_q, int max_seqlen_k, int num_q_heads,
                                                      int num_kv_heads, int head_dim, int page_size, int num_pages,
                                                      int max_blocks_per_seq, int causal, int force_target,
                                                      void* stream, size_t* workspace_bytes, int kv_dtype) {
  return paged_workspace_size("muh_paged_prefill_workspace_size_quant", dtype, layout, batch, total_q, max_seqlen_q,
                              max_seqlen_k, num_q_heads, num_kv_heads, head_dim, page_size, num_pages,
                              max_blocks_per_seq, causal, force_target, stream, kv_dtype, workspace_bytes);
}
