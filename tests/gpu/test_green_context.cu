// test_green_context.cu — a plan sees the SMs of its stream (issue 18): on a 16-SM green-context
// partition of the device, stream_profile() reports 16 SMs, the decode plan for the seed's cell
// (fp16, hd 256, 4 q / 1 kv head, one sequence of 32k tokens, page 16, vLLM layout) splits
// differently than on the whole device — and, on a target with a wide row (tuning_sm90.hpp's
// kDecodeWide), takes that row there and not on the whole device —, the 16-SM plan matches the
// CPU reference, and the C ABI called on the green stream runs exactly that plan (its output
// bitwise the 16-SM plan's).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "decode_case.hpp"
#include "green_partition.hpp"
#include "gpu_test_util.hpp"
#include "muh/attention.hpp"
#include "muh/instances.hpp"
#include "muh/muh.h"
#include "muh/tuning/selectors.hpp"

namespace muh {
namespace {

TEST(GreenContext, PlanSeesTheStreamsSmsAndStillMatchesTheReference) {
  MUH_REQUIRE_GPU();
  if (!is_compiled_instance(DType::fp16, 256)) GTEST_SKIP() << "fp16 hd 256 is not compiled into this build";
  check::GreenPartition green;
  const std::string why = green.create(16);
  if (!why.empty()) GTEST_SKIP() << "no 16-SM partition: " << why;

  HardwareCapability full, part, plain;
  ASSERT_TRUE(device_profile(-1, &full).ok());
  ASSERT_TRUE(stream_profile(green.stream(), &part).ok());
  ASSERT_TRUE(stream_profile(nullptr, &plain).ok());
  EXPECT_EQ(part.sm_count, green.sms());
  EXPECT_LT(part.sm_count, full.sm_count);
  EXPECT_EQ(plain.sm_count, full.sm_count) << "a stream without a green context sees the whole device";

  check::DecodeCase c;
  c.target = -1;
  c.dtype = DType::fp16;
  c.layout = KVLayout::vllm;
  c.head_dim = 256;
  c.num_q_heads = 4;
  c.num_kv_heads = 1;
  c.seq_lens = {32768};
  c.shape = "seed_32k";
  check::DecodeProblem pr(c);
  ASSERT_EQ(pr.upload(), "");
  const DecodeParams p = pr.params();
  DecodePlan on_full, on_part;
  ASSERT_TRUE(plan_decode(p, full, {}, &on_full).ok());
  ASSERT_TRUE(plan_decode(p, part, {}, &on_part).ok());
  EXPECT_NE(on_full.num_splits, on_part.num_splits) << "the partition should change the split count";
  EXPECT_FALSE(on_full.wide) << "the whole device keeps the target's row";
  if (has_decode_wide_policy(on_part.target, c.dtype, c.head_dim))
    EXPECT_TRUE(on_part.wide) << "16 SMs streaming 2k-token partitions take the wide row";
  RecordProperty("splits_full", std::to_string(on_full.num_splits));
  RecordProperty("splits_16sm", std::to_string(on_part.num_splits));

  const check::DecodeOutcome r = pr.run(part, 0);  // the 16-SM plan, against the reference
  ASSERT_TRUE(r.pass()) << r.summary();
  EXPECT_EQ(r.num_splits, on_part.num_splits);

  std::size_t ws_bytes = 0;
  ASSERT_EQ(muh_decode_workspace_size_on_stream(int(p.dtype), int(p.layout), p.num_seqs, p.num_q_heads,
                                                p.num_kv_heads, p.head_dim, p.page_size, p.max_seq_len, -1, 0, 0,
                                                green.stream(), &ws_bytes),
            MUH_OK)
      << muh_last_error();
  EXPECT_EQ(ws_bytes, on_part.workspace_bytes);
  testing::DeviceBuffer work(std::max<std::size_t>(ws_bytes, 16));
  const std::size_t n = r.out.size() * dtype_size(c.dtype);  // out_bytes: out, then lse
  ASSERT_LE(n, r.out_bytes.size());
  MUH_CUDA_CHECK(cudaMemset(p.out, 0xFF, n));
  ASSERT_EQ(muh_paged_decode(int(p.dtype), int(p.layout), p.q, p.k_cache, p.v_cache, p.out, p.lse, p.block_table,
                             p.seq_lens, p.num_seqs, p.num_q_heads, p.num_kv_heads, p.head_dim, p.page_size,
                             p.num_pages, p.max_blocks_per_seq, p.max_seq_len, p.softmax_scale, work.p, ws_bytes, -1,
                             0, 0, green.stream()),
            MUH_OK)
      << muh_last_error();
  MUH_CUDA_CHECK(cudaStreamSynchronize(green.stream()));
  std::vector<unsigned char> got(n);
  MUH_CUDA_CHECK(cudaMemcpy(got.data(), p.out, n, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(std::equal(got.begin(), got.end(), r.out_bytes.begin())) << "the C ABI on the green stream did not run the 16-SM plan";
}

}  // namespace
}  // namespace muh
