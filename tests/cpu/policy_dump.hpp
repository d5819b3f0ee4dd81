// policy_dump.hpp — every field of every policy prefill_policy()/decode_policy() return, one line
// per (family, dispatch target, dtype, head_dim). test_policy_golden.cpp compares these lines
// with tests/data/policies-85668f7.txt, which scripts/dump_policies.cpp printed from the tables
// as they were at 85668f7. Uses only names both the old and the new tables have.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "muh/tuning/selectors.hpp"

namespace muh::golden {

// The dispatch targets of every build (0 = the portable class) and a few no build compiles,
// which still must map to the same rows: below sm_75, between the classes, above sm_90.
inline constexpr int kTargets[] = {0, 70, 75, 80, 86, 87, 89, 90, 100, 120};
inline constexpr DType kDTypes[] = {DType::fp16, DType::bf16, DType::fp32};
inline constexpr int kHeadDims[] = {64, 96, 128, 256};  // shapes.hpp's kSupportedHeadDims

inline std::string prefill_line(int target, DType t, int hd) {
  const PrefillPolicy p = prefill_policy(target, t, hd);
  std::ostringstream s;
  s << "prefill target=" << target << " " << dtype_name(t) << " hd=" << hd << " agent=" << agent_name(p.agent)
    << " block_m=" << p.block_m << " block_n=" << p.block_n << " warps=" << p.num_warps
    << " stages=" << p.num_stages << " ping_pong=" << p.ping_pong << " cap=" << p.smem_cap_bytes
    << " smem=" << prefill_smem_bytes(p, t, hd) << " valid=" << validate(p, t, hd);
  return s.str();
}

inline std::string decode_line(int target, DType t, int hd) {
  const DecodePolicy p = decode_policy(target, t, hd);
  std::ostringstream s;
  s << "decode target=" << target << " " << dtype_name(t) << " hd=" << hd << " agent=" << agent_name(p.agent)
    << " warps=" << p.num_warps << " tile=" << p.tile_tokens << " stages=" << p.num_stages
    << " partition=" << p.partition_size << " ctas_per_sm=" << p.ctas_per_sm << " tma=" << p.tma
    << " cap=" << p.smem_cap_bytes << " smem=" << decode_smem_bytes(p, t, hd) << " valid=" << validate(p, t, hd);
  return s.str();
}

// The lines of one family ("prefill" or "decode") for one target, in dtype-then-head_dim order.
inline std::vector<std::string> policy_lines(const std::string& family, int target) {
  std::vector<std::string> v;
  for (DType t : kDTypes)
    for (int hd : kHeadDims) v.push_back(family == "prefill" ? prefill_line(target, t, hd) : decode_line(target, t, hd));
  return v;
}

}  // namespace muh::golden
