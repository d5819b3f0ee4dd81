// prefill_check.hpp — one prefill case, run on the GPU under a forced dispatch target and held
// against the CPU reference. Shared by tests/gpu/test_prefill.cu (one gtest case per
// (target, dtype, head_dim, shape)) and tools/verify_prefill.cpp (`muh verify`), so both check
// exactly the same thing. Host code only (CUDA runtime API); no gtest.
//
// The tolerance: max |out − ref| ≤ 2 × max(naive_err, u·max|ref|), where ref is muh::ref::prefill
// (double accumulation over the inputs rounded to the storage type) and naive_err is the error of
// a naive implementation at the input precision, computed here the way an eager framework does
// it in that dtype: S = Q·Kᵀ (fp32 accumulation) rounded to the dtype, scaled and rounded again,
// softmax in fp32 rounded to the dtype, O = P·V (fp32 accumulation) rounded to the dtype. The
// factor 2 is FlashAttention's test criterion. The floor u·max|ref| (u = unit roundoff of the
// dtype: 2^-8 bf16, 2^-11 fp16, 2^-24 fp32) is the rounding any implementation that stores its
// output in the dtype makes; it only matters when the naive error happens to be ~0.
// lse is held to 1e-3·(1 + |ref|) (it is computed in fp32 from the same scores), and −inf
// (a query that sees no key) must match exactly. Outputs are pre-filled with NaN (0xFF bytes),
// so a row the kernel forgets shows up as non-finite. Every case runs twice: out and lse must be
// bitwise equal (run-to-run determinism).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "device_buffer.hpp"
#include "variant_spec.hpp"
#include "muh/attention.hpp"
#include "muh/kv_quant.hpp"
#include "muh/dtype.hpp"
#include "muh/reference.hpp"

namespace muh::check {

struct PrefillCase {
  const char* name;
  std::vector<int> len_q, len_k;  // per sequence (0 allowed)
  int num_q_heads, num_kv_heads;
  bool causal;
  float softmax_scale;  // 0 → 1/sqrt(head_dim); larger values make the softmax sharp
  // PrefillPlanOptions::tail_chunk: -1 runs with the workspace the plan asks for (none for these
  // small shapes), > 0 forces the tail split (prefill_plan.hpp) with that many key tiles per
  // tail CTA — where the agent and the shape allow it (prefill_split_applies: tensor-core
  // agents; equal lengths; causal only where every q tile sees most keys).
  int tail_chunk = -1;
  VariantSpec variant = {};  // none by default (the plain kind)
  // An fp8 KV cache (paged cases only: check/paged_prefill_check.hpp stores the codes): K and V
  // are drawn, then replaced by their dequantised fp8 values (code · scale) before the reference
  // and the naive error are computed, so both see exactly what the kernel reads.
  KVQuant kv = {};
};

// The shapes every compiled policy is checked on. Lengths of 1, lengths that are no multiple of
// any tile (16/32/64/128), zero-length sequences, q shorter and longer than k under a causal
// mask, GQA ratios 1, 4, 6 and 8, and sharp softmaxes (scale 1–2) that exercise the running-max
// rescale across many key tiles.
inline const std::vector<PrefillCase>& prefill_cases() {
  static const std::vector<PrefillCase> cases = {
      {"varlen_causal_gqa4", {1, 67, 0, 130, 16}, {1, 67, 0, 130, 16}, 8, 2, true, 0.f},
      {"varlen_gqa8_k_differs", {1, 33, 100, 129}, {5, 70, 100, 300}, 8, 1, false, 1.f},
      {"causal_q_shorter_than_k", {1, 37, 128, 5}, {200, 50, 300, 5}, 4, 4, true, 0.5f},
      {"causal_q_longer_than_k", {50, 3, 9}, {20, 0, 9}, 2, 1, true, 0.f},
      {"long_sharp_causal", {300}, {300}, 2, 2, true, 2.f},
      // GQA 6 (the seed's Qwen3.5-27B at TP4: 6 q heads per kv head), q shorter than k in one
      // sequence, keys past 256 (two 128-key tiles and a ragged third), length 1.
      {"gqa6_causal_varlen", {129, 1, 200}, {129, 1, 333}, 12, 2, true, 0.f},
      // The tail split, forced: pieces of 3 key tiles over 333 keys (6 tiles of 64 keys, 11 of 32:
      // there the pieces straddle q tiles), one key tile per piece over 1000 keys (16–32 pieces of
      // a tile, q length 1), a tail split off a grid larger than the H200's 132 hd-256 slots (144
      // tiles at 128 × 64: 12 split, the rest whole; 5 key tiles of 64 in chunks of 3 straddle),
      // and a single key. tests/cpu/test_prefill_plan.cpp walks every piece of many more shapes.
      {"split_straddle_gqa4", {200, 200, 200}, {333, 333, 333}, 8, 2, false, 1.f, 3},
      {"split_q1_chunk1", {1, 1}, {1000, 1000}, 4, 1, false, 0.f, 1},
      {"split_main_and_tail", {384, 384, 384}, {300, 300, 300}, 16, 4, false, 0.5f, 3},
      {"split_one_key", {64, 64}, {1, 1}, 4, 4, false, 0.f, 1},
      // Causal, a chunk over its prefix (every q tile sees ≥ 3/4 of the keys): one key tile a
      // piece, so that the top rows of a tile find none of their keys in the pieces past their
      // diagonal (row 0 sees keys < 601 of 700), and a 200-row chunk of two q tiles of 128.
      {"split_causal_chunk1", {100, 100}, {700, 700}, 4, 1, true, 1.f, 1},
      {"split_causal_two_tiles", {200}, {1000}, 6, 1, true, 0.f, 2},
  };
  return cases;
}

// Host-side data of one (case, dtype, head_dim): inputs rounded to the dtype, the reference and
// the naive error. Built once and shared by every target that runs it.
struct PrefillInputs {
  const PrefillCase* c = nullptr;
  DType dtype = DType::bf16;
  int head_dim = 0;
  float scale = 0.f;
  std::vector<int> cu_q, cu_k;
  int total_q = 0, total_k = 0, max_q = 0, max_k = 0;
  std::vector<float> q, k, v;
  std::vector<float> ref_out, ref_lse;
  double naive_err = 0, max_ref = 0;
};

// The sizes, scale and mask of a case's call (pointers unset): what the contiguous check and the
// paged one (paged_prefill_check.hpp) both start from.
inline PrefillParams shape_params(const PrefillInputs& in) {
  PrefillParams p;
  p.dtype = in.dtype;
  p.batch = int(in.cu_q.size()) - 1;
  p.total_q = in.total_q;
  p.total_k = in.total_k;
  p.max_seqlen_q = in.max_q;
  p.max_seqlen_k = in.max_k;
  p.num_q_heads = in.c->num_q_heads;
  p.num_kv_heads = in.c->num_kv_heads;
  p.head_dim = in.head_dim;
  p.softmax_scale = in.c->softmax_scale;
  p.causal = in.c->causal;
  return p;
}

// The naive implementation at the input precision (see the header comment); a variant's logit
// transform in fp32 on the rounded scaled score, its sink in the fp32 denominator.
inline void naive_prefill(const PrefillInputs& in, std::vector<float>& out) {
  const int d = in.head_dim, hq = in.c->num_q_heads, hkv = in.c->num_kv_heads, group = hq / hkv;
  const DType t = in.dtype;
  const VariantSpec& var = in.c->variant;
  out.assign(in.q.size(), 0.f);
  std::vector<float> s, p;
  for (std::size_t b = 0; b + 1 < in.cu_q.size(); ++b) {
    const int q0 = in.cu_q[b], sq = in.cu_q[b + 1] - q0, k0 = in.cu_k[b], sk = in.cu_k[b + 1] - k0;
    for (int i = 0; i < sq; ++i) {
      const KeyRange kr_ =
          visible_key_range(i, sq, sk, in.c->causal, var.window_left, var.window_right, var.queries_after_keys);
      const int lo = int(kr_.lo), n = int(std::max<long long>(0, kr_.hi - kr_.lo));
      for (int h = 0; h < hq; ++h) {
        const int kh = h / group;
        const float* qr = &in.q[(std::size_t(q0 + i) * hq + h) * d];
        float* o = &out[(std::size_t(q0 + i) * hq + h) * d];
        if (n == 0) continue;
        s.assign(n, 0.f);
        const float sink = var.sinks.empty() ? -INFINITY : var.sinks[h];
        float m = sink;
        for (int j = 0; j < n; ++j) {
          const float* kr = &in.k[(std::size_t(k0 + lo + j) * hkv + kh) * d];
          float acc = 0.f;
          for (int e = 0; e < d; ++e) acc += qr[e] * kr[e];
          float x = ref::round_to(ref::round_to(acc, t) * in.scale, t);
          if (var.softcap > 0.f) x = var.softcap * std::tanh(x / var.softcap);
          if (!var.alibi.empty()) x -= var.alibi[h] * float(alibi_distance(i, lo + j, sq, sk, var.queries_after_keys));
          s[j] = x;
          m = std::max(m, s[j]);
        }
        p.assign(n, 0.f);
        float den = sink == -INFINITY ? 0.f : std::exp(sink - m);
        for (int j = 0; j < n; ++j) den += (p[j] = std::exp(s[j] - m));
        for (int j = 0; j < n; ++j) p[j] = ref::round_to(p[j] / den, t);
        for (int e = 0; e < d; ++e) {
          float acc = 0.f;
          for (int j = 0; j < n; ++j) acc += p[j] * in.v[(std::size_t(k0 + lo + j) * hkv + kh) * d + e];
          o[e] = ref::round_to(acc, t);
        }
      }
    }
  }
}

inline std::unique_ptr<PrefillInputs> make_prefill_inputs(const PrefillCase& c, DType t, int head_dim, unsigned seed) {
  auto in = std::make_unique<PrefillInputs>();
  in->c = &c;
  in->dtype = t;
  in->head_dim = head_dim;
  in->scale = effective_softmax_scale(c.softmax_scale, head_dim);
  in->cu_q.assign(1, 0);
  in->cu_k.assign(1, 0);
  for (std::size_t b = 0; b < c.len_q.size(); ++b) {
    in->cu_q.push_back(in->cu_q.back() + c.len_q[b]);
    in->cu_k.push_back(in->cu_k.back() + c.len_k[b]);
    in->max_q = std::max(in->max_q, c.len_q[b]);
    in->max_k = std::max(in->max_k, c.len_k[b]);
  }
  in->total_q = in->cu_q.back();
  in->total_k = in->cu_k.back();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto fill = [&](std::vector<float>& x, std::size_t n) {
    x.resize(n);
    for (auto& e : x) e = ref::round_to(u(rng), t);
  };
  fill(in->q, std::size_t(in->total_q) * c.num_q_heads * head_dim);
  fill(in->k, std::size_t(in->total_k) * c.num_kv_heads * head_dim);
  fill(in->v, std::size_t(in->total_k) * c.num_kv_heads * head_dim);
  if (is_fp8(c.kv.dtype)) {
    for (auto& e : in->k) e = fp8_to_float(float_to_fp8(e / c.kv.k_scale, c.kv.dtype), c.kv.dtype) * c.kv.k_scale;
    for (auto& e : in->v) e = fp8_to_float(float_to_fp8(e / c.kv.v_scale, c.kv.dtype), c.kv.dtype) * c.kv.v_scale;
  }
  in->ref_out.assign(in->q.size(), 0.f);
  in->ref_lse.assign(std::size_t(in->total_q) * c.num_q_heads, 0.f);
  ref::prefill(in->q.data(), in->k.data(), in->v.data(), in->cu_q.data(), in->cu_k.data(), int(c.len_q.size()),
               c.num_q_heads, c.num_kv_heads, head_dim, in->scale, c.causal, c.variant.host(), in->ref_out.data(),
               in->ref_lse.data());
  std::vector<float> naive;
  naive_prefill(*in, naive);
  for (std::size_t i = 0; i < naive.size(); ++i) {
    in->naive_err = std::max(in->naive_err, double(std::fabs(naive[i] - in->ref_out[i])));
    in->max_ref = std::max(in->max_ref, double(std::fabs(in->ref_out[i])));
  }
  return in;
}

// Inputs are deterministic per (case, dtype, head_dim, seed); cached so every target reuses them.
inline const PrefillInputs& cached_prefill_inputs(std::size_t case_index, DType t, int head_dim, unsigned seed = 1) {
  static std::mutex mu;
  static std::map<std::tuple<std::size_t, int, int, unsigned>, std::unique_ptr<PrefillInputs>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[{case_index, int(t), head_dim, seed}];
  if (!slot) slot = make_prefill_inputs(prefill_cases()[case_index], t, head_dim, seed + unsigned(case_index) * 7919u);
  return *slot;
}

struct PrefillResult {
  Status status;                  // of the prefill call (or a CUDA step around it)
  double max_err = 0, tol = 0;    // max |out − ref| and its bound
  double max_lse_err = 0;         // max |lse − ref| over finite entries
  std::size_t nonfinite = 0;      // non-finite outputs (NaN pre-fill left, or overflow)
  std::size_t lse_mismatch = 0;   // lse entries outside 1e-3·(1+|ref|), or −inf disagreements
  bool deterministic = true;      // two runs bitwise equal
  std::size_t workspace_bytes = 0;  // the workspace the call used: the tail split's, the persistent
                                    // schedule's counter (0: one CTA per q tile)
  bool persistent = false;          // the plan's persistent schedule ran
  bool pass = false;
  std::string note;               // why it failed, in one line
};


// Runs `in` with the policy of dispatch target `target` (twice) and compares. `launch`, when
// given, replaces plan_prefill() + muh::prefill() (the GPU test uses it to run kernels of policies outside the
// tables, e.g. other K/V ring depths). `stream`, when given (e.g. a green-context stream,
// green_partition.hpp), is where plan_prefill() + muh::prefill() run, planned with
// stream_profile(stream); the inputs are copied on the default stream first, as without one.
// sm_count > 0 plans for that many SMs instead of the profile's (the persistent schedule's CTAs,
// prefill_plan.hpp: a few CTAs then walk many q tiles each on the real device).
using PrefillLauncher = std::function<Status(const PrefillParams&)>;
inline PrefillResult run_prefill_case(const PrefillInputs& in, int target, const PrefillLauncher& launch = {},
                                      cudaStream_t stream = nullptr, int sm_count = 0) {
  PrefillResult r;
  const DType t = in.dtype;
  const std::size_t e = dtype_size(t);
  const std::size_t nq = in.q.size(), nk = in.k.size(), nl = std::size_t(in.total_q) * in.c->num_q_heads;
  DevBuf dq(nq * e), dk(nk * e), dv(nk * e), dout(nq * e), dout2(nq * e), dlse(nl * 4), dlse2(nl * 4),
      dcq(in.cu_q.size() * 4), dck(in.cu_k.size() * 4);
  auto fail = [&](const std::string& what, cudaError_t err) {
    Status s(StatusCode::cuda_error, what + ": " + cudaGetErrorString(err));
    std::swap(r.status, s);  // (assigning a [[nodiscard]] Status warns under nvcc)
    r.note = r.status.message();
    return r;
  };
  if ((nq && (!dq.p || !dout.p || !dout2.p)) || (nk && (!dk.p || !dv.p)) || !dcq.p || !dck.p)
    return fail("cudaMalloc", cudaErrorMemoryAllocation);
  const auto hq = ref::to_storage(in.q, t), hk = ref::to_storage(in.k, t), hv = ref::to_storage(in.v, t);
  cudaError_t err = cudaSuccess;
  if (nq) err = cudaMemcpy(dq.p, hq.data(), hq.size(), cudaMemcpyHostToDevice);
  if (err == cudaSuccess && nk) err = cudaMemcpy(dk.p, hk.data(), hk.size(), cudaMemcpyHostToDevice);
  if (err == cudaSuccess && nk) err = cudaMemcpy(dv.p, hv.data(), hv.size(), cudaMemcpyHostToDevice);
  if (err == cudaSuccess) err = cudaMemcpy(dcq.p, in.cu_q.data(), in.cu_q.size() * 4, cudaMemcpyHostToDevice);
  if (err == cudaSuccess) err = cudaMemcpy(dck.p, in.cu_k.data(), in.cu_k.size() * 4, cudaMemcpyHostToDevice);
  // NaN pre-fill: 0xFF bytes are NaN in fp16, bf16 and fp32.
  if (err == cudaSuccess && nq) err = cudaMemset(dout.p, 0xFF, nq * e);
  if (err == cudaSuccess && nq) err = cudaMemset(dout2.p, 0xFF, nq * e);
  if (err == cudaSuccess && nl) err = cudaMemset(dlse.p, 0xFF, nl * 4);
  if (err == cudaSuccess && nl) err = cudaMemset(dlse2.p, 0xFF, nl * 4);
  DeviceVariant dvar;
  if (err == cudaSuccess) err = dvar.upload(in.c->variant);
  if (err != cudaSuccess) return fail("copying inputs", err);

  PrefillParams p = shape_params(in);
  p.variant = dvar.v;
  p.q = dq.p;
  p.k = dk.p;
  p.v = dv.p;
  p.cu_seqlens_q = static_cast<const int*>(dcq.p);
  p.cu_seqlens_k = static_cast<const int*>(dck.p);
  RunOptions opt;
  opt.debug_checks = true;  // also exercises the cu_seqlens checks
  opt.stream = stream;
  // The plan on this device's profile with the target forced, and the workspace it asks for,
  // pre-filled with NaN: a merge that read a slot no piece wrote would show up as non-finite output.
  PrefillPlan plan;
  DevBuf dws;
  if (!launch) {
    Status s = [&] {
      HardwareCapability hw;
      MUH_TRY(stream ? stream_profile(stream, &hw) : device_profile(-1, &hw));
      if (sm_count > 0) hw.sm_count = sm_count;
      return plan_prefill(p, hw, PrefillPlanOptions{target, in.c->tail_chunk}, &plan);
    }();
    if (!s.ok()) {
      std::swap(r.status, s);
      r.note = r.status.message();
      return r;
    }
    r.workspace_bytes = plan.workspace_bytes;
    r.persistent = plan.persistent.on();
    if (r.workspace_bytes > 0) {
      if (!dws.alloc(r.workspace_bytes)) return fail("cudaMalloc (workspace)", cudaErrorMemoryAllocation);
      if ((err = cudaMemset(dws.p, 0xFF, r.workspace_bytes)) != cudaSuccess) return fail("workspace pre-fill", err);
    }
  }
  // The copies and NaN pre-fills above ran on the default stream, which a non-blocking stream
  // does not wait for.
  if (stream && (err = cudaDeviceSynchronize()) != cudaSuccess) return fail("copying inputs", err);
  for (int run = 0; run < 2; ++run) {
    p.out = run == 0 ? dout.p : dout2.p;
    p.lse = static_cast<float*>(run == 0 ? dlse.p : dlse2.p);
    Status s = launch ? launch(p) : prefill(p, plan, dws.p, r.workspace_bytes, opt);
    std::swap(r.status, s);
    if (!r.status.ok()) {
      r.note = r.status.message();
      return r;
    }
  }
  if ((err = stream ? cudaStreamSynchronize(stream) : cudaDeviceSynchronize()) != cudaSuccess)
    return fail("prefill kernel", err);

  std::vector<unsigned char> out(nq * e), out2(nq * e);
  std::vector<float> lse(nl), lse2(nl);
  if (nq) err = cudaMemcpy(out.data(), dout.p, out.size(), cudaMemcpyDeviceToHost);
  if (err == cudaSuccess && nq) err = cudaMemcpy(out2.data(), dout2.p, out2.size(), cudaMemcpyDeviceToHost);
  if (err == cudaSuccess && nl) err = cudaMemcpy(lse.data(), dlse.p, nl * 4, cudaMemcpyDeviceToHost);
  if (err == cudaSuccess && nl) err = cudaMemcpy(lse2.data(), dlse2.p, nl * 4, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) return fail("copying outputs", err);

  r.deterministic = out == out2 && std::memcmp(lse.data(), lse2.data(), nl * 4) == 0;
  for (std::size_t i = 0; i < nq; ++i) {
    const float got = ref::from_storage(out.data(), i, t);
    if (!std::isfinite(got)) {
      ++r.nonfinite;
      continue;
    }
    r.max_err = std::max(r.max_err, double(std::fabs(got - in.ref_out[i])));
  }
  for (std::size_t i = 0; i < nl; ++i) {
    const float want = in.ref_lse[i], got = lse[i];
    if (std::isinf(want) || std::isinf(got) || std::isnan(got)) {
      if (!(got == want)) ++r.lse_mismatch;
      continue;
    }
    const double d = std::fabs(double(got) - want);
    r.max_lse_err = std::max(r.max_lse_err, d);
    if (d > 1e-3 * (1.0 + std::fabs(want))) ++r.lse_mismatch;
  }
  r.tol = 2.0 * std::max(in.naive_err, ref::unit_roundoff(t) * in.max_ref);
  r.pass = r.nonfinite == 0 && r.lse_mismatch == 0 && r.deterministic && r.max_err <= r.tol;
  if (!r.pass) {
    if (r.nonfinite) r.note += std::to_string(r.nonfinite) + " non-finite outputs; ";
    if (r.lse_mismatch) r.note += std::to_string(r.lse_mismatch) + " lse mismatches; ";
    if (!r.deterministic) r.note += "two runs differ bitwise; ";
    if (r.max_err > r.tol) r.note += "max error " + std::to_string(r.max_err) + " > tol " + std::to_string(r.tol) + "; ";
  }
  return r;
}

}  // namespace muh::check
