// bench_prefill.cu — `muh bench prefill [--out DIR] [--iters N] [--sweep] [--variant LIST ...]`.
//
// The issue's grid: bf16, head_dim 128 × 32 heads and head_dim 256 × 16 heads (MHA), seq_len
// {1024, 4096, 16384} with 16384 tokens per batch (batch = 16384 / seq_len), causal and
// non-causal, through muh::prefill() with the device's own policy; TFLOP/s = 4·b·h·sq·sk·d / t
// (halved for causal). In the same run: a cuBLAS bf16 GEMM 8192³ (the ceiling) and the portable
// agent (forced target 0, the BI-V100 profile) on the seq 1024 cells. --sweep also times candidate
// sm80-agent tilings at seq 4096 and 16384 — the measurements the sm80/sm90 prefill rows cite —
// and, where the build compiled bf16 at hd 64 / 96, those head dims' table rows and candidates
// (64 × 64 heads, 96 × 32 heads; bench_prefill_sweep_64_96.cu).
// muh runs with the workspace prefill_workspace_size() asks for, so the plan may split the tail
// (muh/prefill_plan.hpp); where it does, the cell is timed again with every tile whole (kind
// "whole") in the same run. --tail-chunk C (repeatable) times the non-causal 4k and 16k cells with
// the tail split forced to C key tiles per tail CTA (kind "tail-C"), the cost model's evidence.
// --target T (repeatable; 90, 90a, ...) times every grid cell again with that dispatch target
// forced (kind "tT"): the sm80-class agent (90) beside the Hopper agent (90a) in one process.
// --variant LIST (repeatable; muh/variant.hpp: window=L[:R], softcap=X, sinks — every head's sink
// 0 —, alibi — slopes 2^(−8(h+1)/32) —, comma-separated) times each grid cell again with that
// variant (kind "v:LIST"), right after its plain cell: the variants' cost, side by side. The
// general kind never splits the tail, so its cell compares with the plain "whole" row where the
// plain cell split (a window also skips key tiles: its TFLOP/s count the full causal work).
// Times are medians of --iters (≥ 20) CUDA-event-timed launches after 5 warm-up launches.
// Results: a table on stdout, and bench_prefill.csv / bench_prefill.json under --out.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "bench.hpp"
#include "bench_common.hpp"
#include "bench_prefill.hpp"
#include "commands.hpp"
#include "muh/attention.hpp"
#include "muh/dispatch.hpp"
#include "muh/kernels/prefill_launch.cuh"
#include "muh/targets.hpp"
#include "muh/tuning/selectors.hpp"

namespace muh::cli {
namespace {

using namespace prefill_bench;

// tail_chunk: PrefillPlanOptions::tail_chunk (-1: the plan's choice). *split_bytes, when given,
// gets the workspace the call used (0: every tile whole). The row is named by the plan's policy.
// variant: the call's attention variant (nullptr: none).
Row time_prefill(Buffers& buf, const std::string& kind, int hd, int heads, int seq, bool causal, int target, int iters,
                 int tail_chunk = -1, std::size_t* split_bytes = nullptr, const Variant* variant = nullptr) {
  PrefillParams p = buf.params(hd, heads, seq, causal);
  if (variant != nullptr) p.variant = *variant;
  PrefillPlan plan;
  const Status s = [&] {
    HardwareCapability hw;
    MUH_TRY(device_profile(-1, &hw));
    return plan_prefill(p, hw, PrefillPlanOptions{target, tail_chunk}, &plan);
  }();
  if (!s.ok()) throw std::runtime_error(s.message());
  bench::DeviceMemory ws(std::max<std::size_t>(plan.workspace_bytes, 16));
  if (split_bytes) *split_bytes = plan.workspace_bytes;
  const Status run = prefill(p, plan, ws.p, plan.workspace_bytes);  // surfaces a bad status before timing
  if (!run.ok()) throw std::runtime_error("prefill: " + run.message());
  const double ms = median_ms([&] { (void)prefill(p, plan, ws.p, plan.workspace_bytes); }, iters);
  std::string policy = to_string(plan.policy);
  if (plan.split.split()) policy += " +tail";
  if (plan.persistent.on()) policy += " +persistent";
  Row r{kind, policy, hd, heads, seq, p.batch, causal, ms, 0};
  r.tflops = flops(p.batch, heads, seq, hd, causal) / (ms * 1e-3) / 1e12;
  return r;
}

Row time_gemm(int iters) {
  const int n = 8192;
  bench::DeviceMemory a(2LL * n * n), b(2LL * n * n), c(2LL * n * n);
  bench::fill_bf16_uniform(bits(a), 1LL * n * n, 7u, nullptr);
  bench::fill_bf16_uniform(bits(b), 1LL * n * n, 8u, nullptr);
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
  const float one = 1.f, zero = 0.f;
  auto gemm = [&] {
    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.p, CUDA_R_16BF, n, b.p, CUDA_R_16BF, n, &zero, c.p,
                 CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  const double ms = median_ms(gemm, iters);
  cublasDestroy(h);
  return Row{"gemm", "cublasGemmEx bf16 8192^3", 0, 0, n, 1, false, ms, 2.0 * n * double(n) * n / (ms * 1e-3) / 1e12};
}

void write_results(const std::vector<Row>& rows, const std::string& dir, const std::string& device) {
  if (dir.empty()) return;
  const std::string csv = dir + "/bench_prefill.csv", json = dir + "/bench_prefill.json";
  if (FILE* f = std::fopen(csv.c_str(), "w")) {
    std::fprintf(f, "kind,policy,head_dim,heads,seq_len,batch,causal,ms_median,tflops\n");
    for (const auto& r : rows)
      std::fprintf(f, "\"%s\",%s,%d,%d,%d,%d,%d,%.4f,%.2f\n", r.kind.c_str(), r.policy.c_str(), r.head_dim, r.heads,
                   r.seq, r.batch, int(r.causal), r.ms, r.tflops);
    std::fclose(f);
  } else {
    throw std::runtime_error("cannot write " + csv);
  }
  if (FILE* f = std::fopen(json.c_str(), "w")) {
    char date[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    std::fprintf(f, "{\n  \"device\": \"%s\",\n  \"date\": \"%s\",\n  \"timing\": \"median of CUDA-event-timed launches after 5 warm-ups\",\n  \"results\": [\n", device.c_str(), date);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      std::fprintf(f,
                   "    {\"kind\": \"%s\", \"policy\": \"%s\", \"head_dim\": %d, \"heads\": %d, \"seq_len\": %d, "
                   "\"batch\": %d, \"causal\": %s, \"ms_median\": %.4f, \"tflops\": %.2f}%s\n",
                   r.kind.c_str(), r.policy.c_str(), r.head_dim, r.heads, r.seq, r.batch, r.causal ? "true" : "false",
                   r.ms, r.tflops, i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "  ]\n}\n");
    std::fclose(f);
  }
}

void print_row(const Row& r) {
  std::printf("%-9s %-22s hd%-4d h%-3d seq %-6d b%-3d %-10s %9.3f ms %8.1f TFLOP/s\n", r.kind.c_str(), r.policy.c_str(),
              r.head_dim, r.heads, r.seq, r.batch, r.causal ? "causal" : "non-causal", r.ms, r.tflops);
  std::fflush(stdout);
}

struct Options {
  std::string out;
  int iters = 25;
  bool sweep = false;
  bool portable = true;
  std::vector<int> tail_chunks;
  std::vector<std::string> variants;  // --variant
  std::vector<std::string> targets;   // --target: each grid cell again with this target forced
};

void run(const Options& o) {
  std::vector<Variant> variants;  // (parsed before the device: a bad list is exit 2)
  for (const std::string& v : o.variants) variants.push_back(parse_variant(v));
  std::vector<int> targets;
  for (const std::string& t : o.targets) {
    const int v = parse_target(t);
    if (v < 0) throw UsageError("bench prefill: --target '" + t + "' is not a dispatch target (e.g. 90, 90a, 0)");
    targets.push_back(v);
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) throw UsageError("bench prefill: no CUDA device");
  if (o.iters < 20) throw UsageError("bench prefill: --iters must be >= 20");
  cudaDeviceProp prop{};
  bench::cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("muh bench prefill on %s (sm_%d%d), median of %d\n", prop.name, prop.major, prop.minor, o.iters);
  std::vector<Row> rows;
  auto add = [&](Row r) {
    print_row(r);
    rows.push_back(std::move(r));
  };
  // Clocks ramp from idle (345 MHz seen) to 1980 MHz, so something must run ~0.5 s before
  // anything counts. That warm-up used to be 300 GEMMs, timed GEMM next, then the grid: on the
  // H200 the first cells after the GEMM (hd128 1k) read 15–25 % below compare_torch.py's figures
  // for the same kernel twice (254/238 vs 313/273; 255/226 vs 309/247 on ab830a7), while the
  // later cells agreed within 1–6 % — the GEMM (~700 W) leaves the GPU at its power limit. Now
  // the warm-up is the first cell itself (~0.5 s of it) and the GEMM is timed last. (Not yet
  // measured in this order.)
  {
    Buffers buf;
    const bench::VariantArrays per_head(Buffers::kMaxHeads);  // the variants' sinks and slopes
    for (Variant& v : variants) per_head.bind(v);
    (void)time_prefill(buf, "warm-up", 128, 32, 1024, false, -1, 400);
    const std::pair<int, int> shapes[] = {{128, 32}, {256, 16}};
    for (auto [hd, heads] : shapes)
      for (int seq : {1024, 4096, 16384})
        for (bool causal : {false, true}) {
          std::size_t split = 0;
          add(time_prefill(buf, "muh", hd, heads, seq, causal, -1, o.iters, -1, &split));
          if (split > 0) add(time_prefill(buf, "whole", hd, heads, seq, causal, -1, o.iters, kPrefillTailOff));
          for (std::size_t i = 0; i < targets.size(); ++i)
            add(time_prefill(buf, "t" + o.targets[i], hd, heads, seq, causal, targets[i], o.iters));
          for (std::size_t i = 0; i < variants.size(); ++i)
            add(time_prefill(buf, "v:" + o.variants[i], hd, heads, seq, causal, -1, o.iters, -1, nullptr, &variants[i]));
        }
    for (int chunk : o.tail_chunks)
      for (auto [hd, heads] : shapes)
        for (int seq : {4096, 16384})
          add(time_prefill(buf, "tail-" + std::to_string(chunk), hd, heads, seq, false, -1, o.iters, chunk));
    if (o.portable)
      for (auto [hd, heads] : shapes)
        for (bool causal : {false, true}) add(time_prefill(buf, "portable", hd, heads, 1024, causal, 0, 20));
    if (o.sweep) {
      std::vector<Row> s;
      // Candidates (block_m, block_n, warps, K/V ring buffers) around the table rows.
      sweep<128, Candidate<128, 64, 4, 4>, Candidate<128, 64, 4, 2>, Candidate<128, 64, 4, 3>,
            Candidate<128, 64, 8, 4>, Candidate<64, 64, 4, 4>, Candidate<128, 128, 8, 4>,
            Candidate<128, 32, 4, 6>>(buf, 32, o.iters, s);
      sweep<256, Candidate<64, 64, 4, 2>, Candidate<64, 64, 4, 3>, Candidate<64, 64, 4, 4>,
            Candidate<128, 64, 8, 2>, Candidate<128, 64, 8, 3>, Candidate<64, 32, 4, 2>,
            Candidate<64, 32, 4, 3>, Candidate<64, 32, 4, 4>>(buf, 16, o.iters, s);
      // hd 64 and 96, where this build compiled them: the table row (hd 128's tile) through
      // prefill(), then the candidates around it — the evidence those rows do not have yet.
      const std::pair<int, int> small[] = {{64, 64}, {96, 32}};  // (head_dim, heads): 4096 / 3072 wide
      for (auto [hd, heads] : small)
        if (is_compiled_instance(DType::bf16, hd))
          for (int seq : {4096, 16384})
            for (bool causal : {false, true}) s.push_back(time_prefill(buf, "muh", hd, heads, seq, causal, -1, o.iters));
      sweep_head_dims_64_96(buf, o.iters, s);
      for (auto& r : s) add(r);
    }
  }
  add(time_gemm(o.iters));  // the ceiling, last (see the warm-up above)
  write_results(rows, o.out, prop.name);
}

}  // namespace

void add_bench_prefill(CLI::App& bench) {
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = bench.add_subcommand(
      "prefill", "prefill TFLOP/s on the issue's grid (bf16, hd128x32 and hd256x16 heads, seq 1k/4k/16k, 16k tokens)");
  cmd->add_option("--out", opt->out, "directory for bench_prefill.csv and bench_prefill.json");
  cmd->add_option("--iters", opt->iters, "timed launches per cell (median; >= 20)");
  cmd->add_flag("--sweep", opt->sweep,
                "also time candidate sm80-agent tilings (tuning evidence; hd 64 and 96 too where compiled)");
  cmd->add_flag("!--no-portable", opt->portable, "skip the portable agent's cells");
  cmd->add_option("--tail-chunk", opt->tail_chunks,
                  "also time the non-causal 4k/16k cells with the tail split forced to this many key tiles per "
                  "tail CTA (repeatable)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--target", opt->targets,
                  "also time every grid cell with this dispatch target forced, e.g. 90 (the sm80-class agent "
                  "on Hopper) beside the default walk's 90a (repeatable)");
  cmd->add_option("--variant", opt->variants,
                  "also time every grid cell with this attention variant, e.g. softcap=50 or alibi or sinks "
                  "(repeatable)");
  cmd->callback([opt] { run(*opt); });
}

}  // namespace muh::cli
