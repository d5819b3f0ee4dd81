// plan.hpp — the decode plan: V1 or V2, split count, workspace. Host-only and GPU-free, so it is
// tested on the CPU and reused unchanged across CUDA-graph replays (FlashInfer's plan/run split).
#pragma once

#include <cstddef>

#include "muh/hardware.hpp"
#include "muh/status.hpp"
#include "muh/tuning/policy.hpp"

namespace muh {

struct DecodeParams;

struct PlanOptions {
  int force_target = -1;      // as RunOptions::force_target; must match the run's
  int force_splits = 0;       // > 0: exactly this many partitions per sequence (tests, tuning)
  bool cuda_graph = false;    // fixed for graph capture: splits and workspace sized for
                              // max_seq_len and num_seqs, independent of the actual seq_lens
};

struct DecodePlan {
  int target = -1;             // dispatch target the kernels run
  DecodePolicy policy;         // its decode policy
  bool use_v2 = false;
  int num_splits = 1;          // partitions per sequence (1 for V1)
  int partition_tokens = 0;    // tokens per partition (multiple of policy.tile_tokens)
  int num_seqs = 0;
  int num_q_heads = 0;
  int head_dim = 0;
  bool cuda_graph = false;
  std::size_t workspace_bytes = 0;  // V2 partials: o fp32 + lse fp32 per (seq, split, q head)
};

// Chooses the plan for `p` on hardware `hw` (the present device, or a preset for tests).
Status plan_decode(const DecodeParams& p, const HardwareCapability& hw, const PlanOptions& opt,
                   DecodePlan* plan);

}  // namespace muh
