// Consumer of an installed muh: the constexpr selector from the installed headers, and a call
// into the installed library (query_current_device), which must link and run.
#include <cstdio>

#include "muh/config.hpp"
#include "muh/dispatch.hpp"
#include "muh/models.hpp"

int main() {
  constexpr muh::AttentionConfig c = muh::select_attention_config(
      muh::presets::bi_v100, muh::DType::bf16, 256, 100000, 4, muh::kSeedBackends);
  static_assert(c.prefill.block_m == 32 && c.prefill.block_n == 32 && c.v1_v2_threshold == 100001,
                "the seed's Qwen3.6 config, from the installed headers");
  static_assert(c == muh::QWEN36_BF16, "models.hpp is installed too");

  const muh::DeviceQuery q = muh::query_current_device();  // from libmuh
  if (!q.status.ok() && q.status.code() != muh::StatusCode::no_device) {
    std::fprintf(stderr, "query_current_device: %s\n", q.status.message().c_str());
    return 1;
  }
  std::printf("consumer: block %dx%d, %d warps, %d stage, partition %d, v1_v2_threshold %d; device: %s; "
              "targets compiled into the installed muh: %zu\n",
              c.prefill.block_m, c.prefill.block_n, c.prefill.num_warps, c.prefill.num_stages,
              c.decode.partition_size, c.v1_v2_threshold, q.status.ok() ? q.hw.name : q.status.message().c_str(),
              muh::compiled_targets::size);
  return 0;
}
