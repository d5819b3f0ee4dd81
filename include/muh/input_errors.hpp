// input_errors.hpp — bad inputs that live on the device, found by the kernels themselves.
//
// Block ids, seq_lens and cu_seqlens are device memory: the host cannot check them without a
// copy and a sync (RunOptions::debug_checks does that, at that cost). So every kernel guards
// what it reads through them — nothing outside [0, num_pages) pages, nothing past a block-table
// row, nothing outside q/k/out — and reports what it met in a set of error flags, which the
// caller reads when it chooses to (check_input_errors() below: one sync).
//
// What a kernel does with a bad input (so a caller that ignores the flags still gets a defined,
// contained result — never another request's pages):
//   decode   a sequence whose seq_len is outside [0, max_blocks_per_seq · page_size], or whose
//            block table holds, within its seq_len, an id outside [0, num_pages), is computed as
//            a sequence of length 0: out = 0, lse = −inf. The other sequences are unaffected.
//   prefill  a sequence whose cu_seqlens entries are wrong as seen from it (see InputError) writes
//            nothing: its rows of out and lse keep what they held. The other sequences are
//            computed (rows a wrong cu_seqlens leaves to no sequence are not written either).
//            Paged K/V: a sequence whose seqused_k is outside [0, max_seqlen_k] (seq_len) or whose
//            block-table row holds, among the ids it reads, one outside [0, num_pages) (block_id)
//            writes nothing either.
//
// The flags: kInputErrorWords int32 words, word k non-zero when error kind k (InputError) was
// met. The kernels only ever store 1 into a word (no atomics), so the words may live in device
// memory or in mapped pinned host memory (readable without a sync: take_input_errors()). By
// default the library's own words of the device are used (RunOptions::input_errors = nullptr).
#pragma once

#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "muh/status.hpp"

namespace muh {

// One kind of bad device-side input: the index of its word, and of its bit in a mask.
enum class InputError : int {
  block_id = 0,            // decode, paged prefill: block_table holds a block id outside [0, num_pages)
  seq_len = 1,             // decode: seq_lens outside [0, max_blocks_per_seq · page_size];
                           // paged prefill: seqused_k outside [0, max_seqlen_k]
  cu_seqlens_q_start = 2,  // prefill: cu_seqlens_q[0] is not 0
  cu_seqlens_q_order = 3,  // prefill: cu_seqlens_q decreases
  cu_seqlens_q_end = 4,    // prefill: cu_seqlens_q[batch] is not total_q
  cu_seqlens_q_range = 5,  // prefill: cu_seqlens_q holds an offset outside [0, total_q]
  seqlen_q_max = 6,        // prefill: a q length exceeds max_seqlen_q
  cu_seqlens_k_start = 7,
  cu_seqlens_k_order = 8,
  cu_seqlens_k_end = 9,    // cu_seqlens_k[batch] is not total_k
  cu_seqlens_k_range = 10,
  seqlen_k_max = 11,
};
inline constexpr int kInputErrorKinds = 12;
inline constexpr int kInputErrorWords = 16;  // words of a flag set (room for kinds to come)

constexpr std::uint32_t input_error_bit(InputError e) { return 1u << static_cast<int>(e); }

// One line per kind, naming the input: "block_table holds a block id outside [0, num_pages)".
const char* input_error_message(InputError e);
// The kinds of `mask`, in kind order, "; "-separated ("" for 0).
std::string describe_input_errors(std::uint32_t mask);
// Ok for 0; otherwise invalid_argument "bad device-side input detected by the kernels: <describe>".
Status input_errors_status(std::uint32_t mask);

// Reads and clears a flag set in host-visible memory (pinned host memory mapped for the device,
// or any host array): returns its mask, no CUDA call. Clears only the words it saw set, so an
// error flagged while it runs is reported now or by the next call, never lost.
std::uint32_t take_input_errors(volatile int* words);

// The library's flag set of the current device (what calls with RunOptions::input_errors =
// nullptr flag): synchronises `stream`, then reads and clears it. Errors of calls on other
// streams are included once those calls have finished.
Status read_input_errors(cudaStream_t stream, std::uint32_t* mask);
// read_input_errors(), as a Status: Ok, or invalid_argument naming every kind met since the
// last check (input_errors_status); a CUDA failure of the sync or the copy as cuda_error.
Status check_input_errors(cudaStream_t stream = nullptr);

namespace detail {
// The device address of the library's flag set of the current device (a __device__ array:
// nothing is allocated, so it also serves calls under CUDA-graph capture).
Status library_input_errors(int** words);
}  // namespace detail

}  // namespace muh
