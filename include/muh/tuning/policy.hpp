// tuning/policy.hpp — the policy structs the tuning tables are made of.
//
// A policy is a literal value with ==, a constexpr footprint and a printer (policy_io.hpp): it
// says how a kernel family runs (which agent, tiles, warps, pipeline depth, shared-memory cap) and
// never what it computes. Every compiled policy is tested against the one CPU reference by
// forcing it. The tables of rows are tuning_*.hpp.
#pragma once

#include <string_view>

#include "muh/dtype.hpp"
#include "muh/kv_quant.hpp"
#include "muh/paged_kv.hpp"

namespace muh {

// An agent is one kernel implementation of a family for one arch class (CCCL's "agent" layer).
enum class Agent : unsigned char {
  portable = 0,  // plain CUDA C++, synchronous copies, no inline PTX: BI-V100 (own arch), fits 48 KB
  sm75 = 1,      // Turing: fp16 tensor cores (m16n8k8), no cp.async
  sm80 = 2,      // Ampere/Ada (and Hopper for now): mma.sync m16n8k16, ldmatrix, cp.async pipeline
  sm90 = 3,      // Hopper, sm_90a code only: TMA, wgmma, warp specialisation (prefill)
};

// The K/V sources a prefill agent reads (paged_kv.hpp). The portable and sm80 agents read all
// three (the vLLM layout's token-minor value pages through a transposing copy); the sm75 agent
// reads contiguous and paged NHD K/V — its register stage has no transposing variant yet, so the
// selection (select.hpp) walks a paged-vLLM call on past its rows.
// The sm90 agent reads all three, by TMA boxes of whole pages or parts of one; the vLLM layout's
// boxes land in forms wgmma reads as they are (prefill_sm90.cuh), its value boxes as rows of 16
// slots — so pages of a multiple of 16 slots only (prefill_agent_reads_pages): a vLLM call with
// pages of 8 walks on to the sm80 agent's row of sm_90.
constexpr bool prefill_agent_reads(Agent agent, KVSource s) {
  return agent != Agent::sm75 || s != KVSource::paged_vllm;
}
// ... at this page size (slots a page; any for contiguous K/V).
constexpr bool prefill_agent_reads_pages(Agent agent, KVSource s, int page_size) {
  return prefill_agent_reads(agent, s) && (agent != Agent::sm90 || s != KVSource::paged_vllm || page_size % 16 == 0);
}
// Whether the agent has the general variant kind's hooks (muh/variant.hpp): all but sm90, whose
// calls with a variant walk on to the sm80 agent's row of sm_90.
constexpr bool prefill_agent_has_variants(Agent agent) { return agent != Agent::sm90; }
// Whether the agent reads a paged cache of element type kv (muh/kv_quant.hpp): every agent reads
// q's own type; an fp8 cache the sm80 agent, whose copies land the codes in its ring and widen
// them there (prefill_sm80_pipeline.cuh), and the portable one, which widens each load on its
// way into shared memory (prefill_portable.cuh). Such a call walks past the sm90 agent to the
// sm80 agent's row of sm_90, and past the T4's sm75 row to the portable one.
constexpr bool prefill_agent_reads_kv(Agent agent, KVDType kv) {
  return !is_fp8(kv) || agent == Agent::sm80 || agent == Agent::portable;
}

constexpr std::string_view agent_name(Agent a) {
  switch (a) {
    case Agent::portable: return "portable";
    case Agent::sm75: return "sm75";
    case Agent::sm80: return "sm80";
    case Agent::sm90: return "sm90";
  }
  return "?";
}

// Prefill (flash attention) policy: one CTA computes a block_m × head_dim tile of O, streaming
// K/V in block_n-token tiles through num_stages shared-memory buffers.
struct PrefillPolicy {
  Agent agent = Agent::portable;
  int block_m = 32;
  int block_n = 32;
  int num_warps = 4;
  int num_stages = 1;
  // The shared memory the row's profile grants one block. It bounds the row (validate()) but
  // does not change the kernel, so it is not part of == and rows that differ only in their cap
  // share one instantiation. Launches set the max dynamic smem to the footprint.
  int smem_cap_bytes = 48 * 1024;
  const char* evidence = "";       // where the numbers come from (not part of ==)
  // sm80 agent with warp pairs, on sm_90 code: the two halves of the CTA (warps 0–3, 4–7) take
  // turns at the tensor cores — one runs its MMAs while the other does its softmax — and the
  // K/V ring is ordered by per-buffer mbarriers instead of CTA barriers (prefill_sm80.cuh).
  // The sm90 agent: overlap issues each key tile's QKᵀ beside the previous tile's PV and runs
  // its softmax while that PV finishes (FlashAttention-3 §3.2).
  bool ping_pong = false;
  bool overlap = false;

  friend constexpr bool operator==(const PrefillPolicy& a, const PrefillPolicy& b) {
    return a.agent == b.agent && a.block_m == b.block_m && a.block_n == b.block_n &&
           a.num_warps == b.num_warps && a.num_stages == b.num_stages && a.ping_pong == b.ping_pong &&
           a.overlap == b.overlap;
  }
  friend constexpr bool operator!=(const PrefillPolicy& a, const PrefillPolicy& b) { return !(a == b); }
};

// Decode policy: one CTA serves all query heads of one KV head of one sequence (or of one
// partition of it, for V2), streaming tile_tokens tokens of K and V per shared-memory stage.
struct DecodePolicy {
  Agent agent = Agent::portable;
  int num_warps = 4;
  int tile_tokens = 32;         // tokens of K/V staged per pipeline stage
  int num_stages = 1;
  int partition_size = 512;     // V2 partitions are multiples of this many tokens
  int ctas_per_sm = 2;          // occupancy the kernel is built for (feeds the V1/V2 heuristics)
  int smem_cap_bytes = 48 * 1024;  // bounds the row; not part of == (see PrefillPolicy)
  const char* evidence = "";    // where the numbers come from (not part of ==)
  // sm80 agent on sm_90+: each warp's 16-token K and V tiles come by TMA (tensor-map boxes, an
  // mbarrier per stage) instead of 16-byte cp.asyncs, where the call allows it
  // (decode_sm80_tma below); otherwise the cp.async copies.
  bool tma = false;

  friend constexpr bool operator==(const DecodePolicy& a, const DecodePolicy& b) {
    return a.agent == b.agent && a.num_warps == b.num_warps && a.tile_tokens == b.tile_tokens &&
           a.num_stages == b.num_stages && a.partition_size == b.partition_size &&
           a.ctas_per_sm == b.ctas_per_sm && a.tma == b.tma;
  }
  friend constexpr bool operator!=(const DecodePolicy& a, const DecodePolicy& b) { return !(a == b); }
};

// ---- Shared-memory footprints: the exact bytes each agent's kernel allocates. ----------------
// The kernels static_assert their allocation against these, so a table row that passes validate()
// can always launch.

// Portable prefill stages the Q tile and one K and one V tile (scores stay in registers):
// (block_m + 2·block_n) · head_dim · elem_size.
// Tensor-core prefill (kernels/prefill_sm80.cuh): the Q tile + a ring of num_stages block_n-token
// tiles that K and V take turns in (K0 V0 K1 V1 …), 16-bit elements:
// (block_m + num_stages·block_n) · head_dim · elem_size. num_stages = 2 is FlashAttention-2's
// one K + one V buffer (loads overlap compute); 4 double-buffers the pair; 1 is synchronous.
// The sm75 agent is the same body and allocates exactly the same (its next K/V tile waits in
// registers, not shared memory; never warp pairs): its 1-buffer rows take (block_m + block_n) ·
// head_dim · 2.
// With warp pairs (prefill_sm80_warp_pairs) it adds the pairs' exchange area: per warp its half
// of P (32 rows × block_n/2 keys, 16-bit: 32·block_n bytes) and 2 m16 tiles × 2 row halves ×
// 8 rows of fp32 row maxima (128 bytes); with ping_pong, two 8-byte mbarriers per buffer.
constexpr bool prefill_sm80_warp_pairs(const PrefillPolicy& p, int head_dim);
// The sm90 agent (kernels/prefill_sm90.cuh): q_buffers Q tiles (prefill_sm90_q_buffers) +
// num_stages (K, V) buffer pairs of block_n rows, four 8-byte mbarriers per pair (K full, V full,
// K free, V free) and two per Q buffer (full, free), 48 bytes per Q buffer for its q tile's
// coordinates and 1024 bytes of slack to align the tiles to the 128-byte swizzle's 1024-byte
// period: (q_buffers·block_m + 2·num_stages·block_n)·head_dim·e + 8·(2·q_buffers +
// 4·num_stages) + 48·q_buffers + 1024.
constexpr int prefill_sm90_smem_bytes(const PrefillPolicy& p, DType t, int head_dim, int q_buffers) {
  return (q_buffers * p.block_m + 2 * p.num_stages * p.block_n) * head_dim * dtype_size(t) +
         8 * (2 * q_buffers + 4 * p.num_stages) + 48 * q_buffers + 1024;
}
// Its Q buffers: two where they fit the row's cap — a CTA that goes on to another q tile (the
// persistent schedule, prefill_plan.hpp) loads that tile's Q while the epilogue of the one
// before still reads the other buffer — else one (hd 256: 2 × 64 KB of Q beside 128 KB of K/V
// is past 227 KB), and the next Q waits for the epilogue.
constexpr int prefill_sm90_q_buffers(const PrefillPolicy& p, DType t, int head_dim) {
  return prefill_sm90_smem_bytes(p, t, head_dim, 2) <= p.smem_cap_bytes ? 2 : 1;
}
constexpr int prefill_smem_bytes(const PrefillPolicy& p, DType t, int head_dim) {
  const int e = dtype_size(t);
  if (p.agent == Agent::portable) return (p.block_m + 2 * p.block_n) * head_dim * e;
  if (p.agent == Agent::sm90) return prefill_sm90_smem_bytes(p, t, head_dim, prefill_sm90_q_buffers(p, t, head_dim));
  const int exchange = prefill_sm80_warp_pairs(p, head_dim) ? p.num_warps * (32 * p.block_n + 128) : 0;
  const int mbarriers = p.ping_pong ? 2 * p.num_stages * 8 : 0;  // a full and an empty one per buffer
  return (p.block_m + p.num_stages * p.block_n) * head_dim * e + exchange + mbarriers;
}

// Warp pairs of the tensor-core prefill agent (kernels/prefill_sm80.cuh): at head_dim 256 a warp
// holds one m16 tile (O alone is 128 fp32 registers per lane), so every K and V fragment it reads
// from shared memory feeds one m16 tile. With pairs, two warps share 32 rows — S split by keys,
// O by head dim (still 128 registers) — and each fragment feeds two: 144 → 96 ldmatrix.x4 per
// warp and 64-key tile, plus 8 small exchange accesses: +7–8 % at hd 256 on the H200
// (bench/results/h200-2026-11-30-db46dd2.md). Only rows of ≥ 8 warps: at 64×64 w4 (the 99 KB
// parts' row) the exchange would push 96 KB past 99 KB, and pairs did not make that row faster.
// The figures: bench/results/tuning-history.md.
constexpr bool prefill_sm80_warp_pairs(const PrefillPolicy& p, int head_dim) {
  return p.agent == Agent::sm80 && p.num_warps % 2 == 0 && p.num_warps >= 8 && p.block_m == 16 * p.num_warps &&
         p.block_n % 32 == 0 && head_dim >= 256 && head_dim % 128 == 0;
}

// Decode (kernels/decode_portable.cuh, kernels/decode_sm80.cuh; each static_asserts its
// allocation against this). kDecodeRows = 16 query heads per CTA (the MMA's m16 rows).
//   portable: takes a CTA's query heads kPortableDecodeRows (8) at a time: q of those heads
//             [8][head_dim] fp32 (reused for their O at the end), the per-tile slice sums of the
//             scores [num_warps][8][tile] fp32, p [tile][8] fp32, and three [8] fp32 row vectors
//             (rescale factor, final max, final sum). K and V stay in registers.
//   sm80:     Q [16][head_dim + 8] plus, per warp and stage, a 16-token K tile and V tile of
//             [16][head_dim + 8] (16 bytes of padding per row: ldmatrix rows on distinct banks);
//             tile_tokens = 16 · num_warps is one stage of all warps together.
inline constexpr int kDecodeRows = 16;
// The sm80 decode agent's tile math for a group of ≤ 8 query heads per KV head: the heads on the
// MMA's 8 columns, 16 tokens on its rows (kernels/decode_sm80.cuh, HeadsOnN) — half the MMAs and
// half the O accumulators of the heads on the 16 rows, where a group of 4–6 (the seed's
// Qwen3.5/3.6 at TP4) leaves 10–12 rows padded. A speed choice only (launch_decode makes it).
constexpr bool decode_sm80_heads_on_n(int group) { return group <= 8; }
// Whether the sm80 decode agent's tile math reads an fp8 cache's codes themselves, as ldmatrix
// fragments widened in registers (HeadsOnNCodes), rather than 16-bit tiles widened from them in
// shared memory: with the heads on N, on vLLM pages (K's 16-code groups and V's 16-token dim
// rows are ldmatrix rows) and on NHD pages of a head_dim that is whole 128-byte rows (the ring's
// swizzled boxes: kernels/fp8_fragments.hpp; V's token rows by ldmatrix .trans). A speed choice
// only; the launch (decode_launch.cuh: the TMA maps' form) and the kernel both take it from here.
// (The plan's cost model counts the codes kernels' own CTAs a SM, decode_sm80_codes_ctas_per_sm
// below, and their own per-code time: plan.cpp, fp8_token_seconds.)
constexpr bool decode_sm80_fp8_fragments(KVLayout layout, bool heads_on_n, int head_dim) {
  return heads_on_n && (layout == KVLayout::vllm || head_dim % 128 == 0);
}
// Whether a call (a cache of element type kv, `group` query heads per KV head) on row p runs
// such a kernel: what the launch sizes its shared memory and TMA maps by and the plan its slots.
constexpr bool decode_sm80_reads_codes(const DecodePolicy& p, KVDType kv, KVLayout layout, int group, int head_dim) {
  return is_fp8(kv) && p.agent == Agent::sm80 &&
         decode_sm80_fp8_fragments(layout, decode_sm80_heads_on_n(group), head_dim);
}
// Whether a call of a policy with `tma` takes the TMA copies (kernels/decode_sm80.cuh): a tile's
// 16 tokens must be whole boxes of one page.
//   NHD:  page_size ≥ 16 and head_dim a multiple of 64 (boxes of 16 rows × 64 dims).
//   vLLM: page_size 16: one page of one KV head is then a contiguous [D/8][16][8] K block and
//         [D][16] V block (8 KB each at hd 256), one box each; other page sizes would need a
//         box per 16-byte column, the cp.async form's granularity.
// One rule for the launch (decode_launch.cuh) and the plan's cost model (plan.cpp). A speed
// choice only: both forms compute the same results.
// An fp8 cache (kv_fp8): unswizzled boxes of 1-byte codes, D of them a row, so any head dim.
constexpr bool decode_sm80_tma(const DecodePolicy& p, KVLayout layout, int page_size, int head_dim,
                               bool kv_fp8 = false) {
  if (!p.tma || p.agent != Agent::sm80) return false;
  return layout == KVLayout::nhd ? page_size >= 16 && (kv_fp8 || head_dim % 64 == 0) : page_size == 16;
}
// Whether a call can run a wide row (tuning_sm90.hpp's kDecodeWide: 12 warps × 1 stage): its
// kernels are the TMA ones with the heads on N, over a 16-bit cache, of the plain variant kind —
// the only ones instantiated for it (decode_launch.cuh, launch_decode_wide). One rule for the plan
// (plan.cpp), which takes the row only for such a call, and the launch, which runs the target's
// own row for a call the plan did not make (a graph plan replayed with other pages runs the
// same results either way).
constexpr bool decode_sm80_wide_reads(const DecodePolicy& wide, KVLayout layout, int page_size, int head_dim,
                                      int group, KVDType kv, bool plain) {
  return plain && !is_fp8(kv) && decode_sm80_heads_on_n(group) && decode_sm80_tma(wide, layout, page_size, head_dim);
}
// The shortest partition a plan gives a wide row: at ≤ 1024 tokens a CTA's 12 warps take 1–3 tiles
// each and its fill and 12-way combine cost more than its faster streaming gains (1.03–1.21× the
// 4 × 3 row on the seed's cells); at 2048 it was 0.93–0.94× on 16 SMs
// (bench/results/h200-2026-12-06-tile-pipeline.md, call 3).
inline constexpr int kDecodeWideMinTokens = 2048;
// The granularity of a V2 plan's partitions (plan.cpp cuts them in multiples of it). An sm80 row:
// its partition_size (128 on the H200's rows: tuning_sm90.hpp says why). A portable row: its
// 32-token tile. The portable rows' partition_size is the seed's (vLLM's PARTITION_SIZE, 512),
// which the seed-compatibility layer reports and derives its V1/V2 threshold from; cut in 512s, a
// batch-1 8k sequence has at most 16 partitions, where 32 of 256 tokens ran 1.34× faster on a
// 16-SM partition of the H200 (41.6 against 31.1 µs; at 100k 28 partitions of 3584 against 32 of
// 3136, 1.13×: bench/results/h200-2026-12-02-heads-on-n/, the portable rows).
constexpr int decode_split_tokens(const DecodePolicy& p) {
  return p.agent == Agent::portable ? p.tile_tokens : p.partition_size;
}
inline constexpr int kPortableDecodeRows = 8;
constexpr int decode_smem_bytes(const DecodePolicy& p, DType t, int head_dim) {
  const int e = dtype_size(t);
  if (p.agent == Agent::portable) {
    constexpr int R = kPortableDecodeRows;
    return R * head_dim * 4 + p.num_warps * R * p.tile_tokens * 4 + p.tile_tokens * R * 4 + 3 * R * 4;
  }
  return (p.num_stages * 2 * p.tile_tokens + kDecodeRows) * (head_dim + 8) * e;
}

// The sm80 decode agent's combine scratch, which reuses the stage area after the main loop:
// [W][16][D] fp32 o, [W][16] m and l, and [16] sink factors (the general kind: fold_sinks).
constexpr int decode_sm80_combine_bytes(const DecodePolicy& p, int head_dim) {
  return (p.num_warps * kDecodeRows * head_dim + 2 * p.num_warps * kDecodeRows + kDecodeRows) * 4;
}
// The sm80 decode agent's shared memory where its tile math reads an fp8 cache's codes
// (decode_sm80_fp8_fragments: no 16-bit K/V tiles): Q's 16 padded 16-bit rows, then from the next
// 1024-byte boundary each warp's S stages of codes [K 16·D | V 16·D] (the swizzled NHD ring wants
// the boundary) — or the combine's scratch from the end of Q (decode_sm80_combine_bytes),
// whichever is larger. At hd 256 (4 warps × 3 stages) 107 KB where decode_smem_bytes() is
// 203 KB: two CTAs a SM on a 228 KB SM, where one left each scheduler a single latency-bound
// warp (one CTA a SM read codes no faster than 16-bit values on 16 SMs, 0.29–0.40 of the read
// floor: bench/results/2026-12-06-fp8-fragments; two: 0.48–0.51, 2026-12-06-fp8-nhd-fragments).
constexpr int decode_sm80_codes_smem_bytes(const DecodePolicy& p, int head_dim) {
  const int q = kDecodeRows * (head_dim + 8) * 2;
  const int ring = 1023 + p.num_warps * p.num_stages * 32 * head_dim;
  const int scratch = decode_sm80_combine_bytes(p, head_dim);
  return q + (ring > scratch ? ring : scratch);
}
// CTAs a SM that kernel is planned for: two where two of its footprints fit the row's cap (1 KB
// held back a CTA, as fit.hpp's rule), else the row's own.
constexpr int decode_sm80_codes_ctas_per_sm(const DecodePolicy& p, int head_dim) {
  return p.ctas_per_sm < 2 && 2 * (decode_sm80_codes_smem_bytes(p, head_dim) + 1024) <= p.smem_cap_bytes
             ? 2
             : p.ctas_per_sm;
}

constexpr bool is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

// A row is valid when its tiles fit the profile's shared memory and its shape is one the agent
// can run. Checked with static_assert on every table row. The sm75 agent takes fp16 only: Turing's
// tensor cores have no bf16 (and no fp32) mma, so bf16/fp32 rows on sm_75 are portable rows.
constexpr bool validate(const PrefillPolicy& p, DType t, int head_dim) {
  return p.block_m >= 16 && p.block_n >= 8 && is_pow2(p.block_n) && p.num_warps >= 1 &&
         p.num_warps <= 16 && p.num_stages >= 1 &&
         (p.agent != Agent::portable || p.num_stages == 1) &&
         (p.agent != Agent::sm75 ||
          (t == DType::fp16 && p.block_m % (16 * p.num_warps) == 0 && p.block_n % 16 == 0 && head_dim % 32 == 0)) &&
         (!p.overlap || p.agent == Agent::sm90) &&
         (!p.ping_pong ||
          (prefill_sm80_warp_pairs(p, head_dim) && p.num_warps == 8 && p.num_stages >= 3)) &&
         // sm90: a producer warp group + one consumer group per 64 q rows; 16-bit; whole 64-dim
         // panels; key tiles of 64 or 128 (the wgmma forms of sm90_wgmma.inc)
         (p.agent != Agent::sm90 || (t != DType::fp32 && head_dim % 64 == 0 && p.num_warps == 4 + p.block_m / 16 &&
                                     p.block_m % 64 == 0 && (p.block_n == 64 || p.block_n == 128) &&
                                     p.num_stages >= 2)) &&
         prefill_smem_bytes(p, t, head_dim) <= p.smem_cap_bytes;
}

// Decode agents: portable gives one lane per token of a tile (≤ 32 tokens, whole 16-byte V
// chunks of tokens), one 32-lane tile per query head of a pass (≥ 8 tiles) and at least one
// thread per dim; sm80 runs 16-token warp tiles on 16-bit tensor cores with a ≥ 2-stage
// cp.async pipeline, or one stage a warp where its boxes come by TMA (the wide rows: the warps of
// the CTA, not the stages of one, keep the copies in flight).
constexpr bool validate(const DecodePolicy& p, DType t, int head_dim) {
  const bool agent_ok =
      p.agent == Agent::portable
          ? (p.num_stages == 1 && p.tile_tokens <= 32 && p.tile_tokens % (16 / dtype_size(t)) == 0 &&
             p.num_warps >= kPortableDecodeRows && 32 * p.num_warps >= head_dim)
          : (p.agent == Agent::sm80 && t != DType::fp32 && p.tile_tokens == 16 * p.num_warps &&
             (p.num_stages >= 2 || p.tma));
  return agent_ok && p.num_warps >= 1 && p.num_warps <= 16 && p.tile_tokens >= 1 &&
         p.num_stages >= 1 && p.partition_size > 0 && p.partition_size % p.tile_tokens == 0 &&
         p.ctas_per_sm >= 1 && decode_smem_bytes(p, t, head_dim) <= p.smem_cap_bytes;
}

}  // namespace muh
