// tuning/fit.hpp — the one rule that shrinks a row to a shared-memory cap, and the compile-time
// check that every table row is valid and already fitted as written.
//
// It is the rule the tables were fitted with — the sm_80/86/89 decode rows are the H200 rows
// fitted to those parts' caps (tests/cpu/test_tuning_tables.cpp checks that) — and
// prefill_policy() / decode_policy() (selectors.hpp) apply it, in that one place, to the row a
// target's table gives, with the target's cap. Every row as written is a fixed point of it
// (table_holds(), static_asserted under each table), so a table reads as what runs; a row edited
// past its cap would be shrunk by this rule, not by a loop of its own.
#pragma once

#include <cstddef>

#include "muh/shapes.hpp"
#include "muh/tuning/policy.hpp"
#include "muh/tuning/row.hpp"

namespace muh::tuning {

// Prefill, tensor-core agents: block_n halves while the footprint exceeds the cap — down to 32 on
// the sm80 agent (warp pairs need block_n % 32 == 0), 16 on sm75, 64 on sm90 — then K/V buffers drop, not
// below 2 (loads keep overlapping the MMAs). The portable agent's tile is the seed's rule
// (tuning_portable.hpp), never fitted here.
constexpr PrefillPolicy fit(PrefillPolicy p, DType t, int head_dim, int cap) {
  p.smem_cap_bytes = cap;
  if (p.agent == Agent::portable) return p;
  const int min_block_n = p.agent == Agent::sm75 ? 16 : p.agent == Agent::sm90 ? 64 : 32;
  while (prefill_smem_bytes(p, t, head_dim) > cap && p.block_n > min_block_n) p.block_n /= 2;
  while (prefill_smem_bytes(p, t, head_dim) > cap && p.num_stages > 2) --p.num_stages;
  return p;
}

// Decode, sm80 agent: a row fits when ctas_per_sm CTAs fit the cap with 1 KB each held back (the
// per-CTA reservation): cap / ctas_per_sm − 1024. Stages drop first (not below 2: a cp.async
// pipeline); then one CTA per SM with the row's stages again, dropping; then warps halve (the
// CTA's stage, 16 tokens per warp, with them). The portable agent's tile is its own rule.
constexpr DecodePolicy fit(DecodePolicy p, DType t, int head_dim, int cap) {
  p.smem_cap_bytes = cap;
  if (p.agent == Agent::portable) return p;
  const int stages = p.num_stages;
  auto fits = [&p, t, head_dim, cap] { return decode_smem_bytes(p, t, head_dim) <= cap / p.ctas_per_sm - 1024; };
  while (!fits() && p.num_stages > 2) --p.num_stages;
  if (!fits() && p.ctas_per_sm > 1) {
    p.ctas_per_sm = 1;
    p.num_stages = stages;
    while (!fits() && p.num_stages > 2) --p.num_stages;
  }
  while (!fits() && p.num_warps > 1) {
    p.num_warps /= 2;
    p.tile_tokens = 16 * p.num_warps;
  }
  return p;
}

// Every row serves at least one supported (dtype, head_dim), no two rows serve the same one, and
// at each it serves the row validates and fit() leaves it as written.
template <class Row, std::size_t N>
constexpr bool table_holds(const Row (&rows)[N]) {
  bool used[N] = {};
  for (DType t : {DType::fp16, DType::bf16, DType::fp32})
    for (int hd : kSupportedHeadDims) {
      int serving = 0;
      for (const Row& r : rows) serving += serves(r.dtypes, r.head_dims, t, hd) ? 1 : 0;
      if (serving > 1) return false;
      const int i = row_index(rows, t, hd);
      if (i < 0) continue;
      used[i] = true;
      const auto p = rows[i].policy();
      if (!validate(p, t, hd) || !(fit(p, t, hd, p.smem_cap_bytes) == p)) return false;
    }
  for (bool u : used)
    if (!u) return false;
  return true;
}

}  // namespace muh::tuning
