// paged_call.hpp — a valid paged-prefill call for the CPU tests of its checks and plans: 2
// sequences (5 and 3 new tokens, 100 keys at most), 6 q heads / 1 kv head, causal, page 16, 64 pages,
// 8 blocks a sequence; the pointers are host bytes standing in for device memory (the checks look
// at their values, nothing reads through them). Each test mutates one field and expects the check
// that names it.
#pragma once

#include "muh/attention.hpp"

namespace muh::cpu_test {

// `fake`: at least 512 bytes, 64-byte aligned (the pointers are 64 bytes apart).
inline PrefillParams paged_call(unsigned char* fake, KVLayout layout, DType dtype, int head_dim) {
  PrefillParams p;
  p.dtype = dtype;
  p.head_dim = head_dim;
  p.q = fake;
  p.out = fake + 64;
  p.lse = reinterpret_cast<float*>(fake + 128);
  p.cu_seqlens_q = reinterpret_cast<const int*>(fake + 192);
  p.batch = 2;
  p.total_q = 8;
  p.max_seqlen_q = 5;
  p.max_seqlen_k = 100;
  p.num_q_heads = 6;
  p.num_kv_heads = 1;
  p.causal = true;
  return make_paged_prefill(p, layout, fake + 256, fake + 320, reinterpret_cast<const int*>(fake + 384),
                            reinterpret_cast<const int*>(fake + 448), 16, 64, 8);
}

// The same call made long: one sequence of 4000 queries over 4000 keys (250 blocks), 32 q / 8 kv
// heads — 1024 q tiles of 128 rows, more than any profile's slots (the sm90 agent's persistent
// schedule; a contiguous non-causal call of it splits its tail).
inline void make_long(PrefillParams* p) {
  p->batch = 1;
  p->total_q = p->max_seqlen_q = 4000;
  p->max_seqlen_k = 4000;
  p->max_blocks_per_seq = 250;
  p->num_q_heads = 32;
  p->num_kv_heads = 8;
}

}  // namespace muh::cpu_test
