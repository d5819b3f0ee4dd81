// verify_paged_prefill.cpp — the paged-prefill part of `muh verify`: every compiled prefill policy
// the present device can run, forced, reading K/V through a block table from a paged cache of
// each layout (NHD and vLLM's), on the shapes of paged_prefill_check.hpp (the same check as
// tests/gpu/test_paged_prefill.cu: NaN in every unused cache slot, NaN-filled outputs, two runs
// bitwise equal), against the CPU reference. One row per (target, dtype, head_dim, layout). A
// forced row whose agent has no copy for a layout (the sm75 agent on vLLM pages) is refused by
// the selection; the row then says so and checks what the unforced selection runs instead.
// Then the fp8 KV caches (muh/kv_quant.hpp): every compiled fp8 instance on every target whose row
// reads fp8 codes (the sm80 and portable agents': prefill_agent_reads_kv), both layouts, the same shapes (vLLM pages a
// multiple of 16 slots), k_scale 0.5 and v_scale 2, against the reference on the dequantised cache.
// Then context_attention_fwd's parts in one launch (plan_context_prefill, context_prefill): every
// target whose row is the sm80 agent's, on check::context_prefill_cases() (--quick: the first two).
#include <cuda_runtime_api.h>

#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "muh/build_config.hpp"
#include "muh/dispatch.hpp"
#include "muh/instances.hpp"
#include "muh/select.hpp"
#include "muh/tuning/policy_io.hpp"
#include "muh/tuning/selectors.hpp"
#include "paged_prefill_check.hpp"
#include "verify.hpp"

namespace muh::cli {

namespace {
// "target 90 fp16 hd256 vllm: sm80 128x64 w8 s4"
std::string describe(int target, DType t, int d, KVLayout l) {
  return "target " + target_name(target) + " " + std::string(dtype_name(t)) + " hd" + std::to_string(d) +
         (l == KVLayout::nhd ? " nhd" : " vllm") + ": " + to_string(prefill_policy(target, t, d));
}

// --quick: the mixed batch (decodes beside a chunk, GQA 4) and the varlen GQA-6 case at page
// 16, and the 528-token page; otherwise every case.
std::vector<std::size_t> case_indices(bool quick) {
  const auto& all = check::paged_prefill_cases();
  std::vector<std::size_t> v;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const std::string& n = all[i].name;
    if (!quick || n == "mixed_decodes_and_chunk_gqa4_p16" || n == "many_pages_varlen_gqa6_p16" ||
        n == "many_pages_varlen_gqa6_p528")
      v.push_back(i);
  }
  return v;
}
}  // namespace

std::vector<VerifyRow> verify_paged_prefill(const VerifyOptions& opt, const VerifyProgress& progress) {
  std::vector<VerifyRow> rows;
  if (!MUH_PAGED_PREFILL) {
    rows.push_back({"paged", "(none)", 0, 0, 0, true, "not built: MUH_PAGED_PREFILL=OFF"});
    return rows;
  }
  HardwareCapability hw;
  if (const Status s = opt.stream ? stream_profile(opt.stream, &hw) : device_profile(-1, &hw); !s.ok()) {
    rows.push_back({"paged", "(none)", 0, 0, 0, false, s.message() + ": nothing verified"});
    return rows;
  }
  const int cc = hw.compute_capability;
  const std::vector<std::size_t> cases = case_indices(opt.quick);
  const std::vector<int> targets = verify_targets(opt, cc, "paged", &rows);
  int fp8_rows = 0;
  for (int target : targets)
    for (const auto& e : kCompiledFp8Instances)
      fp8_rows += e.head_dim > 0 && prefill_agent_reads_kv(prefill_policy(target, e.dtype, e.head_dim).agent, e.kv) ? 2 : 0;
  const int total = int((targets.size() * std::size(kCompiledInstances) * 2 + fp8_rows) * cases.size());
  int done = 0;
  for (int target : targets) {
    for (const auto& [t, d] : kCompiledInstances) {
      for (KVLayout layout : {KVLayout::nhd, KVLayout::vllm}) {
        VerifyRow row{"paged", describe(target, t, d, layout), 0, 0, 0, true, ""};
        const KVSource src = paged_source(layout);
        const PrefillSelection sel = choose_prefill(hw, t, d, SelectOptions{target, src});
        // Not run forced: the device cannot hold the row (as verify_prefill), or its agent has no
        // copy for this layout — then the unforced selection's row is what a call gets: check it.
        int run_target = target;
        if (!sel.ok()) {
          const PrefillSelection walked = choose_prefill(hw, t, d, SelectOptions{-1, src});
          if (prefill_agent_reads(prefill_policy(target, t, d).agent, src) || !walked.ok()) {
            row.note = "not run: " + describe(sel);
            rows.push_back(std::move(row));
            done += int(cases.size());
            continue;
          }
          run_target = -1;
          row.note = "forced row refused (" + describe(sel) + "); checked the selection's target " +
                     std::to_string(walked.target) + " ";
        }
        double worst_ratio = -1;
        for (std::size_t c : cases) {
          const auto pi = check::make_paged_prefill_inputs(check::paged_prefill_cases()[c], layout, t, d,
                                                           opt.seed + 16 + unsigned(c));
          // (A forced agent that reads the layout but not at this case's page size — the sm90
          // agent on vLLM pages of 8 — has no row for it: the selection's.)
          const int page = check::paged_prefill_cases()[c].page_size;
          const int case_target =
              run_target >= 0 && !prefill_agent_reads_pages(prefill_policy(target, t, d).agent, src, page) ? -1
                                                                                                       : run_target;
          const check::PrefillResult r = check::run_paged_prefill_case(*pi, case_target, nullptr, nullptr, opt.stream);
          ++row.shapes;
          keep_worst(row, worst_ratio, r.max_err, r.tol);
          const bool ok = r.status.ok() && r.pass && r.deterministic && r.nonfinite == 0;
          if (!ok) {
            row.pass = false;
            row.note += check::paged_prefill_cases()[c].name + ": " +
                        (r.status.ok() ? (r.deterministic ? r.note : "two runs differ bitwise") : r.status.message()) +
                        " ";
          }
          if (progress) progress(++done, total, row.policy + " " + check::paged_prefill_cases()[c].name);
        }
        rows.push_back(std::move(row));
      }
    }
  }
  for (int target : targets)
    for (const auto& e : kCompiledFp8Instances) {
      if (e.head_dim == 0 || !prefill_agent_reads_kv(prefill_policy(target, e.dtype, e.head_dim).agent, e.kv)) continue;
      for (KVLayout layout : {KVLayout::nhd, KVLayout::vllm}) {
        VerifyRow row{"paged", describe(target, e.dtype, e.head_dim, layout) + " [" + std::string(kv_dtype_name(e.kv)) +
                                   "]",
                      0, 0, 0, true, ""};
        double worst_ratio = -1;
        for (std::size_t c : cases) {
          check::PagedPrefillCase pc = check::paged_prefill_cases()[c];
          if (progress) progress(++done, total, row.policy + " " + pc.name);
          if (layout == KVLayout::vllm && pc.page_size % 16 != 0) continue;  // (refused: check_prefill_kv_quant)
          pc.kv = KVQuant{e.kv, 0.5f, 2.f};
          const auto pi = check::make_paged_prefill_inputs(pc, layout, e.dtype, e.head_dim, opt.seed + 16 + unsigned(c));
          const check::PrefillResult r = check::run_paged_prefill_case(*pi, target, nullptr, nullptr, opt.stream);
          ++row.shapes;
          keep_worst(row, worst_ratio, r.max_err, r.tol);
          if (!(r.status.ok() && r.pass && r.deterministic && r.nonfinite == 0)) {
            row.pass = false;
            row.note += pc.name + ": " + (r.status.ok() ? (r.deterministic ? r.note : "two runs differ bitwise")
                                                        : r.status.message()) + " ";
          }
        }
        rows.push_back(std::move(row));
      }
    }
  const std::vector<check::PagedPrefillCase> ctx = check::context_prefill_cases();
  const std::size_t ctx_cases = opt.quick ? 2 : ctx.size();
  for (int target : targets)
    for (const auto& [t, d] : kCompiledInstances) {
      if (t == DType::fp32 || prefill_policy(target, t, d).agent != Agent::sm80) continue;
      VerifyRow row{"paged", "context " + describe(target, t, d, KVLayout::vllm), 0, 0, 0, true, ""};
      double worst_ratio = -1;
      for (std::size_t c = 0; c < ctx_cases; ++c) {
        const auto pi = check::make_paged_prefill_inputs(ctx[c], KVLayout::vllm, t, d, opt.seed + 91 + unsigned(c));
        ContextPlan cp;
        const check::PrefillResult r = check::run_context_prefill_case(*pi, target, ctx[c].tail_chunk, &cp, opt.stream);
        if (r.status.ok() && !cp.fused) {
          // The cases fuse on a whole device; on a partition (--emulate) the split may not cover
          // every q tile: then the op runs the two parts, which the paged rows above check.
          row.note += ctx[c].name + ": not fused (" + cp.why + ") ";
          if (!opt.stream) row.pass = false;
          continue;
        }
        if (r.status.ok()) {
          ++row.shapes;
          keep_worst(row, worst_ratio, r.max_err, r.tol);
        }
        if (!(r.status.ok() && r.pass && r.deterministic && r.nonfinite == 0)) {
          row.pass = false;
          row.note += ctx[c].name + ": " +
                      (!r.status.ok() ? r.status.message() : r.deterministic ? r.note : "two runs differ bitwise") + " ";
        }
      }
      rows.push_back(std::move(row));
    }
  return rows;
}

}  // namespace muh::cli
