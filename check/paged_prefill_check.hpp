// paged_prefill_check.hpp — one paged-prefill case (K/V read from a paged KV cache through the
// block table: chunked prefill, prefix reuse) run on the GPU under a forced dispatch target and
// held against the CPU reference, in prefill_check.hpp's way: the same inputs, reference, naive
// error and tolerance (make_prefill_inputs over the case's q lengths = new tokens and k lengths
// = cached prefix + new tokens), outputs pre-filled with NaN, two runs bitwise equal. What is
// new: the dense K/V are written into a paged cache of the case's layout and page size, pages in
// random order, and everything else in the cache — the unused slots of each sequence's last page
// included — is NaN, so a kernel that reads a slot past a sequence's keys shows it.
// Host code only (CUDA runtime API); no gtest.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "muh/attention.hpp"
#include "muh/reference.hpp"
#include "prefill_check.hpp"

namespace muh::check {

struct PagedPrefillCase {
  std::string name;
  std::vector<int> prefix;  // cached keys per sequence
  std::vector<int> chunk;   // new tokens (queries) per sequence
  int num_q_heads, num_kv_heads;
  int page_size;
  bool causal = true;
  float softmax_scale = 0.f;
  VariantSpec variant = {};  // none by default
  KVQuant kv = {};           // the cache's element type and scales (fp8: the cache holds codes)
  int tail_chunk = -1;       // PrefillPlanOptions::tail_chunk (prefill_check.hpp's PrefillCase)
};

// The paged-prefill shapes of the GPU tests and `muh verify` (page P): prefix lengths 0, 1,
// page − 1, page, many pages; chunk lengths 1, 2, 7, 16, 511; GQA 1, 4, 6, 8; a mixed batch of
// single-token decodes and a chunk.
inline std::vector<PagedPrefillCase> paged_prefill_shapes_for_page(int P) {
  const std::string p = "_p" + std::to_string(P);
  return {
      {"prefix0_chunk511_gqa4" + p, {0}, {511}, 8, 2, P},
      {"prefix1_chunk1_gqa6" + p, {1}, {1}, 6, 1, P},
      {"prefix_page_minus1_chunk7_gqa8" + p, {P - 1}, {7}, 8, 1, P},
      {"prefix_page_chunk16_gqa1" + p, {P}, {16}, 4, 4, P},
      {"many_pages_varlen_gqa6" + p, {5 * P + 3, 0, 2 * P}, {2, 16, 7}, 12, 2, P},
      {"mixed_decodes_and_chunk_gqa4" + p, {1000, 37, 0, 3 * P}, {1, 1, 64, 1}, 8, 2, P},
  };
}

inline const std::vector<PagedPrefillCase>& paged_prefill_cases() {
  static const std::vector<PagedPrefillCase> all = [] {
    std::vector<PagedPrefillCase> v;
    for (int P : {16, 528})
      for (auto& c : paged_prefill_shapes_for_page(P)) v.push_back(c);
    // Other page sizes: the varlen case, and a 511-token chunk whose whole key tiles take the
    // copies' page-per-row path (sm80_load_tile_paged) with pages smaller than, equal to and
    // larger than a copy pass's rows; 24 slots put a 16-key run of a vLLM value tile on two pages
    // (sm80_load_v_runs: each 8-key half looks its page up).
    for (int P : {8, 24, 32, 64, 256}) {
      v.push_back(paged_prefill_shapes_for_page(P)[4]);
      v.push_back(paged_prefill_shapes_for_page(P)[0]);
    }
    // Non-causal over a prefix (cross-attention-like use; the mask is the only difference).
    PagedPrefillCase nc{"noncausal_prefix_p16", {40, 3}, {9, 30}, 4, 1, 16, false, 0.7f};
    v.push_back(nc);
    // context_attention_fwd's prefix part: non-causal, equal chunks, few q tiles over long keys —
    // the plan splits the keys (its tail, prefill_plan.hpp); the second sequence's 1064 keys end
    // long before max_seqlen_k, so its pieces past them are empty.
    PagedPrefillCase split{"noncausal_split_p16", {3000, 1000}, {64, 64}, 4, 1, 16, false, 0.f};
    v.push_back(split);
    // A causal chunk over its prefix in one call (flash_attn_varlen_func, vLLM V1): the plan
    // splits it too where every q tile sees most keys (prefill_split_applies). The plan's own
    // chunk; then one key tile a piece, 100 queries over 800 keys, so that the pieces past a
    // row's diagonal hold no key of that row (the top rows see keys < 701: in the last two key
    // tiles of 64, none) and the second sequence's past its 300 keys none at all.
    PagedPrefillCase causal_split{"causal_split_p16", {3000, 1000}, {64, 64}, 4, 1, 16, true, 0.f};
    v.push_back(causal_split);
    PagedPrefillCase causal_chunk1{"causal_split_chunk1_p16", {700, 200}, {100, 100}, 4, 1, 16, true, 1.f};
    causal_chunk1.tail_chunk = 1;
    v.push_back(causal_chunk1);
    return v;
  }();
  return all;
}

// The host side of one (case, layout, dtype, head_dim): the dense inputs and reference
// (PrefillInputs), and the paged cache holding its K/V.
struct PagedPrefillInputs {
  PagedPrefillCase pc;
  PrefillCase dense;  // the PrefillCase make_prefill_inputs() was given (in.c points here)
  std::unique_ptr<PrefillInputs> in;
  KVLayout layout = KVLayout::nhd;
  PagedKVShape shape;
  int num_pages = 0, max_blocks = 0;
  std::vector<int> block_table, seqused_k;
  std::vector<float> k_cache, v_cache;  // NaN where no key lives
  // An fp8 cache (pc.kv): the codes, in the same layout (x = 16), NaN's code where no key lives.
  std::vector<std::uint8_t> k_codes, v_codes;
};

inline std::unique_ptr<PagedPrefillInputs> make_paged_prefill_inputs(const PagedPrefillCase& c, KVLayout layout,
                                                                     DType t, int head_dim, unsigned seed) {
  auto r = std::make_unique<PagedPrefillInputs>();
  r->pc = c;
  r->layout = layout;
  r->dense = PrefillCase{"paged", c.chunk, {}, c.num_q_heads, c.num_kv_heads, c.causal, c.softmax_scale};
  for (std::size_t b = 0; b < c.chunk.size(); ++b) r->dense.len_k.push_back(c.prefix[b] + c.chunk[b]);
  r->dense.variant = c.variant;
  r->dense.kv = c.kv;  // fp8: the dense K/V are the codes' values (make_prefill_inputs)
  r->in = make_prefill_inputs(r->dense, t, head_dim, seed);
  const int B = int(c.chunk.size()), H = c.num_kv_heads, D = head_dim, P = c.page_size;
  r->seqused_k = r->dense.len_k;
  r->max_blocks = 1;
  for (int L : r->seqused_k) r->max_blocks = std::max(r->max_blocks, (L + P - 1) / P);
  r->num_pages = B * r->max_blocks + 3;  // a few pages nobody uses
  std::vector<int> perm(r->num_pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(seed ^ 0x5eedu));
  r->block_table.assign(perm.begin(), perm.begin() + std::size_t(B) * r->max_blocks);
  r->shape.layout = layout;
  r->shape.page_size = P;
  r->shape.num_kv_heads = H;
  r->shape.head_dim = D;
  const bool fp8 = is_fp8(c.kv.dtype);
  r->shape.x = fp8 ? 16 : 16 / int(dtype_size(t));
  const std::size_t elems = std::size_t(r->num_pages) * P * H * D;
  r->k_cache.assign(elems, std::numeric_limits<float>::quiet_NaN());
  r->v_cache.assign(elems, std::numeric_limits<float>::quiet_NaN());
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < r->seqused_k[b]; ++j) {
      const int page = r->block_table[std::size_t(b) * r->max_blocks + j / P], slot = j % P;
      for (int h = 0; h < H; ++h)
        for (int d = 0; d < D; ++d) {
          const std::size_t src = (std::size_t(r->in->cu_k[b] + j) * H + h) * D + d;
          r->k_cache[r->shape.k_offset(page, slot, h, d)] = r->in->k[src];
          r->v_cache[r->shape.v_offset(page, slot, h, d)] = r->in->v[src];
        }
    }
  if (fp8) {  // (the dense values are code · scale exactly: dividing gives the code back)
    auto codes = [&](const std::vector<float>& x, float scale, std::vector<std::uint8_t>* out) {
      out->resize(x.size());
      for (std::size_t i = 0; i < x.size(); ++i)
        (*out)[i] = std::isnan(x[i]) ? fp8_format(c.kv.dtype).nan_code : float_to_fp8(x[i] / scale, c.kv.dtype);
    };
    codes(r->k_cache, c.kv.k_scale, &r->k_codes);
    codes(r->v_cache, c.kv.v_scale, &r->v_codes);
  }
  return r;
}

// The device copies of one case's inputs; outputs pre-filled with NaN by fresh_outputs().
struct PagedPrefillDevice {
  DevBuf q, k_cache, v_cache, block_table, seqused_k, cu_q, out, lse;
  DeviceVariant var;
  Status status;

  explicit PagedPrefillDevice(const PagedPrefillInputs& pi) {
    const PrefillInputs& in = *pi.in;
    const DType t = in.dtype;
    const std::size_t e = dtype_size(t), nl = std::size_t(in.total_q) * in.c->num_q_heads;
    const bool fp8 = is_fp8(pi.pc.kv.dtype);
    const auto hq = ref::to_storage(in.q, t);
    const auto hk = fp8 ? std::vector<unsigned char>(pi.k_codes.begin(), pi.k_codes.end()) : ref::to_storage(pi.k_cache, t);
    const auto hv = fp8 ? std::vector<unsigned char>(pi.v_codes.begin(), pi.v_codes.end()) : ref::to_storage(pi.v_cache, t);
    bool ok = q.alloc(hq.size()) && k_cache.alloc(hk.size()) && v_cache.alloc(hv.size()) &&
              block_table.alloc(pi.block_table.size() * 4) && seqused_k.alloc(pi.seqused_k.size() * 4) &&
              cu_q.alloc(in.cu_q.size() * 4) && out.alloc(in.q.size() * e) && lse.alloc(nl * 4);
    if (!ok) {
      set_error("cudaMalloc failed");
      return;
    }
    cudaError_t err = cudaMemcpy(q.p, hq.data(), hq.size(), cudaMemcpyHostToDevice);
    if (err == cudaSuccess) err = cudaMemcpy(k_cache.p, hk.data(), hk.size(), cudaMemcpyHostToDevice);
    if (err == cudaSuccess) err = cudaMemcpy(v_cache.p, hv.data(), hv.size(), cudaMemcpyHostToDevice);
    if (err == cudaSuccess)
      err = cudaMemcpy(block_table.p, pi.block_table.data(), pi.block_table.size() * 4, cudaMemcpyHostToDevice);
    if (err == cudaSuccess)
      err = cudaMemcpy(seqused_k.p, pi.seqused_k.data(), pi.seqused_k.size() * 4, cudaMemcpyHostToDevice);
    if (err == cudaSuccess) err = cudaMemcpy(cu_q.p, in.cu_q.data(), in.cu_q.size() * 4, cudaMemcpyHostToDevice);
    if (err == cudaSuccess) err = var.upload(in.c->variant);
    if (err != cudaSuccess) set_error(std::string("copying inputs: ") + cudaGetErrorString(err));
  }
  void set_error(std::string what) {
    Status s(StatusCode::cuda_error, std::move(what));
    std::swap(status, s);  // (assigning a [[nodiscard]] Status warns under nvcc)
  }
  cudaError_t fresh_outputs() {
    cudaError_t err = out.n ? cudaMemset(out.p, 0xFF, out.n) : cudaSuccess;  // NaN in every dtype
    if (err == cudaSuccess && lse.n) err = cudaMemset(lse.p, 0xFF, lse.n);
    return err;
  }
  PrefillParams params(const PagedPrefillInputs& pi) const {
    PrefillParams p = shape_params(*pi.in);  // total_k: make_paged_prefill sets it to 0
    p.q = q.p;
    p.out = out.p;
    p.lse = static_cast<float*>(lse.p);
    p.cu_seqlens_q = static_cast<const int*>(cu_q.p);
    p.variant = var.v;
    p.kv = pi.pc.kv;
    return make_paged_prefill(p, pi.layout, k_cache.p, v_cache.p, static_cast<const int*>(block_table.p),
                              static_cast<const int*>(seqused_k.p), pi.shape.page_size, pi.num_pages, pi.max_blocks);
  }
};

// Device output → host floats (out) and lse.
inline cudaError_t read_outputs(const PagedPrefillDevice& dev, DType t, std::vector<float>* out,
                                std::vector<float>* lse) {
  std::vector<unsigned char> raw(dev.out.n);
  cudaError_t err = raw.empty() ? cudaSuccess : cudaMemcpy(raw.data(), dev.out.p, raw.size(), cudaMemcpyDeviceToHost);
  out->resize(raw.size() / dtype_size(t));
  for (std::size_t i = 0; i < out->size(); ++i) (*out)[i] = ref::from_storage(raw.data(), i, t);
  lse->resize(dev.lse.n / 4);
  if (err == cudaSuccess && !lse->empty()) err = cudaMemcpy(lse->data(), dev.lse.p, dev.lse.n, cudaMemcpyDeviceToHost);
  return err;
}

// Compares out / lse against the reference as run_prefill_case() does (prefill_check.hpp).
inline void compare_prefill(const PrefillInputs& in, const std::vector<float>& out, const std::vector<float>& lse,
                            PrefillResult* r) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      ++r->nonfinite;
      continue;
    }
    r->max_err = std::max(r->max_err, double(std::fabs(out[i] - in.ref_out[i])));
  }
  for (std::size_t i = 0; i < lse.size(); ++i) {
    const float want = in.ref_lse[i], got = lse[i];
    if (std::isinf(want) || std::isinf(got) || std::isnan(got)) {
      if (!(got == want)) ++r->lse_mismatch;
      continue;
    }
    const double d = std::fabs(double(got) - want);
    r->max_lse_err = std::max(r->max_lse_err, d);
    if (d > 1e-3 * (1.0 + std::fabs(want))) ++r->lse_mismatch;
  }
  r->tol = 2.0 * std::max(in.naive_err, ref::unit_roundoff(in.dtype) * in.max_ref);
  r->pass = r->nonfinite == 0 && r->lse_mismatch == 0 && r->deterministic && r->max_err <= r->tol;
  if (!r->pass) {
    if (r->nonfinite) r->note += std::to_string(r->nonfinite) + " non-finite outputs; ";
    if (r->lse_mismatch) r->note += std::to_string(r->lse_mismatch) + " lse mismatches; ";
    if (!r->deterministic) r->note += "two runs differ bitwise; ";
    if (r->max_err > r->tol)
      r->note += "max error " + std::to_string(r->max_err) + " > tol " + std::to_string(r->tol) + "; ";
  }
}

// Plans `pi` with target forced (-1: the selection walks) on this device — or for the SMs of
// `stream`, and runs there — and runs it twice (debug_checks on: the tables are checked too);
// status is the plan's or the run's. sm_count > 0 plans for that many SMs (the persistent
// schedule's CTAs: a few then walk many q tiles each).
inline PrefillResult run_paged_prefill_case(const PagedPrefillInputs& pi, int target, PrefillPlan* plan_out = nullptr,
                                            std::vector<float>* out_copy = nullptr, cudaStream_t stream = nullptr,
                                            int sm_count = 0) {
  PrefillResult r;
  PagedPrefillDevice dev(pi);
  auto fail = [&](Status s) {
    std::swap(r.status, s);
    r.note = r.status.message();
    return r;
  };
  if (!dev.status.ok()) return fail(dev.status);
  const PrefillParams p = dev.params(pi);
  PrefillPlan plan;
  {
    HardwareCapability hw;  // a stream's own SMs (a green partition: `muh verify --emulate`)
    Status s = stream ? stream_profile(stream, &hw) : device_profile(-1, &hw);
    if (!s.ok()) return fail(std::move(s));
    if (sm_count > 0) hw.sm_count = sm_count;
    Status planned = plan_prefill(p, hw, PrefillPlanOptions{target, pi.pc.tail_chunk}, &plan);
    if (!planned.ok()) return fail(std::move(planned));
  }
  if (plan_out) *plan_out = plan;
  DevBuf ws;  // a split plan's partials (non-causal, few q tiles)
  if (!ws.alloc(plan.workspace_bytes)) return fail(Status(StatusCode::cuda_error, "paged prefill: workspace cudaMalloc"));
  RunOptions opt;
  opt.debug_checks = true;
  opt.stream = stream;
  std::vector<float> out[2], lse[2];
  for (int run = 0; run < 2; ++run) {
    cudaError_t err = dev.fresh_outputs();
    // The copies and NaN pre-fills ran on the default stream, which a non-blocking stream (a
    // green context's) does not wait for.
    if (err == cudaSuccess && stream) err = cudaDeviceSynchronize();
    if (err != cudaSuccess) return fail(Status(StatusCode::cuda_error, cudaGetErrorString(err)));
    Status s = prefill(p, plan, ws.p, plan.workspace_bytes, opt);
    if (!s.ok()) return fail(std::move(s));
    if ((err = cudaDeviceSynchronize()) == cudaSuccess) err = read_outputs(dev, pi.in->dtype, &out[run], &lse[run]);
    if (err != cudaSuccess) return fail(Status(StatusCode::cuda_error, std::string("paged prefill: ") + cudaGetErrorString(err)));
  }
  // Bitwise: compare the bytes (NaN != NaN as floats).
  r.deterministic = out[0].size() == out[1].size() && lse[0].size() == lse[1].size() &&
                    std::memcmp(out[0].data(), out[1].data(), out[0].size() * 4) == 0 &&
                    std::memcmp(lse[0].data(), lse[1].data(), lse[0].size() * 4) == 0;
  compare_prefill(*pi.in, out[0], lse[0], &r);
  if (out_copy) *out_copy = out[0];
  return r;
}

// ---- context_attention_fwd in one launch (prefill_plan.hpp, plan_context_prefill) ---------------
// A causal case as the two parts context_attention_fwd runs: the prefix part reads each
// sequence's pc.prefix[b] cached keys from the paged cache (its chunk's slots NaN there: a piece
// that read past the prefix shows it), the chunk part the chunk's k/v, contiguous [total_q,
// kv heads, d]. The reference is the case's own: the chunk's queries causally over prefix + chunk.
// Planned with target forced (-1: the selection walks) and tail_chunk (the fused launch's c; -1:
// the plan's) on this device — or for the SMs of `stream`, and run there —, run twice; whether
// the plan fused the parts is cp_out->fused (status ok and nothing run when it did not: ->why
// says why).
inline PrefillResult run_context_prefill_case(const PagedPrefillInputs& pi, int target, int tail_chunk,
                                              ContextPlan* cp_out, cudaStream_t stream = nullptr) {
  PrefillResult r;
  auto fail = [&](Status s) {
    std::swap(r.status, s);
    r.note = r.status.message();
    return r;
  };
  const PrefillInputs& in = *pi.in;
  const DType t = in.dtype;
  const int B = int(pi.pc.chunk.size()), H = pi.pc.num_kv_heads, D = in.head_dim, P = pi.shape.page_size;
  PagedPrefillDevice dev(pi);
  if (!dev.status.ok()) return fail(dev.status);
  // The cache without the chunks' keys; the chunks' keys contiguous.
  std::vector<float> kc = pi.k_cache, vc = pi.v_cache, kn(std::size_t(in.total_q) * H * D), vn(kn.size());
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < pi.pc.chunk[b]; ++i) {
      const int j = pi.pc.prefix[b] + i, page = pi.block_table[std::size_t(b) * pi.max_blocks + j / P];
      for (int h = 0; h < H; ++h)
        for (int d = 0; d < D; ++d) {
          kc[pi.shape.k_offset(page, j % P, h, d)] = vc[pi.shape.v_offset(page, j % P, h, d)] =
              std::numeric_limits<float>::quiet_NaN();
          const std::size_t src = (std::size_t(in.cu_k[b] + j) * H + h) * D + d;
          const std::size_t dst = (std::size_t(in.cu_q[b] + i) * H + h) * D + d;
          kn[dst] = in.k[src];
          vn[dst] = in.v[src];
        }
    }
  const auto hkc = ref::to_storage(kc, t), hvc = ref::to_storage(vc, t), hkn = ref::to_storage(kn, t),
             hvn = ref::to_storage(vn, t);
  DevBuf k_new, v_new, prefix_len;
  if (!k_new.alloc(hkn.size()) || !v_new.alloc(hvn.size()) || !prefix_len.alloc(std::size_t(B) * 4))
    return fail(Status(StatusCode::cuda_error, "context prefill: cudaMalloc"));
  cudaError_t err = cudaMemcpy(dev.k_cache.p, hkc.data(), hkc.size(), cudaMemcpyHostToDevice);
  if (err == cudaSuccess) err = cudaMemcpy(dev.v_cache.p, hvc.data(), hvc.size(), cudaMemcpyHostToDevice);
  if (err == cudaSuccess && !hkn.empty()) err = cudaMemcpy(k_new.p, hkn.data(), hkn.size(), cudaMemcpyHostToDevice);
  if (err == cudaSuccess && !hvn.empty()) err = cudaMemcpy(v_new.p, hvn.data(), hvn.size(), cudaMemcpyHostToDevice);
  if (err == cudaSuccess) err = cudaMemcpy(prefix_len.p, pi.pc.prefix.data(), std::size_t(B) * 4, cudaMemcpyHostToDevice);
  if (err != cudaSuccess) return fail(Status(StatusCode::cuda_error, cudaGetErrorString(err)));

  PrefillParams prefix = dev.params(pi);  // max_seqlen_k: the longest prefix + chunk, as vLLM's table covers
  prefix.causal = false;
  prefix.seqused_k = static_cast<const int*>(prefix_len.p);
  PrefillParams chunk = shape_params(in);
  chunk.q = dev.q.p;
  chunk.out = dev.out.p;
  chunk.lse = static_cast<float*>(dev.lse.p);
  chunk.cu_seqlens_q = chunk.cu_seqlens_k = static_cast<const int*>(dev.cu_q.p);
  chunk.k = k_new.p;
  chunk.v = v_new.p;
  chunk.total_k = in.total_q;
  chunk.max_seqlen_k = in.max_q;
  chunk.causal = true;
  ContextPlan cp;
  {
    HardwareCapability hw;
    Status s = stream ? stream_profile(stream, &hw) : device_profile(-1, &hw);
    if (!s.ok()) return fail(std::move(s));
    Status planned = plan_context_prefill(prefix, chunk, hw, PrefillPlanOptions{target, tail_chunk}, &cp);
    if (!planned.ok()) return fail(std::move(planned));
  }
  if (cp_out) *cp_out = cp;
  if (!cp.fused) return r;
  DevBuf ws;
  if (!ws.alloc(cp.workspace_bytes)) return fail(Status(StatusCode::cuda_error, "context prefill: workspace cudaMalloc"));
  RunOptions opt;
  opt.debug_checks = true;
  opt.stream = stream;
  std::vector<float> out[2], lse[2];
  for (int run = 0; run < 2; ++run) {
    err = dev.fresh_outputs();
    if (err == cudaSuccess && stream) err = cudaDeviceSynchronize();  // (as run_paged_prefill_case)
    if (err != cudaSuccess) return fail(Status(StatusCode::cuda_error, cudaGetErrorString(err)));
    Status s = context_prefill(prefix, chunk, cp, ws.p, cp.workspace_bytes, opt);
    if (!s.ok()) return fail(std::move(s));
    if ((err = cudaDeviceSynchronize()) == cudaSuccess) err = read_outputs(dev, t, &out[run], &lse[run]);
    if (err != cudaSuccess)
      return fail(Status(StatusCode::cuda_error, std::string("context prefill: ") + cudaGetErrorString(err)));
  }
  r.deterministic = std::memcmp(out[0].data(), out[1].data(), out[0].size() * 4) == 0 &&
                    std::memcmp(lse[0].data(), lse[1].data(), lse[0].size() * 4) == 0;
  compare_prefill(in, out[0], lse[0], &r);
  return r;
}

// The context cases of the GPU tests: causal chunks over prefixes in vLLM's layout, every q
// length of a batch equal (the split's condition); the seed's shape at lengths the CPU reference
// runs in about a second (4 / 1 heads, 200 tokens over 1500: two q tiles, the second partly
// empty), GQA 6 with a sequence of no prefix and one shorter than its chunk, one token, lengths off
// every tile and page (pages of 24), c forced to 1 (a piece per key tile) and to 7, past the
// chunk's 3 key tiles (a chunk CTA meets several q tiles).
inline std::vector<PagedPrefillCase> context_prefill_cases() {
  std::vector<PagedPrefillCase> v = {
      {"ctx_seedlike_1500_200_gqa4_p16", {1500}, {200}, 4, 1, 16},
      {"ctx_varlen_prefix_gqa6_p16", {1000, 0, 37}, {100, 100, 100}, 6, 1, 16},
      {"ctx_one_token_gqa4_p16", {2000, 700}, {1, 1}, 4, 1, 16},
      {"ctx_odd_1001_77_gqa8_p24", {1001, 515}, {77, 77}, 8, 2, 24},
      {"ctx_chunk1_500_150_gqa4_p16", {500}, {150}, 4, 1, 16},
      {"ctx_chunk7_300_150_gqa4_p16", {300, 133}, {150, 150}, 4, 1, 16},
  };
  v[4].tail_chunk = 1;
  v[5].tail_chunk = 7;
  return v;
}

}  // namespace muh::check
