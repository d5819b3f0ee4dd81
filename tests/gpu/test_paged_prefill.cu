// test_paged_prefill.cu — prefill whose K/V are read from a paged KV cache (chunked prefill,
// prefix reuse), every compiled policy forced, against the CPU reference
// (check/paged_prefill_check.hpp: tolerance 2× a naive same-precision implementation, outputs
// pre-filled with NaN, the cache NaN wherever no key lives — the unused slots of each sequence's
// last page included —, random page order, lse, two runs bitwise equal, debug_checks on).
//
// One gtest case per (target, dtype, head_dim, layout, shape): targets from MUH_TARGETS, (dtype,
// head_dim) from MUH_FOR_EACH_INSTANCE, both layouts, the shapes below at page sizes 16 and 528
// (and 8, 32, 64, 256 on two shapes). A forced target whose agent does not read the layout at the
// case's page size has no row (the sm75 agent on the vLLM layout; the sm90 agent on vLLM pages of
// 8 slots): the case checks that plan_prefill says so (and that the unforced selection runs a row
// that reads it).
// Then: chunked prefill of one sequence == one dense prefill of the whole sequence; q_len 1 rows
// == the paged decode path; bad tables refused with debug_checks and nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "prefill_expect.hpp"
#include "muh/build_config.hpp"
#include "muh/dispatch.hpp"
#include "muh/input_errors.hpp"
#include "muh/instances.hpp"
#include "muh/kernels/prefill_sm90_launch.cuh"
#include "muh/tuning/policy_io.hpp"
#include "muh/tuning/selectors.hpp"
#include "paged_prefill_check.hpp"

namespace muh {
namespace {

using testing::device_cc;

// The shapes (prefix lengths 0, 1, page − 1, page, many pages; chunks 1, 2, 7, 16, 511; GQA 1, 4,
// 6, 8; a mixed batch; pages 8–528; one non-causal case): check::paged_prefill_cases(), which
// `muh verify` runs too.
const std::vector<check::PagedPrefillCase>& cases() { return check::paged_prefill_cases(); }

struct Param {
  int target;
  DType dtype;
  int head_dim;
  KVLayout layout;
  std::size_t case_index;
};

std::string param_name(const Param& p) {
  return "t" + std::to_string(p.target) + "_" + std::string(dtype_name(p.dtype)) + "_hd" + std::to_string(p.head_dim) +
         (p.layout == KVLayout::nhd ? "_nhd_" : "_vllm_") + cases()[p.case_index].name + "_" +
         std::string(agent_name(prefill_policy(p.target, p.dtype, p.head_dim).agent));
}
void PrintTo(const Param& p, std::ostream* os) { *os << param_name(p); }

std::vector<Param> all_params() {
  std::vector<Param> v;
  for (std::size_t ti = 0; ti < compiled_targets::size; ++ti)
    for (const auto& [t, d] : kCompiledInstances)
      for (KVLayout l : {KVLayout::nhd, KVLayout::vllm})
        for (std::size_t c = 0; c < cases().size(); ++c) v.push_back({compiled_targets::values[ti], t, d, l, c});
  return v;
}

class PagedPrefillForced : public ::testing::TestWithParam<Param> {};

TEST_P(PagedPrefillForced, MatchesReference) {
  MUH_REQUIRE_GPU();
  const Param prm = GetParam();
  if (!target_runs_on_cc(prm.target, device_cc()))
    GTEST_SKIP() << "target " << prm.target << " is newer than the device (sm_" << device_cc() << ")";
  const auto pi = check::make_paged_prefill_inputs(cases()[prm.case_index], prm.layout, prm.dtype, prm.head_dim,
                                                   17 + unsigned(prm.case_index));
  const PrefillPolicy pol = prefill_policy(prm.target, prm.dtype, prm.head_dim);
  SCOPED_TRACE("policy: " + to_string(pol, prm.dtype, prm.head_dim));
  const KVSource src = paged_source(prm.layout);
  const int page = cases()[prm.case_index].page_size;
  PrefillPlan plan;
  const check::PrefillResult r = check::run_paged_prefill_case(*pi, prm.target, &plan);
  if (!prefill_agent_reads_pages(pol.agent, src, page)) {
    // No row for this layout on this agent (the sm75 agent on vLLM pages, the sm90 agent on vLLM
    // pages of 8): a clear Status, and the unforced selection runs a row whose agent reads it.
    EXPECT_EQ(r.status.code(), StatusCode::unsupported) << r.status.message();
    EXPECT_NE(r.status.message().find(src == KVSource::paged_vllm ? "paged vLLM" : "paged NHD"), std::string::npos)
        << r.status.message();
    const check::PrefillResult walked = check::run_paged_prefill_case(*pi, -1, &plan);
    ASSERT_TRUE(walked.status.ok()) << walked.status.message();
    EXPECT_TRUE(prefill_agent_reads_pages(plan.policy.agent, src, page));
    EXPECT_TRUE(walked.pass) << walked.note;
    return;
  }
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(plan.target, prm.target);
  // A workspace only where the plan split the keys (equal q lengths; causal where every q tile
  // sees most keys: prefill_split_applies) or runs the sm90 agent's persistent schedule (more q
  // tiles than SMs). A forced split must have run on an agent that splits, else the case tests
  // nothing new.
  EXPECT_EQ(plan.workspace_bytes > 0, plan.split.split() || plan.persistent.on());
  PrefillParams planned;
  static_cast<PrefillShape&>(planned) = plan.shape;
  if (plan.split.split()) EXPECT_TRUE(prefill_split_applies(planned, plan.policy));
  if (pi->pc.tail_chunk > 0 && (pol.agent == Agent::sm80 || pol.agent == Agent::sm75))
    EXPECT_TRUE(plan.split.split()) << "the forced tail split did not run";
  testing::expect_matches_reference(r, pi->in->naive_err, pi->in->max_ref,
                                    "pre-filled with NaN; NaN in unused cache slots");
  RecordProperty("max_err", std::to_string(r.max_err));
  RecordProperty("tol", std::to_string(r.tol));
}

INSTANTIATE_TEST_SUITE_P(PagedPrefill, PagedPrefillForced, ::testing::ValuesIn(all_params()),
                         [](const ::testing::TestParamInfo<Param>& info) { return param_name(info.param); });

// The sm90 agent's persistent schedule over paged K/V (both layouts), planned for 2 SMs: 2 CTAs
// walk every q tile of the case, the producer warps guarding each tile's block-table row. Same
// checks.
std::vector<Param> persistent_params() {
  std::vector<Param> v;
  for (const Param& p : all_params())
    if (p.target == kTargetSm90a && prefill_policy(p.target, p.dtype, p.head_dim).agent == Agent::sm90 &&
        prefill_agent_reads_pages(Agent::sm90, paged_source(p.layout), cases()[p.case_index].page_size))
      v.push_back(p);
  return v;
}

class PagedPrefillPersistent : public ::testing::TestWithParam<Param> {};

TEST_P(PagedPrefillPersistent, TwoCtasWalkEveryTile) {
  MUH_REQUIRE_GPU();
  const Param prm = GetParam();
  if (!target_runs_on_cc(prm.target, device_cc()))
    GTEST_SKIP() << "target " << prm.target << " is newer than the device (sm_" << device_cc() << ")";
  const auto pi = check::make_paged_prefill_inputs(cases()[prm.case_index], prm.layout, prm.dtype, prm.head_dim,
                                                   17 + unsigned(prm.case_index));
  PrefillPlan plan;
  const check::PrefillResult r = check::run_paged_prefill_case(*pi, prm.target, &plan, nullptr, nullptr, 2);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(plan.persistent.ctas, 2) << "the plan did not take the persistent schedule";
  testing::expect_matches_reference(r, pi->in->naive_err, pi->in->max_ref,
                                    "pre-filled with NaN; NaN in unused cache slots");
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PagedPrefillPersistent);
INSTANTIATE_TEST_SUITE_P(PagedPrefill, PagedPrefillPersistent, ::testing::ValuesIn(persistent_params()),
                         [](const ::testing::TestParamInfo<Param>& info) { return param_name(info.param); });

// ---- Chunked prefill == one dense prefill of the whole sequence ----------------------------------
// One sequence of 700 tokens: the whole of it by the contiguous prefill (GPU, the same target),
// then in chunks [0, 100), [100, 107), [107, 618), [618, 619), [619, 700), each a paged call over
// the cache holding keys 0 .. end − 1 (its prefix and its own tokens). Row for row the chunks
// equal the whole within the tolerance (both are checked against the reference as well).
struct ChunkParam {
  int target;
  DType dtype;
  int head_dim;
  KVLayout layout;
};

std::vector<ChunkParam> chunk_params() {
  std::vector<ChunkParam> v;
  for (std::size_t ti = 0; ti < compiled_targets::size; ++ti)
    for (const auto& [t, d] : kCompiledInstances)
      for (KVLayout l : {KVLayout::nhd, KVLayout::vllm})
        if (prefill_agent_reads_pages(prefill_policy(compiled_targets::values[ti], t, d).agent, paged_source(l), 16))
          v.push_back({compiled_targets::values[ti], t, d, l});
  return v;
}

std::string chunk_param_name(const ChunkParam& p) {
  return "t" + std::to_string(p.target) + "_" + std::string(dtype_name(p.dtype)) + "_hd" + std::to_string(p.head_dim) +
         (p.layout == KVLayout::nhd ? "_nhd" : "_vllm");
}
// gtest's printer (found by ADL): the case's name, not its bytes, in the test list and on failure.
void PrintTo(const ChunkParam& p, std::ostream* os) { *os << chunk_param_name(p); }

class PagedPrefillChunked : public ::testing::TestWithParam<ChunkParam> {};

TEST_P(PagedPrefillChunked, ChunksEqualTheWholeSequence) {
  MUH_REQUIRE_GPU();
  const ChunkParam prm = GetParam();
  if (!target_runs_on_cc(prm.target, device_cc())) GTEST_SKIP() << "target " << prm.target << " is newer than the device";
  const int L = 700;
  const int bounds[] = {0, 100, 107, 618, 619, 700};
  // The whole sequence, dense, with the same q/k/v (the paged inputs of a 0-prefix, 700-token
  // case are the dense inputs).
  const check::PagedPrefillCase whole_case{"whole", {0}, {L}, 6, 1, 16};
  const auto whole = check::make_paged_prefill_inputs(whole_case, prm.layout, prm.dtype, prm.head_dim, 5);
  const std::size_t row = std::size_t(6) * prm.head_dim;
  check::PrefillCase dense = whole->dense;
  const auto dense_in = check::make_prefill_inputs(dense, prm.dtype, prm.head_dim, 5);  // same seed: same q/k/v
  ASSERT_EQ(dense_in->q, whole->in->q);
  const check::PrefillResult dr = check::run_prefill_case(*dense_in, prm.target);
  ASSERT_TRUE(dr.status.ok()) << dr.status.message();
  ASSERT_TRUE(dr.pass) << dr.note;
  // The dense output, read back by running it once more into a buffer of our own.
  std::vector<float> dense_out;
  {
    check::PagedPrefillDevice dev(*whole);  // reuse its q copy and output buffers
    ASSERT_TRUE(dev.status.ok()) << dev.status.message();
    const auto hk = ref::to_storage(dense_in->k, prm.dtype), hv = ref::to_storage(dense_in->v, prm.dtype);
    testing::DeviceBuffer dk(hk.size()), dv(hv.size()), dck(8);
    MUH_CUDA_CHECK(cudaMemcpy(dk.p, hk.data(), hk.size(), cudaMemcpyHostToDevice));
    MUH_CUDA_CHECK(cudaMemcpy(dv.p, hv.data(), hv.size(), cudaMemcpyHostToDevice));
    const int cuk[2] = {0, L};
    MUH_CUDA_CHECK(cudaMemcpy(dck.p, cuk, 8, cudaMemcpyHostToDevice));
    MUH_CUDA_CHECK(dev.fresh_outputs());
    PrefillParams p = dev.params(*whole);
    p.kv_source = KVSource::contiguous;
    p.k = dk.p;
    p.v = dv.p;
    p.cu_seqlens_k = static_cast<const int*>(dck.p);
    p.total_k = L;
    HardwareCapability hw;
    ASSERT_TRUE(device_profile(-1, &hw).ok());
    PrefillPlan plan;
    ASSERT_TRUE(plan_prefill(p, hw, PrefillPlanOptions{prm.target, kPrefillTailOff}, &plan).ok());
    ASSERT_TRUE(prefill(p, plan, nullptr, 0).ok());
    MUH_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> lse;
    MUH_CUDA_CHECK(check::read_outputs(dev, prm.dtype, &dense_out, &lse));
  }
  for (int i = 0; i + 1 < int(std::size(bounds)); ++i) {
    const int s = bounds[i], e = bounds[i + 1];
    const check::PagedPrefillCase c{"chunk", {s}, {e - s}, 6, 1, 16};
    auto pi = check::make_paged_prefill_inputs(c, prm.layout, prm.dtype, prm.head_dim, 5);
    // The chunk's q, k, v are the whole sequence's: rows s .. e − 1 of q, keys 0 .. e − 1.
    pi->in->q.assign(whole->in->q.begin() + std::size_t(s) * row, whole->in->q.begin() + std::size_t(e) * row);
    for (int b = 0; b < 1; ++b)
      for (int j = 0; j < e; ++j)
        for (int h = 0; h < 1; ++h)
          for (int d = 0; d < prm.head_dim; ++d) {
            const std::size_t src = (std::size_t(j) * 1 + h) * prm.head_dim + d;
            const int page = pi->block_table[j / 16], slot = j % 16;
            pi->k_cache[pi->shape.k_offset(page, slot, h, d)] = whole->in->k[src];
            pi->v_cache[pi->shape.v_offset(page, slot, h, d)] = whole->in->v[src];
          }
    pi->in->ref_out.assign(whole->in->ref_out.begin() + std::size_t(s) * row,
                           whole->in->ref_out.begin() + std::size_t(e) * row);
    std::vector<float> ref_lse;
    for (int h = 0; h < 6; ++h)
      for (int r = s; r < e; ++r) ref_lse.push_back(whole->in->ref_lse[std::size_t(h) * L + r]);
    pi->in->ref_lse = ref_lse;
    std::vector<float> out;
    const check::PrefillResult r = check::run_paged_prefill_case(*pi, prm.target, nullptr, &out);
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_TRUE(r.pass) << "chunk [" << s << ", " << e << "): " << r.note;
    double diff = 0;
    for (std::size_t j = 0; j < out.size(); ++j)
      diff = std::max(diff, double(std::fabs(out[j] - dense_out[std::size_t(s) * row + j])));
    EXPECT_LE(diff, r.tol) << "chunk [" << s << ", " << e << ") against the dense prefill of the whole sequence";
  }
}

INSTANTIATE_TEST_SUITE_P(PagedPrefill, PagedPrefillChunked, ::testing::ValuesIn(chunk_params()),
                         [](const ::testing::TestParamInfo<ChunkParam>& info) { return chunk_param_name(info.param); });

// ---- context_attention_fwd in one launch (plan_context_prefill, context_prefill) ----------------
// The chunk's queries over their prefix from vLLM's pages and over the chunk's own contiguous k/v,
// both parts' pieces in one tail launch and one merge, against the reference of the chunk's
// queries causally over prefix + chunk (check/paged_prefill_check.hpp: run_context_prefill_case;
// the cache NaN past each prefix, outputs pre-filled with NaN, lse, two runs bitwise equal).
// Forced targets: the rows of the sm80 agent fuse, on every case; the others (portable, sm90) say
// why not and run nothing (one case each: the one-token one, whose reference is cheap). The
// selection's own choice (-1) is checked wherever it fuses.
struct ContextParam {
  int target;  // -1: the selection walks
  DType dtype;
  int head_dim;
  std::size_t case_index;
};
const std::vector<check::PagedPrefillCase>& context_cases() {
  static const std::vector<check::PagedPrefillCase> v = check::context_prefill_cases();
  return v;
}
std::string context_param_name(const ContextParam& p) {
  return (p.target < 0 ? std::string("auto") : "t" + std::to_string(p.target)) + "_" +
         std::string(dtype_name(p.dtype)) + "_hd" + std::to_string(p.head_dim) + "_" + context_cases()[p.case_index].name;
}
void PrintTo(const ContextParam& p, std::ostream* os) { *os << context_param_name(p); }
std::vector<ContextParam> context_params() {
  std::vector<ContextParam> v;
  for (int ti = -1; ti < int(compiled_targets::size); ++ti)
    for (const auto& [t, d] : kCompiledInstances) {
      if (t == DType::fp32) continue;
      const int target = ti < 0 ? -1 : compiled_targets::values[ti];
      const bool all = target < 0 || prefill_policy(target, t, d).agent == Agent::sm80;
      for (std::size_t c = 0; c < context_cases().size(); ++c)
        if (all || context_cases()[c].name.rfind("ctx_one_token", 0) == 0) v.push_back({target, t, d, c});
    }
  return v;
}

class ContextPrefill : public ::testing::TestWithParam<ContextParam> {};

TEST_P(ContextPrefill, FusedPartsMatchTheReference) {
  MUH_REQUIRE_GPU();
  const ContextParam prm = GetParam();
  if (prm.target >= 0 && !target_runs_on_cc(prm.target, device_cc()))
    GTEST_SKIP() << "target " << prm.target << " is newer than the device (sm_" << device_cc() << ")";
  const check::PagedPrefillCase& pc = context_cases()[prm.case_index];
  const auto pi = check::make_paged_prefill_inputs(pc, KVLayout::vllm, prm.dtype, prm.head_dim, 91 + unsigned(prm.case_index));
  ContextPlan cp;
  const check::PrefillResult r = check::run_context_prefill_case(*pi, prm.target, pc.tail_chunk, &cp);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  const bool sm80_row = prm.target >= 0 && prefill_policy(prm.target, prm.dtype, prm.head_dim).agent == Agent::sm80;
  if (prm.target >= 0) EXPECT_EQ(cp.fused, sm80_row) << cp.why;
  if (!cp.fused) {
    EXPECT_NE(std::string(cp.why), "");
    return;
  }
  EXPECT_EQ(cp.prefix.policy.agent, Agent::sm80);
  if (pc.tail_chunk > 0) EXPECT_EQ(cp.chunk_split.tail_chunk, pc.tail_chunk);
  RecordProperty("prefix_ctas", std::to_string(cp.prefix_split.tail_ctas));
  RecordProperty("chunk_ctas", std::to_string(cp.chunk_split.tail_ctas));
  testing::expect_matches_reference(r, pi->in->naive_err, pi->in->max_ref,
                                    "pre-filled with NaN; NaN in the cache past each prefix");
  RecordProperty("max_err", std::to_string(r.max_err));
  RecordProperty("tol", std::to_string(r.tol));
}

INSTANTIATE_TEST_SUITE_P(PagedPrefill, ContextPrefill, ::testing::ValuesIn(context_params()),
                         [](const ::testing::TestParamInfo<ContextParam>& info) {
                           return context_param_name(info.param);
                         });

// context_prefill refuses, before any launch, what its plan was not made for.
TEST(ContextPrefillBadCalls, RefusedWithAStatusAndNothingRun) {
  MUH_REQUIRE_GPU();
  const check::PagedPrefillCase pc = context_cases()[0];
  DType t = DType::fp16;
  int d = 0;
  for (const auto& [tt, dd] : kCompiledInstances)
    if (tt != DType::fp32 && d == 0) {
      t = tt;
      d = dd;
    }
  if (d == 0) GTEST_SKIP() << "no 16-bit instance compiled";
  const auto pi = check::make_paged_prefill_inputs(pc, KVLayout::vllm, t, d, 5);
  check::PagedPrefillDevice dev(*pi);
  ASSERT_TRUE(dev.status.ok());
  PrefillParams prefix = dev.params(*pi);
  prefix.causal = false;
  PrefillParams chunk = check::shape_params(*pi->in);
  chunk.q = prefix.q;
  chunk.out = prefix.out;
  chunk.lse = prefix.lse;
  chunk.cu_seqlens_q = chunk.cu_seqlens_k = prefix.cu_seqlens_q;
  chunk.k = chunk.v = prefix.q;  // (never read: every call below is refused)
  chunk.total_k = chunk.total_q;
  chunk.max_seqlen_k = chunk.max_seqlen_q;
  chunk.causal = true;
  ContextPlan cp;
  HardwareCapability hw;
  ASSERT_TRUE(device_profile(-1, &hw).ok());
  ASSERT_TRUE(plan_context_prefill(prefix, chunk, hw, PrefillPlanOptions{-1, kPrefillTailOff}, &cp).ok());
  ASSERT_FALSE(cp.fused);
  ASSERT_EQ(dev.fresh_outputs(), cudaSuccess);
  const Status s = context_prefill(prefix, chunk, cp, nullptr, 0);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("not fused"), std::string::npos) << s.message();
  int fused_target = -1;
  for (std::size_t ti = 0; ti < compiled_targets::size; ++ti)
    if (prefill_policy(compiled_targets::values[ti], t, d).agent == Agent::sm80 &&
        target_runs_on_cc(compiled_targets::values[ti], device_cc()))
      fused_target = compiled_targets::values[ti];
  if (fused_target < 0) GTEST_SKIP() << "no sm80-agent row compiled for this device";
  ASSERT_TRUE(plan_context_prefill(prefix, chunk, hw, PrefillPlanOptions{fused_target, -1}, &cp).ok());
  ASSERT_TRUE(cp.fused) << cp.why;
  check::DevBuf ws(cp.workspace_bytes);
  PrefillParams other_out = chunk;
  other_out.out = ws.p;
  const Status other = context_prefill(prefix, other_out, cp, ws.p, cp.workspace_bytes);
  EXPECT_EQ(other.code(), StatusCode::invalid_argument);
  EXPECT_NE(other.message().find("same q, out"), std::string::npos) << other.message();
  const Status small = context_prefill(prefix, chunk, cp, ws.p, cp.workspace_bytes - 16);
  EXPECT_EQ(small.code(), StatusCode::invalid_argument) << small.message();
  PrefillParams longer = chunk;
  longer.max_seqlen_q += 1;
  PrefillParams longer_prefix = prefix;
  longer_prefix.max_seqlen_q += 1;
  const Status replan = context_prefill(longer_prefix, longer, cp, ws.p, cp.workspace_bytes);
  EXPECT_EQ(replan.code(), StatusCode::invalid_argument) << replan.message();
  // Nothing ran: the outputs still hold their NaN.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> out, lse;
  ASSERT_EQ(check::read_outputs(dev, t, &out, &lse), cudaSuccess);
  for (float x : out) ASSERT_TRUE(std::isnan(x));
}

// ---- q_len 1 rows == the paged decode path -------------------------------------------------------
TEST(PagedPrefillVsDecode, SingleTokenRowsMatchPagedDecode) {
  MUH_REQUIRE_GPU();
  for (const auto& [t, d] : kCompiledInstances) {
    if (t == DType::fp32) continue;  // decode's rows are 16-bit
    for (KVLayout l : {KVLayout::nhd, KVLayout::vllm}) {
      const check::PagedPrefillCase c{"decodes", {0, 15, 16, 300, 1023}, {1, 1, 1, 1, 1}, 8, 2, 16};
      const auto pi = check::make_paged_prefill_inputs(c, l, t, d, 23);
      std::vector<float> prefill_out;
      const check::PrefillResult r = check::run_paged_prefill_case(*pi, -1, nullptr, &prefill_out);
      ASSERT_TRUE(r.status.ok()) << r.status.message();
      EXPECT_TRUE(r.pass) << r.note;
      // The same cache through paged_decode.
      check::PagedPrefillDevice dev(*pi);
      ASSERT_TRUE(dev.status.ok());
      MUH_CUDA_CHECK(dev.fresh_outputs());
      DecodeParams p;
      p.dtype = t;
      p.layout = l;
      p.q = dev.q.p;
      p.k_cache = dev.k_cache.p;
      p.v_cache = dev.v_cache.p;
      p.out = dev.out.p;
      p.block_table = static_cast<const int*>(dev.block_table.p);
      p.seq_lens = static_cast<const int*>(dev.seqused_k.p);
      p.num_seqs = 5;
      p.num_q_heads = 8;
      p.num_kv_heads = 2;
      p.head_dim = d;
      p.page_size = 16;
      p.num_pages = pi->num_pages;
      p.max_blocks_per_seq = pi->max_blocks;
      p.max_seq_len = 1024;
      HardwareCapability hw;
      ASSERT_TRUE(device_profile(-1, &hw).ok());
      DecodePlan plan;
      ASSERT_TRUE(plan_decode(p, hw, PlanOptions{}, &plan).ok());
      testing::DeviceBuffer ws(plan.workspace_bytes);
      const Status s = paged_decode(p, plan, ws.p, plan.workspace_bytes);
      ASSERT_TRUE(s.ok()) << s.message();
      MUH_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<float> decode_out, lse;
      MUH_CUDA_CHECK(check::read_outputs(dev, t, &decode_out, &lse));
      double diff = 0;
      for (std::size_t j = 0; j < decode_out.size(); ++j) {
        ASSERT_TRUE(std::isfinite(decode_out[j]));
        diff = std::max(diff, double(std::fabs(decode_out[j] - prefill_out[j])));
      }
      // Each is within r.tol of the reference, so within 2·tol of each other.
      EXPECT_LE(diff, 2 * r.tol) << dtype_name(t) << " hd " << d << (l == KVLayout::nhd ? " nhd" : " vllm");
    }
  }
}

// ---- The sm90 agent's V map: a box a TMA, every panel ----------------------------------------------
// Paged V with boxes of 16–64 rows is read through a 5-D map whose last dim is the 64-dim panel
// (128 bytes apart, below the other dims' strides): should the driver refuse such a map the
// launch falls back to a TMA a panel (prefill_sm90_launch.cuh), which the forced cases cannot
// tell apart — this says which one runs. At the page sizes the forced cases take.
TEST(PagedPrefillSm90Maps, VIsABoxATmaWhereBoxesHold16To64Rows) {
  MUH_REQUIRE_GPU();
  if (device_cc() < 90) GTEST_SKIP() << "tensor maps need sm_90 (device sm_" << device_cc() << ")";
  void* cache = nullptr;
  MUH_CUDA_CHECK(cudaMalloc(&cache, std::size_t(64) << 20));
  for (const int d : {64, 128, 256})
    for (const int page : {16, 32, 64, 528}) {
      const int heads = 8, rows = kernels::sm90_page_box_rows(page, 64);
      const long long pages = (std::size_t(64) << 20) / (std::size_t(page) * heads * d * 2);
      CUtensorMap map;
      EXPECT_TRUE(kernels::make_sm90_pages_panels_map(&map, cache, DType::bf16, d, heads, page, pages, rows))
          << "hd " << d << ", page " << page << ": the driver refused the 5-D V map";
      // The vLLM layout's maps (a box a TMA, one per key box and one per value box).
      EXPECT_TRUE(kernels::make_sm90_vllm_keys_map(&map, cache, DType::bf16, d, heads, page, pages, rows))
          << "hd " << d << ", page " << page << ": the driver refused the vLLM key map";
      EXPECT_TRUE(kernels::make_sm90_vllm_values_map(&map, cache, DType::bf16, d, heads, page, pages, rows))
          << "hd " << d << ", page " << page << ": the driver refused the vLLM value map";
    }
  MUH_CUDA_CHECK(cudaFree(cache));
}

// ---- Bad tables with debug_checks: a clear Status and nothing written ----------------------------
TEST(PagedPrefillBadTables, DebugChecksRefuseAndLaunchNothing) {
  MUH_REQUIRE_GPU();
  const auto& [t, d] = kCompiledInstances[0];
  const check::PagedPrefillCase c{"bad", {20, 3}, {4, 5}, 4, 1, 16};
  struct Mut {
    const char* says;
    void (*f)(check::PagedPrefillInputs&);
  };
  const Mut muts[] = {
      {"block_table[0][1]", [](check::PagedPrefillInputs& pi) { pi.block_table[1] = pi.num_pages; }},
      {"seqused_k[1]", [](check::PagedPrefillInputs& pi) { pi.seqused_k[1] = pi.in->max_k + 1; }},
      {"queries but seqused_k", [](check::PagedPrefillInputs& pi) { pi.seqused_k[1] = 4; }},
      {"not monotonic", [](check::PagedPrefillInputs& pi) { pi.in->cu_q = {0, 5, 4}; }},
  };
  for (const Mut& m : muts) {
    auto pi = check::make_paged_prefill_inputs(c, KVLayout::nhd, t, d, 3);
    m.f(*pi);
    check::PagedPrefillDevice dev(*pi);
    ASSERT_TRUE(dev.status.ok());
    MUH_CUDA_CHECK(dev.fresh_outputs());
    RunOptions opt;
    opt.debug_checks = true;
    const Status s = prefill(dev.params(*pi), opt);
    EXPECT_EQ(s.code(), StatusCode::invalid_argument) << m.says << ": " << s.message();
    EXPECT_NE(s.message().find(m.says), std::string::npos) << s.message();
    MUH_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> out, lse;
    MUH_CUDA_CHECK(check::read_outputs(dev, t, &out, &lse));
    for (float x : out) ASSERT_TRUE(std::isnan(x)) << "a refused call wrote its output";
  }
}

// Without debug checks the kernels guard the tables themselves (kernels/prefill_kv.cuh,
// paged_sequence_ok): a block id outside [0, num_pages) in the part of a row a sequence reads, or
// a seqused_k outside [0, max_seqlen_k], makes that sequence write nothing and flags the kind;
// the other sequence of the batch is computed as in a valid call (bitwise). Both layouts; a
// 16-bit cache, and an fp8 one where an fp8 instance is compiled and the device has the sm80 agent
// (its kernels run the same guard before their code copies).
TEST(PagedPrefillGuard, BadDeviceTablesAreFlaggedReadNothingAndSpareTheOtherSequence) {
  MUH_REQUIRE_GPU();
  struct Cache {
    KVDType kv;
    DType t;
    int d;
  };
  std::vector<Cache> caches = {{KVDType::same, kCompiledInstances[0].dtype, kCompiledInstances[0].head_dim}};
  if (device_cc() >= 80 && MUH_PAGED_PREFILL)
    for (const auto& e : kCompiledFp8Instances)
      if (e.head_dim > 0) {
        caches.push_back({e.kv, e.dtype, e.head_dim});
        break;
      }
  for (const Cache& cache : caches) {
    const DType t = cache.t;
    const int d = cache.d;
    SCOPED_TRACE(std::string(kv_dtype_name(cache.kv)) + " cache, " + std::string(dtype_name(t)) + " hd " +
                 std::to_string(d));
    // keys 24 and 8, page 16: sequence 0 reads block_table[0..1], sequence 1 block_table[2].
    check::PagedPrefillCase c{"guard", {20, 3}, {4, 5}, 4, 1, 16};
    if (is_fp8(cache.kv)) c.kv = KVQuant{cache.kv, 0.5f, 2.f};
    struct Mut {
      InputError kind;
      void (*f)(check::PagedPrefillInputs&);
    };
    const Mut muts[] = {
        {InputError::block_id, [](check::PagedPrefillInputs& pi) { pi.block_table[1] = pi.num_pages; }},
        {InputError::block_id, [](check::PagedPrefillInputs& pi) { pi.block_table[0] = -1; }},
        {InputError::block_id, [](check::PagedPrefillInputs& pi) { pi.block_table[1] = 1 << 30; }},
        {InputError::seq_len, [](check::PagedPrefillInputs& pi) { pi.seqused_k[0] = pi.in->max_k + 1; }},
        {InputError::seq_len, [](check::PagedPrefillInputs& pi) { pi.seqused_k[0] = -1; }},
    };
    for (KVLayout layout : {KVLayout::nhd, KVLayout::vllm}) {
      std::vector<float> good, lse;
      {
        auto pi = check::make_paged_prefill_inputs(c, layout, t, d, 3);
        check::PagedPrefillDevice dev(*pi);
        ASSERT_TRUE(dev.status.ok());
        MUH_CUDA_CHECK(dev.fresh_outputs());
        ASSERT_TRUE(prefill(dev.params(*pi)).ok());
        MUH_CUDA_CHECK(cudaDeviceSynchronize());
        MUH_CUDA_CHECK(check::read_outputs(dev, t, &good, &lse));
      }
      const std::size_t seq0 = std::size_t(4) * c.num_q_heads * d;  // sequence 0's rows of out
      for (const Mut& m : muts) {
        auto pi = check::make_paged_prefill_inputs(c, layout, t, d, 3);
        m.f(*pi);
        check::PagedPrefillDevice dev(*pi);
        ASSERT_TRUE(dev.status.ok());
        MUH_CUDA_CHECK(dev.fresh_outputs());
        std::uint32_t mask = 0;
        ASSERT_TRUE(read_input_errors(nullptr, &mask).ok());  // clear what earlier tests left
        const Status s = prefill(dev.params(*pi));            // no debug checks: the kernels' guard
        ASSERT_TRUE(s.ok()) << s.message();
        ASSERT_TRUE(read_input_errors(nullptr, &mask).ok());
        EXPECT_EQ(mask, input_error_bit(m.kind)) << describe_input_errors(mask);
        std::vector<float> out;
        MUH_CUDA_CHECK(check::read_outputs(dev, t, &out, &lse));
        for (std::size_t i = 0; i < seq0; ++i) ASSERT_TRUE(std::isnan(out[i])) << "the bad sequence wrote out[" << i << "]";
        for (std::size_t i = seq0; i < out.size(); ++i)
          ASSERT_EQ(std::memcmp(&out[i], &good[i], sizeof(float)), 0) << "the good sequence differs at out[" << i << "]";
      }
    }
  }
}

}  // namespace
}  // namespace muh
