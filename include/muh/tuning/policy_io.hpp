// tuning/policy_io.hpp — the one printed form of a policy (host only): `muh verify`, `muh bench`,
// the GPU tests' traces and gtest's failure messages all print policies through it.
//   prefill  "sm80 128x64 w8 s4 pp"          agent, block_m x block_n, warps, K/V buffers, ping-pong
//   decode   "sm80 w4 64tok s3 c2 p128 tma"  agent, warps, tokens per stage, stages, CTAs/SM,
//                                            partition, TMA
// Every field of == is printed and nothing else, so two policies print alike exactly when they
// are ==. With (dtype, head_dim) the footprint and the cap follow: "..., smem 214080 of 232448 B".
#pragma once

#include <ostream>
#include <string>

#include "muh/dtype.hpp"
#include "muh/tuning/policy.hpp"

namespace muh {

inline std::string to_string(const PrefillPolicy& p) {
  return std::string(agent_name(p.agent)) + " " + std::to_string(p.block_m) + "x" + std::to_string(p.block_n) +
         " w" + std::to_string(p.num_warps) + " s" + std::to_string(p.num_stages) + (p.ping_pong ? " pp" : "") +
         (p.overlap ? " ov" : "");
}

inline std::string to_string(const DecodePolicy& p) {
  return std::string(agent_name(p.agent)) + " w" + std::to_string(p.num_warps) + " " + std::to_string(p.tile_tokens) +
         "tok s" + std::to_string(p.num_stages) + " c" + std::to_string(p.ctas_per_sm) + " p" +
         std::to_string(p.partition_size) + (p.tma ? " tma" : "");
}

inline std::string to_string(const PrefillPolicy& p, DType t, int head_dim) {
  return to_string(p) + ", smem " + std::to_string(prefill_smem_bytes(p, t, head_dim)) + " of " +
         std::to_string(p.smem_cap_bytes) + " B";
}

inline std::string to_string(const DecodePolicy& p, DType t, int head_dim) {
  return to_string(p) + ", smem " + std::to_string(decode_smem_bytes(p, t, head_dim)) + " of " +
         std::to_string(p.smem_cap_bytes) + " B";
}

inline std::ostream& operator<<(std::ostream& os, const PrefillPolicy& p) { return os << to_string(p); }
inline std::ostream& operator<<(std::ostream& os, const DecodePolicy& p) { return os << to_string(p); }

}  // namespace muh
