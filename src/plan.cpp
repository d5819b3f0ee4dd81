// plan.cpp — plan_decode(): which dispatch target and policy run, V1 or V2, how many partitions,
// how much workspace. Host-only and GPU-free (tests/cpu/test_plan.cpp), and the input checks
// shared with paged_decode() (decode_check.hpp).
//
// The split count comes from a small cost model of the attention kernel plus the merge:
//
//   ctas(s)   = num_seqs · kv_heads · head_chunks · s          slots = SMs · ctas_per_sm
//   waves(s)  = ceil(ctas / slots)                             active = min(ctas, slots)
//   cta_bw    = min(bytes_in_flight_per_CTA / latency,  bandwidth / active,
//                   1.5 · (bandwidth / SMs) / CTAs per busy SM)
//   t(s)      = waves · (t_cta_start + partition · bytes_per_token / cta_bw)
//               + [s > 1] · (t_merge + partial bytes written and read / bandwidth)
//
// i.e. a CTA streams its partition at the smallest of what its own pipeline keeps in flight,
// its share of HBM, and its share of what one SM can pull. V1 (s = 1) wins when the batch alone fills the slots; a long sequence in
// a small batch splits until the partitions fill the resident slots (every SM busy with
// ctas_per_sm CTAs, e.g. 264 on the H200 at head_dim 128: ≥ 2 CTAs per SM), and no further,
// since more waves of shorter partitions only add CTA starts and merge traffic. Partitions are
// multiples of decode_split_tokens() (policy.hpp); a split that gains less than 1 % over one with
// fewer partitions is not taken (the model is coarse; fewer partitions mean less merge traffic).
//
// Where the target has a wide row (tuning_sm90.hpp's kDecodeWide) and the call can take it, the
// same search runs for that row with its own CTA rate (kLatencyWideSeconds) over partitions of
// ≥ kDecodeWideMinTokens, and the plan takes the faster by ≥ 1 %.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "decode_check.hpp"
#include "kv_quant_check.hpp"
#include "pointer_checks.hpp"
#include "variant_check.hpp"
#include "muh/instances.hpp"
#include "muh/plan.hpp"
#include "muh/select.hpp"
#include "muh/shapes.hpp"

namespace muh {
namespace detail {

namespace {

bool is_pow2_int(long long x) { return x > 0 && (x & (x - 1)) == 0; }

}  // namespace

Status check_decode_shape(const DecodeParams& p) {
  const std::string w = "paged_decode: ";
  auto num = [](long long v) { return std::to_string(v); };
  if (p.dtype != DType::fp16 && p.dtype != DType::bf16 && p.dtype != DType::fp32)
    return invalid_argument(w + "dtype " + num(static_cast<int>(p.dtype)) + " is not one of fp16, bf16, fp32");
  if (!is_supported_head_dim(p.head_dim))
    return invalid_argument(w + "head_dim " + num(p.head_dim) + " is not supported (supported: 64, 96, 128, 256)");
  if (p.layout != KVLayout::nhd && p.layout != KVLayout::vllm)
    return invalid_argument(w + "KV layout " + num(static_cast<int>(p.layout)) + " is not one of nhd (0), vllm (1)");
  if (p.num_seqs < 0 || p.num_seqs > 65535)
    return invalid_argument(w + "num_seqs " + num(p.num_seqs) + " is outside [0, 65535]");
  if (p.num_q_heads < 1 || p.num_kv_heads < 1)
    return invalid_argument(w + "num_q_heads (" + num(p.num_q_heads) + ") and num_kv_heads (" + num(p.num_kv_heads) +
                            ") must be >= 1");
  if (p.num_q_heads % p.num_kv_heads != 0)
    return invalid_argument(w + "num_q_heads (" + num(p.num_q_heads) + ") must be a multiple of num_kv_heads (" +
                            num(p.num_kv_heads) + ")");
  if (p.num_q_heads > 65535)
    return invalid_argument(w + "num_q_heads " + num(p.num_q_heads) + " exceeds 65535");
  // Page sizes: powers of two; the vLLM layout moves V in 16-byte runs of 8 tokens of a page.
  const int min_page = p.layout == KVLayout::vllm ? 8 : 1;
  if (!is_pow2_int(p.page_size) || p.page_size < min_page || p.page_size > 256)
    return invalid_argument(w + "page_size " + num(p.page_size) + " is not supported (" +
                            (p.layout == KVLayout::vllm ? "vllm layout: 8, 16, 32, 64, 128 or 256"
                                                        : "nhd layout: a power of two from 1 to 256") + ")");
  if (p.max_seq_len < 0 || p.max_seq_len > 0x3fffffff)
    return invalid_argument(w + "max_seq_len " + num(p.max_seq_len) + " is outside [0, 2^30 - 1]");
  if (p.num_seqs > 0) {
    if (p.max_blocks_per_seq < 1)
      return invalid_argument(w + "max_blocks_per_seq must be >= 1 (got " + num(p.max_blocks_per_seq) + ")");
    if (p.num_pages < 1) return invalid_argument(w + "num_pages must be >= 1 (got " + num(p.num_pages) + ")");
    const long long covered = static_cast<long long>(p.max_blocks_per_seq) * p.page_size;
    if (p.max_seq_len > covered)
      return invalid_argument(w + "max_seq_len " + num(p.max_seq_len) + " exceeds what the block table covers (" +
                              num(p.max_blocks_per_seq) + " blocks x page_size " + num(p.page_size) + " = " +
                              num(covered) + " tokens)");
  }
  if (!std::isfinite(p.softmax_scale) || p.softmax_scale < 0.f)
    return invalid_argument(w + "softmax_scale must be finite and >= 0 (0 selects 1/sqrt(head_dim))");
  MUH_TRY(check_kv_quant(p));
  return check_variant_values(p.variant, w);
}

// The cache's element type (muh/kv_quant.hpp): an fp8 cache with fp16 / bf16 q, positive finite
// scales; with kv dtype "same" the scales are not read.
Status check_kv_quant(const DecodeParams& p) {
  const std::string w = "paged_decode: ";
  MUH_TRY(check_kv_quant_values(p.kv, w));
  if (!is_fp8(p.kv.dtype)) return Status::Ok();
  if (p.dtype == DType::fp32)
    return invalid_argument(w + "an fp8 KV cache (" + std::string(kv_dtype_name(p.kv.dtype)) +
                            ") is read with fp16 or bf16 q, not fp32");
  if (p.layout == KVLayout::vllm && p.page_size < 16)  // (the V tile's 16 tokens: one page, one copy)
    return invalid_argument(w + "an fp8 KV cache in the vllm layout needs page_size >= 16 (got " +
                            std::to_string(p.page_size) + ")");
  return Status::Ok();
}

Status check_decode_call(const DecodeParams& p) {
  MUH_TRY(check_decode_shape(p));
  if (p.num_seqs == 0) return Status::Ok();  // nothing is read or written
  MUH_TRY(check_variant_compiled(p.variant, p.dtype, p.head_dim, "paged_decode: "));
  if (is_fp8(p.kv.dtype) && !is_fp8_instance(p.kv.dtype, p.dtype, p.head_dim))
    return {StatusCode::not_compiled, "paged_decode: the " + std::string(kv_dtype_name(p.kv.dtype)) +
                                          " KV cache with " + std::string(dtype_name(p.dtype)) + " q and head_dim " +
                                          std::to_string(p.head_dim) +
                                          " is not compiled into this build; rebuild with MUH_KV_FP8 / "
                                          "MUH_KV_FP8_HEAD_DIMS including it"};
  if (!is_compiled_instance(p.dtype, p.head_dim))
    return {StatusCode::not_compiled, "paged_decode: " + std::string(dtype_name(p.dtype)) + " with head_dim " +
                                          std::to_string(p.head_dim) + " is not compiled into this build (compiled: " +
                                          describe_compiled_instances() +
                                          "); rebuild with MUH_DTYPES / MUH_HEAD_DIMS including it"};
  return check_decode_pointers(p);
}

Status check_decode_pointers(const DecodeParams& p) {
  const std::string w = "paged_decode: ";
  if (p.q == nullptr || p.k_cache == nullptr || p.v_cache == nullptr || p.out == nullptr)
    return invalid_argument(w + "q, k_cache, v_cache and out must not be null");
  if (p.block_table == nullptr || p.seq_lens == nullptr)
    return invalid_argument(w + "block_table and seq_lens must not be null");
  // 16-byte vector loads of q / K / V rows and 8- or 16-byte stores of out rows; head_dim·elem is
  // a multiple of 16 for every supported head dim, so aligned bases give aligned rows.
  if (!is_aligned(p.q, 16) || !is_aligned(p.k_cache, 16) || !is_aligned(p.v_cache, 16) ||
      !is_aligned(p.out, 16))
    return invalid_argument(w + "q, k_cache, v_cache and out must be 16-byte aligned");
  if (!is_aligned(p.block_table, 4) || !is_aligned(p.seq_lens, 4) || (p.lse != nullptr && !is_aligned(p.lse, 4)))
    return invalid_argument(w + "block_table, seq_lens and lse must be 4-byte aligned");
  return Status::Ok();
}

}  // namespace detail

namespace {

// Cost-model constants (see the top of the file), calibrated on the H200 with the forced
// split counts of `muh bench decode` (bench/results/decode-h200-2026-11-30-669c6ba.log: the TMA
// copies of the sm90 rows; tests/cpu/test_plan.cpp holds that sweep):
//   * one CTA alone (V1 at batch 1 × 32k, 134 MB): the hd128 row (4 warps × 3 stages, 96 KB of
//     tiles) streams 41 GB/s (8 CTAs, 408.7 µs), the hd256 row (4 × 2, 128 KB) 55 GB/s (4 CTAs,
//     609.1 µs) → the tiles of all W · S stages over an effective latency of 2.4 µs. The 3-stage
//     hd256 row (192 KB) was no faster (615.5 µs): one SM tops out near 1.5× its fair share of
//     the datasheet bandwidth (55 / (4.8 TB/s / 132)), kSmShareCap;
//   * more partitions than fill the slots cost ~2 µs per extra wave of CTAs (128 × 8 CTAs of
//     16 tokens: 30.6 µs against 14.6 µs at 16 × 8), the CTA start below;
//   * the merge: the call with the merge kernel not launched at all (a probe, the output wrong)
//     was 3.1 µs faster at hd128 batch 1 × 32k and 3.8–4.4 µs at hd256 (a20d1b2's merge;
//     bench/results/decode-h200-2026-11-30-experiments.md, section 9).
// The fit before TMA (cp.async rows: 43 / 40 GB/s, W · (S − 1) tiles over 1.5 µs, a 1.25× share,
// a 2 µs merge) had hd256 batch 16 × 512 take 2 partitions, measured 22.8 µs against 18.1 for V1.
constexpr double kLatencySeconds = 2.4e-6;
// The sm80 agent's cp.async copies of vLLM-layout pages (32 16-byte copies a lane per 16-token
// hd-256 tile, each with its own address arithmetic) keep one CTA slower than the TMA boxes of NHD
// pages: V1 of the seed's cells on the H200 (fp16, hd 256, 4 warps × 2 stages = 128 KB of tiles,
// the heads-on-N tile math; bench/results/h200-2026-12-02-heads-on-n/) read 268 MB in 7275 µs,
// 36.9 GB/s — 128 KB over 3.5 µs. Fitted with 2.4 µs the model saw a CTA 1.5× faster than it is,
// found 90 partitions (b1 × 256k, 132 SMs) as good as 128, and took 90: 118.9 µs against 98.6.
// vLLM pages the sm90 rows fetch by TMA (decode_sm80_tma) are modelled like NHD's boxes.
constexpr double kLatencyVllmSeconds = 3.5e-6;
// A wide row's CTA (12 warps × 1 stage, tuning_sm90.hpp's kDecodeWide) keeps as many bytes in
// flight as the 4 × 3 row (192 KB) but streams them faster: three warps a scheduler instead of one
// latency-bound warp. On the H200's 16-SM partition (one CTA a SM, the seed's vLLM cells at 100k
// and 256k, h200-2026-12-06-tile-pipeline/call3-W.json against call3-T.json) a CTA read 108–125
// GB/s against the 4 × 3 row's 80–92: 1.30–1.36×, so 2.4 µs / 1.33.
constexpr double kLatencyWideSeconds = 1.8e-6;
constexpr double kCtaStartSeconds = 1.5e-6;
constexpr double kMergeSeconds = 3.5e-6;
constexpr double kSplitGain = 0.99;  // take more partitions only for ≥ 1 % modelled gain
// One SM pulls at most ~1.5× its fair share of HBM (bandwidth / SMs) however many bytes its
// CTAs keep in flight: a plan that leaves SMs idle cannot make up for them elsewhere.
constexpr double kSmShareCap = 1.5;
// The sm80 agent's K/V copies carry an L2 evict-first policy only when the call reads at most
// this many L2 sizes of K/V. A/B on the H200 (60 MB L2; bench/results/decode-h200-2026-11-30-
// experiments.md, section 7, same build, same run), µs with / without the policy:
//   * reads of 34–134 MB (batch 1 × 8k/32k, batch 16 × 512/2k, batch 64 × 512): the policy is
//     1–11 % faster (hd128 batch 1 × 8k 21.0 / 23.3, hd256 batch 16 × 512 21.4 / 23.8);
//   * reads of 537 MB and more: 1–10 % slower (hd256 batch 16 × 8k 164 / 149, hd128 batch 64 ×
//     8k 539 / 516), never faster;
//   * the crossover: hd128 between 201 MB (65.1 / 67.2) and 268 MB (81.5 / 81.4), hd256 between
//     134 MB and 201 MB (72.5 / 70.2). 3 × 60 MB = 180 MB sits between the two.
constexpr double kEvictFirstL2Multiple = 3.0;

struct CostModel {
  double bandwidth;         // bytes/s
  double sms;               // SMs
  double slots;             // resident CTAs: SMs · ctas_per_sm
  double cta_peak;          // bytes/s one CTA's pipeline sustains: bytes in flight / latency
  double bytes_per_token;   // K + V bytes of one token of one KV head
  double base_ctas;         // CTAs of V1
  double partial_bytes;     // V2 partial bytes per partition, written once and read once

  double seconds(long long splits, long long partition) const {
    const double ctas = base_ctas * static_cast<double>(splits);
    if (ctas <= 0) return 0;
    const double waves = std::ceil(ctas / slots);
    const double active = std::min(ctas, slots);
    const double per_sm = active / std::min(active, sms);  // CTAs sharing one busy SM
    const double cta_bw = std::min({cta_peak, bandwidth / active, kSmShareCap * bandwidth / sms / per_sm});
    double t = waves * (kCtaStartSeconds + static_cast<double>(partition) * bytes_per_token / cta_bw);
    if (splits > 1) t += kMergeSeconds + 2.0 * partial_bytes * static_cast<double>(splits) / bandwidth;
    return t;
  }
};

// Bytes of K/V one CTA of `pol` keeps in its pipeline: the sm80 agent's W · S tiles of 16 tokens
// (the fit above: its rate follows the stage area, not only the S − 1 tiles ahead); the portable
// agent loads one tile at a time, synchronously.
double bytes_in_flight(const DecodePolicy& pol, double bytes_per_token) {
  if (pol.agent == Agent::sm80) return pol.num_warps * pol.num_stages * 16 * bytes_per_token;
  return pol.tile_tokens * bytes_per_token;
}

long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

// A split of L keys: partitions a sequence, tokens a partition, the model's seconds.
struct Split {
  long long splits = 1, partition = 1;
  double seconds = 0;
};

// The split count for L keys under model m: force_splits > 0 exactly that many partitions (where
// 16-token granularity allows it); else the fewest partitions, in multiples of G tokens, within
// kSplitGain of the best the model sees. min_partition > 0: only partitions of at least that many
// tokens are searched (V1 where there is none: the caller checks the length it gets).
Split choose_split(const CostModel& m, long long L, long long G, int force_splits, long long min_partition = 0) {
  Split r{1, std::max<long long>(L, 1), 0};
  if (L > 16) {
    if (force_splits > 0) {
      r.partition = ceil_div(ceil_div(L, force_splits), 16) * 16;
      r.splits = ceil_div(L, r.partition);
    } else {
      double best = L >= min_partition ? m.seconds(1, L) : HUGE_VAL;
      // Beyond ~4 waves of partitions nothing is left to fill; the grid's y is at most 65535.
      const long long s_max = std::min<long long>(
          {65535, ceil_div(L, G), std::max<long long>(1, static_cast<long long>(std::ceil(4.0 * m.slots / m.base_ctas)))});
      long long last = 1;
      for (long long s = 2; s <= s_max; ++s) {
        const long long part = ceil_div(ceil_div(L, s), G) * G;
        const long long s_eff = ceil_div(L, part);
        if (s_eff == last) continue;
        last = s_eff;
        if (part < min_partition) break;  // (partitions only shrink from here)
        const double t = m.seconds(s_eff, part);
        if (t < kSplitGain * best) {
          best = t;
          r.splits = s_eff;
          r.partition = part;
        }
      }
    }
  }
  if (r.splits <= 1) r = Split{1, std::max<long long>(L, 1), 0};
  r.seconds = m.seconds(r.splits, r.splits > 1 ? r.partition : L);
  return r;
}

// One sm80-agent CTA's seconds per token over an fp8 cache where its instructions, not its
// bytes in flight, bound it: each token's 2 · head_dim codes are widened to fp16 by the CTA's
// warps, one per scheduler at hd 256, latency-bound (ncu: ~5 cycles an issued instruction).
// Fitted to V1 (one CTA) of hd 256, 4 query heads / 1 KV head, vLLM pages of 16 by TMA, with the
// widening pass through shared memory (671 instructions a 16-token warp-tile against the 16-bit
// cache's 272): 8010.9 µs for 262144 tokens on an H100 (1980 MHz), 5.97e-11 s a code
// (bench/results/h100-2026-12-06-portable-fp8/call1/seed.log). With it the model takes that
// run's best split count on the seed's 132-SM cells at ≥ 32k (batch 1: 128–131, as measured;
// batch 2: 64–66 against 66), where the 16-bit cache's plan (87–90, 44–46) was 1.26–1.45× off;
// on 16 SMs both are one CTA per SM. The 16-bit cache's CTA (10.3 ns a token there) stays bound
// by the latency model.
// The kernels that read the codes themselves (decode_sm80_reads_codes: ldmatrix fragments of the
// codes) issue fewer instructions. Their own figure, since they run two CTAs a SM at hd 256
// (decode_sm80_codes_ctas_per_sm): with the widening pass's, the model filled both slots of all
// 132 SMs (196–256 partitions at batch 1) and was 1.04–1.18× the best count of the H100's seed
// run (2026-12-06-fp8-nhd-fragments/call13). One CTA reads a code in 2.3e-11 s timed (V1 of the
// seed's 32k cell, 386.8 µs on the H200, 2026-12-07-causal-key-split/call17) and 3.0e-11 s under
// ncu's clocks (504.6 µs, 2026-12-06-fp8-fragments/s10-call1). At 3.0e-11 the H200's plan took
// 256 partitions at batch 1 × 32k (1.19× the best, 128): 132 CTAs seemed too few for 4.8 TB/s.
// 2.7e-11 is fitted: 2.6–2.8e-11 keep the plan within 10 % of the best timed count on both
// sweeps (tests/cpu/test_plan.cpp, SeedCellsOverAnE4m3CacheWithin10PercentOfTheMeasuredBest; on
// the H200 every count it takes was timed: 1.00–1.06×), 2.5e-11 and 3.0e-11 miss cells.
double fp8_token_seconds(const DecodeParams& p, bool reads_codes) {
  constexpr double kWidenSecondsPerCode = 5.97e-11, kFragmentSecondsPerCode = 2.7e-11;
  return 2.0 * p.head_dim * (reads_codes ? kFragmentSecondsPerCode : kWidenSecondsPerCode);
}

}  // namespace

Status plan_decode(const DecodeParams& p, const HardwareCapability& hw, const PlanOptions& opt, DecodePlan* plan) {
  if (plan == nullptr) return invalid_argument("plan_decode: plan must not be null");
  MUH_TRY(detail::check_decode_shape(p));
  return detail::plan_decode_unchecked(p, hw, opt, plan);
}

Status detail::plan_decode_unchecked(const DecodeParams& p, const HardwareCapability& hw, const PlanOptions& opt,
                                     DecodePlan* plan) {
  const std::string w = "plan_decode: ";
  if (plan == nullptr) return invalid_argument(w + "plan must not be null");
  if (opt.force_target < -1)
    return invalid_argument(w + "force_target must be -1 (auto), 0 (portable) or a compute capability");
  if (opt.force_splits < 0) return invalid_argument(w + "force_splits must be >= 0 (0: the plan chooses)");
  if (opt.l2_evict_first < -1 || opt.l2_evict_first > 1)
    return invalid_argument(w + "l2_evict_first must be -1 (the plan chooses), 0 or 1");
  if (opt.wide_row < -1 || opt.wide_row > 1)
    return invalid_argument(w + "wide_row must be -1 (the plan chooses), 0 or 1");
  if (hw.sm_count < 1 || hw.memory_bandwidth_gbps < 1)
    return invalid_argument(w + "hardware profile '" + hw.name + "' has no SMs or no bandwidth");

  // ---- Target and policy: the one selection (select.hpp) -------------------------------------
  // Both decode agents have the variant hooks: a call of the general kind takes the same row.
  const VariantKind kind = variant_kind(p.variant);
  const DecodeSelection sel = choose_decode(hw, p.dtype, p.head_dim, SelectOptions{opt.force_target});
  MUH_TRY(selection_status(sel, w, hw));
  const DecodePolicy& pol = sel.policy;
  // (An fp8 cache is read by both decode agents: the sm80 agent widens the codes in shared memory,
  // the portable one in registers as it uses them.)

  DecodePlan r;
  r.target = sel.target;
  r.policy = pol;
  r.selection = sel;
  r.dtype = p.dtype;
  r.num_seqs = p.num_seqs;
  r.num_q_heads = p.num_q_heads;
  r.num_kv_heads = p.num_kv_heads;
  r.head_dim = p.head_dim;
  r.max_seq_len = p.max_seq_len;
  r.cuda_graph = opt.cuda_graph;
  r.variant = kind;
  r.kv_dtype = p.kv.dtype;
  const int group = p.num_q_heads / p.num_kv_heads;
  r.head_chunks = (group + kDecodeRows - 1) / kDecodeRows;

  // ---- V1 or V2, and the split count -------------------------------------------------------
  // L: the keys a sequence's CTAs read. A window bounds them: the partitions are cut from the
  // window's first key rounded down to 16 (kernels/decode_variant.cuh), so the count is planned
  // for at most window_left + 1 + 15 keys. (Only the speed depends on it: the last partition takes
  // any tail, so a plan made for a smaller window or max_seq_len still computes a call right.)
  long long L = p.max_seq_len;
  if (kind == VariantKind::general && p.variant.window_left >= 0)
    L = std::min<long long>(L, static_cast<long long>(p.variant.window_left) + 16);
  CostModel m;  // (the target's row; the wide row's below)
  m.bandwidth = hw.memory_bandwidth_gbps * 1e9;
  m.sms = hw.sm_count;
  // An fp8 cache: 1-byte codes. Its CTAs keep as many tiles in flight as the 16-bit cache's (at
  // half the bytes), and on the sm80 agent widening the codes bounds a CTA too (fp8_token_seconds).
  // Where the sm80 agent's tile math reads the codes themselves, its kernel's footprint is smaller
  // (decode_sm80_codes_smem_bytes, the launch's): two CTAs a SM at hd 256.
  const bool fp8 = is_fp8(p.kv.dtype);
  const bool reads_codes = decode_sm80_reads_codes(pol, p.kv.dtype, p.layout, group, p.head_dim);
  r.ctas_per_sm = reads_codes ? decode_sm80_codes_ctas_per_sm(pol, p.head_dim) : pol.ctas_per_sm;
  m.slots = static_cast<double>(hw.sm_count) * r.ctas_per_sm;
  m.bytes_per_token = 2.0 * p.head_dim * (fp8 ? 1.0 : static_cast<double>(dtype_size(p.dtype)));
  m.cta_peak = bytes_in_flight(pol, m.bytes_per_token) /
               (pol.agent == Agent::sm80 && p.layout == KVLayout::vllm &&
                        !decode_sm80_tma(pol, p.layout, p.page_size, p.head_dim, fp8)
                    ? kLatencyVllmSeconds
                    : kLatencySeconds);
  if (fp8 && pol.agent == Agent::sm80)
    m.cta_peak = std::min(m.cta_peak, m.bytes_per_token / fp8_token_seconds(p, reads_codes));
  m.base_ctas = static_cast<double>(p.num_seqs) * p.num_kv_heads * r.head_chunks;
  m.partial_bytes = static_cast<double>(p.num_seqs) * p.num_q_heads * (p.head_dim + 1) * 4.0;

  Split split{1, std::max<long long>(L, 1), 0};
  if (p.num_seqs > 0) split = choose_split(m, L, decode_split_tokens(pol), opt.force_splits);

  // ---- The wide row: 12 warps × 1 stage where each CTA streams a long range ------------------
  // Taken where the model sees its faster CTA gain ≥ 1 % at partitions of ≥ kDecodeWideMinTokens:
  // where a CTA may pull more than the 4 × 3 row's CTA streams (a partition of a few SMs; on the
  // H200's 132 SMs one SM's share of HBM, kSmShareCap, bounds both rows alike and the target's own
  // row stays).
  const bool has_wide = has_decode_wide_policy(sel.target, p.dtype, p.head_dim);
  const DecodePolicy wide = decode_wide_policy(sel.target, p.dtype, p.head_dim);  // (the row's own without one)
  const bool wide_reads = has_wide && decode_sm80_wide_reads(wide, p.layout, p.page_size, p.head_dim, group,
                                                             p.kv.dtype, kind == VariantKind::plain);
  if (opt.wide_row == 1 && !wide_reads)
    return invalid_argument(w + "wide_row 1: " +
                            (has_wide ? std::string("the wide row reads a 16-bit cache by TMA (NHD pages of >= 16 "
                                                    "slots, vLLM pages of 16) with <= 8 query heads a KV head, the "
                                                    "plain kind")
                                      : "target " + target_name(sel.target) + " has no wide decode row for " +
                                            std::string(dtype_name(p.dtype)) + " head_dim " +
                                            std::to_string(p.head_dim)));
  if (wide_reads && opt.wide_row != 0 && p.num_seqs > 0) {
    CostModel mw = m;
    mw.slots = static_cast<double>(hw.sm_count) * wide.ctas_per_sm;
    mw.cta_peak = bytes_in_flight(wide, m.bytes_per_token) / kLatencyWideSeconds;
    const Split sw = choose_split(mw, L, decode_split_tokens(wide), opt.force_splits,
                                  opt.wide_row == 1 ? 0 : kDecodeWideMinTokens);
    const long long sw_tokens = sw.splits > 1 ? sw.partition : L;
    if (opt.wide_row == 1 || (sw_tokens >= kDecodeWideMinTokens && sw.seconds < kSplitGain * split.seconds)) {
      split = sw;
      m = mw;
      r.wide = true;
      r.policy = wide;
      r.ctas_per_sm = wide.ctas_per_sm;
    }
  }
  const long long splits = split.splits, partition = split.partition;
  r.use_v2 = splits > 1;
  r.num_splits = static_cast<int>(splits);
  r.partition_tokens = static_cast<int>(partition);
  r.ctas = static_cast<int>(std::min<double>(m.base_ctas * static_cast<double>(splits), 2147483647.0));
  r.est_seconds = m.seconds(splits, splits > 1 ? partition : L);
  const double kv_bytes = static_cast<double>(p.num_seqs) * static_cast<double>(L) * p.num_kv_heads * m.bytes_per_token;
  r.l2_evict_first = opt.l2_evict_first >= 0
                         ? opt.l2_evict_first != 0
                         : kv_bytes <= kEvictFirstL2Multiple * static_cast<double>(hw.l2_cache_size_bytes);
  r.workspace_bytes = r.use_v2 ? static_cast<std::size_t>(p.num_seqs) * r.num_splits * p.num_q_heads *
                                     (static_cast<std::size_t>(p.head_dim) + 1) * sizeof(float)
                               : 0;
  *plan = r;
  return Status::Ok();
}

}  // namespace muh
