// mixed_plan.cpp — plan_mixed(): one paged-prefill launch or the decode/prefill pair for a mixed
// batch (mixed_plan.hpp).
//
// The cost model compares only what differs between the two routes: the decode rows. Inside one
// paged-prefill launch a decode row is a q tile of one real row per q head: num_q_heads CTAs,
// each running a whole block_m × block_n tile of the tensor-core math for every key tile of its
// sequence (the tile's other rows are padding), and reading the row's K/V (from L2 for all but
// the first head of a KV group). As the decode part the same rows are the decode kernel's
// memory-bound stream, with GQA packed (plan_decode's own model, DecodePlan::est_seconds), plus
// the pair's extra launches:
//
//   in_prefill = max( Σ_dec num_q_heads · 4 · block_m · block_n · head_dim · key_tiles(kv)
//                       / (SMs · per-SM rate),
//                     Σ_dec num_kv_heads · kv · 2 · head_dim · elem / bandwidth )   (elem: the cache's)
//   as_decode  = DecodePlan::est_seconds · share + extra launches · kLaunchSeconds
//   (share 1, or for expanded short rows the part of the per-row stream they pay: below)
//
// and splits when as_decode < in_prefill. At the serving cell (63 decodes at 8k, 32 / 8
// heads, hd 128, bf16, H200) the padded math is 63 · 32 · 4 · block_m · 128 · 8192 FLOPs — 1.08e12
// FLOPs at block_m 128, 3.3 ms at 329 TFLOP/s (1.6 ms at block_m 64) —
// against 2.1 GB of K/V, 0.44 ms at 4.8 TB/s, which the decode part streams: a split by ~4–8×.
// A few decode rows over short prefixes go the other way: their padded tiles cost less than one
// more launch. The per-SM rate is muh's measured prefill rate on the H200 (329 TFLOP/s at hd 256
// over 132 SMs, bench/results/prefill-h200-2026-11-30-waves.md); the portable agent's rate and
// kLaunchSeconds are estimates, not measured — the benchmark (bench/paged_prefill.py --mixed)
// times both routes (force_split) side by side.
#include "muh/mixed_plan.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "decode_check.hpp"
#include "prefill_check.hpp"
#include "muh/select.hpp"

namespace muh {
namespace {

constexpr double kTensorSmFlops = 329e12 / 132;  // muh's sm80-row prefill on one H200 SM (above)
constexpr double kPortableSmFlops = 0.25e12;     // estimate: FMA math of the portable agent
constexpr double kLaunchSeconds = 3e-6;          // estimate: one more kernel launch on the stream
// Expanded short rows (one decode row per token, a sequence's rows adjacent): every row reads its
// sequence's keys, but the repeats come mostly from L2. 64 sequences × 4 tokens at 8k ran 1.98×
// one 64-row decode call on the H200 (bench/results/2026-12-07-causal-key-split) and 2.02–2.26×
// on an H100 (bench/results/2026-12-07-sm90-paged-probe), not 4×: a repeat costs ~1/3 of a first
// read.
// (Fitted at 4 tokens a sequence only.)
constexpr double kRepeatReadShare = 1.0 / 3;

// The share of the decode plan's per-row stream that an expanded part pays: `seqs` first reads and
// tokens − seqs repeats, of `tokens` rows modelled as first reads.
double expanded_read_share(int seqs, int tokens) {
  return tokens > 0 ? (seqs + (tokens - seqs) * kRepeatReadShare) / tokens : 1.0;
}

long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

std::string num(long long v) { return std::to_string(v); }

std::string us(double seconds) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f us", seconds * 1e6);
  return b;
}

// The host lengths against the shape (mixed_plan.hpp, plan_mixed).
// A graph plan's decode rows (b < graph_decodes) may be padding: q_len 1 over seqused_k 0, which
// the decode kernel computes as out = 0.
Status check_host_lengths(const PrefillParams& p, const int* cq, const int* used, int graph_decodes) {
  const std::string w = "plan_mixed: ";
  if (cq[0] != 0) return invalid_argument(w + "cu_seqlens_q_host[0] is " + num(cq[0]) + ", not 0");
  for (int b = 0; b < p.batch; ++b) {
    const int sq = cq[b + 1] - cq[b];
    if (sq < 0) return invalid_argument(w + "cu_seqlens_q_host is not monotonic at " + num(b + 1));
    if (sq > p.max_seqlen_q)
      return invalid_argument(w + "sequence " + num(b) + " has " + num(sq) + " queries (host), above max_seqlen_q " +
                              num(p.max_seqlen_q));
    if (used[b] < 0 || used[b] > p.max_seqlen_k)
      return invalid_argument(w + "seqused_k_host[" + num(b) + "] is " + num(used[b]) + ", outside [0, max_seqlen_k " +
                              num(p.max_seqlen_k) + "]");
    if (p.causal && sq > used[b] && b >= graph_decodes)
      return invalid_argument(w + "sequence " + num(b) + " has " + num(sq) + " queries but seqused_k_host " +
                              num(used[b]) + ": a causal call's keys include its queries' own tokens");
  }
  if (cq[p.batch] != p.total_q)
    return invalid_argument(w + "cu_seqlens_q_host[batch] is " + num(cq[p.batch]) + ", not total_q " + num(p.total_q));
  return Status::Ok();
}

// Seconds of the decode rows (kv lengths `kv` of `nd` rows) inside one paged-prefill launch of
// `plan`'s policy on `hw` (the model above).
double rows_in_prefill(const PrefillParams& p, const PrefillPlan& plan, const HardwareCapability& hw, const int* kv,
                       int nd, int kv_all) {
  const PrefillPolicy& pol = plan.policy;
  const double rate = hw.sm_count * (pol.agent == Agent::portable ? kPortableSmFlops : kTensorSmFlops);
  double flops = 0, bytes = 0;
  const double elem = is_fp8(p.kv.dtype) ? 1.0 : static_cast<double>(dtype_size(p.dtype));  // an fp8 cache: codes
  for (int s = 0; s < nd; ++s) {
    const long long L = kv ? kv[s] : kv_all;
    flops += double(p.num_q_heads) * 4.0 * pol.block_m * pol.block_n * p.head_dim * double(ceil_div(L, pol.block_n));
    bytes += double(p.num_kv_heads) * double(L) * 2.0 * p.head_dim * elem;
  }
  return std::max(flops / rate, bytes / (hw.memory_bandwidth_gbps * 1e9));
}

}  // namespace

DecodeParams mixed_decode_part(const PrefillParams& p, const MixedPlan& plan, void* workspace) {
  DecodeParams d;
  d.dtype = p.dtype;
  d.layout = paged_layout(p.kv_source);
  d.q = p.q;  // rows 0 .. nd − 1: [nd, num_q_heads, head_dim], decode's q layout
  d.k_cache = p.k_cache;
  d.v_cache = p.v_cache;
  d.out = p.out;
  d.lse = nullptr;  // the split writes no lse (mixed_plan.hpp)
  d.block_table = p.block_table;
  d.seq_lens = p.seqused_k;
  d.num_seqs = plan.decode_tokens;  // = num_decodes, or (expanded) one decode row per token
  if (plan.expand()) {  // the rows' own lengths and block-table rows, written by the expand kernel
    d.seq_lens = plan.expanded_lens(workspace);
    d.block_table = plan.expanded_table(workspace);
  }
  d.num_q_heads = p.num_q_heads;
  d.num_kv_heads = p.num_kv_heads;
  d.head_dim = p.head_dim;
  d.page_size = p.page_size;
  d.num_pages = p.num_pages;
  d.max_blocks_per_seq = p.max_blocks_per_seq;
  d.max_seq_len = plan.decode_max_kv;
  d.softmax_scale = p.softmax_scale;
  d.kv = p.kv;  // an fp8 cache: both parts read it (either decode agent; the prefill's sm80 or portable agent)
  return d;
}

PrefillParams mixed_prefill_part(const PrefillParams& p, const MixedPlan& plan, const int* rebased_cu) {
  PrefillParams s = p;
  const std::size_t row_bytes = std::size_t(p.num_q_heads) * p.head_dim * dtype_size(p.dtype);
  const std::size_t skip = std::size_t(plan.decode_tokens) * row_bytes;
  s.q = p.q ? static_cast<const unsigned char*>(p.q) + skip : nullptr;
  s.out = p.out ? static_cast<unsigned char*>(p.out) + skip : nullptr;
  s.lse = nullptr;
  s.cu_seqlens_q = rebased_cu;
  s.block_table = p.block_table ? p.block_table + std::size_t(plan.num_decodes) * p.max_blocks_per_seq : nullptr;
  s.seqused_k = p.seqused_k ? p.seqused_k + plan.num_decodes : nullptr;
  s.batch = plan.num_prefills;
  s.total_q = plan.prefill_tokens;
  s.max_seqlen_q = plan.prefill_max_q;
  return s;  // max_seqlen_k stays the call's: the kernels' guard bounds seqused_k by it
}

Status plan_mixed(const PrefillParams& p, const int* cq, const int* used, const HardwareCapability& hw,
                  const MixedPlanOptions& opt, MixedPlan* plan) {
  const std::string w = "plan_mixed: ";
  if (plan == nullptr) return invalid_argument(w + "plan must not be null");
  if (!is_paged(p.kv_source))
    return invalid_argument(w + "a mixed batch reads a paged KV cache: kv_source must be paged (make_paged_prefill)");
  MUH_TRY(detail::check_prefill_shape(p, "plan_mixed: "));
  if (variant_kind(p.variant) != VariantKind::plain)
    return unsupported(w + "attention variants (" + describe_variant(p.variant) +
                       ") are not supported in a mixed batch yet; run the prefill and decode parts with prefill() "
                       "and paged_decode()");
  if (opt.force_split < -1 || opt.force_split > 1)
    return invalid_argument(w + "force_split must be -1 (the plan decides), 0 or 1");
  if (!opt.cuda_graph && (cq == nullptr || used == nullptr))
    return invalid_argument(w + "cu_seqlens_q_host and seqused_k_host are required (host copies of the call's "
                                "device arrays), except for a cuda_graph plan");
  if ((cq == nullptr) != (used == nullptr))
    return invalid_argument(w + "give both cu_seqlens_q_host and seqused_k_host, or neither");
  if (cq) MUH_TRY(check_host_lengths(p, cq, used, opt.cuda_graph ? opt.graph_num_decodes : 0));
  if (opt.cuda_graph && (opt.graph_num_decodes < 0 || opt.graph_num_decodes > p.batch ||
                         opt.graph_num_decodes > p.total_q))
    return invalid_argument(w + "graph_num_decodes " + num(opt.graph_num_decodes) + " is outside [0, min(batch " +
                            num(p.batch) + ", total_q " + num(p.total_q) + ")]");
  if (!opt.cuda_graph && opt.graph_num_decodes != 0)
    return invalid_argument(w + "graph_num_decodes is for cuda_graph plans (the decode rows of others are counted)");

  MixedPlan r;
  r.shape = p;
  r.cuda_graph = opt.cuda_graph;

  // ---- The batch's rows: the leading runs of q_len 1 and of decode-like rows, and what follows ----
  // lead: rows 0 .. lead − 1 have q_len 1; lead_short (eager plans): rows 0 .. lead_short − 1 have
  // 1 ≤ q_len ≤ kMixedShortRowMaxQ (decodes and verification rows, vLLM's order with speculative
  // decoding: requests of ≤ 1 + num_spec_tokens first). A q_len-1 row after that run is late.
  int lead = 0, lead_short = 0;
  if (cq) {
    bool in_lead = true, in_short = !opt.cuda_graph;
    for (int b = 0; b < p.batch; ++b) {
      const int sq = cq[b + 1] - cq[b];
      if (sq == 0) ++r.rows_empty;
      else if (sq == 1) ++r.rows_decode;
      else if (sq <= kMixedShortRowMaxQ) ++r.rows_short;
      else ++r.rows_long;
      if (in_lead && sq == 1) ++lead;
      else in_lead = false;
      if (in_short && sq >= 1 && sq <= kMixedShortRowMaxQ) ++lead_short;
      else in_short = false;
      if (!in_lead && !in_short && sq == 1 && r.first_late_decode < 0) r.first_late_decode = b;
    }
  }
  int nd = lead;
  if (opt.cuda_graph) {
    nd = opt.graph_num_decodes;
    if (cq && lead < nd)
      return invalid_argument(w + "graph_num_decodes is " + num(nd) + " but row " + num(lead) + " has q_len " +
                              num(cq[lead + 1] - cq[lead]) + " (the decode rows must have q_len 1)");
  }

  // ---- The single launch: always valid, planned first (it is also the fallback) ---------------
  PrefillPlan single;
  MUH_TRY(detail::plan_prefill_unchecked(p, hw, PrefillPlanOptions{opt.force_target, kPrefillTailOff}, &single));
  auto go_single = [&](std::string why) {
    MixedPlan s;
    s.shape = r.shape;
    s.cuda_graph = r.cuda_graph;
    s.rows_decode = r.rows_decode;
    s.rows_short = r.rows_short;
    s.rows_long = r.rows_long;
    s.rows_empty = r.rows_empty;
    s.first_late_decode = r.first_late_decode;
    s.est_rows_in_prefill = r.est_rows_in_prefill;
    s.est_rows_as_decode = r.est_rows_as_decode;
    s.route = MixedRoute::single;
    s.prefill = single;
    s.prefill_max_q = p.max_seqlen_q;
    s.reason = std::move(why);
    *plan = s;
    return Status::Ok();
  };
  auto refuse = [&](const std::string& why) -> Status {
    if (opt.force_split == 1) return invalid_argument(w + "force_split: the batch cannot be split: " + why);
    return go_single(why);
  };

  if (opt.force_split == 0) return go_single("force_split = 0");
  if (p.batch == 0 || p.total_q == 0) return go_single("nothing to run (batch or total_q is 0)");
  if (nd == 0 && lead_short == 0) {
    if (r.first_late_decode >= 0)
      return refuse("the decodes are not a prefix of the batch (row " + num(r.first_late_decode) +
                    " has q_len 1 after row 0 with q_len " + num(cq[1] - cq[0]) +
                    "); the pair needs decodes first (vLLM's order)");
    return refuse(opt.cuda_graph ? "graph_num_decodes is 0" : "no decode rows (q_len 1 to " +
                                                                  num(kMixedShortRowMaxQ) + ") in the batch");
  }
  if (!opt.cuda_graph && r.first_late_decode >= 0)
    return refuse("the decodes are not a prefix of the batch: rows 0.." + num(std::max(nd, lead_short) - 1) +
                  " have q_len 1 to " + num(kMixedShortRowMaxQ) + ", row " + num(r.first_late_decode) +
                  " has q_len 1 after a longer row; the pair needs decodes first (vLLM's order)");
  if (opt.with_lse)
    return refuse("lse asked: the decode kernel writes lse [seqs, heads], the prefill [heads, total_q]; the pair's "
                  "lse is not built");

  // ---- The pair for the first `rows` rows (q_len 1, or up to kMixedShortRowMaxQ: expanded) --------
  // Fills c (from r's row counts) or says why it cannot be split; its model's gain in *gain.
  auto pair = [&](int rows, MixedPlan* c, std::string* why_not, double* gain) -> Status {
    *c = r;
    c->route = MixedRoute::split;
    c->num_decodes = rows;
    c->decode_tokens = opt.cuda_graph || cq == nullptr ? rows : cq[rows];
    c->num_prefills = p.batch - rows;
    c->prefill_tokens = p.total_q - c->decode_tokens;
    if (opt.cuda_graph) {
      c->decode_max_kv = p.max_seqlen_k;
      c->prefill_max_q = std::min(p.max_seqlen_q, c->prefill_tokens);
    } else {
      for (int b = 0; b < rows; ++b) c->decode_max_kv = std::max(c->decode_max_kv, used[b]);
      for (int b = rows; b < p.batch; ++b) c->prefill_max_q = std::max(c->prefill_max_q, cq[b + 1] - cq[b]);
    }
    const DecodeParams dp = mixed_decode_part(p, *c);
    if (Status s = detail::check_decode_shape(dp); !s.ok()) {
      *why_not = "the decode part: " + s.message();
      return Status::Ok();
    }
    PlanOptions dopt;
    dopt.force_target = opt.force_target;
    dopt.cuda_graph = opt.cuda_graph;
    if (Status s = detail::plan_decode_unchecked(dp, hw, dopt, &c->decode); !s.ok()) {
      *why_not = "the decode part: " + s.message();
      return Status::Ok();
    }
    const bool with_prefill = c->num_prefills > 0 && c->prefill_tokens > 0;
    if (with_prefill) {
      const PrefillParams pp = mixed_prefill_part(p, *c, nullptr);
      MUH_TRY(detail::check_prefill_shape(pp, "plan_mixed: the prefill part: "));
      MUH_TRY(detail::plan_prefill_unchecked(pp, hw, PrefillPlanOptions{opt.force_target, kPrefillTailOff}, &c->prefill));
    }
    // The rebase kernel: the prefill part's offsets, and the decode rows' check under a graph.
    c->rebase = with_prefill || opt.cuda_graph;
    const int launches = 1 + (c->rebase ? 1 : 0) + (c->expand() ? 1 : 0) + (with_prefill ? 1 : 0);  // against 1
    // A graph plan's model reads the maxima only: its fixed parts must not depend on one replay's lengths.
    c->est_rows_in_prefill = rows_in_prefill(p, single, hw, opt.cuda_graph ? nullptr : used, rows, p.max_seqlen_k);
    const double share = c->expand() ? expanded_read_share(rows, c->decode_tokens) : 1.0;
    c->est_rows_as_decode = c->decode.est_seconds * share + (launches - 1) * kLaunchSeconds;
    *gain = c->est_rows_in_prefill - c->est_rows_as_decode;
    c->reason = num(rows) + " decode rows" +
                (c->expand() ? " (" + num(c->decode_tokens) + " tokens, one decode row each)" : std::string()) + ": " +
                us(c->est_rows_in_prefill) + " inside one paged-prefill launch, " + us(c->est_rows_as_decode) +
                " as the decode part (+" + num(launches - 1) + " launches)";
    // The workspace: decode partials, the rebased offsets, then (expanded) the rows' lengths and
    // block-table rows.
    const auto align16 = [](std::size_t x) { return (x + 15) / 16 * 16; };
    c->cu_offset = align16(c->decode.workspace_bytes);
    std::size_t end = c->cu_offset + (c->rebase ? std::size_t(c->num_prefills + 1) * sizeof(int) : 0);
    if (c->expand()) {
      c->lens_offset = align16(end);
      c->table_offset = align16(c->lens_offset + std::size_t(c->decode_tokens) * sizeof(int));
      end = c->table_offset + std::size_t(c->decode_tokens) * p.max_blocks_per_seq * sizeof(int);
    }
    c->workspace_bytes = align16(end);
    return Status::Ok();
  };

  // The candidates: the q_len-1 rows alone, and (eager plans with short rows leading) the decode-like
  // rows with the short ones expanded. The one whose model gains the most; none gaining, one launch.
  MixedPlan best;
  double best_gain = 0;
  std::string why_not;
  bool have = false;
  for (const int rows : {nd, lead_short}) {
    if (rows == 0 || (have && rows == best.num_decodes)) continue;
    MixedPlan c;
    std::string no;
    double gain = 0;
    MUH_TRY(pair(rows, &c, &no, &gain));
    if (!no.empty()) {
      if (why_not.empty()) why_not = no;
      continue;
    }
    // Forced: the most rows the decode part can take.
    const bool better = !have || (opt.force_split == 1 ? c.num_decodes > best.num_decodes : gain > best_gain);
    if (better) {
      best = c;
      best_gain = gain;
      have = true;
    }
  }
  if (!have) return refuse(why_not);
  r.est_rows_in_prefill = best.est_rows_in_prefill;
  r.est_rows_as_decode = best.est_rows_as_decode;
  if (opt.force_split != 1 && best_gain <= 0) return go_single(best.reason);
  if (opt.force_split == 1) best.reason = "force_split = 1; " + best.reason;
  *plan = best;
  return Status::Ok();
}

std::string describe(const MixedPlan& m) {
  std::string s = "mixed: " + std::string(mixed_route_name(m.route)) + (m.cuda_graph ? " (cuda_graph, for maxima)" : "") +
                  " — " + m.reason + "\n";
  const PrefillShape& p = m.shape;
  s += "  batch " + num(p.batch) + ", total_q " + num(p.total_q) + ", max q/kv " + num(p.max_seqlen_q) + "/" +
       num(p.max_seqlen_k);
  if (m.rows_decode + m.rows_short + m.rows_long + m.rows_empty > 0)
    s += "; rows: " + num(m.rows_decode) + " decode, " + num(m.rows_short) + " short (2-16), " + num(m.rows_long) +
         " long, " + num(m.rows_empty) + " empty";
  s += "\n";
  if (m.has_decode())
    s += "  decode part: rows 0.." + num(m.num_decodes - 1) +
         (m.expand() ? " (" + num(m.decode_tokens) + " tokens: one decode row each, its own kv length)" : std::string()) +
         ", " + target_name(m.decode.target) + ", " +
         (m.decode.use_v2 ? "V2 " + num(m.decode.num_splits) + " splits of " + num(m.decode.partition_tokens) + " tokens"
                          : std::string("V1")) +
         ", max kv " + num(m.decode_max_kv) + ", est " + us(m.decode.est_seconds) + " (" + describe(m.decode.selection) +
         ")\n";
  if (m.has_prefill()) {
    if (m.route == MixedRoute::split)
      s += "  prefill part: rows " + num(m.num_decodes) + ".." + num(p.batch - 1) + " (" + num(m.num_prefills) +
           " sequences, " + num(m.prefill_tokens) + " q rows, max q " + num(m.prefill_max_q) + "), ";
    else
      s += "  one paged prefill: ";
    s += target_name(m.prefill.target) + " " + num(m.prefill.policy.block_m) + "x" + num(m.prefill.policy.block_n) +
         " tiles (" + describe(m.prefill.selection) + ")\n";
  }
  if (m.route == MixedRoute::split && !m.expand() && m.rows_short > 0)
    s += "  short rows (2-" + num(kMixedShortRowMaxQ) + " tokens) run in the paged prefill part" +
         (m.cuda_graph ? " (a graph plan's decode rows are q_len 1)" : std::string(" (the model preferred it)")) + "\n";
  s += "  workspace " + num(static_cast<long long>(m.workspace_bytes)) + " B";
  if (m.rebase) s += " (rebased cu_seqlens_q at " + num(static_cast<long long>(m.cu_offset)) + ")";
  if (m.expand())
    s += " (the decode rows' kv lengths at " + num(static_cast<long long>(m.lens_offset)) + ", block-table rows at " +
         num(static_cast<long long>(m.table_offset)) + ")";
  return s;
}

}  // namespace muh
