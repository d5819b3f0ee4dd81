// test_input_errors.cpp — the host side of the kernels' input guard (muh/input_errors.hpp): the
// messages name the input, masks read and clear as documented, the C ABI's bits are the C++ ones,
// and prefill's classification of a sequence's cu_seqlens offsets (seqlens_errors, the function
// every prefill CTA calls) flags exactly the kinds it should. The kernels themselves are tested
// in tests/gpu/test_input_guard.cu.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "muh/input_errors.hpp"
#include "muh/kernels/prefill_common.cuh"
#include "muh/muh.h"

namespace muh {
namespace {

std::vector<InputError> all_kinds() {
  std::vector<InputError> v;
  for (int k = 0; k < kInputErrorKinds; ++k) v.push_back(static_cast<InputError>(k));
  return v;
}

TEST(InputErrors, EveryKindHasItsOwnMessageNamingTheInput) {
  std::set<std::string> seen;
  for (InputError e : all_kinds()) {
    const std::string m = input_error_message(e);
    EXPECT_TRUE(seen.insert(m).second) << "duplicate message: " << m;
    const int k = static_cast<int>(e);
    const char* input = k == 0 ? "block_table" : k == 1 ? "seq_lens" : k <= 6 ? "cu_seqlens_q" : "cu_seqlens_k";
    EXPECT_NE(m.find(input), std::string::npos) << m;
  }
  EXPECT_EQ(std::string(input_error_message(InputError::block_id)),
            "block_table holds a block id outside [0, num_pages)");
  EXPECT_NE(std::string(input_error_message(InputError::seqlen_q_max)).find("max_seqlen_q"), std::string::npos);
  EXPECT_NE(std::string(input_error_message(InputError::seqlen_k_max)).find("max_seqlen_k"), std::string::npos);
  EXPECT_LE(kInputErrorKinds, kInputErrorWords);
}

TEST(InputErrors, DescribeListsTheKindsOfAMaskInOrder) {
  EXPECT_EQ(describe_input_errors(0), "");
  EXPECT_EQ(describe_input_errors(input_error_bit(InputError::seq_len)), input_error_message(InputError::seq_len));
  const std::uint32_t two = input_error_bit(InputError::cu_seqlens_k_end) | input_error_bit(InputError::block_id);
  EXPECT_EQ(describe_input_errors(two), std::string(input_error_message(InputError::block_id)) + "; " +
                                            input_error_message(InputError::cu_seqlens_k_end));
  EXPECT_NE(describe_input_errors(1u << 20).find("unknown input error 20"), std::string::npos);
}

TEST(InputErrors, StatusIsOkForNoneAndInvalidArgumentNamingEachKind) {
  EXPECT_TRUE(input_errors_status(0).ok());
  for (InputError e : all_kinds()) {
    const Status s = input_errors_status(input_error_bit(e));
    EXPECT_EQ(s.code(), StatusCode::invalid_argument);
    EXPECT_NE(s.message().find(input_error_message(e)), std::string::npos) << s.message();
  }
}

TEST(InputErrors, TakeReadsAndClearsOnlyTheWordsSet) {
  int words[kInputErrorWords] = {};
  EXPECT_EQ(take_input_errors(words), 0u);
  words[static_cast<int>(InputError::block_id)] = 1;
  words[static_cast<int>(InputError::seqlen_k_max)] = 7;  // any non-zero word counts
  EXPECT_EQ(take_input_errors(words),
            input_error_bit(InputError::block_id) | input_error_bit(InputError::seqlen_k_max));
  for (int k = 0; k < kInputErrorWords; ++k) EXPECT_EQ(words[k], 0) << k;
  EXPECT_EQ(take_input_errors(words), 0u);  // cleared: reported once
}

TEST(InputErrors, CAbiBitsAreTheCppBits) {
  const std::uint32_t c[] = {MUH_INPUT_ERROR_BLOCK_ID,           MUH_INPUT_ERROR_SEQ_LEN,
                             MUH_INPUT_ERROR_CU_SEQLENS_Q_START, MUH_INPUT_ERROR_CU_SEQLENS_Q_ORDER,
                             MUH_INPUT_ERROR_CU_SEQLENS_Q_END,   MUH_INPUT_ERROR_CU_SEQLENS_Q_RANGE,
                             MUH_INPUT_ERROR_SEQLEN_Q_MAX,       MUH_INPUT_ERROR_CU_SEQLENS_K_START,
                             MUH_INPUT_ERROR_CU_SEQLENS_K_ORDER, MUH_INPUT_ERROR_CU_SEQLENS_K_END,
                             MUH_INPUT_ERROR_CU_SEQLENS_K_RANGE, MUH_INPUT_ERROR_SEQLEN_K_MAX};
  ASSERT_EQ(sizeof c / sizeof c[0], static_cast<std::size_t>(kInputErrorKinds));
  for (int k = 0; k < kInputErrorKinds; ++k) EXPECT_EQ(c[k], input_error_bit(static_cast<InputError>(k))) << k;
}

// Without a GPU the flags cannot be read: a Status that says so (no crash, no ok). With one (a
// GPU machine running the CPU tests), nothing was flagged in this process.
TEST(InputErrors, CheckWithoutErrorsOrWithoutADevice) {
  int n = 0;
  const bool gpu = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  const Status s = check_input_errors();
  if (gpu) {
    EXPECT_TRUE(s.ok()) << s.message();
  } else {
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(s.code() == StatusCode::no_device || s.code() == StatusCode::cuda_error) << s.message();
  }
  std::uint32_t mask = 123;
  EXPECT_EQ(muh_check_input_errors(nullptr, &mask), static_cast<int>(s.code()));
  EXPECT_EQ(mask, 0u);
  EXPECT_EQ(read_input_errors(nullptr, nullptr).code(), StatusCode::invalid_argument);
}

// ---- prefill: the classification of one sequence's offsets (kernels/prefill_common.cuh) ------
std::uint32_t q_errors(int lo, int hi, int b, int batch, int total, int max_len) {
  return kernels::seqlens_errors(lo, hi, b, batch, total, max_len, InputError::cu_seqlens_q_start);
}
constexpr std::uint32_t bit(InputError e) { return input_error_bit(e); }

TEST(PrefillSeqlensGuard, GoodOffsetsShowNothing) {
  // cu = [0, 3, 3, 10], total 10, max 7: every sequence, the empty one included.
  EXPECT_EQ(q_errors(0, 3, 0, 3, 10, 7), 0u);
  EXPECT_EQ(q_errors(3, 3, 1, 3, 10, 7), 0u);
  EXPECT_EQ(q_errors(3, 10, 2, 3, 10, 7), 0u);
  EXPECT_EQ(q_errors(0, 0, 0, 1, 0, 0), 0u);  // one empty sequence of an empty batch
}

TEST(PrefillSeqlensGuard, EachBadArrayIsFlaggedByTheSequenceThatSeesIt) {
  using E = InputError;
  // Not from 0: cu = [2, 5, 10] — sequence 0 sees it (the others cannot).
  EXPECT_EQ(q_errors(2, 5, 0, 2, 10, 8), bit(E::cu_seqlens_q_start));
  EXPECT_EQ(q_errors(5, 10, 1, 2, 10, 8), 0u);
  // Decreasing: cu = [0, 7, 4, 10] — sequence 1.
  EXPECT_EQ(q_errors(7, 4, 1, 3, 10, 8), bit(E::cu_seqlens_q_order));
  // Last != total: cu = [0, 4, 9], total 10 — the last sequence.
  EXPECT_EQ(q_errors(4, 9, 1, 2, 10, 8), bit(E::cu_seqlens_q_end));
  // Past the tensor: cu = [0, 12, 10], total 10 — sequence 0 would read rows 10, 11.
  EXPECT_EQ(q_errors(0, 12, 0, 2, 10, 12), bit(E::cu_seqlens_q_range));
  EXPECT_EQ(q_errors(12, 10, 1, 2, 10, 12), bit(E::cu_seqlens_q_order) | bit(E::cu_seqlens_q_range));
  // Negative offset: cu = [-3, 4], total 4.
  EXPECT_EQ(q_errors(-3, 4, 0, 1, 4, 8), bit(E::cu_seqlens_q_start) | bit(E::cu_seqlens_q_range));
  // Longer than max_seqlen: [0, 9) with max 8 (the grid covers 8 rows).
  EXPECT_EQ(q_errors(0, 9, 0, 1, 9, 8), bit(E::seqlen_q_max));
  EXPECT_EQ(q_errors(0, 8, 0, 1, 8, 8), 0u);
}

TEST(PrefillSeqlensGuard, KeysUseTheirOwnKinds) {
  using E = InputError;
  const auto k = [](int lo, int hi, int b, int batch, int total, int max_len) {
    return kernels::seqlens_errors(lo, hi, b, batch, total, max_len, E::cu_seqlens_k_start);
  };
  EXPECT_EQ(k(1, 5, 0, 1, 5, 8), bit(E::cu_seqlens_k_start));
  EXPECT_EQ(k(5, 4, 1, 3, 9, 8), bit(E::cu_seqlens_k_order));
  EXPECT_EQ(k(0, 4, 0, 1, 5, 8), bit(E::cu_seqlens_k_end));
  EXPECT_EQ(k(0, 6, 0, 2, 5, 8), bit(E::cu_seqlens_k_range));
  EXPECT_EQ(k(0, 9, 0, 1, 9, 8), bit(E::seqlen_k_max));
}

}  // namespace
}  // namespace muh
