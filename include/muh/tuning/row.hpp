// tuning/row.hpp — one line of a tuning table: which (dtype, head_dim) it serves and the policy,
// in the column order the tables print (agent, tiles, warps, stages, ..., cap, evidence).
// A table is an array of rows, at most one serving each (dtype, head_dim) (fit.hpp's table_holds).
#pragma once

#include <cstddef>

#include "muh/shapes.hpp"
#include "muh/tuning/policy.hpp"

namespace muh::tuning {

// The dtypes a row serves, as a bit set over DType.
inline constexpr unsigned kFp16 = 1u << static_cast<unsigned>(DType::fp16);
inline constexpr unsigned kBf16 = 1u << static_cast<unsigned>(DType::bf16);
inline constexpr unsigned k16Bit = kFp16 | kBf16;

// The head dims a row serves, as a bit set over kSupportedHeadDims (shapes.hpp): a table has rows
// for the head dims it was written for and no others.
constexpr unsigned head_dim_bit(int head_dim) {
  for (std::size_t i = 0; i < kSupportedHeadDims.size(); ++i)
    if (kSupportedHeadDims[i] == head_dim) return 1u << i;
  return 0;
}
inline constexpr unsigned kHd64 = head_dim_bit(64);
inline constexpr unsigned kHd96 = head_dim_bit(96);
inline constexpr unsigned kHd128 = head_dim_bit(128);
inline constexpr unsigned kHd256 = head_dim_bit(256);

constexpr bool serves(unsigned dtypes, unsigned head_dims, DType t, int head_dim) {
  return (dtypes & (1u << static_cast<unsigned>(t))) != 0 && (head_dims & head_dim_bit(head_dim)) != 0;
}

struct PrefillRow {
  unsigned dtypes;     // kFp16 / kBf16 / k16Bit
  unsigned head_dims;  // kHd64 | kHd96 | ...
  Agent agent;
  int block_m, block_n, num_warps, num_stages;
  bool ping_pong;
  int cap;               // the target's shared memory per block (smem_cap_bytes)
  const char* evidence;  // the result file under bench/results/ and the figure
  bool overlap = false;  // the sm90 agent's intra-warp-group overlap (PrefillPolicy::overlap)
  constexpr PrefillPolicy policy() const {
    return {agent, block_m, block_n, num_warps, num_stages, cap, evidence, ping_pong, overlap};
  }
};

struct DecodeRow {
  unsigned dtypes;
  unsigned head_dims;
  Agent agent;
  int num_warps, tile_tokens, num_stages, ctas_per_sm, partition_size;
  bool tma;
  int cap;
  const char* evidence;
  constexpr DecodePolicy policy() const {
    return {agent, num_warps, tile_tokens, num_stages, partition_size, ctas_per_sm, cap, evidence, tma};
  }
};

// The policy of the row of `rows` that serves (t, head_dim), if one does.
template <class Policy>
struct FoundRow {
  bool found = false;
  Policy policy{};
};

template <class Row, std::size_t N>
constexpr int row_index(const Row (&rows)[N], DType t, int head_dim) {
  for (std::size_t i = 0; i < N; ++i)
    if (serves(rows[i].dtypes, rows[i].head_dims, t, head_dim)) return static_cast<int>(i);
  return -1;
}

template <class Row, std::size_t N>
constexpr auto find_row(const Row (&rows)[N], DType t, int head_dim) {
  const int i = row_index(rows, t, head_dim);
  using Policy = decltype(rows[0].policy());
  return i < 0 ? FoundRow<Policy>{} : FoundRow<Policy>{true, rows[i].policy()};
}

}  // namespace muh::tuning
