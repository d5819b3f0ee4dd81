// prefill_plan.cpp — the tail split of a prefill launch (prefill_plan.hpp).
//
// The cost model, in units of one key tile of one CTA (a q tile of the split shapes costs
// key_tiles of them; N tiles, S slots, nk key tiles per tile, c the chunk):
//
//   unsplit = ceil(N / S) · nk                       (rounds in lock-step: the last one is whole)
//   split   = floor(N / S) · nk + c + kPieceCost · (pieces of the busiest tail CTA) + kMergeCost
//
// with c = ceil(R · nk / S), R = N mod S: the R tail tiles' key tiles spread evenly over every
// slot. A piece costs more than its key tiles: it loads its Q tile and writes o and lse in fp32
// (128 KB at hd 256, 128 rows); the merge is one more launch that reads every partial. The split
// is taken when it saves at least one key tile. The constants are estimates in key-tile units
// (one 128 × 64 key tile at hd 256 is ~3.4 µs of one H200 SM at 330 TFLOP/s; a 128-KB partial
// written by 132 CTAs at once ~4–6 µs); `muh bench prefill --tail-chunk` times forced chunks
// against them.
//
// Measured on the H200 (eb12bcc; bench/results/h200-2026-11-30-eb12bcc.md), split against whole
// tiles timed interleaved:
//   - the non-causal 4k / 16k cells (15.52 rounds): +1.7–2.7 %;
//   - 15.03 rounds (3968 tokens): +4.8–5.2 %;
//   - the plan's chunk against forced chunks of 8–48 key tiles: best, or within 0.6 %.
// The constants themselves were not fitted. The 1k cells (16 key tiles per q tile, 15.5 rounds)
// sit at the model's break-even and are not split; whether a split gains there was not measured.

#include "muh/prefill_plan.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "muh/kernels/prefill_common.cuh"
#include "prefill_check.hpp"

namespace muh {
namespace {

constexpr double kPieceCost = 1.5;   // key tiles: Q load + fp32 partial write of one piece
constexpr double kMergeCost = 4.0;   // key tiles: the merge launch and its reads
constexpr double kMinGain = 1.0;     // key tiles the split must save
// The sm90 agent's speed over the sm80 agent's per SM, at the same keys, where the choice is
// made: few q tiles over long keys. At hd 256 2.2x: fitted to the four cells of
// bench/results/2026-12-07-ncu-prefill (prefix_part_ab.py, H100, fp16, 4 q / 1 kv head, 16 and 64
// q tiles over 8k and 32k keys, non-causal), the sm80 split against every q tile whole on the
// Hopper agent — the model then predicts each measured ratio within 10 % (1.5 had the 64-tile
// cells split, 1.12–1.17x slower than whole). Elsewhere 1.5, about the lowest of 1.54-1.93x at
// 4k-16k, hd 128/256 and 1.43-1.68 at hd 64 on the whole GPU (h100-2026-12-06-sm90-prefill, call
// 10), not measured in this regime.
double sm90_speed(int head_dim) { return head_dim == 256 ? 2.2 : 1.5; }
// The sm80 agent on vLLM pages against NHD pages, the same keys: 1.05–1.06x (prefix_part_ab.py,
// t90, hd 256 fp16, 4 q / 1 kv head, 8k / 32k + 512 and 32k + 2048, H100, two rounds;
// bench/results/2026-12-07-sm80-vllm-copies/, call39) since its K tiles are chunk-major and its V
// tiles in 16-key runs (sm80_load_k_chunk_major, sm80_load_v_runs: each 16-byte copy of the
// row-major K tile had taken its own shared wavefront and L2 sector, 1.29–1.39x; the dim-major V
// copies 4x their ideal wavefronts, 1.06–1.10x). A cost the sm90 agent, whose vLLM boxes land as
// wgmma reads them, does not pay. (The decisions of Hd256SeedPrefixPartsDecideAsMeasured are the
// same at 1.05 as at 1.37.)
constexpr double kSm80VllmCost = 1.05;

long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

// The tail of `s`: R tail tiles of nk key tiles each, dealt c per CTA (prefill_common.cuh,
// tail_segment), and the workspace their partials take — one slot per (CTA, tile) it meets,
// CTA j and tile u in slot j + u: ctas + R − 1 slots of block_m rows.
void set_tail(PrefillSplit* s, long long R, long long nk, long long c, int block_m, int head_dim) {
  const long long ctas = ceil_div(R * nk, c);
  s->tail_tiles = static_cast<int>(R);
  s->key_tiles = static_cast<int>(nk);
  s->tail_chunk = static_cast<int>(c);
  s->tail_ctas = static_cast<int>(ctas);
  s->ws_slots = static_cast<int>(ctas + R - 1);
  const std::size_t rows = static_cast<std::size_t>(s->ws_slots) * block_m;
  s->ws_lse_offset = rows * head_dim;
  s->workspace_bytes = (s->ws_lse_offset + rows) * sizeof(float);
}

}  // namespace

int prefill_ctas_per_sm(const PrefillPolicy& policy, DType dtype, int head_dim, const HardwareCapability& hw) {
  const int threads = policy.num_warps * 32;
  // The SM's shared memory is the per-block opt-in limit plus the 1 KB reserved for one block
  // (sm_80: 163 + 1 KB, sm_86/89: 99 + 1, sm_90: 227 + 1; sm_75: 64 KB for one block and the SM).
  const int sm_smem = hw.smem_limit() + (hw.compute_capability >= 80 ? 1024 : 0);
  const int cta_smem = prefill_smem_bytes(policy, dtype, head_dim) + (hw.compute_capability >= 80 ? 1024 : 0);
  const int by_smem = cta_smem > 0 ? sm_smem / cta_smem : 32;
  const int by_threads = 2048 / threads;
  const int by_regs = 65536 / (threads * 256);  // 255 registers round up to 256 per thread
  return std::max(1, std::min({by_smem, by_threads, by_regs}));
}

bool prefill_split_applies(const PrefillParams& p, const PrefillPolicy& policy) {
  if (policy.agent != Agent::sm80 && policy.agent != Agent::sm75) return false;
  if (variant_kind(p.variant) != VariantKind::plain) return false;
  if (p.batch <= 0 || p.max_seqlen_q <= 0 || p.max_seqlen_k <= 0) return false;
  if (static_cast<long long>(p.batch) * p.max_seqlen_q != p.total_q) return false;
  // Causal: the cost model deals key_tiles key tiles per tail tile, but a causal tile sees only
  // the keys up to its diagonal (the pieces past it are empty: the body clips them, visible_keys).
  // Taken where every tile sees at least 3/4 of the keys — a short chunk over a long prefix, the
  // one call of flash_attn_varlen_func or vLLM V1 for a prefill chunk (the seed's 512-token
  // chunks over 8k: 16 q tiles, each seeing 96–100 % of the keys) — so that the model is off by
  // at most a quarter. Causal self-attention (q as long as k: tiles seeing 1/nk to all of the
  // keys) stays whole: tile_of's longest-first order already fills its last round. Measured (H200,
  // bench/results/2026-12-07-causal-key-split): those chunks over 8k / 32k 0.91× / 0.93× FlashInfer's
  // fa2 in the same process (0.27× / 0.24× unsplit, session 11's H100).
  if (p.causal) {
    const int rows = p.max_seqlen_q < policy.block_m ? p.max_seqlen_q : policy.block_m;
    const long long least = kernels::visible_keys(0, rows, p.max_seqlen_q, p.max_seqlen_k, true);
    if (4 * least < 3LL * p.max_seqlen_k) return false;
  }
  // Paged K/V: the key lengths (seqused_k) live on the device, so the split is planned for
  // max_seqlen_k; a sequence with fewer keys has empty pieces past its end (prefill_sm80.cuh),
  // correct and only slower than planned. The case it is for: context_attention_fwd's prefix
  // part (non-causal, every chunk token sees the whole prefix) — at the seed's one sequence and
  // 4–6 q heads a 512-token chunk is 16–24 q tiles, which unsplit run on 16–24 of 132 SMs.
  if (is_paged(p.kv_source)) return true;
  return static_cast<long long>(p.batch) * p.max_seqlen_k == p.total_k;
}

PrefillSplit plan_prefill_split(const PrefillParams& p, const PrefillPolicy& policy, const HardwareCapability& hw,
                                int tail_chunk) {
  PrefillSplit s;
  if (p.batch <= 0 || p.max_seqlen_q <= 0 || p.num_q_heads <= 0) return s;
  s.tiles = static_cast<int>(ceil_div(p.max_seqlen_q, policy.block_m) * p.batch * p.num_q_heads);
  s.slots = std::max(1, hw.sm_count) * prefill_ctas_per_sm(policy, p.dtype, p.head_dim, hw);
  s.key_tiles = static_cast<int>(ceil_div(std::max(p.max_seqlen_k, 0), policy.block_n));
  const long long N = s.tiles, S = s.slots, nk = s.key_tiles;
  s.est_rounds = static_cast<double>(ceil_div(N, S));
  if (tail_chunk == kPrefillTailOff || !prefill_split_applies(p, policy)) return s;

  long long R = N % S;
  if (tail_chunk > 0 && R == 0) R = std::min(N, S);  // forced: split the last round
  if (R == 0) return s;
  // Paged K/V, automatic: only a tail of at most half a round. Measured on the H200 (fp16 hd 256,
  // context_attention_fwd's prefix part, 8k–100k keys; bench/results/h200-2026-12-02-paged-split/),
  // split against unsplit on 132 slots: tails of 16, 24 and 64 tiles, and of 60 after a full
  // round, 1.07–6.5x faster; 96 tiles −5 % at 8k and +11–16 % at 32k–100k; 128 tiles 0 to −12 %.
  // The model below predicted gains for all of them. A guess at why, not measured by counters:
  // whole tiles of one kv head read its keys in lock-step, so L2 serves them once, while the
  // tail's pieces, dealt end to end, start at different keys per tile.
  if (is_paged(p.kv_source) && tail_chunk < 0 && 2 * R > S) return s;
  long long c = tail_chunk > 0 ? std::clamp<long long>(tail_chunk, 1, nk) : ceil_div(R * nk, S);
  const long long ctas = ceil_div(R * nk, c);
  // The busiest tail CTA: a chunk that starts inside a tile runs over into the next one.
  const int pieces = (c == nk || nk % c == 0) ? 1 : 2;
  const double unsplit = static_cast<double>(ceil_div(N, S) * nk);
  const double split = static_cast<double>((N / S) * nk + ceil_div(ctas, S) * c) + kPieceCost * pieces + kMergeCost;
  if (tail_chunk < 0 && split > unsplit - kMinGain) return s;

  set_tail(&s, R, nk, c, policy.block_m, p.head_dim);
  s.est_rounds = split / static_cast<double>(nk);
  return s;
}

namespace {

// The sm90 agent runs every q tile whole (no key split). A call of few q tiles over many keys —
// context_attention_fwd's prefix part, or a causal chunk over its prefix in one call, at 4–6 q
// heads: a 512-token chunk is 16–24 tiles on 132 SMs — then leaves most SMs idle, where the sm80
// agent's tail split spreads the keys over all of them. In the cost model's units (one SM's time
// for a tile's keys on the sm80 agent): whole tiles on the sm90 agent take ceil(N / S) · (block_m
// ratio) / sm90_speed, the sm80 agent's split est_rounds · (its CTAs an SM) — its rounds share an
// SM between that many CTAs — · kSm80VllmCost on vLLM pages. The cheaper one is taken, and the
// selection records why sm_90a was passed over.
void prefer_key_split(const PrefillParams& p, const HardwareCapability& hw, const SelectOptions& so, int tail_chunk,
                      PrefillSelection* sel, PrefillSplit* split) {
  if (sel->policy.agent != Agent::sm90) return;
  TargetSet rest;  // the compiled targets without sm_90a: the walk's next row
  const TargetSet all = compiled_target_set();
  for (int i = 0; i < all.count; ++i)
    if (all.values[i] != kTargetSm90a) rest.values[rest.count++] = all.values[i];
  PrefillSelection alt = choose_prefill(hw, p.dtype, p.head_dim, so, rest);
  if (!alt.ok() || alt.policy.agent == Agent::sm90) return;
  const PrefillSplit alt_split = plan_prefill_split(p, alt.policy, hw, tail_chunk);
  if (!alt_split.split() || split->slots < 1) return;
  const double whole = std::ceil(static_cast<double>(split->tiles) / split->slots) * sel->policy.block_m /
                       alt.policy.block_m / sm90_speed(p.head_dim);
  const double spread = alt_split.est_rounds * prefill_ctas_per_sm(alt.policy, p.dtype, p.head_dim, hw) *
                        (p.kv_source == KVSource::paged_vllm ? kSm80VllmCost : 1.0);
  if (spread >= whole) return;
  Passed why{sel->target, Pass::no_key_split, p.kv_source};
  why.tiles = split->tiles;
  why.slots = split->slots;
  alt.sm90a_not_compiled = false;  // it is compiled: passed over for this call
  const int keep = alt.passed_count < 16 ? alt.passed_count : 15;
  for (int i = keep; i > 0; --i) alt.passed[i] = alt.passed[i - 1];
  alt.passed[0] = why;
  alt.passed_count = keep + 1;
  alt.start = sel->start;
  *sel = alt;
  *split = alt_split;
}

}  // namespace

Status plan_prefill(const PrefillParams& p, const HardwareCapability& hw, const PrefillPlanOptions& opt,
                    PrefillPlan* plan) {
  if (plan == nullptr) return invalid_argument("plan_prefill: plan must not be null");
  MUH_TRY(detail::check_prefill_shape(p, "plan_prefill: "));
  return detail::plan_prefill_unchecked(p, hw, opt, plan);
}

Status detail::plan_prefill_unchecked(const PrefillParams& p, const HardwareCapability& hw,
                                      const PrefillPlanOptions& opt, PrefillPlan* plan) {
  const std::string w = "plan_prefill: ";
  if (plan == nullptr) return invalid_argument(w + "plan must not be null");
  if (opt.force_target < -1)
    return invalid_argument(w + "force_target must be -1 (auto), 0 (portable) or a compute capability");
  if (opt.tail_chunk < -1) return invalid_argument(w + "tail_chunk must be -1 (auto), 0 (off) or a key-tile count");
  if (hw.sm_count < 1) return invalid_argument(w + "hardware profile '" + hw.name + "' has no SMs");

  SelectOptions so{opt.force_target, p.kv_source, variant_kind(p.variant) != VariantKind::plain, p.kv.dtype};
  if (is_paged(p.kv_source)) so.page_size = p.page_size;
  PrefillSelection sel = choose_prefill(hw, p.dtype, p.head_dim, so);
  MUH_TRY(selection_status(sel, w, hw));
  PrefillSplit split = plan_prefill_split(p, sel.policy, hw, opt.tail_chunk);
  if (!sel.forced && opt.tail_chunk != kPrefillTailOff) prefer_key_split(p, hw, so, opt.tail_chunk, &sel, &split);
  PrefillPlan r;
  r.target = sel.target;
  r.policy = sel.policy;
  r.selection = sel;
  r.device_cc = hw.compute_capability;
  r.sm_count = hw.sm_count;
  r.split = split;
  r.workspace_bytes = r.split.workspace_bytes;
  if (r.policy.agent == Agent::sm90 && opt.tail_chunk != kPrefillTailOff &&
      !split.split() && split.tiles > split.slots) {
    r.persistent.ctas = split.slots;
    r.persistent.counter_offset = (r.workspace_bytes + 15) / 16 * 16;
    r.workspace_bytes = r.persistent.counter_offset + 16;
  }
  r.shape = p;
  r.variant = variant_kind(p.variant);
  r.kv_dtype = p.kv.dtype;
  *plan = r;
  return Status::Ok();
}

// ---- context_attention_fwd in one launch (prefill_plan.hpp) --------------------------------------

Status plan_context_prefill(const PrefillParams& prefix, const PrefillParams& chunk, const HardwareCapability& hw,
                            const PrefillPlanOptions& opt, ContextPlan* plan) {
  const std::string w = "plan_context_prefill: ";
  if (plan == nullptr) return invalid_argument(w + "plan must not be null");
  if (!is_paged(prefix.kv_source) || prefix.causal)
    return invalid_argument(w + "the prefix part must be a paged, non-causal call");
  if (is_paged(chunk.kv_source) || !chunk.causal)
    return invalid_argument(w + "the chunk part must be a contiguous, causal call");
  if (chunk.dtype != prefix.dtype || chunk.batch != prefix.batch || chunk.total_q != prefix.total_q ||
      chunk.max_seqlen_q != prefix.max_seqlen_q || chunk.num_q_heads != prefix.num_q_heads ||
      chunk.num_kv_heads != prefix.num_kv_heads || chunk.head_dim != prefix.head_dim ||
      chunk.total_k != chunk.total_q || chunk.max_seqlen_k != chunk.max_seqlen_q)
    return invalid_argument(w + "the chunk part must have the prefix part's q, heads and dtype, and keys of its "
                                "own queries (total_k = total_q, max_seqlen_k = max_seqlen_q)");
  MUH_TRY(detail::check_prefill_shape(chunk, "plan_context_prefill: "));
  ContextPlan r;
  r.chunk_shape = chunk;
  auto unfused = [&](const char* why) {
    r.why = why;
    *plan = r;
    return Status::Ok();
  };
  // (Before the prefix part's plan: the caller plans the parts of an unfused call itself.)
  if (prefix.kv_source != KVSource::paged_vllm) return unfused("the prefix is not in vLLM's layout");
  if (is_fp8(prefix.kv.dtype)) return unfused("an fp8 cache (no fused instance)");
  if (variant_kind(prefix.variant) != VariantKind::plain || variant_kind(chunk.variant) != VariantKind::plain)
    return unfused("a variant (ALiBi, a window): no split");
  MUH_TRY(plan_prefill(prefix, hw, opt, &r.prefix));
  const PrefillPlan& pp = r.prefix;
  if (pp.policy.agent != Agent::sm80) return unfused("the prefix part's row is not the sm80 agent's");
  if (!pp.split.split() || pp.split.tail_tiles != pp.split.tiles)
    return unfused("the prefix part's plan is not a key split of every q tile");
  if (ceil_div(prefix.max_seqlen_q, pp.policy.block_m) > kernels::kPrefillChunk)
    return unfused("more m-blocks than one tile_of chunk (the two parts' tile orders differ)");

  const long long R = pp.split.tiles, S = pp.split.slots, nkp = pp.split.key_tiles;
  const long long nkc = ceil_div(chunk.max_seqlen_q, pp.policy.block_n);
  const long long c = opt.tail_chunk > 0 ? opt.tail_chunk : ceil_div(R * (nkp + nkc), S);
  // Both parts' pieces over the same tail tiles, each with its own workspace: the prefix's take
  // min(c, its key tiles) — as plan_prefill_split — the chunk's c however many of its q tiles
  // that spans (then one piece a tile: prefill_common.cuh's slot rule, CTA j and tile u → slot
  // j + u, holds for any chunk), so that its few key tiles take few CTAs.
  r.prefix_split = r.chunk_split = pp.split;  // (tiles, slots, est_rounds: the prefix plan's)
  set_tail(&r.prefix_split, R, nkp, std::min(c, nkp), pp.policy.block_m, prefix.head_dim);
  set_tail(&r.chunk_split, R, nkc, c, pp.policy.block_m, prefix.head_dim);
  r.chunk_ws_offset = (r.prefix_split.workspace_bytes + 15) / 16 * 16;
  r.workspace_bytes = r.chunk_ws_offset + r.chunk_split.workspace_bytes;
  r.fused = true;
  *plan = r;
  return Status::Ok();
}

}  // namespace muh
