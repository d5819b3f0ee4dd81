// bench_emulate.hpp — the 16-SM green partition of `--emulate bi-v100` (the BI-V100's SM count,
// presets::bi_v100) that `muh bench decode --grid seed` and `muh bench paged` run their emulated
// cells on, and the profile their plans see there (stream_profile() of its stream).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "commands.hpp"
#include "green_partition.hpp"
#include "muh/hardware.hpp"

namespace muh::cli {

inline constexpr int kEmulatedSms = presets::bi_v100.sm_count;  // 16, the seed's profile

// The emulated run: the partition's stream and the profile its plans see.
struct EmulatedRun {
  cudaStream_t stream;
  HardwareCapability hw;
};

// Makes `green` the 16-SM partition and returns its stream with that stream's profile (one result,
// so that no caller reads green.stream() before the partition exists: a401dee's bench decode did,
// and timed its 16-SM cells on the whole GPU); UsageError (exit 2, one line starting with `who`)
// when the device cannot make one, it has no stream or the profile does not see 16 SMs.
inline EmulatedRun emulate_bi_v100(check::GreenPartition& green, const std::string& who,
                                   const std::string& device_name) {
  const std::string why = green.create(kEmulatedSms);
  if (!why.empty()) throw UsageError(who + "no 16-SM partition of " + device_name + ": " + why);
  if (green.sms() != kEmulatedSms)
    throw UsageError(who + device_name + " partitions in other sizes (asked 16 SMs, got " + std::to_string(green.sms()) + ")");
  if (green.stream() == nullptr) throw UsageError(who + "the 16-SM partition has no stream");
  HardwareCapability hw;
  const Status s = stream_profile(green.stream(), &hw);
  if (!s.ok()) throw UsageError(who + s.message());
  if (hw.sm_count != kEmulatedSms)
    throw UsageError(who + "stream_profile() sees " + std::to_string(hw.sm_count) + " SMs on the 16-SM partition");
  return {green.stream(), hw};
}

}  // namespace muh::cli
