// mixed_plan.hpp — the plan of a mixed batch over the paged KV cache: rows of q_len 1 (decodes),
// short rows (speculative-decoding verification, 2–16 tokens) and long prefill chunks in one
// paged-prefill call's shape (PrefillParams with kv_source paged). plan_mixed() decides, on the
// host and without a GPU, whether the call runs as
//   * one paged-prefill launch over the whole batch (prefill_plan.hpp), or
//   * a planned pair: the decode rows through muh's paged decode with its own split-KV plan
//     (plan.hpp, plan_decode) and the other rows through the paged prefill (plan_prefill);
// paged_attention(params, plan, workspace) (attention.hpp) runs it on one stream. Where both are
// possible, a cost model (mixed_plan.cpp) weighs the decode rows' padded tensor-core tiles inside
// the prefill launch against their stream through the decode kernel plus the pair's extra launches.
//
// The decodes-first contract. The pair addresses its two parts without copying q, out or the
// tables: it needs the decode rows to be a prefix of the batch — rows 0 .. nd − 1 have q_len 1,
// as vLLM V1 orders a batch (vllm/v1/attention/backends/utils.py,
// reorder_batch_to_split_decodes_and_prefills: requests of <= decode_threshold tokens first). Then
// their q / out rows, block-table rows and kv lengths are prefixes too (q rows 0 .. nd − 1,
// block_table rows 0 .. nd − 1, seqused_k[0 .. nd − 1]), and the prefill part is the suffix:
// q + nd rows, out + nd rows, block_table + nd · max_blocks_per_seq, seqused_k + nd. Its
// cu_seqlens_q is the suffix of the call's, less nd: cu_seqlens_q[nd + i] − nd. The paged
// prefill cannot take cu_seqlens_q + nd as it is (its input guard, prefill_common.cuh's
// seqlens_errors, requires cu_seqlens_q[0] == 0 and the host debug check does too), so the run
// writes the rebased offsets, batch − nd + 1 int32, into the plan's workspace with one small
// kernel (kernels/mixed_rebase.cuh) that reads the device cu_seqlens_q — valid under CUDA-graph
// replay, where the offsets change. That kernel also flags a decode row whose q length is not 1
// (InputError::seqlen_q_max: the decode rows' max q length is 1) and cu_seqlens_q[0] != 0
// (cu_seqlens_q_start). With short rows expanded (below) the same holds with the decode part's q
// rows in place of nd where q and out are offset and cu_seqlens_q rebased (q + decode_tokens
// rows; cu_seqlens_q[nd + i] − decode_tokens), and the rows' max q length is kMixedShortRowMaxQ.
// A batch whose decodes are not a prefix (a q_len-1 row after a longer one) is planned as one
// paged-prefill launch, and describe() says so.
//
// Short rows (2–16 tokens: speculative-decoding verification). Where they lead the batch with the
// decodes (vLLM's order: requests of ≤ 1 + num_spec_tokens tokens first), an eager plan may give
// them to the decode part too, expanded: each of their tokens becomes one decode row of its own,
// the query row as it is in q (rows 0 .. decode_tokens − 1 of the call's q and out, no copy),
// over its own kv length — seqused_k − q_len + 1 + t for token t under the causal mask (bottom-
// right), seqused_k without it — and its sequence's block-table row. The expand kernel
// (kernels/mixed_expand.cuh) writes those lengths and rows into the workspace from the device
// arrays; the decode kernel then streams each token's keys with the GQA group on the MMA rows and
// its own split-KV plan. A sequence's tokens read the same pages at nearly the same time (they are
// neighbouring decode rows), mostly from L2. Measured: bench/paged_prefill.py --mixed (verify).
// The model weighs the q_len-1 rows alone against the decode-like rows expanded and takes the
// larger gain. A graph plan keeps its short rows in the prefill part (graph_num_decodes counts
// q_len-1 rows).
//
// Not built yet: lse for the pair (the decode kernel writes lse [num_seqs, num_q_heads], the
// prefill [num_q_heads, total_q]; a call that asks for lse is planned as one launch:
// MixedPlanOptions::with_lse).
//
// The CUDA-graph contract (MixedPlanOptions::cuda_graph). The plan is made for maxima, and a
// graph captured once replays it with other lengths:
//   * the call's shape at capture, and the plan's, are the maxima: batch = the captured number of
//     sequences (padded), total_q = the captured q tokens (padded), max_seqlen_q / max_seqlen_k
//     bounds of every replay's q lengths and seqused_k;
//   * the number of decode rows nd (graph_num_decodes) is a capture-time constant: on every
//     replay rows 0 .. nd − 1 have q_len 1 (cu_seqlens_q[i] = i for i <= nd); a padded decode row
//     has seqused_k 0 (out = 0). vLLM pads its decodes to a captured size the same way;
//   * on every replay cu_seqlens_q[batch] == total_q (padding tokens belong to padding
//     sequences at the end, each with q_len <= seqused_k when causal), every q length <=
//     max_seqlen_q and every seqused_k <= max_seqlen_k (the kernels' guards flag the others);
//   * the decode part is plan_decode's cuda_graph plan for nd sequences of max_seqlen_k (its
//     split count is the maximum's, and a shorter sequence leaves its later partitions empty);
//     the prefill part's grid is sized for max_seqlen_q × (batch − nd) × heads, and each CTA reads
//     its sequence's q length on the device (a tile past it returns at once);
//   * the workspace holds the maxima's partials and offsets; the same pointers every replay.
// Host q / kv lengths are optional for a graph plan (the maxima decide); given, they are checked.
#pragma once

#include <cstddef>
#include <string>

#include "muh/hardware.hpp"
#include "muh/params.hpp"
#include "muh/plan.hpp"
#include "muh/prefill_plan.hpp"
#include "muh/status.hpp"

namespace muh {

// How a mixed call runs.
enum class MixedRoute : unsigned char {
  single = 0,  // one paged-prefill launch over the whole batch
  split = 1,   // the decode prefix through paged decode, the suffix through the paged prefill
};

inline const char* mixed_route_name(MixedRoute r) { return r == MixedRoute::split ? "split" : "single"; }

// Rows of 2 .. kMixedShortRowMaxQ tokens are short rows (verification of 1–15 draft tokens); an
// eager split may run them in the decode part, one decode row per token (above).
inline constexpr int kMixedShortRowMaxQ = 16;

struct MixedPlanOptions {
  // -1: the selection walks the compiled targets; 0, 75, 80, ...: that target for both parts.
  int force_target = -1;
  // -1: the cost model decides; 0: one paged-prefill launch; 1: split wherever it is correct
  // (decodes first, no lse, a page size the decode kernel takes): tests and benchmarks.
  int force_split = -1;
  bool with_lse = false;     // the call passes lse: planned as one launch (see above)
  bool cuda_graph = false;   // a plan for maxima, replayed by a captured graph (see above)
  int graph_num_decodes = 0; // cuda_graph: the decode rows (a capture-time constant)
};

// What plan_mixed() decided. Host values only; paged_attention() takes it for exactly the shape it
// was made for (the call's PrefillShape).
struct MixedPlan {
  MixedRoute route = MixedRoute::single;
  bool cuda_graph = false;
  int num_decodes = 0;        // split: the decode part's sequences, rows 0 .. num_decodes − 1 (0 for single)
  int decode_tokens = 0;      // split: their q rows (= num_decodes unless expanded)
  int num_prefills = 0;       // split: the suffix's sequences, batch − num_decodes
  int prefill_tokens = 0;     // split: the suffix's q rows, total_q − decode_tokens
  int decode_max_kv = 0;      // split: the decode plan's max_seq_len
  int prefill_max_q = 0;      // the prefill part's max_seqlen_q
  // The batch as the host saw it (lengths given): rows by kind, and the first q_len-1 row after a
  // longer one (-1: none; the decodes are then a prefix).
  int rows_decode = 0, rows_short = 0, rows_long = 0, rows_empty = 0;
  int first_late_decode = -1;
  // The cost model (mixed_plan.cpp), seconds: the decode rows inside one paged-prefill launch,
  // and the same rows as the decode part plus the pair's extra launches. 0 when not estimated.
  double est_rows_in_prefill = 0, est_rows_as_decode = 0;
  PrefillPlan prefill;        // the suffix (split, when num_prefills > 0) or the whole batch
  DecodePlan decode;          // split, when num_decodes > 0
  PrefillShape shape;         // the call's shape the plan was made for
  // The workspace: the decode part's partials at 0 (decode.workspace_bytes), then the prefill
  // part's rebased cu_seqlens_q, int32 [num_prefills + 1], at cu_offset; expanded, then the
  // decode rows' kv lengths, int32 [decode_tokens], at lens_offset and their block-table rows,
  // int32 [decode_tokens][max_blocks_per_seq], at table_offset (each 16-byte aligned).
  std::size_t cu_offset = 0;
  std::size_t lens_offset = 0, table_offset = 0;
  std::size_t workspace_bytes = 0;
  bool rebase = false;        // the run launches the rebase kernel (split with a prefill part, or any graph split)
                              // (and, expanded, the expand kernel)
  std::string reason;         // why this route, one line with numbers
  bool has_decode() const { return route == MixedRoute::split && num_decodes > 0; }
  // Short rows among the decode part's, one decode row per token (above).
  bool expand() const { return decode_tokens != num_decodes; }
  bool has_prefill() const { return prefill.target >= 0; }  // single, or a split with prefill rows
  // The workspace's arrays above, in a workspace ws of workspace_bytes (ws null: null).
  int* rebased_cu(void* ws) const { return at(ws, cu_offset); }
  int* expanded_lens(void* ws) const { return at(ws, lens_offset); }
  int* expanded_table(void* ws) const { return at(ws, table_offset); }

 private:
  static int* at(void* ws, std::size_t offset) {
    return ws ? reinterpret_cast<int*>(static_cast<unsigned char*>(ws) + offset) : nullptr;
  }
};

// Plans the mixed call `p` (a paged PrefillParams: shapes only, pointers unread) on `hw`.
// cu_seqlens_q_host [batch + 1] and seqused_k_host [batch] are host copies of the call's device
// arrays (vLLM's query_start_loc_cpu and seq_lens_cpu); required unless opt.cuda_graph, and
// checked against the shape when given: cu[0] == 0, non-decreasing, cu[batch] == total_q, every q
// length <= max_seqlen_q, every seqused_k in [0, max_seqlen_k] and >= its q length when causal.
Status plan_mixed(const PrefillParams& p, const int* cu_seqlens_q_host, const int* seqused_k_host,
                  const HardwareCapability& hw, const MixedPlanOptions& opt, MixedPlan* plan);

// The plan in a few lines: route and why (with the model's numbers), both parts' plans, workspace.
std::string describe(const MixedPlan& plan);

// The two parts' parameters of a split plan, for the run and for tests: pointer offsets into the
// call's tensors (no copies). `rebased_cu` is the device array of the suffix's offsets (the
// workspace at plan.cu_offset); an expanded decode part reads its kv lengths and block-table
// rows from `workspace` (null: null pointers, for shape checks).
DecodeParams mixed_decode_part(const PrefillParams& p, const MixedPlan& plan, void* workspace = nullptr);
PrefillParams mixed_prefill_part(const PrefillParams& p, const MixedPlan& plan, const int* rebased_cu);

}  // namespace muh
