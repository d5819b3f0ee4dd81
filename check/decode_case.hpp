// decode_case.hpp — one paged-decode check, shared by tests/gpu/test_decode.cu and `muh verify`
// (tools/verify_decode.cpp) so that both run exactly the same thing (the muh_check library,
// check/CMakeLists.txt). Host code only (the CUDA
// runtime API and muh's public API); no gtest.
//
// A DecodeProblem builds random inputs for a DecodeCase, computes the CPU reference (double) and
// a naive same-precision result, uploads everything, and runs paged_decode under a forced target
// and split count, plain or through a captured CUDA graph.
//
// What a run checks:
//   * every output element finite — out and lse are pre-filled with NaN, so a row never written
//     shows up; unused slots of each sequence's last page (and unused pages) hold NaN, so a
//     masking leak shows up; block-table entries past a sequence hold 2^30 (never dereferenced);
//   * |out − ref| ≤ tol, with tol = 2 · max(naive_err, floor):
//       naive_err — the max error of a naive implementation at the storage precision: fp32
//         scores and softmax, p rounded to the storage type before P·V (what any 16-bit
//         tensor-core kernel does), fp32 accumulation, output rounded to the storage type;
//       floor — u · max|ref| for fp16/bf16 (u = 2^-11 / 2^-8: one rounding of the largest
//         output), 64 · 2^-24 · max|ref| for fp32 (a few ulps of exp2 and of reordered fp32
//         sums over up to thousands of terms); it only matters when the naive error happens to
//         be 0 (e.g. seq_len 1, where out = v exactly);
//   * lse: |lse − lse_ref| ≤ 1e-3 + 1e-5·|lse_ref| (fp32 scores; bugs move it by O(0.1)), and an
//     empty sequence gives lse = −inf and out = 0 exactly.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "variant_spec.hpp"
#include "muh/attention.hpp"
#include "muh/build_config.hpp"
#include "muh/dispatch.hpp"
#include "muh/instances.hpp"
#include "muh/plan.hpp"
#include "muh/reference.hpp"
#include "muh/tuning/selectors.hpp"

namespace muh::check {

struct DecodeCase {
  int target = 0;
  DType dtype = DType::bf16;
  KVLayout layout = KVLayout::nhd;
  int head_dim = 128;
  int page_size = 16;
  int num_q_heads = 8;
  int num_kv_heads = 2;
  std::vector<int> seq_lens{17};
  int force_splits = 0;        // 0: the plan's choice
  int wide_row = -1;           // PlanOptions::wide_row: -1 the plan's choice, 1 the target's wide row
  float softmax_scale = 0.f;   // 0: 1/sqrt(head_dim)
  unsigned seed = 1;
  std::string shape = "case";  // label of the shape family
  VariantSpec variant = {};    // an attention variant (none: the plain kind)
  // The cache's element type (muh/kv_quant.hpp). fp8: K and V are drawn as x ~ U(−kv_amp, kv_amp),
  // stored as the codes of x / scale (saturating past the format's largest value), and the
  // reference reads code · scale; unused slots hold the NaN code.
  KVDType kv = KVDType::same;
  float k_scale = 1.f, v_scale = 1.f;
  float kv_amp = 1.f;

  std::string name() const {
    std::string s = "t" + std::to_string(target) + "_" + std::string(dtype_name(dtype)) + "_hd" +
                    std::to_string(head_dim) + "_" + (layout == KVLayout::nhd ? "nhd" : "vllm") + "_" + shape;
    if (is_fp8(kv)) s += "_" + std::string(kv_dtype_name(kv));
    if (wide_row == 1) s += "_wide";
    return s;
  }
};

struct DecodeOutcome {
  std::string error;               // non-empty: the run itself failed (Status or CUDA error)
  double max_err = 0;              // max |out − ref|
  double tol = 0;
  double naive_err = 0;
  double max_ref = 0;
  double lse_err = 0;              // max |lse − lse_ref| over non-empty rows
  double lse_tol = 0;
  std::size_t nonfinite = 0;       // NaN / inf elements of out
  std::size_t empty_bad = 0;       // elements of empty sequences that are not out = 0 / lse = −inf
  int num_splits = 0;              // the plan's
  std::vector<unsigned char> out_bytes;  // raw out, then raw lse (bitwise comparisons)
  std::vector<float> out;                // out as float

  bool pass() const {
    return error.empty() && nonfinite == 0 && empty_bad == 0 && max_err <= tol && lse_err <= lse_tol;
  }
  std::string summary() const {
    if (!error.empty()) return error;
    std::string s = "max_err " + std::to_string(max_err) + " (tol " + std::to_string(tol) + ", naive " +
                    std::to_string(naive_err) + "), lse_err " + std::to_string(lse_err) + ", nonfinite " +
                    std::to_string(nonfinite) + ", bad empty rows " + std::to_string(empty_bad) + ", splits " +
                    std::to_string(num_splits);
    return s;
  }
};


class DecodeProblem {
 public:
  explicit DecodeProblem(const DecodeCase& c) : c_(c) { build_host(); }

  const DecodeCase& config() const { return c_; }
  int max_seq_len() const { return max_len_; }

  // Runs on `stream` (not owned; e.g. a green-context stream, green_partition.hpp) instead of a
  // non-blocking stream of its own. Call before the first run().
  void set_stream(cudaStream_t stream) { external_stream_ = stream; }

  // Whether run() also checks seq_lens and the used block ids on the host (RunOptions::
  // debug_checks; on by default). Off: the kernels' own guard is all there is (the bad-input
  // tests of tests/gpu/test_input_guard.cu).
  void set_host_checks(bool on) { host_checks_ = on; }

  // Replaces the sequence lengths — each at most that sequence's original length, since only
  // those pages exist — and recomputes the reference; upload_seq_lens() moves them to the device.
  void set_seq_lens(const std::vector<int>& lens) {
    // Misuse is a bug of the caller, not a kernel failure: stop loudly.
    if (lens.size() != lens_.size()) std::abort();
    for (std::size_t i = 0; i < lens.size(); ++i)
      if (lens[i] < 0 || lens[i] > lens_[i]) std::abort();
    lens_ = lens;
    compute_reference();
  }

  // Uploads every input; returns an error message or "".
  std::string upload() {
    const std::size_t e = dtype_size(c_.dtype), ce = kv_elem_size(c_.kv, int(e));
    if (!q_d_.alloc(q_.size() * e) || !k_d_.alloc(k_.size() * ce) || !v_d_.alloc(v_.size() * ce) ||
        !bt_d_.alloc(bt_.size() * 4) || !lens_d_.alloc(lens_.size() * 4) || !out_d_.alloc(out_elems() * e) ||
        !lse_d_.alloc(lse_elems() * 4))
      return "cudaMalloc failed";
    auto put = [](DevBuf& b, const void* h, std::size_t n) { return cudaMemcpy(b.p, h, n, cudaMemcpyHostToDevice); };
    cudaError_t err = put(q_d_, ref::to_storage(q_, c_.dtype).data(), q_.size() * e);
    if (is_fp8(c_.kv)) {
      if (!err) err = put(k_d_, k8_.data(), k8_.size());
      if (!err) err = put(v_d_, v8_.data(), v8_.size());
    } else {
      if (!err) err = put(k_d_, ref::to_storage(k_, c_.dtype).data(), k_.size() * e);
      if (!err) err = put(v_d_, ref::to_storage(v_, c_.dtype).data(), v_.size() * e);
    }
    if (!err) err = put(bt_d_, bt_.data(), bt_.size() * 4);
    if (!err) err = put(lens_d_, lens_.data(), lens_.size() * 4);
    if (!err) err = dvar_.upload(c_.variant);
    // A set_stream() stream may be another context's (a green context): wait for the copies here
    // rather than rely on how the default stream orders them against it.
    if (!err && external_stream_ != nullptr) err = cudaDeviceSynchronize();
    return err ? std::string("upload: ") + cudaGetErrorString(err) : std::string();
  }
  std::string upload_seq_lens() {
    const cudaError_t err = cudaMemcpy(lens_d_.p, lens_.data(), lens_.size() * 4, cudaMemcpyHostToDevice);
    return err ? std::string("upload seq_lens: ") + cudaGetErrorString(err) : std::string();
  }

  DecodeParams params() const {
    DecodeParams p;
    p.dtype = c_.dtype;
    p.layout = c_.layout;
    p.q = q_d_.p;
    p.k_cache = k_d_.p;
    p.v_cache = v_d_.p;
    p.out = out_d_.p;
    p.lse = static_cast<float*>(lse_d_.p);
    p.block_table = static_cast<const int*>(bt_d_.p);
    p.seq_lens = static_cast<const int*>(lens_d_.p);
    p.num_seqs = static_cast<int>(lens_.size());
    p.num_q_heads = c_.num_q_heads;
    p.num_kv_heads = c_.num_kv_heads;
    p.head_dim = c_.head_dim;
    p.page_size = c_.page_size;
    p.num_pages = num_pages_;
    p.max_blocks_per_seq = max_blocks_;
    p.max_seq_len = max_len_;
    p.softmax_scale = c_.softmax_scale;
    p.variant = dvar_.v;
    p.kv = KVQuant{c_.kv, c_.k_scale, c_.v_scale};
    return p;
  }

  // Plans (forced target, force_splits ≥ 0) and runs once; with `graph`, the plan is a
  // cuda_graph plan and the call is captured into a graph and replayed `graph_replays` times.
  // l2_evict_first: as PlanOptions::l2_evict_first (-1: the plan's choice).
  DecodeOutcome run(const HardwareCapability& hw, int force_splits, bool graph = false, int l2_evict_first = -1) {
    DecodeOutcome r;
    DecodeParams p = params();
    DecodePlan plan;
    const Status s =
        plan_decode(p, hw, PlanOptions{c_.target, force_splits, graph, l2_evict_first, c_.wide_row}, &plan);
    if (!s.ok()) return fail(r, "plan_decode: " + s.message());
    return run_planned(plan, graph);
  }

  // Runs once under `plan`, made by the caller — e.g. for other pages than the case's (a plan
  // serves any call of its shapes: paged_decode() takes it); with `graph` captured into a graph
  // and replayed (a cuda_graph plan).
  DecodeOutcome run_planned(const DecodePlan& plan, bool graph = false) {
    DecodeOutcome r;
    r.num_splits = plan.num_splits;
    if (!ws_d_.alloc(plan.workspace_bytes)) return fail(r, "cudaMalloc workspace failed");
    poison(plan.workspace_bytes);
    RunOptions opt;
    opt.stream = stream();
    if (!graph) {
      opt.debug_checks = host_checks_;  // seq_lens and used block ids checked on the host as well
      const Status run = paged_decode(params(), plan, ws_d_.p, plan.workspace_bytes, opt);
      if (!run.ok()) return fail(r, "paged_decode: " + run.message());
    } else {
      const Status cap = capture(params(), plan, opt);
      if (!cap.ok()) return fail(r, cap.message());
      const cudaError_t e = cudaGraphLaunch(graph_exec_, stream());
      if (e) return fail(r, std::string("cudaGraphLaunch: ") + cudaGetErrorString(e));
    }
    return collect(r);
  }

  // Replays the graph captured by the last run(graph = true) after poisoning the outputs.
  DecodeOutcome replay() {
    DecodeOutcome r;
    if (graph_exec_ == nullptr) return fail(r, "no captured graph");
    poison(0);
    const cudaError_t e = cudaGraphLaunch(graph_exec_, stream());
    if (e) return fail(r, std::string("cudaGraphLaunch: ") + cudaGetErrorString(e));
    r.num_splits = last_splits_;
    return collect(r);
  }

  ~DecodeProblem() {
    if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  DecodeProblem(const DecodeProblem&) = delete;
  DecodeProblem& operator=(const DecodeProblem&) = delete;

 private:
  DecodeCase c_;
  int max_len_ = 0, max_blocks_ = 1, num_pages_ = 1, last_splits_ = 0;
  bool host_checks_ = true;
  PagedKVShape kv_;
  std::vector<float> q_, k_, v_, ref_out_, ref_lse_;
  std::vector<std::uint8_t> k8_, v8_;  // an fp8 cache's codes (k_, v_ hold code · scale)
  std::vector<int> bt_, lens_;
  double naive_err_ = 0, max_ref_ = 0;
  DevBuf q_d_, k_d_, v_d_, bt_d_, lens_d_, out_d_, lse_d_, ws_d_;
  DeviceVariant dvar_;
  cudaStream_t stream_ = nullptr;           // own, made on first use
  cudaStream_t external_stream_ = nullptr;  // set_stream()
  cudaGraphExec_t graph_exec_ = nullptr;

  cudaStream_t stream() {
    if (external_stream_ != nullptr) return external_stream_;
    if (stream_ == nullptr) cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    return stream_;
  }
  std::size_t out_elems() const { return lens_.size() * c_.num_q_heads * static_cast<std::size_t>(c_.head_dim); }
  std::size_t lse_elems() const { return lens_.size() * c_.num_q_heads; }

  static DecodeOutcome fail(DecodeOutcome& r, std::string m) {
    r.error = std::move(m);
    return r;
  }

  void poison(std::size_t ws_bytes) {
    cudaMemsetAsync(out_d_.p, 0xff, out_elems() * dtype_size(c_.dtype), stream());  // NaN in fp16/bf16/fp32
    cudaMemsetAsync(lse_d_.p, 0xff, lse_elems() * 4, stream());
    if (ws_bytes) cudaMemsetAsync(ws_d_.p, 0xff, ws_bytes, stream());
  }

  Status capture(const DecodeParams& p, const DecodePlan& plan, const RunOptions& opt) {
    if (graph_exec_) {
      cudaGraphExecDestroy(graph_exec_);
      graph_exec_ = nullptr;
    }
    cudaStreamSynchronize(stream());
    cudaGraph_t g = nullptr;
    cudaError_t e = cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal);
    if (e) return {StatusCode::cuda_error, std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(e)};
    const Status s = paged_decode(p, plan, ws_d_.p, plan.workspace_bytes, opt);
    e = cudaStreamEndCapture(stream(), &g);
    if (!s.ok()) {
      if (g) cudaGraphDestroy(g);
      return {s.code(), "paged_decode under capture: " + s.message()};
    }
    if (e) return {StatusCode::cuda_error, std::string("cudaStreamEndCapture: ") + cudaGetErrorString(e)};
    e = cudaGraphInstantiate(&graph_exec_, g, 0);
    cudaGraphDestroy(g);
    if (e) return {StatusCode::cuda_error, std::string("cudaGraphInstantiate: ") + cudaGetErrorString(e)};
    last_splits_ = plan.num_splits;
    return Status::Ok();
  }

  DecodeOutcome collect(DecodeOutcome& r) {
    cudaError_t e = cudaStreamSynchronize(stream());
    if (e) return fail(r, std::string("kernel: ") + cudaGetErrorString(e));
    const std::size_t es = dtype_size(c_.dtype);
    std::vector<unsigned char> ob(out_elems() * es);
    std::vector<float> lse(lse_elems());
    e = cudaMemcpy(ob.data(), out_d_.p, ob.size(), cudaMemcpyDeviceToHost);
    if (!e) e = cudaMemcpy(lse.data(), lse_d_.p, lse.size() * 4, cudaMemcpyDeviceToHost);
    if (e) return fail(r, std::string("download: ") + cudaGetErrorString(e));
    r.out.resize(out_elems());
    for (std::size_t i = 0; i < r.out.size(); ++i) r.out[i] = ref::from_storage(ob.data(), i, c_.dtype);
    const std::size_t D = c_.head_dim, H = c_.num_q_heads;
    for (std::size_t s = 0; s < lens_.size(); ++s)
      for (std::size_t h = 0; h < H; ++h) {
        const std::size_t row = s * H + h;
        const bool empty = lens_[s] == 0;
        for (std::size_t d = 0; d < D; ++d) {
          const float x = r.out[row * D + d];
          if (!std::isfinite(x)) {
            ++r.nonfinite;
            continue;
          }
          if (empty && x != 0.f) ++r.empty_bad;
          r.max_err = std::max(r.max_err, double(std::fabs(x - ref_out_[row * D + d])));
        }
        if (empty) {
          if (!(std::isinf(lse[row]) && lse[row] < 0)) ++r.empty_bad;
        } else if (!std::isfinite(lse[row])) {
          ++r.nonfinite;
        } else {
          r.lse_err = std::max(r.lse_err, double(std::fabs(lse[row] - ref_lse_[row])));
        }
      }
    r.naive_err = naive_err_;
    r.max_ref = max_ref_;
    const double floor = c_.dtype == DType::fp32 ? 64.0 * ref::unit_roundoff(c_.dtype) * max_ref_
                                                 : ref::unit_roundoff(c_.dtype) * max_ref_;
    r.tol = 2.0 * std::max(naive_err_, floor);
    double max_abs_lse = 0;
    for (std::size_t i = 0; i < ref_lse_.size(); ++i)
      if (std::isfinite(ref_lse_[i])) max_abs_lse = std::max(max_abs_lse, double(std::fabs(ref_lse_[i])));
    r.lse_tol = 1e-3 + 1e-5 * max_abs_lse;
    r.out_bytes = ob;
    const auto* lb = reinterpret_cast<const unsigned char*>(lse.data());
    r.out_bytes.insert(r.out_bytes.end(), lb, lb + lse.size() * 4);
    return r;
  }

  void build_host() {
    std::mt19937 rng(c_.seed * 7919u + 17u);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    lens_ = c_.seq_lens;
    max_len_ = lens_.empty() ? 0 : *std::max_element(lens_.begin(), lens_.end());
    const int ps = c_.page_size, D = c_.head_dim, Hkv = c_.num_kv_heads;
    kv_ = PagedKVShape{c_.layout, ps, Hkv, D, 16 / kv_elem_size(c_.kv, dtype_size(c_.dtype))};
    // Pages: each sequence's pages in random order among all pages, plus 3 pages nobody uses.
    int used = 0;
    for (int len : lens_) used += (len + ps - 1) / ps;
    num_pages_ = used + 3;
    max_blocks_ = std::max(1, (max_len_ + ps - 1) / ps + 1);  // one spare block-table column
    std::vector<int> perm(num_pages_);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    bt_.assign(lens_.size() * static_cast<std::size_t>(max_blocks_), 1 << 30);  // never dereferenced
    int next = 0;
    for (std::size_t s = 0; s < lens_.size(); ++s)
      for (int b = 0; b < (lens_[s] + ps - 1) / ps; ++b) bt_[s * max_blocks_ + b] = perm[next++];
    // K, V: random storage-precision values; NaN in every slot no sequence uses.
    const std::size_t cache = static_cast<std::size_t>(num_pages_) * ps * Hkv * D;
    k_.assign(cache, std::numeric_limits<float>::quiet_NaN());
    v_.assign(cache, std::numeric_limits<float>::quiet_NaN());
    const bool fp8 = is_fp8(c_.kv);
    if (fp8) {
      const std::uint8_t nan_code = fp8_format(c_.kv).nan_code;
      k8_.assign(cache, nan_code);
      v8_.assign(cache, nan_code);
    }
    // One cache element: a storage-precision value, or (fp8) the code of amp · u / scale and its
    // dequantised value code · scale.
    auto element = [&](std::vector<float>& val, std::vector<std::uint8_t>& codes, std::int64_t i, float scale) {
      if (!fp8) {
        val[i] = ref::round_to(u(rng), c_.dtype);
        return;
      }
      codes[i] = float_to_fp8(c_.kv_amp * u(rng) / scale, c_.kv);
      val[i] = fp8_to_float(codes[i], c_.kv) * scale;
    };
    for (std::size_t s = 0; s < lens_.size(); ++s)
      for (int t = 0; t < lens_[s]; ++t) {
        const int page = bt_[s * max_blocks_ + t / ps];
        for (int h = 0; h < Hkv; ++h)
          for (int d = 0; d < D; ++d) {
            element(k_, k8_, kv_.k_offset(page, t % ps, h, d), c_.k_scale);
            element(v_, v8_, kv_.v_offset(page, t % ps, h, d), c_.v_scale);
          }
      }
    // q ~ U(−2, 2): scores of std ≈ 1.3 at scale 1/sqrt(D), a softmax that is neither flat nor one-hot.
    q_.resize(lens_.size() * static_cast<std::size_t>(c_.num_q_heads) * D);
    for (auto& x : q_) x = ref::round_to(2.f * u(rng), c_.dtype);
    compute_reference();
  }

  void compute_reference() {
    const int D = c_.head_dim, H = c_.num_q_heads, group = c_.num_q_heads / c_.num_kv_heads;
    const float scale = effective_softmax_scale(c_.softmax_scale, D);
    ref_out_.assign(out_elems(), 0.f);
    ref_lse_.assign(lse_elems(), 0.f);
    const Variant var = c_.variant.host();
    ref::paged_decode(q_.data(), k_.data(), v_.data(), kv_, bt_.data(), max_blocks_, lens_.data(),
                      static_cast<int>(lens_.size()), H, scale, var, ref_out_.data(), ref_lse_.data());
    max_ref_ = 0;
    for (float x : ref_out_) max_ref_ = std::max(max_ref_, double(std::fabs(x)));
    // The naive same-precision implementation (see the top of the file).
    naive_err_ = 0;
    std::vector<float> sc, o(D);
    for (std::size_t s = 0; s < lens_.size(); ++s) {
      const int len = lens_[s];
      if (len == 0) continue;
      sc.assign(len, 0.f);
      // The variant (muh/variant.hpp): the query is the last token; keys [lo, len).
      const int lo = int(visible_key_range(0, 1, len, true, var.window_left, var.window_right).lo);
      for (int h = 0; h < H; ++h) {
        const int kh = h / group;
        const float* q = q_.data() + (s * H + h) * static_cast<std::size_t>(D);
        const float sink = var.use_sinks ? var.sinks[h] : -std::numeric_limits<float>::infinity();
        float m = sink;
        for (int t = lo; t < len; ++t) {
          const int page = bt_[s * max_blocks_ + t / c_.page_size];
          float acc = 0.f;
          for (int d = 0; d < D; ++d) acc += q[d] * k_[kv_.k_offset(page, t % c_.page_size, kh, d)];
          float x = acc * scale;
          if (var.softcap > 0.f) x = var.softcap * std::tanh(x / var.softcap);
          if (var.use_alibi) x -= var.alibi_slopes[h] * float(len - 1 - t);
          sc[t] = x;
          m = std::max(m, sc[t]);
        }
        float l = sink == -std::numeric_limits<float>::infinity() ? 0.f : std::exp(sink - m);
        std::fill(o.begin(), o.end(), 0.f);
        for (int t = lo; t < len; ++t) {
          const int page = bt_[s * max_blocks_ + t / c_.page_size];
          const float p = std::exp(sc[t] - m);
          l += p;
          const float pr = ref::round_to(p, c_.dtype);
          for (int d = 0; d < D; ++d) o[d] += pr * v_[kv_.v_offset(page, t % c_.page_size, kh, d)];
        }
        for (int d = 0; d < D; ++d) {
          const float x = ref::round_to(o[d] / l, c_.dtype);
          naive_err_ = std::max(naive_err_, double(std::fabs(x - ref_out_[(s * H + h) * D + d])));
        }
      }
    }
  }
};

// ---- The forced-policy sweep ---------------------------------------------------------------
// Shapes (each a family; every one runs for each target × dtype × head_dim × layout):
//   len1            seq_len 1 (three sequences), GQA 4
//   ragged          lengths that are multiples of neither the page nor the partition, GQA 8, page 8
//   one_partition   lengths of exactly one partition (the policy's) and one token less, GQA 1
//   many_partitions 6 forced partitions of 256 tokens over 1500 / 700 / 3 tokens, GQA 4
//   empty_seqs      seq_len 0 among others, V2 forced (3 partitions), GQA 8
//   gqa20           20 query heads per KV head: two head chunks per KV head, page 32
//   gqa6            6 query heads, 1 KV head (the seed's Qwen3.5-27B at TP4): 6 of the sm80
//                   agent's 8 head columns
//   gqa12           12 query heads per KV head: the sm80 agent's heads on the MMA rows (> 8),
//                   V2 forced (2 partitions)
//   long_auto       4100 tokens, the plan's own choice (V2 on sm80 targets), GQA 8
//   page64          page 64
//   page1           page 1 (NHD only: the vLLM layout moves V in 8-token runs of one page)
struct DecodeShape {
  const char* name;
  int page_size;
  int num_q_heads;
  int num_kv_heads;
  std::vector<int> seq_lens;  // -1 = the policy's partition_size, -2 = that minus one
  int force_splits;
  bool quick;                 // part of `muh verify --quick`
  bool nhd_only = false;
};

inline const std::vector<DecodeShape>& decode_shapes() {
  static const std::vector<DecodeShape> shapes = {
      {"len1", 16, 8, 2, {1, 1, 1}, 0, true},
      {"ragged", 8, 16, 2, {17, 1, 200, 33}, 0, true},
      {"one_partition", 32, 4, 4, {-1, -2}, 0, false},
      {"many_partitions", 16, 8, 2, {1500, 700, 3}, 6, true},
      {"empty_seqs", 16, 16, 2, {0, 37, 0, 130}, 3, true},
      {"gqa20", 32, 40, 2, {77, 300}, 0, false},
      {"gqa6", 16, 6, 1, {1, 333, 16}, 0, false},
      {"gqa12", 16, 24, 2, {250, 17}, 2, false},
      {"long_auto", 16, 16, 2, {4100}, 0, false},
      {"page64", 64, 8, 2, {130, 64}, 0, false},
      {"page1", 1, 8, 2, {19, 40}, 0, false, true},
  };
  return shapes;
}

// wide: the target's wide row forced (DecodeCase::wide_row), its partition for the -1/-2 lengths.
inline DecodeCase make_decode_case(int target, DType t, int head_dim, KVLayout layout, const DecodeShape& sh,
                                   unsigned seed, bool wide = false) {
  DecodeCase c;
  c.target = target;
  c.dtype = t;
  c.head_dim = head_dim;
  c.layout = layout;
  c.page_size = sh.page_size;
  c.num_q_heads = sh.num_q_heads;
  c.num_kv_heads = sh.num_kv_heads;
  const int part = (wide ? decode_wide_policy(target, t, head_dim) : decode_policy(target, t, head_dim)).partition_size;
  c.wide_row = wide ? 1 : -1;
  c.seq_lens.clear();
  for (int len : sh.seq_lens) c.seq_lens.push_back(len == -1 ? part : len == -2 ? part - 1 : len);
  c.force_splits = sh.force_splits;
  c.shape = sh.name;
  c.seed = seed + static_cast<unsigned>(head_dim) * 131u + static_cast<unsigned>(t) * 17u;
  return c;
}

// fp32 runs only the portable agent: it is swept on the targets whose 16-bit rows are portable
// too (0 and 75); on the others the fp32 row is the same portable instantiation.
inline bool sweep_fp32_on(int target) {
  return decode_policy(target, DType::bf16, 128).agent == Agent::portable;
}

// The dispatch targets a decode sweep runs: the compiled ones, less an arch-specific target
// (sm_90a) whose decode rows are those of its base arch, itself compiled — the same policies and
// kernel code (the Hopper agent is prefill's; tuning/selectors.hpp's decode_row gives sm_90a sm_90's
// rows), which the sweeps otherwise ran twice, once as t90 and once as t91.
inline std::vector<int> decode_sweep_targets() {
  std::vector<int> v;
  const int* first = compiled_targets::values;
  const int* last = compiled_targets::values + compiled_targets::size;
  for (const int* it = first; it != last; ++it) {
    const int target = *it;
    bool same_as_base = target_is_arch_specific(target) && std::find(first, last, target_arch(target)) != last;
    for (const auto& [t, d] : kCompiledInstances)
      same_as_base = same_as_base && decode_policy(target, t, d) == decode_policy(target_arch(target), t, d);
    if (!same_as_base) v.push_back(target);
  }
  return v;
}

// Every (target, dtype, head_dim, layout, shape) of the sweep over this build's instances.
inline std::vector<DecodeCase> decode_sweep_cases(bool quick, unsigned seed) {
  std::vector<DecodeCase> v;
  for (const int target : decode_sweep_targets()) {
    for (const auto& [t, d] : kCompiledInstances) {
      if (t == DType::fp32 && !sweep_fp32_on(target)) continue;
      for (KVLayout layout : {KVLayout::nhd, KVLayout::vllm})
        for (const DecodeShape& sh : decode_shapes())
          if ((!quick || sh.quick) && !(sh.nhd_only && layout != KVLayout::nhd))
            v.push_back(make_decode_case(target, t, d, layout, sh, seed));
      // The target's wide row (tuning_sm90.hpp's kDecodeWide), forced on the shapes it reads.
      if (has_decode_wide_policy(target, t, d))
        for (KVLayout layout : {KVLayout::nhd, KVLayout::vllm})
          for (const DecodeShape& sh : decode_shapes())
            if ((!quick || sh.quick) && !(sh.nhd_only && layout != KVLayout::nhd) &&
                decode_sm80_wide_reads(decode_wide_policy(target, t, d), layout, sh.page_size, d,
                                       sh.num_q_heads / sh.num_kv_heads, KVDType::same, true))
              v.push_back(make_decode_case(target, t, d, layout, sh, seed, true));
    }
  }
  return v;
}

// The fp8 KV-cache cases (muh/kv_quant.hpp): every compiled fp8 instance on every compiled target
// (both decode agents read fp8), over the same shapes, with
// k_scale 0.5 and v_scale 2 (vLLM-layout shapes with pages under 16 tokens are left out: an fp8
// cache there is refused, check_kv_quant).
inline std::vector<DecodeCase> decode_fp8_sweep_cases(bool quick, unsigned seed) {
  std::vector<DecodeCase> v;
  for (const int target : decode_sweep_targets()) {
    for (const auto& e : kCompiledFp8Instances) {
      if (e.head_dim == 0) continue;
      for (KVLayout layout : {KVLayout::nhd, KVLayout::vllm})
        for (const DecodeShape& sh : decode_shapes()) {
          if ((quick && !sh.quick) || (sh.nhd_only && layout != KVLayout::nhd)) continue;
          if (layout == KVLayout::vllm && sh.page_size < 16) continue;
          DecodeCase c = make_decode_case(target, e.dtype, e.head_dim, layout, sh, seed);
          c.kv = e.kv;
          c.k_scale = 0.5f;
          c.v_scale = 2.f;
          v.push_back(c);
        }
    }
  }
  return v;
}

}  // namespace muh::check
