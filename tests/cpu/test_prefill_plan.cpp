// test_prefill_plan.cpp — the prefill tail split on the host: which shapes it applies to, what the
// plan chooses on the H200 preset for the benchmark's cells, and that the tail CTAs' pieces
// (tail_segment) cover every key tile of every tail tile exactly once, with workspace slots that
// never collide and stay below ws_slots. A gap would leave keys out of a row's softmax, an
// overlap would count them twice, a slot collision would merge one piece's partial into another.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "muh/attention.hpp"
#include "muh/kernels/prefill_common.cuh"
#include "muh/prefill_plan.hpp"
#include "muh/select.hpp"
#include "muh/tuning/selectors.hpp"

namespace muh {
namespace {

PrefillParams shape(int batch, int sq, int sk, int heads, int kv_heads, int hd, bool causal = false) {
  PrefillParams p;
  p.dtype = DType::bf16;
  p.batch = batch;
  p.max_seqlen_q = sq;
  p.max_seqlen_k = sk;
  p.total_q = batch * sq;
  p.total_k = batch * sk;
  p.num_q_heads = heads;
  p.num_kv_heads = kv_heads;
  p.head_dim = hd;
  p.causal = causal;
  return p;
}

// The sm_90 rows' occupancy: hd 128 (128 × 64, 4 warps) 2 CTAs per SM, hd 256 (128 × 64, 8 warps)
// 1 — the slots the wave probe measured (264 and 132 on the H200).
TEST(PrefillPlan, CtasPerSmOfTheH200Rows) {
  EXPECT_EQ(prefill_ctas_per_sm(prefill_policy(90, DType::bf16, 128), DType::bf16, 128, presets::h200), 2);
  EXPECT_EQ(prefill_ctas_per_sm(prefill_policy(90, DType::bf16, 256), DType::bf16, 256, presets::h200), 1);
}

TEST(PrefillPlan, AppliesOnlyToEqualLengthTensorCoreCallsWhoseTilesSeeMostKeys) {
  const PrefillPolicy tc = prefill_policy(90, DType::bf16, 128);
  EXPECT_TRUE(prefill_split_applies(shape(4, 4096, 4096, 32, 8, 128), tc));
  EXPECT_FALSE(prefill_split_applies(shape(4, 4096, 4096, 32, 8, 128, true), tc));  // causal, q as long as k
  // Causal, a chunk over a prefix: where the top q tile (block_m rows) sees at least 3/4 of the
  // keys — 128 + (sk − sq) ≥ 3 sk / 4.
  ASSERT_EQ(tc.block_m, 128);
  EXPECT_TRUE(prefill_split_applies(shape(1, 512, 8704, 4, 1, 128, true), tc));   // 8320 of 8704
  EXPECT_TRUE(prefill_split_applies(shape(1, 1152, 4096, 4, 1, 128, true), tc));  // 3072 of 4096: the edge
  EXPECT_FALSE(prefill_split_applies(shape(1, 1153, 4096, 4, 1, 128, true), tc));
  EXPECT_TRUE(prefill_split_applies(shape(1, 7, 7, 4, 1, 128, true), tc));  // one tile: it sees every key
  EXPECT_FALSE(prefill_split_applies(shape(1, 4096, 100, 4, 1, 128, true), tc));  // q longer than k
  PrefillParams varlen = shape(4, 4096, 4096, 32, 8, 128);
  varlen.total_q -= 7;  // one sequence shorter than max_seqlen_q
  EXPECT_FALSE(prefill_split_applies(varlen, tc));
  PrefillParams varlen_k = shape(4, 4096, 4096, 32, 8, 128);
  varlen_k.total_k -= 1;
  EXPECT_FALSE(prefill_split_applies(varlen_k, tc));
  EXPECT_FALSE(prefill_split_applies(shape(4, 4096, 0, 32, 8, 128), tc));  // no keys
  EXPECT_FALSE(prefill_split_applies(shape(4, 4096, 4096, 32, 8, 128), prefill_policy(0, DType::bf16, 128)));
  // Paged K/V: q lengths as above; the keys are planned at max_seqlen_k (total_k is 0 there).
  const auto paged = [](PrefillParams q) {
    return make_paged_prefill(q, KVLayout::vllm, nullptr, nullptr, nullptr, nullptr, 16, 8000, 7000);
  };
  EXPECT_TRUE(prefill_split_applies(paged(shape(1, 512, 100000, 4, 1, 256)), tc));
  EXPECT_TRUE(prefill_split_applies(paged(shape(1, 512, 100000, 4, 1, 256, true)), tc));  // causal chunk
  PrefillParams paged_varlen = paged(shape(2, 512, 100000, 4, 1, 256));
  paged_varlen.total_q -= 1;
  EXPECT_FALSE(prefill_split_applies(paged_varlen, tc));
  // Off means off, whatever the shape.
  EXPECT_FALSE(plan_prefill_split(shape(4, 4096, 4096, 16, 4, 256), prefill_policy(90, DType::bf16, 256), presets::h200,
                                  kPrefillTailOff)
                   .split());
}

// The seed's context_attention_fwd prefix part (fp16, hd 256, 4 q / 1 kv head, a 512-token chunk
// over a 100k prefix, vLLM pages): 16 q tiles on 132 slots. Unsplit they take 16 SMs for all 1563
// key tiles; split, the keys of all 16 go evenly over every slot.
TEST(PrefillPlan, SplitsTheSeedsPagedPrefixPart) {
  PrefillParams p = make_paged_prefill(shape(1, 512, 100000, 4, 1, 256), KVLayout::vllm, nullptr, nullptr, nullptr,
                                       nullptr, 16, 6300, 6250);
  p.dtype = DType::fp16;
  const PrefillPolicy pol = prefill_policy(90, DType::fp16, 256);
  const PrefillSplit s = plan_prefill_split(p, pol, presets::h200, kPrefillTailAuto);
  ASSERT_TRUE(s.split());
  EXPECT_EQ(s.tiles, 4 * (512 / pol.block_m));
  EXPECT_EQ(s.tail_tiles, s.tiles);  // fewer tiles than slots: the whole grid is tail
  EXPECT_EQ(s.key_tiles, (100000 + pol.block_n - 1) / pol.block_n);
  EXPECT_GE(s.tail_ctas, s.slots - s.tiles);  // (near) every slot gets keys
  EXPECT_LE(s.tail_ctas, s.slots);
  // About tiles / slots = 0.12 of the unsplit round (the pieces and the merge add a little).
  EXPECT_LT(s.est_rounds, 1.2 * s.tiles / static_cast<double>(s.slots));
  EXPECT_GT(s.workspace_bytes, 0u);
  // A paged tail of more than half a round stays whole (4096-token chunk: 128 tiles on 132 slots,
  // measured slower split); a forced chunk still splits it.
  PrefillParams big = p;
  big.max_seqlen_q = big.total_q = 4096;
  EXPECT_FALSE(plan_prefill_split(big, pol, presets::h200, kPrefillTailAuto).split());
  EXPECT_TRUE(plan_prefill_split(big, pol, presets::h200, 64).split());
  PrefillParams half = p;  // 2048 tokens: 64 tiles, under half of the 132 slots
  half.max_seqlen_q = half.total_q = 2048;
  EXPECT_TRUE(plan_prefill_split(half, pol, presets::h200, kPrefillTailAuto).split());
  // Causal (flash_attn_varlen_func's prefix + chunk call, the chunk's tokens in the cache): the
  // same split — every tile sees 99.6–100 % of the 100 512 keys.
  PrefillParams c = p;
  c.causal = true;
  c.max_seqlen_k += 512;
  const PrefillSplit sc = plan_prefill_split(c, pol, presets::h200, kPrefillTailAuto);
  EXPECT_TRUE(sc.split());
  EXPECT_EQ(sc.tail_tiles, sc.tiles);
}

// The 4k cells are 15.52 rounds on the H200: the plan splits the last 68 (hd 256) / 136
// (hd 128) tiles, spreading their key tiles evenly over every slot. A shape that fills its rounds
// exactly is not split; neither is one whose tail is nearly a full round.
TEST(PrefillPlan, SplitsThePartRoundOfTheBenchmarkCells) {
  const PrefillPolicy p256 = prefill_policy(90, DType::bf16, 256), p128 = prefill_policy(90, DType::bf16, 128);
  const PrefillSplit s256 = plan_prefill_split(shape(4, 4096, 4096, 16, 4, 256), p256, presets::h200, kPrefillTailAuto);
  EXPECT_EQ(s256.tiles, 2048);
  EXPECT_EQ(s256.slots, 132);
  EXPECT_EQ(s256.key_tiles, 64);
  EXPECT_EQ(s256.tail_tiles, 68);
  EXPECT_EQ(s256.tail_chunk, 33);  // ceil(68 · 64 / 132)
  EXPECT_EQ(s256.tail_ctas, 132);
  EXPECT_EQ(s256.ws_slots, 132 + 68 - 1);
  EXPECT_EQ(s256.ws_lse_offset, static_cast<std::size_t>(s256.ws_slots) * 128 * 256);  // after o
  EXPECT_EQ(s256.workspace_bytes, static_cast<std::size_t>(s256.ws_slots) * 128 * 257 * 4);
  EXPECT_LT(s256.est_rounds, 15.7);

  const PrefillSplit s128 = plan_prefill_split(shape(4, 4096, 4096, 32, 8, 128), p128, presets::h200, kPrefillTailAuto);
  EXPECT_EQ(s128.slots, 264);
  EXPECT_EQ(s128.tail_tiles, 4096 % 264);
  EXPECT_TRUE(s128.split());

  // 16k, batch 1: the same 15.52 rounds, 256 key tiles per tile.
  EXPECT_TRUE(plan_prefill_split(shape(1, 16384, 16384, 16, 4, 256), p256, presets::h200, kPrefillTailAuto).split());
  // 4224 = 16.00 rounds at hd 256: nothing to gain.
  EXPECT_FALSE(plan_prefill_split(shape(4, 4224, 4224, 16, 4, 256), p256, presets::h200, kPrefillTailAuto).split());
  // 127 of 132 slots busy in the last round, 64 key tiles: a split would save less than it costs.
  EXPECT_FALSE(plan_prefill_split(shape(1, 127 * 128, 4096, 1, 1, 256), p256, presets::h200, kPrefillTailAuto).split());
  // Causal: never (the tiles' costs differ, the longest-first order already fills the tail).
  EXPECT_FALSE(plan_prefill_split(shape(4, 4096, 4096, 16, 4, 256, true), p256, presets::h200, kPrefillTailAuto).split());
}

// Few q tiles over long keys (a short prompt against a long prefix): one partial round, every
// tile split — the tail is the whole grid.
TEST(PrefillPlan, ShortQueriesOverLongKeysSplitEverything) {
  const PrefillPolicy p = prefill_policy(90, DType::bf16, 128);
  const PrefillSplit s = plan_prefill_split(shape(1, 128, 32768, 32, 8, 128), p, presets::h200, kPrefillTailAuto);
  EXPECT_EQ(s.tiles, 32);
  EXPECT_EQ(s.tail_tiles, 32);
  EXPECT_EQ(s.tail_chunk, (32 * 512 + 263) / 264);
  EXPECT_LT(s.est_rounds, 0.3);
}

TEST(PrefillPlan, ForcedChunkIsClampedAndSplitsAFullRound) {
  const PrefillPolicy p = prefill_policy(90, DType::bf16, 256);
  // 4224 fills 16 rounds exactly: forced, the last round is split.
  const PrefillSplit s = plan_prefill_split(shape(4, 4224, 4224, 16, 4, 256), p, presets::h200, 5);
  EXPECT_EQ(s.tail_tiles, 132);
  EXPECT_EQ(s.tail_chunk, 5);
  EXPECT_EQ(s.tail_ctas, (132 * 66 + 4) / 5);
  // A chunk above the key tiles is clamped to them: one piece per tile.
  const PrefillSplit big = plan_prefill_split(shape(1, 200, 100, 2, 1, 256), p, presets::h200, 1000);
  EXPECT_EQ(big.key_tiles, 2);
  EXPECT_EQ(big.tail_chunk, 2);
  EXPECT_EQ(big.tail_tiles, 4);  // 2 m-blocks × 2 heads, all in the one partial round
  EXPECT_EQ(big.tail_ctas, 4);
}

// The sm90 agent runs whole q tiles only. A call of few q tiles over long keys (a short chunk
// against a long prefix, non-causal: context_attention_fwd's prefix part) would leave most SMs idle
// on it; the plan takes the sm80 agent's key split instead and says why. A call that fills the
// GPU, causal self-attention (no split applies), a plan without the split or a forced target keep the
// row the selection chose.
TEST(PrefillPlan, FewTilesOverLongKeysTakeTheSm80AgentsKeySplit) {
  const bool sm90a = compiled_target_set().contains(kTargetSm90a);
  for (KVSource src : {KVSource::contiguous, KVSource::paged_nhd}) {
    const auto as = [src](PrefillParams p) {
      if (src == KVSource::contiguous) return p;
      return make_paged_prefill(p, KVLayout::nhd, nullptr, nullptr, nullptr, nullptr, 16, 4200, 4100);
    };
    SCOPED_TRACE(kv_source_name(src));
    const PrefillParams few = as(shape(1, 512, 32768, 4, 1, 128));  // 16 q tiles on 132 SMs
    PrefillPlan plan;
    ASSERT_TRUE(plan_prefill(few, presets::h200, {}, &plan).ok());
    EXPECT_EQ(plan.target, 90);
    EXPECT_EQ(plan.policy.agent, Agent::sm80);
    EXPECT_TRUE(plan.split.split());
    EXPECT_GT(plan.workspace_bytes, 0u);
    if (sm90a) {
      ASSERT_GE(plan.selection.passed_count, 1);
      EXPECT_EQ(plan.selection.passed[0].target, kTargetSm90a);
      EXPECT_EQ(plan.selection.passed[0].why, Pass::no_key_split);
      EXPECT_EQ(plan.selection.passed[0].tiles, 16);
      EXPECT_EQ(plan.selection.passed[0].slots, 132);
      EXPECT_NE(describe(plan.selection).find("no key split and this call has 16 q tiles for its 132 slots"),
                std::string::npos)
          << describe(plan.selection);
      EXPECT_FALSE(plan.selection.sm90a_not_compiled);
      const int top = sm90a ? kTargetSm90a : 90;
      // Without the split there is nothing to gain: the sm90 agent.
      PrefillPlan off;
      ASSERT_TRUE(plan_prefill(few, presets::h200, PrefillPlanOptions{-1, kPrefillTailOff}, &off).ok());
      EXPECT_EQ(off.target, top);
      // Causal, the chunk over its prefix in one call (every tile sees ≥ 98 % of the keys): the
      // same split. Causal self-attention of 512 tokens (16 tiles too, but seeing 1/4 to all of
      // the keys): no split applies, the sm90 agent.
      PrefillParams causal = few;
      causal.causal = true;
      PrefillPlan pc;
      ASSERT_TRUE(plan_prefill(causal, presets::h200, {}, &pc).ok());
      EXPECT_EQ(pc.policy.agent, Agent::sm80);
      EXPECT_TRUE(pc.split.split());
      EXPECT_EQ(pc.selection.passed[0].why, Pass::no_key_split);
      PrefillPlan self;
      ASSERT_TRUE(plan_prefill(as(shape(1, 512, 512, 4, 1, 128, true)), presets::h200, {}, &self).ok());
      EXPECT_EQ(self.target, top);
      EXPECT_FALSE(self.split.split());
      // Forced: exactly the row asked for.
      PrefillPlan forced;
      ASSERT_TRUE(plan_prefill(few, presets::h200, PrefillPlanOptions{kTargetSm90a, kPrefillTailAuto}, &forced).ok());
      EXPECT_EQ(forced.target, kTargetSm90a);
      EXPECT_FALSE(forced.split.split());
      // 128 tiles on 132 SMs (a 4096-token chunk, 4 heads): nearly one round whole on the sm90 agent,
      // against a split whose pieces and merge cost more than the sm90 agent's speed gives back.
      PrefillPlan full;
      ASSERT_TRUE(plan_prefill(as(shape(1, 4096, 32768, 4, 1, 128)), presets::h200, {}, &full).ok());
      EXPECT_EQ(full.target, top);
      EXPECT_EQ(full.selection.passed_count, 0);
    }
  }
}

// At hd 256 the model weighs the sm90 agent at 2.2x the sm80 agent per SM, and the sm80 agent on
// vLLM pages at 1.05x its NHD time (src/prefill_plan.cpp; 1.37x when these cells were measured:
// the vLLM cells' split is now faster, the choices the same; bench/results/2026-12-07-ncu-prefill,
// prefix_part_ab.py on the H100: context_attention_fwd's prefix part, fp16, 4 q / 1 kv head). The
// measured cells decide as measured: 16 q tiles over 8k / 32k keys split (whole was 2.7–3.2x
// slower), 64 run whole on the Hopper agent (the split was 1.12–1.17x slower on NHD pages,
// 1.55–1.60x on vLLM pages).
// (A build without sm_90a has no choice to make: every cell takes sm_90's row.)
TEST(PrefillPlan, Hd256SeedPrefixPartsDecideAsMeasured) {
  const bool sm90a = compiled_target_set().contains(kTargetSm90a);
  for (KVLayout layout : {KVLayout::nhd, KVLayout::vllm})
    for (int keys : {8192, 32768})
      for (int chunk : {512, 2048}) {
        SCOPED_TRACE(::testing::Message() << (layout == KVLayout::nhd ? "nhd" : "vllm") << " " << keys << " + " << chunk);
        PrefillParams p = shape(1, chunk, keys, 4, 1, 256);
        p.dtype = DType::fp16;
        p = make_paged_prefill(p, layout, nullptr, nullptr, nullptr, nullptr, 16, keys / 16, keys / 16);
        PrefillPlan plan;
        ASSERT_TRUE(plan_prefill(p, presets::h100, {}, &plan).ok());
        if (!sm90a) {
          EXPECT_EQ(plan.target, 90);
        } else if (chunk == 512) {
          EXPECT_EQ(plan.policy.agent, Agent::sm80);
          EXPECT_TRUE(plan.split.split());
          EXPECT_EQ(plan.selection.passed[0].why, Pass::no_key_split);
        } else {
          EXPECT_EQ(plan.target, kTargetSm90a);
          EXPECT_FALSE(plan.split.split());
        }
      }
}

// The persistent schedule: the sm90 agent (contiguous or paged NHD K/V), where the q tiles
// outnumber the slots and the caller gives a workspace: one CTA per slot, the counter after the
// split's partials (none here) at a 16-byte offset. Nowhere else.
TEST(PrefillPlan, PersistentScheduleOnTheSm90AgentWhereTilesOutnumberSlots) {
  const bool sm90a = compiled_target_set().contains(kTargetSm90a);
  const PrefillParams many = shape(16, 1024, 1024, 32, 32, 128);  // 4096 q tiles of 128 rows
  PrefillPlan plan;
  ASSERT_TRUE(plan_prefill(many, presets::h200, {}, &plan).ok());
  ASSERT_EQ(plan.target, sm90a ? kTargetSm90a : 90);
  if (sm90a) {
    EXPECT_EQ(plan.split.tiles, 4096);
    EXPECT_EQ(plan.persistent.ctas, 132);
    EXPECT_EQ(plan.persistent.counter_offset, 0u);
    EXPECT_EQ(plan.workspace_bytes, 16u);
    // Causal too (the counter hands out the heavy tiles first, as tile_of orders them).
    PrefillParams causal = many;
    causal.causal = true;
    PrefillPlan pc;
    ASSERT_TRUE(plan_prefill(causal, presets::h200, {}, &pc).ok());
    EXPECT_EQ(pc.persistent.ctas, 132);
    // A 16-SM partition: a CTA per SM of the partition.
    HardwareCapability part = presets::h200;
    part.sm_count = 16;
    PrefillPlan small;
    ASSERT_TRUE(plan_prefill(many, part, {}, &small).ok());
    EXPECT_EQ(small.persistent.ctas, 16);
  }
  // No workspace (kPrefillTailOff): one CTA per q tile.
  PrefillPlan off;
  ASSERT_TRUE(plan_prefill(many, presets::h200, PrefillPlanOptions{-1, kPrefillTailOff}, &off).ok());
  EXPECT_FALSE(off.persistent.on());
  EXPECT_EQ(off.workspace_bytes, 0u);
  // No more tiles than slots: nothing to go on to (8 tiles; causal with q as long as k, so that no
  // key split applies).
  PrefillPlan few;
  ASSERT_TRUE(plan_prefill(shape(1, 256, 256, 4, 1, 128, true), presets::h200, {}, &few).ok());
  EXPECT_FALSE(few.persistent.on());
  EXPECT_EQ(few.workspace_bytes, 0u);
  // The sm80-class agent (sm_90's row forced) has none.
  PrefillPlan t90;
  ASSERT_TRUE(plan_prefill(many, presets::h200, PrefillPlanOptions{90, kPrefillTailAuto}, &t90).ok());
  EXPECT_EQ(t90.policy.agent, Agent::sm80);
  EXPECT_FALSE(t90.persistent.on());
  // Paged K/V: the same (the producer warps guard each tile's block-table row), NHD and vLLM's
  // layout with pages of 16; vLLM pages of 8 run the sm80 agent (prefill_agent_reads_pages), which
  // has none.
  const PrefillParams paged =
      make_paged_prefill(many, KVLayout::nhd, nullptr, nullptr, nullptr, nullptr, 16, 1100, 64);
  PrefillPlan pp;
  ASSERT_TRUE(plan_prefill(paged, presets::h200, {}, &pp).ok());
  EXPECT_EQ(pp.target, sm90a ? kTargetSm90a : 90);
  EXPECT_EQ(pp.persistent.ctas, sm90a ? 132 : 0);
  PrefillPlan pv;
  ASSERT_TRUE(plan_prefill(make_paged_prefill(many, KVLayout::vllm, nullptr, nullptr, nullptr, nullptr, 16, 1100, 64),
                           presets::h200, {}, &pv).ok());
  EXPECT_EQ(pv.target, sm90a ? kTargetSm90a : 90);
  EXPECT_EQ(pv.persistent.ctas, sm90a ? 132 : 0);
  PrefillPlan pv8;
  ASSERT_TRUE(plan_prefill(make_paged_prefill(many, KVLayout::vllm, nullptr, nullptr, nullptr, nullptr, 8, 2200, 128),
                           presets::h200, {}, &pv8).ok());
  EXPECT_EQ(pv8.policy.agent, Agent::sm80);
  EXPECT_FALSE(pv8.persistent.on());
}

// Brute force over the pieces every tail CTA walks, as the kernel walks them. Chunks up to the key
// tiles (plan_prefill_split) and past them (a fused context launch's chunk part,
// plan_context_prefill: a CTA then meets several tiles, one piece each).
TEST(PrefillPlan, TailPiecesCoverEveryKeyTileOnceWithUniqueSlots) {
  for (int R : {1, 2, 3, 7, 68})
    for (int nk : {1, 2, 5, 16, 64})
      for (int c = 1; c <= 3 * nk + 2; c = c < 4 ? c + 1 : c * 2 + 1) {
        SCOPED_TRACE(::testing::Message() << "tail tiles " << R << ", key tiles " << nk << ", chunk " << c);
        kernels::PrefillTail a;
        a.main_tiles = 1000;
        a.tail_tiles = R;
        a.key_tiles = nk;
        a.tail_chunk = c;
        const int ctas = (R * nk + c - 1) / c;
        const int slots = ctas + R - 1;
        std::vector<int> covered(static_cast<std::size_t>(R) * nk, 0), slot_used(static_cast<std::size_t>(slots), 0);
        std::vector<std::vector<int>> writers(static_cast<std::size_t>(R));  // CTAs that wrote tile u, in order
        for (int j = 0; j < ctas; ++j) {
          long long it = static_cast<long long>(j) * c;
          const long long end = kernels::tail_end(a, j);
          int pieces = 0;
          while (it < end) {
            const kernels::TailSegment s = kernels::tail_segment(a, j, it);
            ASSERT_GE(s.linear, 1000);
            ASSERT_LT(s.linear, 1000 + R);
            ASSERT_LE(0, s.kt_lo);
            ASSERT_LT(s.kt_lo, s.kt_hi);
            ASSERT_LE(s.kt_hi, nk);
            ASSERT_GE(s.slot, 0);
            ASSERT_LT(s.slot, slots);
            ++slot_used[s.slot];
            for (int k = s.kt_lo; k < s.kt_hi; ++k) ++covered[(s.linear - 1000) * nk + k];
            writers[s.linear - 1000].push_back(j);
            ASSERT_EQ(s.slot, j + static_cast<int>(s.linear - 1000));
            it = s.next;
            ++pieces;
          }
          ASSERT_LE(pieces, (c + nk - 1) / nk + 1);  // c ≤ key_tiles: at most two tiles
        }
        for (int v : covered) ASSERT_EQ(v, 1);
        for (int v : slot_used) ASSERT_LE(v, 1);
        // The merge's view (tail_pieces): exactly the CTAs that wrote tile u, consecutive from
        // the first, so its slots first + i + u are the ones the pieces wrote.
        for (int u = 0; u < R; ++u) {
          const kernels::TailPieces tp = kernels::tail_pieces(a, u);
          ASSERT_EQ(tp.count, static_cast<int>(writers[u].size())) << "tile " << u;
          for (int i = 0; i < tp.count; ++i) ASSERT_EQ(writers[u][i], tp.first + i) << "tile " << u;
        }
      }
}

// context_attention_fwd's parts (plan_context_prefill): the seed's 512-token chunks over 8k / 32k
// (fp16 hd 256, 4 q / 1 kv head, vLLM pages of 16, the block table one page past the prefix as
// vLLM's covers the chunk) fuse on the H100 preset — the prefix part is the sm80 agent's split of
// all 16 q tiles, with or without sm_90a in the build — into one round of CTAs of both parts, c
// key tiles at most each; the rest does not fuse, and says why.
PrefillParams context_prefix(int prefix, int chunk, int heads, KVLayout layout = KVLayout::vllm) {
  PrefillParams p = shape(1, chunk, prefix + chunk, heads, 1, 256);
  p.dtype = DType::fp16;
  const int pages = (prefix + chunk + 15) / 16;
  return make_paged_prefill(p, layout, nullptr, nullptr, nullptr, nullptr, 16, pages, pages);
}
PrefillParams context_chunk(int chunk, int heads) {
  PrefillParams c = shape(1, chunk, chunk, heads, 1, 256, true);
  c.dtype = DType::fp16;
  return c;
}

TEST(ContextPlan, SeedChunksFuseIntoOneRoundOfBothParts) {
  for (int prefix : {8192, 32768})
    for (int heads : {4, 6}) {
      SCOPED_TRACE(::testing::Message() << prefix << " + 512, " << heads << " q heads");
      ContextPlan cp;
      ASSERT_TRUE(
          plan_context_prefill(context_prefix(prefix, 512, heads), context_chunk(512, heads), presets::h100, {}, &cp)
              .ok());
      ASSERT_TRUE(cp.fused) << cp.why;
      EXPECT_EQ(cp.prefix.policy.agent, Agent::sm80);
      const PrefillSplit &sp = cp.prefix_split, &sc = cp.chunk_split;
      EXPECT_EQ(sp.tail_tiles, 4 * heads);
      EXPECT_EQ(sc.tail_tiles, 4 * heads);
      EXPECT_EQ(sp.key_tiles, (prefix + 512 + 63) / 64);  // the block table's capacity
      EXPECT_EQ(sc.key_tiles, 8);
      const int c = (4 * heads * (sp.key_tiles + 8) + sp.slots - 1) / sp.slots;
      EXPECT_EQ(sp.tail_chunk, c);
      EXPECT_EQ(sc.tail_chunk, c);  // past the chunk's 8 key tiles: few CTAs for them
      EXPECT_EQ(sc.tail_ctas, (4 * heads * 8 + c - 1) / c);
      EXPECT_LE(sp.tail_ctas + sc.tail_ctas, sp.slots);  // one round
      EXPECT_EQ(sp.ws_slots, sp.tail_ctas + sp.tail_tiles - 1);
      EXPECT_EQ(sc.ws_slots, sc.tail_ctas + sc.tail_tiles - 1);
      EXPECT_EQ(cp.chunk_ws_offset % 16, 0u);
      EXPECT_GE(cp.chunk_ws_offset, sp.workspace_bytes);
      EXPECT_EQ(cp.workspace_bytes, cp.chunk_ws_offset + sc.workspace_bytes);
      EXPECT_EQ(sc.workspace_bytes, (sc.ws_lse_offset + std::size_t(sc.ws_slots) * 128) * sizeof(float));
    }
  // At 8k + 512 and 4 heads: c = ceil(16 · (136 + 8) / 132) = 18, 121 + 8 CTAs.
  ContextPlan cp;
  ASSERT_TRUE(plan_context_prefill(context_prefix(8192, 512, 4), context_chunk(512, 4), presets::h100, {}, &cp).ok());
  EXPECT_EQ(cp.prefix_split.tail_chunk, 18);
  EXPECT_EQ(cp.prefix_split.tail_ctas, 121);
  EXPECT_EQ(cp.chunk_split.tail_ctas, 8);
  // A forced chunk (tests): both parts take it, the prefix's clamped to its key tiles.
  ASSERT_TRUE(plan_context_prefill(context_prefix(700, 200, 4), context_chunk(200, 4), presets::h100,
                                   PrefillPlanOptions{90, 1}, &cp)
                  .ok());
  ASSERT_TRUE(cp.fused) << cp.why;
  EXPECT_EQ(cp.prefix_split.tail_chunk, 1);
  EXPECT_EQ(cp.chunk_split.tail_chunk, 1);
  EXPECT_EQ(cp.chunk_split.tail_ctas, 2 * 4 * 4);
  ASSERT_TRUE(plan_context_prefill(context_prefix(100, 200, 4), context_chunk(200, 4), presets::h100,
                                   PrefillPlanOptions{90, 7}, &cp)
                  .ok());
  ASSERT_TRUE(cp.fused) << cp.why;
  EXPECT_EQ(cp.prefix_split.tail_chunk, 5);  // (100 + 200) keys: 5 key tiles
  EXPECT_EQ(cp.chunk_split.tail_chunk, 7);
}

TEST(ContextPlan, TheRestRunsAsTwoPartsAndSaysWhy) {
  auto why = [](const PrefillParams& p, const PrefillParams& c, PrefillPlanOptions o = {}) {
    ContextPlan cp;
    const Status s = plan_context_prefill(p, c, presets::h100, o, &cp);
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_FALSE(cp.fused);
    EXPECT_EQ(cp.workspace_bytes, 0u);
    return std::string(cp.why);
  };
  // 2048-token chunks: 16 m-blocks (with sm_90a the prefix runs whole on the Hopper agent).
  EXPECT_FALSE(why(context_prefix(8192, 2048, 4), context_chunk(2048, 4)).empty());
  EXPECT_NE(why(context_prefix(8192, 512, 4, KVLayout::nhd), context_chunk(512, 4)).find("vLLM"), std::string::npos);
  PrefillParams alibi = context_prefix(8192, 512, 4);
  alibi.variant.use_alibi = true;
  alibi.variant.alibi_slopes = reinterpret_cast<const float*>(16);
  EXPECT_NE(why(alibi, context_chunk(512, 4)).find("variant"), std::string::npos);
  PrefillParams fp8 = context_prefix(8192, 512, 4);
  fp8.kv.dtype = KVDType::fp8_e4m3;
  EXPECT_NE(why(fp8, context_chunk(512, 4)).find("fp8"), std::string::npos);
  // The portable row forced: no split.
  EXPECT_NE(why(context_prefix(8192, 512, 4), context_chunk(512, 4), PrefillPlanOptions{0, -1}).find("sm80"),
            std::string::npos);
  // No split asked for (the prefix then runs whole: on the Hopper agent where sm_90a is compiled).
  EXPECT_FALSE(why(context_prefix(8192, 512, 4), context_chunk(512, 4), PrefillPlanOptions{-1, kPrefillTailOff})
                   .empty());
}

TEST(ContextPlan, RefusesPartsThatAreNotAChunkAndItsPrefix) {
  ContextPlan cp;
  const PrefillParams p = context_prefix(8192, 512, 4), c = context_chunk(512, 4);
  EXPECT_EQ(plan_context_prefill(p, c, presets::h100, {}, nullptr).code(), StatusCode::invalid_argument);
  PrefillParams causal_prefix = p;
  causal_prefix.causal = true;
  EXPECT_EQ(plan_context_prefill(causal_prefix, c, presets::h100, {}, &cp).code(), StatusCode::invalid_argument);
  PrefillParams plain_chunk = c;
  plain_chunk.causal = false;
  EXPECT_EQ(plan_context_prefill(p, plain_chunk, presets::h100, {}, &cp).code(), StatusCode::invalid_argument);
  PrefillParams other_heads = context_chunk(512, 6);
  EXPECT_EQ(plan_context_prefill(p, other_heads, presets::h100, {}, &cp).code(), StatusCode::invalid_argument);
  PrefillParams keys = c;
  keys.max_seqlen_k = 600;
  keys.total_k = 600;
  EXPECT_EQ(plan_context_prefill(p, keys, presets::h100, {}, &cp).code(), StatusCode::invalid_argument);
  EXPECT_EQ(plan_context_prefill(c, c, presets::h100, {}, &cp).code(), StatusCode::invalid_argument);
}

}  // namespace
}  // namespace muh

// ---- plan_prefill(): the selection, the split and the workspace as one value ---------------------
namespace muh {
namespace {

TEST(PrefillPlanValue, CarriesTheSelectionTheSplitAndTheShape) {
  const PrefillParams p = shape(4, 4096, 4096, 16, 4, 256);
  PrefillPlan plan;
  ASSERT_TRUE(plan_prefill(p, presets::h200, {}, &plan).ok());
  EXPECT_EQ(plan.target, start_target(presets::h200));
  EXPECT_TRUE(plan.policy == prefill_policy(plan.target, DType::bf16, 256));
  EXPECT_EQ(plan.selection.target, plan.target);
  EXPECT_EQ(plan.sm_count, 132);
  EXPECT_EQ(plan.device_cc, 90);
  const PrefillSplit want = plan_prefill_split(p, plan.policy, presets::h200, kPrefillTailAuto);
  EXPECT_EQ(plan.split.tail_tiles, want.tail_tiles);
  EXPECT_EQ(plan.split.tail_chunk, want.tail_chunk);
  // (The sm90 agent's persistent schedule adds its 16-byte tile counter: 256 q tiles, 132 slots.)
  EXPECT_EQ(plan.persistent.on(), plan.policy.agent == Agent::sm90);
  EXPECT_EQ(plan.workspace_bytes, want.workspace_bytes + (plan.persistent.on() ? 16u : 0u));
  EXPECT_TRUE(plan.shape == p);
  EXPECT_EQ(plan.shape.num_kv_heads, 4);

  // Off: the same row, no split, no workspace. Forced portable: no split either (no partial epilogue).
  PrefillPlan off, portable;
  ASSERT_TRUE(plan_prefill(p, presets::h200, PrefillPlanOptions{-1, kPrefillTailOff}, &off).ok());
  EXPECT_EQ(off.target, plan.target);
  EXPECT_FALSE(off.split.split());
  EXPECT_EQ(off.workspace_bytes, 0u);
  ASSERT_TRUE(plan_prefill(p, presets::h200, PrefillPlanOptions{0, 3}, &portable).ok());
  EXPECT_EQ(portable.policy.agent, Agent::portable);
  EXPECT_EQ(portable.workspace_bytes, 0u);

  // The 16-SM partition of the same part: a plan is made for the SMs it is given.
  HardwareCapability part = presets::h200;
  part.sm_count = 16;
  PrefillPlan small;
  ASSERT_TRUE(plan_prefill(p, part, {}, &small).ok());
  EXPECT_EQ(small.split.slots, 16);
}

}  // namespace
}  // namespace muh
