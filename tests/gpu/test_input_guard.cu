// test_input_guard.cu — the kernels' guard of device-side inputs (muh/input_errors.hpp), with the
// host checks (RunOptions::debug_checks) off, so that the kernels alone stand between a bad
// block id / seq_len / cu_seqlens and memory outside the caller's.
//
// For each bad case: the kind is flagged (check_input_errors / read_input_errors, the C ABI,
// a caller's own device words, mapped pinned host words read without a sync), the sequence
// concerned is dropped as documented (decode: out = 0, lse = −inf exactly; prefill: its rows keep
// the NaN pre-fill), and every other sequence of the batch matches the CPU reference within the
// tolerance of check/decode_case.hpp / check/prefill_check.hpp — decode over a 16-bit and over an
// fp8 KV cache (whose kernels copy by the same guarded pages). No read outside the inputs''
// allocations (every cache and tensor is allocated at its exact size): run under
// `compute-sanitizer --tool memcheck`. Valid inputs give the same bits with and without the guard
// (the kernels compiled with kGuard = false, launched on the same arguments).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "decode_case.hpp"
#include "gpu_test_util.hpp"
#include "muh/attention.hpp"
#include "muh/build_config.hpp"
#include "muh/dispatch.hpp"
#include "muh/input_errors.hpp"
#include "muh/instances.hpp"
#include "muh/kernels/decode_launch.cuh"
#include "muh/launch_args.cuh"
#include "muh/muh.h"
#include "muh/tuning/selectors.hpp"
#include "prefill_check.hpp"

namespace muh {
namespace {

using testing::device_cc;

const HardwareCapability& device_hw() {
  static const HardwareCapability hw = query_current_device().hw;
  return hw;
}

// The library's flags of the device, read and cleared (after a sync of the whole device).
std::uint32_t take_library_flags() {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::uint32_t mask = 0;
  const Status s = read_input_errors(nullptr, &mask);
  EXPECT_TRUE(s.ok()) << s.message();
  return mask;
}

std::vector<int> compiled_target_list() {
  return std::vector<int>(compiled_targets::values, compiled_targets::values + compiled_targets::size);
}

// A 16-bit compiled instance (bf16 hd128 where compiled).
std::pair<DType, int> a_16bit_instance() {
  if (is_compiled_instance(DType::bf16, 128)) return {DType::bf16, 128};
  for (const auto& [t, d] : kCompiledInstances)
    if (t != DType::fp32) return {t, d};
  return {kCompiledInstances[0].dtype, kCompiledInstances[0].head_dim};
}

// An fp8 KV-cache instance (muh/kv_quant.hpp; both decode agents read one), or none ({same, fp32,
// 0}).
CompiledFp8Instance an_fp8_instance() {
  for (const auto& e : kCompiledFp8Instances)
    if (e.head_dim > 0) return e;
  return {KVDType::same, DType::fp32, 0};
}

// ---- Decode ----------------------------------------------------------------------------------
enum class DecodeBad { block_minus_one, block_num_pages, block_2p30, seq_len_past_table, seq_len_negative };
const char* bad_name(DecodeBad b) {
  switch (b) {
    case DecodeBad::block_minus_one: return "block_id_minus_1";
    case DecodeBad::block_num_pages: return "block_id_num_pages";
    case DecodeBad::block_2p30: return "block_id_2p30";
    case DecodeBad::seq_len_past_table: return "seq_len_past_table";
    case DecodeBad::seq_len_negative: return "seq_len_negative";
  }
  return "?";
}

struct GuardDecodeCase {
  int target;
  KVLayout layout;
  int page_size;
  int splits;  // 1: V1; 3: V2 (the bad page lies in the first of the sequence's partitions)
  DecodeBad bad;
  bool graph;  // through a captured CUDA graph (no debug checks there either)
  KVDType kv = KVDType::same;  // an fp8 cache: its kernels take the same guard (an_fp8_instance)
};
void PrintTo(const GuardDecodeCase& c, std::ostream* os) {
  *os << "t" << c.target << "_" << (c.layout == KVLayout::nhd ? "nhd" : "vllm") << "_page" << c.page_size << "_splits"
      << c.splits << "_" << bad_name(c.bad) << (c.graph ? "_graph" : "")
      << (is_fp8(c.kv) ? "_" + std::string(kv_dtype_name(c.kv)) : std::string());
}

std::vector<GuardDecodeCase> guard_decode_cases() {
  std::vector<GuardDecodeCase> v;
  for (int t : compiled_target_list())
    for (KVLayout l : {KVLayout::nhd, KVLayout::vllm})
      for (int page : {16, 8})
        for (int splits : {1, 3})
          for (DecodeBad b : {DecodeBad::block_minus_one, DecodeBad::block_num_pages, DecodeBad::block_2p30,
                              DecodeBad::seq_len_past_table, DecodeBad::seq_len_negative})
            v.push_back({t, l, page, splits, b, false});
  for (int t : compiled_target_list())  // graphs: one bad kind of each family per target
    for (DecodeBad b : {DecodeBad::block_num_pages, DecodeBad::seq_len_past_table})
      v.push_back({t, KVLayout::nhd, 16, 3, b, true});
  // An fp8 cache, on every target (page 16: the vLLM layout's fp8 minimum; the sm_90 rows' TMA
  // copies then take the guarded page as the cp.asyncs do, the portable agent's loads as its own).
  for (int t : compiled_target_list())
    if (const CompiledFp8Instance e = an_fp8_instance(); e.head_dim > 0)
      for (KVLayout l : {KVLayout::nhd, KVLayout::vllm})
        for (int splits : {1, 3})
          for (DecodeBad b : {DecodeBad::block_minus_one, DecodeBad::block_num_pages, DecodeBad::block_2p30,
                              DecodeBad::seq_len_past_table, DecodeBad::seq_len_negative})
            v.push_back({t, l, 16, splits, b, false, e.kv});
  return v;
}

class DecodeGuard : public ::testing::TestWithParam<GuardDecodeCase> {};

TEST_P(DecodeGuard, BadSequenceDroppedFlaggedOthersExact) {
  const GuardDecodeCase& g = GetParam();
  MUH_REQUIRE_GPU();
  if (!target_runs_on_cc(g.target, device_cc())) GTEST_SKIP() << "target " << g.target << " is newer than the device";
  auto [t, d] = a_16bit_instance();
  check::DecodeCase c;
  if (is_fp8(g.kv)) {
    const CompiledFp8Instance e = an_fp8_instance();
    t = e.dtype;
    d = e.head_dim;
    c.kv = g.kv;
    c.k_scale = 0.5f;
    c.v_scale = 2.f;
  }
  c.target = g.target;
  c.dtype = t;
  c.head_dim = d;
  c.layout = g.layout;
  c.page_size = g.page_size;
  c.num_q_heads = 8;
  c.num_kv_heads = 2;
  c.seq_lens = {100, 130, 61};  // not multiples of the page; sequence 1 goes bad
  c.shape = "guard";
  check::DecodeProblem prob(c);
  prob.set_host_checks(false);
  ASSERT_EQ(prob.upload(), "");
  take_library_flags();  // nothing left from earlier tests

  const DecodeParams p = prob.params();
  int* table = const_cast<int*>(p.block_table);
  int* lens = const_cast<int*>(p.seq_lens);
  InputError want = InputError::block_id;
  int value = 0;
  switch (g.bad) {
    case DecodeBad::block_minus_one: value = -1; break;
    case DecodeBad::block_num_pages: value = p.num_pages; break;
    case DecodeBad::block_2p30: value = 1 << 30; break;
    case DecodeBad::seq_len_past_table: value = p.max_blocks_per_seq * p.page_size + 1; want = InputError::seq_len; break;
    case DecodeBad::seq_len_negative: value = -5; want = InputError::seq_len; break;
  }
  if (want == InputError::block_id) {
    // Sequence 1's block holding tokens 16..31 (page 16) or 16..23 (page 8): inside its length,
    // in its first partition, neither its first nor its last page.
    const int block = 16 / p.page_size;
    ASSERT_EQ(cudaMemcpy(table + p.max_blocks_per_seq + block, &value, 4, cudaMemcpyHostToDevice), cudaSuccess);
  } else {
    ASSERT_EQ(cudaMemcpy(lens + 1, &value, 4, cudaMemcpyHostToDevice), cudaSuccess);
  }
  // The reference: sequence 1 as one of length 0 (the guard's contract); the device keeps its
  // real (or bad) length.
  prob.set_seq_lens({100, 0, 61});

  const check::DecodeOutcome r = prob.run(device_hw(), g.splits, g.graph);
  EXPECT_TRUE(r.pass()) << r.summary();
  EXPECT_EQ(r.num_splits > 1, g.splits > 1);
  EXPECT_EQ(take_library_flags(), input_error_bit(want));
  if (g.graph) {  // a replay flags it again
    const check::DecodeOutcome again = prob.replay();
    EXPECT_TRUE(again.pass()) << again.summary();
    EXPECT_EQ(take_library_flags(), input_error_bit(want));
  }
}

INSTANTIATE_TEST_SUITE_P(AllTargets, DecodeGuard, ::testing::ValuesIn(guard_decode_cases()),
                         [](const ::testing::TestParamInfo<GuardDecodeCase>& i) {
                           std::ostringstream os;
                           PrintTo(i.param, &os);
                           return os.str();
                         });

// Valid inputs never flag anything.
TEST(DecodeGuardFlags, ValidBatchFlagsNothing) {
  MUH_REQUIRE_GPU();
  const auto [t, d] = a_16bit_instance();
  check::DecodeCase c;
  c.target = compiled_target_list().back();
  if (!target_runs_on_cc(c.target, device_cc())) c.target = 0;
  c.dtype = t;
  c.head_dim = d;
  c.seq_lens = {1, 0, 300, 17};
  check::DecodeProblem prob(c);
  prob.set_host_checks(false);
  ASSERT_EQ(prob.upload(), "");
  take_library_flags();
  for (int splits : {1, 4}) {
    const check::DecodeOutcome r = prob.run(device_hw(), splits);
    EXPECT_TRUE(r.pass()) << r.summary();
  }
  EXPECT_EQ(take_library_flags(), 0u);
  EXPECT_TRUE(check_input_errors().ok());
}

// The other ways to read the flags: check_input_errors() and the C ABI name the kind; a
// caller's own device words (RunOptions::input_errors) get the flag instead of the library's;
// mapped pinned host words are readable by take_input_errors() without any CUDA call.
check::DecodeCase small_case() {
  const auto [t, d] = a_16bit_instance();
  check::DecodeCase c;
  c.target = 0;
  c.dtype = t;
  c.head_dim = d;
  c.seq_lens = {40, 40};
  return c;
}
// Uploads the batch with sequence 0's first block id set to num_pages + 7.
void make_bad(check::DecodeProblem& prob, DecodeParams* p) {
  ASSERT_EQ(prob.upload(), "");
  *p = prob.params();
  const int bad = p->num_pages + 7;
  ASSERT_EQ(cudaMemcpy(const_cast<int*>(p->block_table), &bad, 4, cudaMemcpyHostToDevice), cudaSuccess);
}
Status decode_once(const DecodeParams& p, const RunOptions& opt) {
  DecodePlan plan;
  MUH_TRY(plan_decode(p, device_hw(), PlanOptions{0, 1}, &plan));
  return paged_decode(p, plan, nullptr, 0, opt);
}

TEST(DecodeGuardFlags, CheckInputErrorsAndTheCAbiNameTheKind) {
  MUH_REQUIRE_GPU();
  check::DecodeProblem prob(small_case());
  DecodeParams p;
  make_bad(prob, &p);
  take_library_flags();
  ASSERT_TRUE(decode_once(p, RunOptions{}).ok());
  const Status s = check_input_errors();
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("block_table holds a block id outside [0, num_pages)"), std::string::npos) << s.message();
  EXPECT_TRUE(check_input_errors().ok());  // read and cleared

  ASSERT_TRUE(decode_once(p, RunOptions{}).ok());
  std::uint32_t mask = 0;
  EXPECT_EQ(muh_check_input_errors(nullptr, &mask), MUH_INVALID_ARGUMENT);
  EXPECT_EQ(mask, static_cast<std::uint32_t>(MUH_INPUT_ERROR_BLOCK_ID));
  EXPECT_NE(std::string(muh_last_error()).find("block_table"), std::string::npos);
  EXPECT_EQ(muh_check_input_errors(nullptr, &mask), MUH_OK);
  EXPECT_EQ(mask, 0u);
}

TEST(DecodeGuardFlags, CallersOwnDeviceWordsAndMappedHostWords) {
  MUH_REQUIRE_GPU();
  check::DecodeProblem prob(small_case());
  DecodeParams p;
  make_bad(prob, &p);
  take_library_flags();

  check::DevBuf words(kInputErrorWords * sizeof(int));
  ASSERT_EQ(cudaMemset(words.p, 0, words.n), cudaSuccess);
  RunOptions own;
  own.input_errors = static_cast<int*>(words.p);
  ASSERT_TRUE(decode_once(p, own).ok());
  int host[kInputErrorWords] = {};
  ASSERT_EQ(cudaMemcpy(host, words.p, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(take_input_errors(host), input_error_bit(InputError::block_id));
  EXPECT_EQ(take_library_flags(), 0u);  // the library's words were not used

  int* mapped = nullptr;
  ASSERT_EQ(cudaHostAlloc(&mapped, kInputErrorWords * sizeof(int), cudaHostAllocMapped), cudaSuccess);
  std::memset(mapped, 0, kInputErrorWords * sizeof(int));
  int* mapped_dev = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(&mapped_dev, mapped, 0), cudaSuccess);
  RunOptions host_words;
  host_words.input_errors = mapped_dev;
  ASSERT_TRUE(decode_once(p, host_words).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(take_input_errors(mapped), input_error_bit(InputError::block_id));
  EXPECT_EQ(take_input_errors(mapped), 0u);
  cudaFreeHost(mapped);
}

// ---- Valid inputs: the same bits with and without the guard ------------------------------------
// The guarded kernels (paged_decode) against the same policy compiled with kGuard = false,
// launched on the same arguments: the portable agent (target 0) and, on sm_90, the sm90 row
// (cp.async for vLLM, TMA for NHD). fp16 hd128 (compiled here for the test, not taken from the
// library, so it needs the library's fp16 hd128 instance only for the guarded half).
template <int Target>
using Fp16Hd128 = policy_getter<DecodeSelector<DType::fp16, 128>, Target>;

Status launch_unguarded(int target, const DecodeParams& p, const DecodePlan& plan, void* ws) {
  const kernels::decode::DecodeArgs a = detail::make_decode_args(p, plan, ws);
  if (target == 0)
    return kernels::decode::launch_decode<Fp16Hd128<0>, DType::fp16, 128, false>(a, p.layout, device_cc(), nullptr);
  return kernels::decode::launch_decode<Fp16Hd128<90>, DType::fp16, 128, false>(a, p.layout, device_cc(), nullptr);
}

TEST(DecodeGuardBitwise, GuardedEqualsUnguardedOnValidInputs) {
  MUH_REQUIRE_GPU();
  if (!is_compiled_instance(DType::fp16, 128)) GTEST_SKIP() << "fp16 hd128 is not compiled into this build";
  for (int target : {0, 90}) {
    if (!target_runs_on_cc(target, device_cc())) continue;
    bool compiled = false;
    for (int t : compiled_target_list()) compiled = compiled || t == target;
    if (!compiled) continue;
    for (KVLayout layout : {KVLayout::nhd, KVLayout::vllm})
      for (int splits : {1, 3}) {
        SCOPED_TRACE("target " + std::to_string(target) + (layout == KVLayout::nhd ? " nhd" : " vllm") + " splits " +
                     std::to_string(splits));
        check::DecodeCase c;
        c.target = target;
        c.dtype = DType::fp16;
        c.head_dim = 128;
        c.layout = layout;
        c.seq_lens = {1, 77, 300, 0, 16};
        check::DecodeProblem prob(c);
        prob.set_host_checks(false);
        ASSERT_EQ(prob.upload(), "");
        const check::DecodeOutcome guarded = prob.run(device_hw(), splits);
        ASSERT_TRUE(guarded.pass()) << guarded.summary();
        // The same plan, the unguarded kernels, into the same outputs (pre-filled with NaN again).
        const DecodeParams p = prob.params();
        DecodePlan plan;
        ASSERT_TRUE(plan_decode(p, device_hw(), PlanOptions{target, splits}, &plan).ok());
        check::DevBuf ws(plan.workspace_bytes);
        const std::size_t out_bytes = std::size_t(p.num_seqs) * p.num_q_heads * p.head_dim * 2;
        const std::size_t lse_bytes = std::size_t(p.num_seqs) * p.num_q_heads * 4;
        ASSERT_EQ(cudaMemset(p.out, 0xff, out_bytes), cudaSuccess);
        ASSERT_EQ(cudaMemset(p.lse, 0xff, lse_bytes), cudaSuccess);
        ASSERT_TRUE(launch_unguarded(target, p, plan, ws.p).ok());
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<unsigned char> bytes(out_bytes + lse_bytes);
        ASSERT_EQ(cudaMemcpy(bytes.data(), p.out, out_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(bytes.data() + out_bytes, p.lse, lse_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
        EXPECT_TRUE(bytes == guarded.out_bytes) << "guarded and unguarded kernels differ bitwise";
      }
  }
}

// ---- Prefill -----------------------------------------------------------------------------------
// Each case: valid inputs of three (or more) sequences, then one wrong thing done to the offsets
// on the device or to the max lengths the call states. `valid` are the sequences whose rows must
// match the reference; the rows of every other sequence (by the original offsets) must keep the
// NaN pre-fill: they are not written.
struct GuardPrefillCase {
  const char* name;
  std::vector<int> len_q, len_k;
  std::function<void(std::vector<int>& cu_q, std::vector<int>& cu_k, PrefillParams& p)> mutate;
  std::uint32_t want;  // the kinds flagged
  std::vector<int> valid;
  int tail_chunk = -1;  // > 0: force the tail split (where the agent has it)
};

constexpr std::uint32_t bit(InputError e) { return input_error_bit(e); }

const std::vector<GuardPrefillCase>& guard_prefill_cases() {
  using E = InputError;
  static const std::vector<GuardPrefillCase> v = {
      {"q_not_from_0", {5, 9, 7}, {6, 9, 8}, [](auto& q, auto&, auto&) { q[0] = 2; }, bit(E::cu_seqlens_q_start), {1, 2}},
      {"k_not_from_0_negative", {5, 9, 7}, {6, 9, 8}, [](auto&, auto& k, auto&) { k[0] = -3; },
       bit(E::cu_seqlens_k_start) | bit(E::cu_seqlens_k_range), {1, 2}},
      {"q_not_monotonic", {5, 9, 7}, {6, 9, 8}, [](auto& q, auto&, auto&) { q[1] = 16; },
       bit(E::cu_seqlens_q_order) | bit(E::seqlen_q_max), {2}},
      {"k_not_monotonic", {5, 9, 7}, {6, 9, 8}, [](auto&, auto& k, auto&) { k[2] = 2; },
       bit(E::cu_seqlens_k_order) | bit(E::seqlen_k_max), {0}},
      {"q_last_not_total", {5, 9, 7}, {6, 9, 8}, [](auto& q, auto&, auto&) { q[3] -= 1; }, bit(E::cu_seqlens_q_end), {0, 1}},
      {"k_past_the_tensor", {5, 9, 7}, {6, 9, 8}, [](auto&, auto& k, auto&) { k[3] += 5; },
       bit(E::cu_seqlens_k_end) | bit(E::cu_seqlens_k_range), {0, 1}},
      {"q_longer_than_max_seqlen_q", {5, 9, 7}, {6, 9, 8}, [](auto&, auto&, PrefillParams& p) { p.max_seqlen_q = 7; },
       bit(E::seqlen_q_max), {0, 2}},
      {"k_longer_than_max_seqlen_k", {5, 9, 7}, {6, 9, 8}, [](auto&, auto&, PrefillParams& p) { p.max_seqlen_k = 8; },
       bit(E::seqlen_k_max), {0, 2}},
      // Long sequences over many q and key tiles, and the tail split (its pieces and merge skip the
      // bad sequence too): sequence 1 has one key more than max_seqlen_k says.
      {"split_k_longer_than_max", {200, 200, 200}, {333, 334, 332},
       [](auto&, auto&, PrefillParams& p) { p.max_seqlen_k = 333; }, bit(E::seqlen_k_max), {0, 2}, 3},
      {"long_q_longer_than_max", {300, 129, 64}, {300, 129, 64},
       [](auto&, auto&, PrefillParams& p) { p.max_seqlen_q = 200; }, bit(E::seqlen_q_max), {1, 2}},
  };
  return v;
}

struct GuardPrefillParam {
  int target;
  std::size_t case_index;
};
void PrintTo(const GuardPrefillParam& g, std::ostream* os) {
  *os << "t" << g.target << "_" << guard_prefill_cases()[g.case_index].name;
}
std::vector<GuardPrefillParam> guard_prefill_params() {
  std::vector<GuardPrefillParam> v;
  for (int t : compiled_target_list())
    for (std::size_t i = 0; i < guard_prefill_cases().size(); ++i) v.push_back({t, i});
  return v;
}

class PrefillGuard : public ::testing::TestWithParam<GuardPrefillParam> {};

TEST_P(PrefillGuard, BadSequenceSkippedFlaggedOthersExact) {
  const GuardPrefillParam& g = GetParam();
  const GuardPrefillCase& gc = guard_prefill_cases()[g.case_index];
  MUH_REQUIRE_GPU();
  if (!target_runs_on_cc(g.target, device_cc())) GTEST_SKIP() << "target " << g.target << " is newer than the device";
  const auto [t, d] = a_16bit_instance();
  // Causal, GQA 4, the checks' naive-error tolerance (check/prefill_check.hpp).
  const check::PrefillCase pc{gc.name, gc.len_q, gc.len_k, 8, 2, gc.tail_chunk < 0, 0.f, gc.tail_chunk};
  const auto in = check::make_prefill_inputs(pc, t, d, 7);
  const std::size_t e = dtype_size(t), hq = pc.num_q_heads;
  const std::size_t nq = in->q.size(), nk = in->k.size(), nl = std::size_t(in->total_q) * hq;
  check::DevBuf dq(nq * e), dk(nk * e), dv(nk * e), dout(nq * e), dlse(nl * 4), dcq(in->cu_q.size() * 4),
      dck(in->cu_k.size() * 4);
  const auto hq_ = ref::to_storage(in->q, t), hk = ref::to_storage(in->k, t), hv = ref::to_storage(in->v, t);
  ASSERT_EQ(cudaMemcpy(dq.p, hq_.data(), hq_.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dk.p, hk.data(), hk.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dv.p, hv.data(), hv.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(dout.p, 0xff, nq * e), cudaSuccess);
  ASSERT_EQ(cudaMemset(dlse.p, 0xff, nl * 4), cudaSuccess);

  PrefillParams p;
  p.dtype = t;
  p.q = dq.p;
  p.k = dk.p;
  p.v = dv.p;
  p.out = dout.p;
  p.lse = static_cast<float*>(dlse.p);
  p.cu_seqlens_q = static_cast<const int*>(dcq.p);
  p.cu_seqlens_k = static_cast<const int*>(dck.p);
  p.batch = int(gc.len_q.size());
  p.total_q = in->total_q;
  p.total_k = in->total_k;
  p.max_seqlen_q = in->max_q;
  p.max_seqlen_k = in->max_k;
  p.num_q_heads = pc.num_q_heads;
  p.num_kv_heads = pc.num_kv_heads;
  p.head_dim = d;
  p.causal = pc.causal;
  std::vector<int> cu_q = in->cu_q, cu_k = in->cu_k;
  gc.mutate(cu_q, cu_k, p);
  ASSERT_EQ(cudaMemcpy(dcq.p, cu_q.data(), cu_q.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dck.p, cu_k.data(), cu_k.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  take_library_flags();

  PrefillPlan plan;
  const Status planned = plan_prefill(p, device_hw(), PrefillPlanOptions{g.target, gc.tail_chunk}, &plan);
  ASSERT_TRUE(planned.ok()) << planned.message();
  check::DevBuf ws(plan.workspace_bytes);
  if (plan.workspace_bytes) ASSERT_EQ(cudaMemset(ws.p, 0xff, plan.workspace_bytes), cudaSuccess);
  const Status run = prefill(p, plan, ws.p, plan.workspace_bytes, RunOptions{});  // no host checks
  ASSERT_TRUE(run.ok()) << run.message();
  const std::uint32_t flagged = take_library_flags();
  EXPECT_EQ(flagged, gc.want) << describe_input_errors(flagged);

  std::vector<unsigned char> out(nq * e);
  std::vector<float> lse(nl);
  ASSERT_EQ(cudaMemcpy(out.data(), dout.p, out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(lse.data(), dlse.p, nl * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  const double tol = 2.0 * std::max(in->naive_err, ref::unit_roundoff(t) * in->max_ref);
  double max_err = 0;
  std::size_t nonfinite = 0, written = 0, lse_bad = 0;
  for (int b = 0; b < p.batch; ++b) {
    const bool valid = std::find(gc.valid.begin(), gc.valid.end(), b) != gc.valid.end();
    for (int row = in->cu_q[b]; row < in->cu_q[b + 1]; ++row)
      for (std::size_t h = 0; h < hq; ++h) {
        const std::size_t li = h * in->total_q + row;
        for (int x = 0; x < d; ++x) {
          const std::size_t i = (std::size_t(row) * hq + h) * d + x;
          const float got = ref::from_storage(out.data(), i, t);
          if (!valid) {
            written += !std::isnan(got);
          } else if (!std::isfinite(got)) {
            ++nonfinite;
          } else {
            max_err = std::max(max_err, double(std::fabs(got - in->ref_out[i])));
          }
        }
        if (!valid) {
          written += !std::isnan(lse[li]);
        } else if (std::isinf(in->ref_lse[li]) ? !(lse[li] == in->ref_lse[li])
                                               : !(std::fabs(lse[li] - in->ref_lse[li]) <= 1e-3 * (1 + std::fabs(in->ref_lse[li])))) {
          ++lse_bad;
        }
      }
  }
  EXPECT_EQ(nonfinite, 0u);
  EXPECT_LE(max_err, tol);
  EXPECT_EQ(lse_bad, 0u);
  EXPECT_EQ(written, 0u) << "rows of the skipped sequences were written";
}

INSTANTIATE_TEST_SUITE_P(AllTargets, PrefillGuard, ::testing::ValuesIn(guard_prefill_params()),
                         [](const ::testing::TestParamInfo<GuardPrefillParam>& i) {
                           std::ostringstream os;
                           PrintTo(i.param, &os);
                           return os.str();
                         });

}  // namespace
}  // namespace muh
