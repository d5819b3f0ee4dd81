// bench_decode.hpp — what `muh bench decode`'s grids share: the options, the device a run
// measures, and one decode call planned and timed under the cold-L2 method. bench_decode.cu runs
// the default grid (bf16, NHD, issue 3's cells); bench_decode_seed.cu runs --grid seed (the seed's
// fp16 hd-256 cells, issue 18) and --emulate bi-v100.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "commands.hpp"
#include "muh/attention.hpp"

namespace muh::cli {

struct BenchDecodeOptions {
  std::string out = ".";
  int iters = 30;
  bool no_sweep = false;
  bool policy_sweep = false;
  bool no_layouts = false;
  std::string kv_layout = "nhd";
  std::string l2_hint = "auto";
  std::string wide_row = "auto";  // --wide-row: the plan's wide row (PlanOptions::wide_row) auto / on / off
  int splits = 0;                 // --splits: forced partitions for the --only cells (0: the plan's)
  std::vector<std::string> only;  // "hd128:1:32768" — grid cells to run (all when empty)
  std::string grid = "default";   // --grid: default or seed
  std::string emulate;            // --emulate: "" or bi-v100 (with --grid seed)
  bool guard_ab = false;          // --guard-ab: the input guard's cost, guarded vs unguarded kernels
  bool no_portable = false;       // --no-portable (--grid seed --emulate): the device's agent only
  std::string variant;            // --variant (with --only): the cells' attention variant (parse_variant)
  std::string kv_dtype = "auto";  // --kv-dtype (with --only): cache types, comma-separated (parse_kv_dtype)
  std::vector<std::string> given;  // the options on the command line, e.g. "--only" (set by the parser)
};

// The L2 hint option as PlanOptions::l2_evict_first: -1 the plan's choice, 0 off, 1 on.
inline int l2_hint_option(const std::string& hint) { return hint == "on" ? 1 : hint == "off" ? 0 : -1; }
// The wide-row option as PlanOptions::wide_row, the same way.
inline int wide_row_option(const std::string& w) { return l2_hint_option(w); }

// The present device a benchmark measures, with its clocks for the result files. Throws
// UsageError("<who>: no CUDA device") without one (exit 2, one line).
struct BenchDevice {
  HardwareCapability hw;
  int sm_clock_khz = 0, mem_clock_khz = 0;
};

inline BenchDevice open_bench_device(const std::string& who) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw UsageError(who + ": no CUDA device");
  }
  const DeviceQuery dq = query_current_device();
  if (!dq.status.ok()) throw UsageError(who + ": " + dq.status.message());
  BenchDevice d;
  d.hw = dq.hw;
  int dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&d.sm_clock_khz, cudaDevAttrClockRate, dev);
  cudaDeviceGetAttribute(&d.mem_clock_khz, cudaDevAttrMemoryClockRate, dev);
  return d;
}

// The "device" object of a result file.
inline nlohmann::json device_json(const BenchDevice& d) {
  return {{"name", d.hw.name},
          {"compute_capability", d.hw.compute_capability},
          {"sm_count", d.hw.sm_count},
          {"l2_bytes", d.hw.l2_cache_size_bytes},
          {"memory_bandwidth_gbps_datasheet", d.hw.memory_bandwidth_gbps},
          {"sm_clock_max_mhz", d.sm_clock_khz / 1000},
          {"memory_clock_mhz", d.mem_clock_khz / 1000}};
}

// The names of the options given on `cmd`'s command line ("--only", ...).
inline std::vector<std::string> given_options(const CLI::App& cmd) {
  std::vector<std::string> v;
  for (const CLI::Option* opt : cmd.get_options())
    if (opt->count() > 0) v.push_back(opt->get_name());
  return v;
}

// One decode call planned for `hw` with `opt` and timed: `iters` calls on `stream`, each after an
// L2 flush on the same stream (untimed), after `warmup` untimed calls. `launch`, when given,
// replaces paged_decode() (bench_decode.cu's policy candidates). The workspace grows to the plan's.
struct TimedDecode {
  DecodePlan plan;
  std::vector<double> us;  // per call, sorted
};
using DecodeLauncher = std::function<Status(const DecodePlan&)>;

inline TimedDecode time_decode(const DecodeParams& p, const HardwareCapability& hw, const PlanOptions& opt,
                               bench::DeviceMemory& ws, bench::L2Flusher& flusher, cudaStream_t stream, int iters,
                               int warmup = 3, const DecodeLauncher& launch = {}) {
  TimedDecode t;
  const Status s = plan_decode(p, hw, opt, &t.plan);
  if (!s.ok()) throw std::runtime_error("plan_decode: " + s.message());
  if (t.plan.workspace_bytes > ws.n) ws.reset(t.plan.workspace_bytes);
  RunOptions run;
  run.stream = stream;
  auto call = [&] {
    const Status r = launch ? launch(t.plan) : paged_decode(p, t.plan, ws.p, ws.n, run);
    if (!r.ok()) throw std::runtime_error("paged_decode: " + r.message());
  };
  t.us = bench::time_calls_us(call, [&] { flusher.flush(stream); }, stream, iters, warmup);
  bench::cuda_check(cudaGetLastError(), "decode");
  return t;
}

// --kv-dtype's cache types, in order (UsageError on an unknown name: exit 2 before the device).
std::vector<KVDType> parse_kv_types(const BenchDecodeOptions& o);

// bench_decode_seed.cu: registers --grid and --emulate on `muh bench decode`, and runs
// `muh bench decode --grid seed [--emulate bi-v100]`.
void add_bench_decode_seed_options(CLI::App& cmd, BenchDecodeOptions& o);
void run_bench_decode_seed(const BenchDecodeOptions& o);

}  // namespace muh::cli
