// test_mixed_batch.cu — mixed batches over the paged cache (mixed_plan.hpp, paged_attention())
// against the CPU reference, with check/paged_prefill_check.hpp's inputs, reference and
// tolerance (2× a naive same-precision implementation; outputs pre-filled with NaN; the cache NaN
// wherever no key lives, the unused slots of each sequence's last page included; random page
// order). Per (case, dtype, layout) at head_dim 128, for the dtypes compiled in:
//   * the split plan (forced: decode prefix through paged decode, suffix through the paged
//     prefill) within tolerance of the reference, two runs bitwise equal, no input error flagged;
//   * the one-launch plan (forced) likewise, and the pair equal to it within the tolerance;
//   * a batch whose decodes are not first: planned as one launch, correct.
// Then a CUDA graph: one capture of a plan for maxima, replayed with three length sets (each
// checked against its own reference), and a replay that breaks the decodes-first contract is
// flagged by the rebase kernel's guard. Short rows expanded into decode rows (the split cases with
// rows of 2–16 tokens leading), and bad device lengths under them flagged by the expand kernel.
// And the C ABI (muh_paged_attention) against the C++ call.
// The per-case test runs over an e4m3 cache too (k_scale 0.5, v_scale 2; where the fp8 instance is
// compiled and the device has the sm80 agent): both parts read the codes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "muh/attention.hpp"
#include "muh/build_config.hpp"
#include "muh/input_errors.hpp"
#include "muh/instances.hpp"
#include "muh/mixed_plan.hpp"
#include "muh/muh.h"
#include "paged_prefill_check.hpp"

namespace muh {
namespace {

constexpr int kHeadDim = 128;

// q lengths (chunk) 1, 2, 7, 16, 511; kv lengths 1, page − 1, many pages; GQA 1/4/6/8.
const std::vector<check::PagedPrefillCase>& cases() {
  static const std::vector<check::PagedPrefillCase> all = {
      // name, prefix (kv − q), chunk (q), q heads, kv heads, page
      {"decodes_first_q7_q16_gqa4", {0, 14, 147, 20, 33}, {1, 1, 1, 7, 16}, 8, 2, 16},
      {"decodes_first_q2_q7_gqa6", {299, 15, 38, 0}, {1, 1, 2, 7}, 12, 2, 16},
      {"decodes_first_q16_gqa8_page32", {999, 0, 14, 16, 0}, {1, 1, 1, 1, 16}, 16, 2, 32},
      {"decodes_first_q511_gqa1", {2047, 1, 1000}, {1, 1, 511}, 4, 4, 16},  // the long case
      {"all_decodes_gqa8", {0, 14, 15, 16, 499, 1999}, {1, 1, 1, 1, 1, 1}, 8, 1, 16},
      {"decodes_then_empty_rows_gqa4", {19, 39, 3, 0, 0}, {1, 1, 0, 5, 0}, 8, 2, 16},
      // Short rows expanded (one decode row per token) with a prefill part after them: rows of
      // 3, 16 and 4 tokens, over a page − 1 prefix (the first is 3 tokens over none: its first token sees
      // one key); then a 100-token chunk.
      {"verify_expanded_then_chunk_gqa4", {0, 30, 15, 200}, {3, 16, 4, 100}, 8, 2, 16},
      // A short row first, then decodes and a short row: every row decode-like, all expanded.
      {"short_row_first_gqa4", {23, 99, 0, 0}, {7, 1, 1, 2}, 8, 2, 16},
  };
  return all;
}

// Decodes not first — after a row longer than a short row (16 tokens): one launch. (Its first
// form, q lengths {7, 1, 1, 2}, is all decode-like rows since short rows join the decode part:
// the case short_row_first below.)
const check::PagedPrefillCase kNotFirst{"decodes_not_first_gqa4", {23, 99, 0, 0}, {40, 1, 1, 2}, 8, 2, 16};

struct Param {
  int c;  // index into cases(), or -1 for kNotFirst
  DType dtype;
  KVLayout layout;
  KVDType kv = KVDType::same;  // the cache's element type (fp8_e4m3: codes, k_scale 0.5, v_scale 2)
};

std::vector<Param> params() {
  std::vector<Param> v;
  for (KVDType kv : {KVDType::same, KVDType::fp8_e4m3})
    for (int c = -1; c < int(cases().size()); ++c)
      for (DType t : {DType::fp16, DType::bf16})
        if (is_fp8(kv) ? is_fp8_instance(kv, t, kHeadDim) && MUH_PAGED_PREFILL : is_compiled_instance(t, kHeadDim))
          for (KVLayout l : {KVLayout::nhd, KVLayout::vllm}) v.push_back({c, t, l, kv});
  return v;
}

check::PagedPrefillCase case_of(const Param& p) {
  check::PagedPrefillCase c = p.c < 0 ? kNotFirst : cases()[p.c];
  if (is_fp8(p.kv)) c.kv = KVQuant{p.kv, 0.5f, 2.f};
  return c;
}

std::string param_name(const ::testing::TestParamInfo<Param>& i) {
  return case_of(i.param).name + "_" + std::string(dtype_name(i.param.dtype)) +
         (i.param.layout == KVLayout::vllm ? "_vllm" : "_nhd") +
         (is_fp8(i.param.kv) ? "_" + std::string(kv_dtype_name(i.param.kv)) : std::string());
}

// One run of `plan` on the case's device buffers, outputs pre-filled with NaN: out as floats.
Status run_once(const check::PagedPrefillInputs& pi, check::PagedPrefillDevice& dev, const PrefillParams& p,
                const MixedPlan& plan, void* ws, std::vector<float>* out) {
  cudaError_t e = dev.fresh_outputs();
  if (e != cudaSuccess) return {StatusCode::cuda_error, cudaGetErrorString(e)};
  RunOptions opt;
  opt.debug_checks = true;  // both parts' tables checked on the host too
  MUH_TRY(paged_attention(p, plan, ws, plan.workspace_bytes, opt));
  if ((e = cudaDeviceSynchronize()) != cudaSuccess) return {StatusCode::cuda_error, cudaGetErrorString(e)};
  MUH_TRY(check_input_errors());
  std::vector<float> lse;
  e = check::read_outputs(dev, pi.in->dtype, out, &lse);
  if (e != cudaSuccess) return {StatusCode::cuda_error, cudaGetErrorString(e)};
  return Status::Ok();
}

// A Status expression that must be ok (a fresh value each time: assigning a [[nodiscard]] Status
// warns under nvcc).
#define MUH_ASSERT_OK(expr)                              \
  do {                                                   \
    const Status muh_s_ = (expr);                        \
    ASSERT_TRUE(muh_s_.ok()) << #expr << ": " << muh_s_.message(); \
  } while (0)

class MixedBatch : public ::testing::TestWithParam<Param> {};

TEST_P(MixedBatch, MatchesTheReference) {
  MUH_REQUIRE_GPU();
  const Param& prm = GetParam();
  const check::PagedPrefillCase c = case_of(prm);
  const auto pi = check::make_paged_prefill_inputs(c, prm.layout, prm.dtype, kHeadDim, 1234u + prm.c);
  check::PagedPrefillDevice dev(*pi);
  ASSERT_TRUE(dev.status.ok()) << dev.status.message();
  PrefillParams p = dev.params(*pi);
  p.lse = nullptr;  // the pair writes no lse (mixed_plan.hpp)
  HardwareCapability hw;
  ASSERT_TRUE(device_profile(-1, &hw).ok());

  std::vector<float> outs[2];  // [0] the split (or, for kNotFirst, the auto plan), [1] one launch
  for (int route = 0; route < 2; ++route) {
    MixedPlanOptions o;
    o.force_split = prm.c < 0 ? -1 : (route == 0 ? 1 : 0);
    MixedPlan plan;
    const Status s = plan_mixed(p, pi->in->cu_q.data(), pi->seqused_k.data(), hw, o, &plan);
    ASSERT_TRUE(s.ok()) << s.message();
    SCOPED_TRACE(describe(plan));
    if (prm.c < 0) {
      EXPECT_EQ(plan.route, MixedRoute::single);
      EXPECT_NE(plan.reason.find("not a prefix"), std::string::npos);
    } else {
      EXPECT_EQ(plan.route, route == 0 ? MixedRoute::split : MixedRoute::single);
    }
    testing::DeviceBuffer ws(plan.workspace_bytes);
    std::vector<float> again;
    MUH_ASSERT_OK(run_once(*pi, dev, p, plan, ws.p, &outs[route]));
    MUH_ASSERT_OK(run_once(*pi, dev, p, plan, ws.p, &again));
    check::PrefillResult res;
    res.deterministic = again.size() == outs[route].size() &&
                        std::memcmp(again.data(), outs[route].data(), again.size() * sizeof(float)) == 0;
    check::compare_prefill(*pi->in, outs[route], {}, &res);
    EXPECT_TRUE(res.pass) << res.note << " (max err " << res.max_err << ", tol " << res.tol << ")";
    if (prm.c < 0) return;
    if (route == 1) {
      // The pair equals the single paged-prefill launch within the same tolerance.
      double diff = 0;
      for (std::size_t i = 0; i < outs[0].size(); ++i) diff = std::max(diff, double(std::fabs(outs[0][i] - outs[1][i])));
      EXPECT_LE(diff, res.tol) << "split vs one launch";
    }
  }
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(MixedBatch);  // (a build without kHeadDim's instances)
INSTANTIATE_TEST_SUITE_P(Cases, MixedBatch, ::testing::ValuesIn(params()), param_name);

// ---- CUDA graph: capture once, replay with changing lengths -------------------------------------

// The maxima: 6 sequences, 3 decode rows, 43 q tokens (padded), q <= 32, kv <= 300, page 16.
constexpr int kSeqs = 6, kDecodes = 3, kTokens = 43, kMaxQ = 32, kMaxKv = 300, kPage = 16;
constexpr int kMaxBlocks = (kMaxKv + kPage - 1) / kPage;
constexpr int kPages = kSeqs * kMaxBlocks + 3;  // what make_paged_prefill_inputs uses at most

struct Replay {
  std::vector<int> q, kv;
};

// Each replay fills every padded q row (Σ q = kTokens): the last sequences take the padding.
const std::vector<Replay>& replays() {
  static const std::vector<Replay> r = {
      {{1, 1, 1, 32, 7, 1}, {300, 1, 15, 40, 7, 1}},
      {{1, 1, 1, 2, 6, 32}, {17, 299, 1, 2, 100, 32}},
      {{1, 1, 1, 0, 20, 20}, {64, 128, 256, 0, 20, 21}},
  };
  return r;
}

// The fixed device buffers the graph is captured on, and one replay's data written into them.
struct GraphBuffers {
  testing::DeviceBuffer q, k_cache, v_cache, block_table, seqused_k, cu_q, out, ws;
  std::size_t elem = 0;
};

Status upload(const check::PagedPrefillInputs& pi, DType t, GraphBuffers* g) {
  const auto hq = ref::to_storage(pi.in->q, t), hk = ref::to_storage(pi.k_cache, t), hv = ref::to_storage(pi.v_cache, t);
  // The block table re-strided to the maxima's row length.
  std::vector<int> bt(std::size_t(kSeqs) * kMaxBlocks, 0);
  for (int b = 0; b < kSeqs; ++b)
    for (int i = 0; i < pi.max_blocks; ++i) bt[std::size_t(b) * kMaxBlocks + i] = pi.block_table[std::size_t(b) * pi.max_blocks + i];
  if (hq.size() != g->q.n || hk.size() > g->k_cache.n || hv.size() > g->v_cache.n)
    return invalid_argument("replay does not fit the captured buffers");
  cudaError_t e = cudaMemcpy(g->q.p, hq.data(), hq.size(), cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemcpy(g->k_cache.p, hk.data(), hk.size(), cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemcpy(g->v_cache.p, hv.data(), hv.size(), cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemcpy(g->block_table.p, bt.data(), bt.size() * 4, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemcpy(g->seqused_k.p, pi.seqused_k.data(), kSeqs * 4, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemcpy(g->cu_q.p, pi.in->cu_q.data(), (kSeqs + 1) * 4, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemset(g->out.p, 0xFF, g->out.n);  // NaN
  // The copies and the memset ran on the legacy stream, which the graph's non-blocking stream does
  // not wait for (and a pageable copy may return before its DMA is done).
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return {StatusCode::cuda_error, cudaGetErrorString(e)};
  return Status::Ok();
}

std::unique_ptr<check::PagedPrefillInputs> replay_inputs(const Replay& r, KVLayout l, DType t, unsigned seed) {
  check::PagedPrefillCase c{"replay", {}, r.q, 8, 2, kPage};
  for (std::size_t b = 0; b < r.q.size(); ++b) c.prefix.push_back(r.kv[b] - r.q[b]);
  return check::make_paged_prefill_inputs(c, l, t, kHeadDim, seed);
}

class MixedBatchGraph : public ::testing::TestWithParam<KVLayout> {};

TEST_P(MixedBatchGraph, CaptureOnceReplayChangingLengths) {
  MUH_REQUIRE_GPU();
  const DType t = is_compiled_instance(DType::bf16, kHeadDim) ? DType::bf16 : DType::fp16;
  if (!is_compiled_instance(t, kHeadDim)) GTEST_SKIP() << "no 16-bit hd 128 instance compiled";
  const KVLayout layout = GetParam();
  GraphBuffers g;
  g.elem = dtype_size(t);
  const std::size_t page_elems = std::size_t(kPage) * 2 * kHeadDim;
  ASSERT_TRUE(g.q.alloc(std::size_t(kTokens) * 8 * kHeadDim * g.elem) && g.out.alloc(g.q.n) &&
              g.k_cache.alloc(kPages * page_elems * g.elem) && g.v_cache.alloc(g.k_cache.n) &&
              g.block_table.alloc(std::size_t(kSeqs) * kMaxBlocks * 4) && g.seqused_k.alloc(kSeqs * 4) &&
              g.cu_q.alloc((kSeqs + 1) * 4));
  MUH_CUDA_CHECK(cudaMemset(g.k_cache.p, 0xFF, g.k_cache.n));  // NaN where no replay writes
  MUH_CUDA_CHECK(cudaMemset(g.v_cache.p, 0xFF, g.v_cache.n));

  // The plan for the maxima, and the call captured with them.
  PrefillParams s;
  s.dtype = t;
  s.batch = kSeqs;
  s.total_q = kTokens;
  s.max_seqlen_q = kMaxQ;
  s.max_seqlen_k = kMaxKv;
  s.num_q_heads = 8;
  s.num_kv_heads = 2;
  s.head_dim = kHeadDim;
  s.causal = true;
  s.q = g.q.p;
  s.out = g.out.p;
  s.cu_seqlens_q = static_cast<const int*>(g.cu_q.p);
  const PrefillParams p =
      make_paged_prefill(s, layout, g.k_cache.p, g.v_cache.p, static_cast<const int*>(g.block_table.p),
                         static_cast<const int*>(g.seqused_k.p), kPage, kPages, kMaxBlocks);
  HardwareCapability hw;
  ASSERT_TRUE(device_profile(-1, &hw).ok());
  MixedPlanOptions o;
  o.cuda_graph = true;
  o.graph_num_decodes = kDecodes;
  o.force_split = 1;
  MixedPlan plan;
  MUH_ASSERT_OK(plan_mixed(p, nullptr, nullptr, hw, o, &plan));
  SCOPED_TRACE(describe(plan));
  ASSERT_TRUE(g.ws.alloc(plan.workspace_bytes));

  cudaStream_t stream;
  MUH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  RunOptions opt;
  opt.stream = stream;
  // An eager call first (as engines warm up before capture), on replay 0's data.
  const auto first = replay_inputs(replays()[0], layout, t, 77u);
  MUH_ASSERT_OK(upload(*first, t, &g));
  MUH_ASSERT_OK(paged_attention(p, plan, g.ws.p, g.ws.n, opt));
  MUH_CUDA_CHECK(cudaStreamSynchronize(stream));

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  MUH_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const Status captured = paged_attention(p, plan, g.ws.p, g.ws.n, opt);
  MUH_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  ASSERT_TRUE(captured.ok()) << captured.message();
  MUH_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));

  for (std::size_t r = 0; r < replays().size(); ++r) {
    SCOPED_TRACE("replay " + std::to_string(r));
    const auto pi = replay_inputs(replays()[r], layout, t, 100u + unsigned(r));
    ASSERT_EQ(pi->in->total_q, kTokens);
    ASSERT_LE(pi->max_blocks, kMaxBlocks);
    MUH_ASSERT_OK(upload(*pi, t, &g));
    MUH_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    MUH_CUDA_CHECK(cudaStreamSynchronize(stream));
    const Status flags = check_input_errors(stream);
    EXPECT_TRUE(flags.ok()) << flags.message();
    std::vector<unsigned char> raw(g.out.n);
    MUH_CUDA_CHECK(cudaMemcpy(raw.data(), g.out.p, raw.size(), cudaMemcpyDeviceToHost));
    std::vector<float> out(raw.size() / g.elem);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = ref::from_storage(raw.data(), i, t);
    check::PrefillResult res;
    check::compare_prefill(*pi->in, out, {}, &res);
    EXPECT_TRUE(res.pass) << res.note << " (max err " << res.max_err << ", tol " << res.tol << ")";
  }

  // A replay whose decode row 1 has 2 queries breaks the contract: the guard flags it.
  Replay bad = replays()[0];
  bad.q = {1, 2, 0, 32, 7, 1};
  bad.kv = {300, 2, 15, 40, 7, 1};
  const auto pb = replay_inputs(bad, layout, t, 999u);
  MUH_ASSERT_OK(upload(*pb, t, &g));
  MUH_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  MUH_CUDA_CHECK(cudaStreamSynchronize(stream));
  const Status flagged = check_input_errors(stream);
  EXPECT_EQ(flagged.code(), StatusCode::invalid_argument) << "the broken decodes-first contract was not flagged";

  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(Layouts, MixedBatchGraph, ::testing::Values(KVLayout::nhd, KVLayout::vllm),
                         [](const ::testing::TestParamInfo<KVLayout>& i) {
                           return std::string(i.param == KVLayout::vllm ? "vllm" : "nhd");
                         });

// Short rows expanded: the expand kernel's guard. The plan is made from host lengths; then the
// device's seqused_k of the second sequence is set past max_seqlen_k, and (a second run)
// cu_seqlens_q[2] to 9, so that the decode rows hold one token more than planned. Each is flagged
// (seq_len; cu_seqlens_q_end), nothing outside the caller's memory is read (memcheck runs this),
// and the first sequence's rows are still right.
TEST(MixedBatchExpand, BadDeviceLengthsAreFlagged) {
  MUH_REQUIRE_GPU();
  const DType t = is_compiled_instance(DType::bf16, kHeadDim) ? DType::bf16 : DType::fp16;
  if (!is_compiled_instance(t, kHeadDim)) GTEST_SKIP() << "no 16-bit hd 128 instance compiled";
  const check::PagedPrefillCase c{"verify_guard_gqa4", {50, 60}, {4, 4}, 8, 2, 16};
  const auto pi = check::make_paged_prefill_inputs(c, KVLayout::nhd, t, kHeadDim, 99u);
  check::PagedPrefillDevice dev(*pi);
  ASSERT_TRUE(dev.status.ok()) << dev.status.message();
  PrefillParams p = dev.params(*pi);
  p.lse = nullptr;
  HardwareCapability hw;
  MUH_ASSERT_OK(device_profile(-1, &hw));
  MixedPlanOptions o;
  o.force_split = 1;
  MixedPlan plan;
  MUH_ASSERT_OK(plan_mixed(p, pi->in->cu_q.data(), pi->seqused_k.data(), hw, o, &plan));
  SCOPED_TRACE(describe(plan));
  ASSERT_TRUE(plan.expand());
  ASSERT_EQ(plan.decode_tokens, 8);
  testing::DeviceBuffer ws(plan.workspace_bytes);
  const std::size_t row = std::size_t(c.num_q_heads) * kHeadDim;
  for (int broken = 0; broken < 2; ++broken) {
    SCOPED_TRACE(broken == 0 ? "seqused_k[1] past max_seqlen_k" : "cu_seqlens_q[2] = 9");
    std::vector<int> used = pi->seqused_k, cu = pi->in->cu_q;
    if (broken == 0) used[1] = p.max_seqlen_k + 100;
    else cu[2] = 9;
    MUH_CUDA_CHECK(cudaMemcpy(dev.seqused_k.p, used.data(), used.size() * 4, cudaMemcpyHostToDevice));
    MUH_CUDA_CHECK(cudaMemcpy(dev.cu_q.p, cu.data(), cu.size() * 4, cudaMemcpyHostToDevice));
    MUH_CUDA_CHECK(dev.fresh_outputs());
    MUH_ASSERT_OK(paged_attention(p, plan, ws.p, plan.workspace_bytes, RunOptions{}));
    MUH_CUDA_CHECK(cudaDeviceSynchronize());
    const Status flagged = check_input_errors();
    EXPECT_EQ(flagged.code(), StatusCode::invalid_argument) << "not flagged";
    EXPECT_NE(flagged.message().find(broken == 0 ? "seqused_k" : "cu_seqlens_q"), std::string::npos)
        << flagged.message();
    std::vector<float> out, lse;
    MUH_CUDA_CHECK(check::read_outputs(dev, t, &out, &lse));
    if (broken == 0) {
      // The first sequence's 4 rows as the reference has them; the second's read nothing (0).
      double err = 0, zero = 0;
      for (std::size_t i = 0; i < 4 * row; ++i) err = std::max(err, double(std::fabs(out[i] - pi->in->ref_out[i])));
      for (std::size_t i = 4 * row; i < 8 * row; ++i) zero = std::max(zero, double(std::fabs(out[i])));
      EXPECT_LE(err, 2 * std::max(pi->in->naive_err, ref::unit_roundoff(t) * pi->in->max_ref));
      EXPECT_EQ(zero, 0.0);
    }
  }
  MUH_CUDA_CHECK(cudaMemcpy(dev.seqused_k.p, pi->seqused_k.data(), pi->seqused_k.size() * 4, cudaMemcpyHostToDevice));
  MUH_CUDA_CHECK(cudaMemcpy(dev.cu_q.p, pi->in->cu_q.data(), pi->in->cu_q.size() * 4, cudaMemcpyHostToDevice));
}

// The C ABI plans on the stream's profile exactly as the C++ call does on the device's: the same
// workspace size, and the same bytes out.
TEST(MixedBatchCAbi, EqualsTheCppCall) {
  MUH_REQUIRE_GPU();
  const DType t = is_compiled_instance(DType::bf16, kHeadDim) ? DType::bf16 : DType::fp16;
  if (!is_compiled_instance(t, kHeadDim)) GTEST_SKIP() << "no 16-bit hd 128 instance compiled";
  const auto pi = check::make_paged_prefill_inputs(cases()[0], KVLayout::vllm, t, kHeadDim, 4321u);
  check::PagedPrefillDevice dev(*pi);
  ASSERT_TRUE(dev.status.ok()) << dev.status.message();
  PrefillParams p = dev.params(*pi);
  p.lse = nullptr;
  HardwareCapability hw;
  MUH_ASSERT_OK(device_profile(-1, &hw));
  MixedPlanOptions o;
  o.force_split = 1;
  MixedPlan plan;
  MUH_ASSERT_OK(plan_mixed(p, pi->in->cu_q.data(), pi->seqused_k.data(), hw, o, &plan));
  std::size_t ws_c = 0;
  ASSERT_EQ(muh_paged_attention_workspace_size(int(t), MUH_KV_VLLM, pi->in->cu_q.data(), pi->seqused_k.data(), p.batch,
                                               p.total_q, p.max_seqlen_q, p.max_seqlen_k, p.num_q_heads,
                                               p.num_kv_heads, p.head_dim, p.page_size, p.num_pages,
                                               p.max_blocks_per_seq, 1, 0, -1, 1, 0, 0, nullptr, &ws_c),
            0)
      << muh_last_error();
  EXPECT_EQ(ws_c, plan.workspace_bytes);
  testing::DeviceBuffer ws(plan.workspace_bytes);
  std::vector<float> cpp, c_abi, lse;
  MUH_ASSERT_OK(run_once(*pi, dev, p, plan, ws.p, &cpp));
  MUH_CUDA_CHECK(dev.fresh_outputs());
  ASSERT_EQ(muh_paged_attention(int(t), MUH_KV_VLLM, p.q, p.k_cache, p.v_cache, p.out, nullptr, p.cu_seqlens_q,
                                p.block_table, p.seqused_k, pi->in->cu_q.data(), pi->seqused_k.data(), p.batch,
                                p.total_q, p.max_seqlen_q, p.max_seqlen_k, p.num_q_heads, p.num_kv_heads, p.head_dim,
                                p.page_size, p.num_pages, p.max_blocks_per_seq, p.softmax_scale, 1, ws.p, ws.n, -1, 1,
                                0, 0, 1, nullptr),
            0)
      << muh_last_error();
  MUH_CUDA_CHECK(cudaDeviceSynchronize());
  MUH_CUDA_CHECK(check::read_outputs(dev, t, &c_abi, &lse));
  ASSERT_EQ(cpp.size(), c_abi.size());
  EXPECT_EQ(std::memcmp(cpp.data(), c_abi.data(), cpp.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace muh
