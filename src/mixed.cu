// mixed.cu — muh::paged_attention(): a mixed batch (mixed_plan.hpp) run as its plan says, on one
// stream: one paged-prefill launch, or the rebase kernel (kernels/mixed_rebase.cuh), with short
// rows expanded the expand kernel (kernels/mixed_expand.cuh), the decode part (paged_decode) and
// the prefill part (prefill), in that order.
//
// What is checked before any launch (each failure one line, no launch): the call's inputs
// (check_prefill_call: shape, the instance compiled, the pointers), kv_source paged; the plan
// (made, for exactly this PrefillShape); lse null for a split plan (its parts write none:
// re-plan with with_lse); the workspace against plan.workspace_bytes; then, for a split plan,
// both parts' inputs (check_decode_call, check_prefill_call) and the device: both plans' targets
// no newer than it. Each part then runs through its own entry point, which checks its plan again
// (host-only) before it launches.
#include <cuda_runtime_api.h>

#include <string>

#include "decode_check.hpp"
#include "pointer_checks.hpp"
#include "prefill_check.hpp"
#include "muh/attention.hpp"
#include "muh/kernels/launch_status.hpp"
#include "muh/kernels/mixed_expand.cuh"
#include "muh/kernels/mixed_rebase.cuh"
#include "muh/mixed_plan.hpp"

namespace muh {

Status paged_attention(const PrefillParams& p, const MixedPlan& plan, void* workspace, std::size_t workspace_bytes,
                       const RunOptions& opt) {
  const std::string w = "paged_attention: ";
  if (!is_paged(p.kv_source))
    return invalid_argument(w + "a mixed batch reads a paged KV cache: kv_source must be paged (make_paged_prefill)");
  MUH_TRY(detail::check_prefill_call(p));
  if (plan.route == MixedRoute::single && plan.prefill.target < 0)
    return invalid_argument(w + "the plan is empty (make it with plan_mixed())");
  if (plan.shape != static_cast<const PrefillShape&>(p))
    return invalid_argument(w + "the plan was made for another shape (batch " + std::to_string(plan.shape.batch) +
                            ", total_q " + std::to_string(plan.shape.total_q) + ", max q/kv " +
                            std::to_string(plan.shape.max_seqlen_q) + "/" + std::to_string(plan.shape.max_seqlen_k) +
                            "); the call has batch " + std::to_string(p.batch) + ", total_q " +
                            std::to_string(p.total_q) + ", max q/kv " + std::to_string(p.max_seqlen_q) + "/" +
                            std::to_string(p.max_seqlen_k) + ": re-plan");
  if (plan.route == MixedRoute::split && p.lse != nullptr)
    return invalid_argument(w + "the plan splits the batch and its parts write no lse; plan with with_lse for a call "
                                "that asks for lse");
  MUH_TRY(detail::check_workspace(w, "decode partials and rebased cu_seqlens_q", plan.workspace_bytes, workspace,
                                  workspace_bytes));
  if (p.batch == 0 || p.total_q == 0) return Status::Ok();
  if (plan.route == MixedRoute::single) return detail::prefill_unchecked(p, plan.prefill, nullptr, 0, opt);

  // ---- Split: both parts checked first, then the device ----------------------------------------
  int* cu_part = plan.rebase ? plan.rebased_cu(workspace) : nullptr;
  const DecodeParams dp = mixed_decode_part(p, plan, workspace);
  const PrefillParams pp = mixed_prefill_part(p, plan, cu_part);
  if (plan.has_decode()) MUH_TRY(detail::check_decode_call(dp));
  if (plan.has_prefill()) MUH_TRY(detail::check_prefill_call(pp));
  HardwareCapability hw;
  MUH_TRY(device_profile(-1, &hw));
  if ((plan.has_decode() && !profile_runs_target(hw, plan.decode.target)) ||
      (plan.has_prefill() && !profile_runs_target(hw, plan.prefill.target)))
    return unsupported(w + "the plan's targets do not run on the device (sm_" + std::to_string(hw.compute_capability) +
                       ")");

  int* flags = opt.input_errors;
  if ((plan.rebase || plan.expand()) && flags == nullptr) MUH_TRY(detail::library_input_errors(&flags));
  if (plan.rebase) {
    const int n_part = plan.has_prefill() ? plan.num_prefills + 1 : 0;
    kernels::mixed_rebase_kernel<<<1, kernels::kMixedRebaseThreads, 0, opt.stream>>>(
        p.cu_seqlens_q, plan.num_decodes, plan.decode_tokens, plan.expand() ? kMixedShortRowMaxQ : 1, n_part, cu_part,
        flags);
    MUH_TRY(kernels::launch_status("paged_attention: rebase launch"));
  }
  if (plan.expand()) {
    kernels::MixedExpandArgs a;
    a.cu_seqlens_q = p.cu_seqlens_q;
    a.seqused_k = p.seqused_k;
    a.block_table = p.block_table;
    a.nd = plan.num_decodes;
    a.tokens = plan.decode_tokens;
    a.max_blocks = p.max_blocks_per_seq;
    a.page_size = p.page_size;
    a.max_q = kMixedShortRowMaxQ;
    a.max_seqlen_k = p.max_seqlen_k;
    a.causal = p.causal;
    a.lens = plan.expanded_lens(workspace);
    a.table = plan.expanded_table(workspace);
    a.input_errors = flags;
    const unsigned blocks = static_cast<unsigned>((plan.decode_tokens + kernels::kMixedExpandWarps - 1) /
                                                  kernels::kMixedExpandWarps);
    kernels::mixed_expand_kernel<<<blocks, kernels::kMixedExpandWarps * 32, 0, opt.stream>>>(a);
    MUH_TRY(kernels::launch_status("paged_attention: expand launch"));
  }
  if (plan.has_decode())
    MUH_TRY(detail::paged_decode_unchecked(dp, plan.decode, workspace, plan.decode.workspace_bytes, opt));
  if (plan.has_prefill()) MUH_TRY(detail::prefill_unchecked(pp, plan.prefill, nullptr, 0, opt));
  return Status::Ok();
}

}  // namespace muh
