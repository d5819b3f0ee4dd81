// bench_decode.cu — `muh bench decode [--out DIR] [--iters N] [--no-split-sweep] [--no-layouts]
//                    [--policy-sweep] [--kv-layout nhd|vllm] [--l2-hint auto|on|off]
//                    [--only hdD:BATCH:KV_LEN ... [--splits N] [--variant LIST] [--kv-dtype LIST]]`.
//
// --only times just the listed cells (a quick look at a few cells, or under ncu); it also accepts
// the probe config kv1 (see kProbeConfigs); --splits forces their partition count; --variant
// gives them an attention variant (window=L[:R], softcap=X, sinks — every head's sink 0 —, alibi
// — slopes 2^(−8(h+1)/32) —, comma-separated: muh/variant.hpp), e.g. a 4k window over a 128k
// context beside the plain 4k and 128k cells; --kv-dtype times each of them once per listed cache
// type (auto = bf16, fp8_e4m3, fp8_e5m2: muh/kv_quant.hpp), one after the other in one run, e.g.
// `--kv-dtype auto,fp8_e4m3` for an fp8 cache's speed-up (its cell bytes count 1-byte K/V; the
// pool's random bf16 bytes read as fp8 codes include NaN codes, which change no speed). --kv-layout
// vllm runs the grid on vLLM's cache layout (same page bytes); --l2-hint forces the L2
// evict-first policy of the K/V copies on or off (default: the plan's choice).
//
// The issue's grid: bf16, page 16, NHD, each cell's pages in random order (a permutation of its
// own batch × kv_len / 16 pages) in FlashInfer's cache layout (K and V of a page side by side;
// the same grid is also timed with vLLM's separate K/V regions and with pages spread over a
// 34 GB pool — see PoolLayout); head_dim 128 with 32 q / 8 kv heads and head_dim 256 with
// 16 q / 4 kv heads;
// batch {1, 16, 64, 256} × kv_len {512, 2048, 8192, 32768}, every sequence kv_len long, through
// muh::paged_decode() with the plan it makes for the present device. Each timed iteration starts
// with a cold L2 (a 256 MB buffer is overwritten first, untimed); the figure is the median of
// --iters (≥ 30) CUDA-event-timed calls after 3 warm-up calls. Effective bandwidth = (K and V
// bytes of all tokens + q + out) / time. In the same run: the streaming-read ceiling (8 GiB,
// 16 CTAs per SM); per grid cell the size-matched read floor (the same read over the cell's
// K/V bytes after the same flush — the floor a decode of that cell reads against); and —
// unless --no-split-sweep — forced split counts at batch 1 and 16, the evidence for the plan's
// choice; with --policy-sweep, candidate sm80-agent shapes (warps × stages) on four cells per
// head dim, the evidence for the sm90 rows — on the two V2 cells also with forced split counts,
// so that a candidate is judged with the split count that suits it (the plan's own count is
// fitted to the row in the table, not to the candidate).
// Results: a table on stdout (with the ratio to FlashInfer's figures on the same H200, from the
// issue), decode-<device>-<date>.csv and .json under --out. `--grid seed [--emulate bi-v100]` runs
// the seed's cells instead (bench_decode_seed.cu).
//
// --guard-ab: the cost of the kernels' input guard (muh/input_errors.hpp) on the same grid (or the
// --only cells), in one run: the sm90 row's kernels as the library runs them (kGuard = true) and
// compiled without the guard (kGuard = false), launched on the same arguments, interleaved with
// the unguarded arm a second time as an A/A control (its "cost" is the method's noise), in 6
// rounds of --iters cold-L2 calls per arm with the arms' order rotated every round; per cell the
// medians over the rounds, guarded ÷ unguarded − 1, the A/A figure, and whether the outputs are
// bitwise identical. Needs sm_90.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench.hpp"
#include "bench_common.hpp"
#include "bench_decode.hpp"
#include "commands.hpp"
#include "muh/attention.hpp"
#include "muh/build_config.hpp"
#include "muh/dispatch.hpp"
#include "muh/input_errors.hpp"
#include "muh/kernels/decode_instance.cuh"
#include "muh/kernels/decode_launch.cuh"
#include "muh/launch_args.cuh"
#include "muh/tuning/selectors.hpp"
#include "muh/tuning/tuning_sm90.hpp"

namespace muh::cli {
namespace {

struct DecodeConfig {
  const char* name;
  int head_dim;
  int q_heads;
  int kv_heads;
};
constexpr DecodeConfig kConfigs[] = {{"hd128_32q_8kv", 128, 32, 8}, {"hd256_16q_4kv", 256, 16, 4}};
// Reachable with --only only: the hd128 cell's bytes with one KV head per sequence (each head's
// page one contiguous 4 KB run instead of 16 rows of 256 B at a 2 KB stride) — batch × 8 of it
// reads what the hd128 cell reads, with the same CTAs and work per CTA, in another pattern.
constexpr DecodeConfig kProbeConfigs[] = {{"kv1_4q_1kv", 128, 4, 1}};
constexpr int kBatches[] = {1, 16, 64, 256};
constexpr int kLens[] = {512, 2048, 8192, 32768};
constexpr int kPage = 16;

// FlashInfer on this H200, same method (issue 3): effective TB/s and median µs per cell,
// [config][batch][kv_len].
constexpr double kFlashInferTbps[2][4][4] = {
    {{0.16, 0.55, 1.40, 2.47}, {1.42, 2.49, 3.71, 4.21}, {2.50, 3.70, 4.21, 4.37}, {3.51, 4.18, 4.36, 4.40}},
    {{0.12, 0.45, 1.14, 2.31}, {1.25, 2.41, 3.67, 4.24}, {2.53, 3.76, 4.22, 4.39}, {3.38, 4.18, 4.39, 4.43}}};
constexpr double kFlashInferUs[2][4][4] = {
    {{13, 15, 24, 54}, {24, 54, 145, 510}, {54, 145, 511, 1968}, {154, 515, 1973, 7810}},
    {{17, 19, 29, 58}, {27, 56, 146, 506}, {53, 143, 509, 1956}, {160, 515, 1958, 7753}}};

// ---- Policy sweep: candidate sm80-agent shapes (warps × stages, CTAs/SM the footprint allows)
// timed on the same arguments as the plan's own policy — the measurements the sm90 rows cite.
// Like the sm90 rows, the candidates take their K/V by TMA (DecodePolicy::tma) where the call
// allows it.
template <int W, int S, int CtasPerSm>
struct Candidate {
  constexpr DecodePolicy operator()() const {
    // partition_size only has to be a multiple of the tile; the launch takes the plan's partitions.
    DecodePolicy p{Agent::sm80, W, 16 * W, S, 16 * W, CtasPerSm, tuning::sm90::kSmemCap, "bench candidate"};
    p.tma = true;
    return p;
  }
};

using LaunchFn = Status (*)(const kernels::decode::DecodeArgs&, KVLayout, cudaStream_t);

template <class G, int D>
Status launch_candidate(const kernels::decode::DecodeArgs& a, KVLayout a_layout, cudaStream_t stream) {
  return kernels::decode::launch_decode<G, DType::bf16, D>(a, a_layout, 90, stream);
}

struct PolicyCandidate {
  int head_dim, warps, stages, ctas_per_sm;
  LaunchFn launch;
  std::string name() const {
    return "w" + std::to_string(warps) + "s" + std::to_string(stages) + "c" + std::to_string(ctas_per_sm);
  }
};

// --guard-ab's two arms: the device's sm90 row with and without the input guard. The guarded arm
// flags into g_guard_flags (a device buffer of kInputErrorWords; never written on these valid inputs).
int* g_guard_flags = nullptr;
template <int D, bool kGuard>
Status launch_guard_arm(const kernels::decode::DecodeArgs& a, KVLayout a_layout, cudaStream_t stream) {
  using G = policy_getter<DecodeSelector<DType::bf16, D>, 90>;
  return kernels::decode::launch_decode<G, DType::bf16, D, kGuard>(a, a_layout, 90, stream, g_guard_flags);
}
LaunchFn guard_arm(int head_dim, bool guarded) {
  if (head_dim == 128) return guarded ? &launch_guard_arm<128, true> : &launch_guard_arm<128, false>;
  return guarded ? &launch_guard_arm<256, true> : &launch_guard_arm<256, false>;
}

#define MUH_CAND(D, W, S, C) PolicyCandidate{D, W, S, C, &launch_candidate<Candidate<W, S, C>, D>}
const PolicyCandidate kCandidates[] = {
    MUH_CAND(128, 4, 3, 2), MUH_CAND(128, 2, 6, 2), MUH_CAND(128, 1, 12, 2), MUH_CAND(128, 4, 6, 1),
    MUH_CAND(128, 8, 3, 1), MUH_CAND(128, 4, 2, 3), MUH_CAND(256, 4, 3, 1), MUH_CAND(256, 2, 6, 1),
    MUH_CAND(256, 1, 12, 1), MUH_CAND(256, 2, 3, 2), MUH_CAND(256, 1, 6, 2), MUH_CAND(128, 6, 2, 2),
    MUH_CAND(256, 4, 2, 1), MUH_CAND(256, 5, 2, 1), MUH_CAND(256, 6, 2, 1), MUH_CAND(256, 3, 2, 2),
};
#undef MUH_CAND

struct Cell {
  std::string config;
  std::string layout;
  int head_dim, q_heads, kv_heads, batch, kv_len;
  int splits, ctas, partition;
  bool forced;
  bool l2_evict_first;
  double median_us, min_us, max_us, tbps, model_us;
  double fi_tbps = 0, fi_us = 0;
  // The size-matched read floor (bench::streaming_read_us over the cell's K/V bytes after the
  // same flush): .cs (evict-first) and .cg loads; 0 where not measured (sweeps).
  double floor_us = 0, floor_cg_us = 0;
};

// Where a cell's pages live. All three keep K and V in one 34 GB allocation (2 × 524288 pages
// of 32 KB, filled once with random bf16) and put each sequence's pages in random order:
//   interleaved  FlashInfer's cache tensor [num_pages, 2, page, kv_heads, head_dim]: the K and V
//                of a page are neighbours; the cell's pages are a random permutation of its own
//                batch × kv_len / 16 pages (block ids 2p, v_cache = k_cache + one page);
//   split        vLLM's pair of tensors [2][num_pages, page, ...]: a K region then a V region of
//                the cell's own pages, each in random order;
//   spread       K and V in the two 16 GiB halves, the cell's pages drawn at random from all
//                524288 (every cell's pages spread over the whole allocation).
enum class PoolLayout { interleaved, split, spread };
const char* pool_layout_name(PoolLayout l) {
  return l == PoolLayout::interleaved ? "interleaved" : l == PoolLayout::split ? "split" : "spread";
}

struct Pool {
  bench::DeviceMemory kv, q, out, table, lens, ws;
  KVLayout kv_layout = KVLayout::nhd;  // --kv-layout: the kernel's cache layout (same page bytes)
  int l2_evict_first = -1;             // --l2-hint: -1 the plan's choice, 0 off, 1 on
  int wide_row = -1;                   // --wide-row: PlanOptions::wide_row
  std::vector<int> perm_all;  // a random order of all max_pages pages (spread)
  Variant variant;            // --variant: the cells' attention variant (its arrays: per_head)
  std::string variant_text;
  bench::VariantArrays per_head{32};  // (the largest config's q heads)
  KVQuant kv_quant;           // --kv-dtype: the cache's element type of the cell being timed
  long long max_pages = 0;
  std::size_t page_bytes = 0;
};

double cell_bytes(const DecodeConfig& c, int batch, int len, int kv_elem = 2) {
  const double kv = 2.0 * batch * static_cast<double>(len) * c.kv_heads * c.head_dim * kv_elem;
  const double qo = 2.0 * batch * static_cast<double>(c.q_heads) * c.head_dim * 2;
  return kv + qo;
}

Cell run_cell(Pool& pool, const HardwareCapability& hw, const DecodeConfig& c, int batch, int len, int force_splits,
              int iters, bench::L2Flusher& flusher, cudaStream_t stream, const PolicyCandidate* cand = nullptr,
              PoolLayout layout = PoolLayout::interleaved, bool with_floor = false, LaunchFn arm = nullptr) {
  const int blocks = len / kPage;
  const int kv_elem = kv_elem_size(pool.kv_quant.dtype, 2);
  const std::size_t page_bytes = std::size_t(kPage) * c.kv_heads * c.head_dim * kv_elem;  // ≤ pool.page_bytes
  const long long n = static_cast<long long>(batch) * blocks;  // the cell's pages
  std::vector<int> table(static_cast<std::size_t>(n));
  unsigned char* base = pool.kv.as<unsigned char>();
  const void* k_cache = base;
  const void* v_cache = nullptr;
  long long num_pages = 0;
  if (layout == PoolLayout::spread) {
    for (long long i = 0; i < n; ++i) table[i] = pool.perm_all[i];
    v_cache = base + static_cast<std::size_t>(pool.max_pages) * pool.page_bytes;
    num_pages = pool.max_pages;
  } else {
    std::iota(table.begin(), table.end(), 0);
    std::mt19937 rng(static_cast<unsigned>(batch * 100003 + len));
    std::shuffle(table.begin(), table.end(), rng);
    if (layout == PoolLayout::interleaved) {
      for (auto& id : table) id *= 2;
      v_cache = base + page_bytes;
      num_pages = 2 * n;
    } else {
      v_cache = base + static_cast<std::size_t>(n) * page_bytes;
      num_pages = n;
    }
  }
  std::vector<int> lens(batch, len);
  bench::cuda_check(cudaMemcpy(pool.table.p, table.data(), table.size() * 4, cudaMemcpyHostToDevice), "table");
  bench::cuda_check(cudaMemcpy(pool.lens.p, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice), "lens");

  DecodeParams p;
  p.dtype = DType::bf16;
  p.layout = pool.kv_layout;
  p.q = pool.q.p;
  p.k_cache = k_cache;
  p.v_cache = v_cache;
  p.out = pool.out.p;
  p.block_table = pool.table.as<int>();
  p.seq_lens = pool.lens.as<int>();
  p.num_seqs = batch;
  p.num_q_heads = c.q_heads;
  p.num_kv_heads = c.kv_heads;
  p.head_dim = c.head_dim;
  p.page_size = kPage;
  p.num_pages = static_cast<int>(num_pages);
  p.max_blocks_per_seq = blocks;
  p.max_seq_len = len;
  p.variant = pool.variant;
  p.kv = pool.kv_quant;
  // A candidate launches its own kernel with the plan's arguments, made once (on the first call,
  // after the workspace has grown to the plan's).
  kernels::decode::DecodeArgs args{};
  DecodeLauncher launch;
  if (cand || arm)
    launch = [&, made = false](const DecodePlan& plan) mutable {
      if (!made) args = detail::make_decode_args(p, plan, pool.ws.p);
      made = true;
      return (arm ? arm : cand->launch)(args, p.layout, stream);
    };
  const TimedDecode timed = time_decode(p, hw, PlanOptions{-1, force_splits, false, pool.l2_evict_first, pool.wide_row},
                                        pool.ws, flusher, stream, iters, 3, launch);
  const DecodePlan& plan = timed.plan;
  const std::vector<double>& us = timed.us;
  Cell cell;
  cell.config = cand ? std::string(c.name) + "_" + cand->name() : std::string(c.name);
  if (!pool.variant_text.empty()) cell.config += "[" + pool.variant_text + "]";
  if (is_fp8(pool.kv_quant.dtype)) cell.config += "[" + std::string(kv_dtype_name(pool.kv_quant.dtype)) + "]";
  cell.layout = pool_layout_name(layout);
  cell.head_dim = c.head_dim;
  cell.q_heads = c.q_heads;
  cell.kv_heads = c.kv_heads;
  cell.batch = batch;
  cell.kv_len = len;
  cell.splits = plan.num_splits;
  cell.ctas = plan.ctas;
  cell.partition = plan.partition_tokens;
  cell.forced = force_splits > 0;
  cell.l2_evict_first = plan.l2_evict_first;
  cell.median_us = bench::median(us);
  cell.min_us = us.front();
  cell.max_us = us.back();
  cell.tbps = cell_bytes(c, batch, len, kv_elem) / (cell.median_us * 1e-6) / 1e12;
  cell.model_us = plan.est_seconds * 1e6;
  if (with_floor) {
    // The cell's K/V bytes start at the pool's base (interleaved, split); spread cells read the
    // same number of bytes from there.
    const std::size_t kv = 2 * static_cast<std::size_t>(n) * page_bytes;
    auto before = [&] { flusher.flush(stream); };
    cell.floor_us = bench::streaming_read_us(base, kv, 16, iters, stream, before, true);
    cell.floor_cg_us = bench::streaming_read_us(base, kv, 16, iters, stream, before, false);
  }
  return cell;
}

// One --only cell, "NAME:BATCH:KV_LEN" with NAME the config's prefix (hd128, hd256, kv1): its
// config is null when the text is not a cell the pool can hold (batch 1..2048, kv_len a positive
// multiple of the page, at most the largest grid cell's tokens × heads); error says why.
struct OnlyCell {
  const DecodeConfig* config = nullptr;
  int batch = 0, kv_len = 0;
  std::string error;
};

OnlyCell parse_only(const std::string& v) {
  OnlyCell r;
  char name[16] = {};
  char tail = 0;
  if (std::sscanf(v.c_str(), "%15[a-z0-9]:%d:%d%c", name, &r.batch, &r.kv_len, &tail) != 3) {
    r.error = "expected NAME:BATCH:KV_LEN (e.g. hd128:1:32768), got '" + v + "'";
    return r;
  }
  const std::string prefix = std::string(name) + "_";
  const DecodeConfig* cfg = nullptr;
  for (const auto& c : kConfigs)
    if (std::string(c.name).rfind(prefix, 0) == 0) cfg = &c;
  for (const auto& c : kProbeConfigs)
    if (std::string(c.name).rfind(prefix, 0) == 0) cfg = &c;
  if (cfg == nullptr)
    r.error = "unknown config '" + std::string(name) + "' in '" + v + "' (hd128, hd256 or kv1)";
  else if (r.batch < 1 || r.batch > 2048)
    r.error = "batch must be 1..2048 in '" + v + "'";
  else if (r.kv_len < kPage || r.kv_len % kPage != 0)
    r.error = "kv_len must be a positive multiple of " + std::to_string(kPage) + " in '" + v + "'";
  else if (static_cast<long long>(r.batch) * r.kv_len * cfg->kv_heads > 256LL * 32768 * 8)
    r.error = "'" + v + "' holds more K/V than the largest grid cell (256 x 32768 tokens x 8 heads)";
  else
    r.config = cfg;
  return r;
}

// One timed cell, as it finishes (stderr: the progress of a long run).
void print_progress(const Cell& c) {
  std::fprintf(stderr, "  %s batch %3d kv %5d: %8.1f us  %.2f TB/s  (splits %d%s)", c.config.c_str(), c.batch,
               c.kv_len, c.median_us, c.tbps, c.splits, c.l2_evict_first ? ", evict-first" : "");
  if (c.floor_us > 0) std::fprintf(stderr, "  read floor %.1f us (.cg %.1f)", c.floor_us, c.floor_cg_us);
  std::fprintf(stderr, "\n");
}

// One markdown table per config over the grid's batches × lengths; `cell` prints the cell of
// `cells` at that place (nullptr where the run has none), with its trailing " |". `lead` goes
// before each table's header.
void print_grid_tables(const std::vector<Cell>& cells, const char* lead, const std::function<void(const Cell*)>& cell) {
  for (int ci = 0; ci < 2; ++ci) {
    std::printf("%s| %s | 512 | 2048 | 8192 | 32768 |\n|---|---|---|---|---|\n", lead, kConfigs[ci].name);
    for (int bi = 0; bi < 4; ++bi) {
      std::printf("| batch %d |", kBatches[bi]);
      for (int li = 0; li < 4; ++li) {
        const Cell* c = nullptr;
        for (const Cell& x : cells)
          if (x.config == kConfigs[ci].name && x.batch == kBatches[bi] && x.kv_len == kLens[li]) c = &x;
        cell(c);
      }
      std::printf("\n");
    }
  }
}

// --guard-ab (see the top of the file): one row per cell.
struct GuardAbRow {
  std::string config;
  int batch, kv_len, splits;
  double unguarded_us, guarded_us, control_us;  // control: the unguarded arm timed again (A/A)
  bool identical;
};
constexpr int kGuardAbRounds = 6;  // two rotations of the three arms

void run_guard_ab(const BenchDecodeOptions& o, Pool& pool, const HardwareCapability& hw, bench::L2Flusher& flusher,
                  cudaStream_t stream, const std::string& stem) {
  if (hw.compute_capability < 90) throw UsageError("muh bench decode --guard-ab: needs an sm_90 device (the sm90 row)");
  bench::DeviceMemory flags;
  flags.reset(kInputErrorWords * sizeof(int));
  bench::cuda_check(cudaMemset(flags.p, 0, flags.n), "guard flags");
  g_guard_flags = flags.as<int>();
  std::vector<std::tuple<const DecodeConfig*, int, int>> grid;
  for (const std::string& v : o.only) {
    const OnlyCell oc = parse_only(v);
    grid.emplace_back(oc.config, oc.batch, oc.kv_len);
  }
  if (o.only.empty())
    for (const auto& c : kConfigs)
      for (int b : kBatches)
        for (int l : kLens) grid.emplace_back(&c, b, l);
  std::vector<GuardAbRow> rows;
  for (const auto& [cfg, batch, len] : grid) {
    const std::size_t out_bytes = std::size_t(batch) * cfg->q_heads * cfg->head_dim * 2;
    // Arms 0 = unguarded, 1 = guarded, 2 = unguarded again (the A/A control: what the same
    // kernel reads as a "cost" in this method, i.e. the noise the guard's figure is judged
    // against). The order rotates every round, so that no arm always runs first after the
    // cell's table upload.
    std::vector<double> us[3];
    std::vector<unsigned char> bytes[3];
    int splits = 0;
    for (int round = 0; round < kGuardAbRounds; ++round)
      for (int k = 0; k < 3; ++k) {
        const int arm = (round + k) % 3;
        const Cell c = run_cell(pool, hw, *cfg, batch, len, o.splits, o.iters, flusher, stream, nullptr,
                                PoolLayout::interleaved, false, guard_arm(cfg->head_dim, arm == 1));
        us[arm].push_back(c.median_us);
        splits = c.splits;
        bytes[arm].resize(out_bytes);
        bench::cuda_check(cudaMemcpy(bytes[arm].data(), pool.out.p, out_bytes, cudaMemcpyDeviceToHost), "out");
      }
    GuardAbRow r{cfg->name,           batch, len, splits, bench::median(us[0]), bench::median(us[1]),
                 bench::median(us[2]), bytes[0] == bytes[1] && bytes[0] == bytes[2]};
    std::fprintf(stderr, "  %s batch %3d kv %5d: unguarded %8.1f us, guarded %8.1f us (%+.2f %%; A/A %+.2f %%)%s\n",
                 r.config.c_str(), batch, len, r.unguarded_us, r.guarded_us, 100.0 * (r.guarded_us / r.unguarded_us - 1),
                 100.0 * (r.control_us / r.unguarded_us - 1), r.identical ? "" : "  OUTPUTS DIFFER");
    rows.push_back(r);
  }
  int host[kInputErrorWords] = {};
  bench::cuda_check(cudaMemcpy(host, flags.p, sizeof host, cudaMemcpyDeviceToHost), "guard flags");
  const std::uint32_t flagged = take_input_errors(host);

  std::printf("\ninput guard A/B (sm90 row, bf16, %s, page 16, cold L2; per arm the median over %d rotated rounds"
              " of the medians of %d calls; A/A = the unguarded arm against itself):\n"
              "| cell | splits | unguarded µs | guarded µs | guarded / unguarded − 1 | A/A | bitwise identical |\n"
              "|---|---|---|---|---|---|---|\n", o.kv_layout.c_str(), kGuardAbRounds, o.iters);
  double sum = 0, worst = -1e9, sum_aa = 0, worst_aa = 0;
  bool all_identical = true;
  for (const GuardAbRow& r : rows) {
    const double d = 100.0 * (r.guarded_us / r.unguarded_us - 1);
    const double aa = 100.0 * (r.control_us / r.unguarded_us - 1);
    sum += d;
    worst = std::max(worst, d);
    sum_aa += aa;
    worst_aa = std::max(worst_aa, std::fabs(aa));
    all_identical = all_identical && r.identical;
    std::printf("| %s b%d kv%d | %d | %.1f | %.1f | %+.2f %% | %+.2f %% | %s |\n", r.config.c_str(), r.batch, r.kv_len,
                r.splits, r.unguarded_us, r.guarded_us, d, aa, r.identical ? "yes" : "NO");
  }
  std::printf("mean %+.2f %%, worst %+.2f %% over %zu cells (A/A: mean %+.2f %%, largest |A/A| %.2f %%); outputs %s;"
              " flags written: %s\n",
              sum / rows.size(), worst, rows.size(), sum_aa / rows.size(), worst_aa,
              all_identical ? "bitwise identical in every cell" : "DIFFER",
              flagged ? describe_input_errors(flagged).c_str() : "none");
  std::ofstream csv(stem + "-guard-ab.csv");
  if (!csv) throw UsageError("muh bench decode: cannot write " + stem + "-guard-ab.csv");
  csv << "config,layout,batch,kv_len,splits,unguarded_us,guarded_us,control_us,ratio,control_ratio,bitwise_identical\n";
  for (const GuardAbRow& r : rows)
    csv << r.config << ',' << o.kv_layout << ',' << r.batch << ',' << r.kv_len << ',' << r.splits << ','
        << r.unguarded_us << ',' << r.guarded_us << ',' << r.control_us << ',' << r.guarded_us / r.unguarded_us << ','
        << r.control_us / r.unguarded_us << ',' << int(r.identical) << '\n';
  std::fprintf(stderr, "wrote %s-guard-ab.csv\n", stem.c_str());
  g_guard_flags = nullptr;
}

void run_bench_decode(const BenchDecodeOptions& o) {
  if (o.grid == "seed") return run_bench_decode_seed(o);
  if (!o.emulate.empty())
    throw UsageError("muh bench decode: --emulate " + o.emulate + " runs the seed's cells: add --grid seed");
  if (o.no_portable) throw UsageError("muh bench decode: --no-portable is an option of --grid seed --emulate bi-v100");
  const std::string& out_dir = o.out;
  const int iters = o.iters;
  if (o.splits > 0 && o.only.empty()) throw UsageError("muh bench decode: --splits needs --only");
  if (!o.variant.empty() && o.only.empty()) throw UsageError("muh bench decode: --variant needs --only");
  const Variant variant = parse_variant(o.variant);  // (before the device: a bad list is exit 2)
  // --kv-dtype: the cache types each --only cell is timed with (before the device: exit 2).
  const std::vector<KVDType> kv_types = parse_kv_types(o);
  if (o.kv_dtype != "auto" && o.only.empty())
    throw UsageError("muh bench decode: --kv-dtype needs --only (or --grid seed)");
  const bool split_sweep = !o.no_sweep && o.only.empty();
  const bool policy_sweep = o.policy_sweep;
  const BenchDevice device = open_bench_device("muh bench decode");
  const HardwareCapability& hw = device.hw;
  const int sm_clock_khz = device.sm_clock_khz, mem_clock_khz = device.mem_clock_khz;
  cudaStream_t stream;
  bench::cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");

  std::fprintf(stderr, "muh bench decode: %s (sm_%d, %d SMs), %d timed iterations per cell\n", hw.name,
               hw.compute_capability, hw.sm_count, iters);
  // The ceiling first, on an idle GPU: a streaming read of 8 GiB with 16 CTAs per SM.
  const double ceiling = bench::streaming_read_tbps(std::size_t(8) << 30, 16, 20, stream);
  std::fprintf(stderr, "streaming-read ceiling: %.2f TB/s\n", ceiling);

  // One pool for all cells: the largest cell (256 × 32768 tokens) has 524288 pages of
  // 16 tokens × 8 heads × 128 (or × 4 × 256) bf16 = 32 KB, i.e. 17.2 GB each of K and V.
  Pool pool;
  pool.kv_layout = o.kv_layout == "vllm" ? KVLayout::vllm : KVLayout::nhd;
  pool.l2_evict_first = l2_hint_option(o.l2_hint);
  pool.wide_row = wide_row_option(o.wide_row);
  pool.max_pages = 256LL * 32768 / kPage;
  pool.page_bytes = std::size_t(kPage) * 8 * 128 * 2;
  const std::size_t kv_bytes = 2 * static_cast<std::size_t>(pool.max_pages) * pool.page_bytes;
  pool.kv.reset(kv_bytes);
  bench::fill_bf16_uniform(pool.kv.as<std::uint16_t>(), kv_bytes / 2, 1, stream);
  pool.q.reset(std::size_t(256) * 32 * 128 * 2);
  pool.out.reset(pool.q.n);
  bench::fill_bf16_uniform(pool.q.as<std::uint16_t>(), pool.q.n / 2, 3, stream);
  pool.table.reset(static_cast<std::size_t>(pool.max_pages) * 4);
  pool.lens.reset(2048 * 4);  // --only probe cells go up to batch 2048
  pool.perm_all.resize(pool.max_pages);
  std::iota(pool.perm_all.begin(), pool.perm_all.end(), 0);
  std::mt19937 rng(2026);
  std::shuffle(pool.perm_all.begin(), pool.perm_all.end(), rng);
  if (variant_kind(variant) == VariantKind::general) {
    pool.variant = variant;
    pool.variant_text = o.variant;
    pool.per_head.bind(pool.variant);
  }
  bench::cuda_check(cudaStreamSynchronize(stream), "pool fill");
  bench::L2Flusher flusher;
  if (o.guard_ab) {
    run_guard_ab(o, pool, hw, flusher, stream,
                 out_dir + "/decode-" + bench::device_slug(hw.name) + "-" + bench::utc_date());
    cudaStreamDestroy(stream);
    return;
  }

  std::vector<Cell> cells;
  // --only: exactly the listed cells, in order (probe configs included).
  for (const std::string& v : o.only) {
    const OnlyCell oc = parse_only(v);
    const DecodeConfig* cfg = oc.config;
    const int b = oc.batch, l = oc.kv_len;
    for (KVDType kv : kv_types) {
      pool.kv_quant = KVQuant{kv, 1.f, 1.f};
      Cell c = run_cell(pool, hw, *cfg, b, l, o.splits, iters, flusher, stream, nullptr, PoolLayout::interleaved, true);
      for (int ci = 0; ci < 2; ++ci)
        for (int bi = 0; bi < 4; ++bi)
          for (int li = 0; li < 4; ++li)
            if (cfg == &kConfigs[ci] && b == kBatches[bi] && l == kLens[li] && !is_fp8(kv)) {
              c.fi_tbps = kFlashInferTbps[ci][bi][li];
              c.fi_us = kFlashInferUs[ci][bi][li];
            }
      print_progress(c);
      cells.push_back(c);
    }
  }
  pool.kv_quant = KVQuant{};
  if (o.only.empty()) {
    for (int ci = 0; ci < 2; ++ci)
      for (int bi = 0; bi < 4; ++bi)
        for (int li = 0; li < 4; ++li) {
          Cell c = run_cell(pool, hw, kConfigs[ci], kBatches[bi], kLens[li], 0, iters, flusher, stream, nullptr,
                            PoolLayout::interleaved, true);
          c.fi_tbps = kFlashInferTbps[ci][bi][li];
          c.fi_us = kFlashInferUs[ci][bi][li];
          print_progress(c);
          cells.push_back(c);
        }
  }
  // The same grid with the cache laid out as vLLM's K/V pair and spread over the whole pool.
  std::vector<Cell> layouts;
  if (!o.no_layouts && o.only.empty()) {
    for (PoolLayout l : {PoolLayout::split, PoolLayout::spread})
      for (int ci = 0; ci < 2; ++ci)
        for (int bi = 0; bi < 4; ++bi)
          for (int li = 0; li < 4; ++li) {
            Cell c = run_cell(pool, hw, kConfigs[ci], kBatches[bi], kLens[li], 0, iters, flusher, stream, nullptr, l);
            c.fi_tbps = kFlashInferTbps[ci][bi][li];
            c.fi_us = kFlashInferUs[ci][bi][li];
            layouts.push_back(c);
          }
  }
  std::vector<Cell> sweep;
  if (split_sweep) {
    for (int ci = 0; ci < 2; ++ci)
      for (int batch : {1, 16})
        for (int len : {512, 2048, 8192, 32768})
          for (int s : {1, 2, 4, 8, 16, 32, 64, 128}) {
            if (s > len / 16 || static_cast<long long>(s) * batch * kConfigs[ci].kv_heads > 8192) continue;
            sweep.push_back(run_cell(pool, hw, kConfigs[ci], batch, len, s, iters, flusher, stream));
          }
  }

  // Candidate policies on four cells per head dim: two V1 (batch 64 × 8192, batch 256 × 2048)
  // and two V2 (batch 1 × 32768, batch 16 × 8192) with the plan's own split counts; then the two
  // V2 cells with forced split counts 1 … 64 (psplit), whose best is the candidate's figure
  // under a plan fitted to it.
  std::vector<Cell> psweep, psplit;
  const int kSweepCells[4][2] = {{64, 8192}, {256, 2048}, {1, 32768}, {16, 8192}};
  if (policy_sweep) {
    for (int ci = 0; ci < 2; ++ci)
      for (const PolicyCandidate& cand : kCandidates) {
        if (cand.head_dim != kConfigs[ci].head_dim) continue;
        for (const auto& bl : kSweepCells)
          psweep.push_back(run_cell(pool, hw, kConfigs[ci], bl[0], bl[1], 0, iters, flusher, stream, &cand));
        for (const auto& bl : {kSweepCells[2], kSweepCells[3]})
          for (int s : {1, 2, 4, 8, 16, 32, 64})
            psplit.push_back(run_cell(pool, hw, kConfigs[ci], bl[0], bl[1], s, iters, flusher, stream, &cand));
      }
  }

  // ---- Table -----------------------------------------------------------------------------------
  std::printf("\nmuh paged decode on %s (sm_%d, %d SMs; SM clock %d MHz max, memory %d MHz) — bf16, page 16,\n"
              "random page order, cold L2, median of %d; effective TB/s (median µs) [× FlashInfer]\n"
              "streaming-read ceiling (8 GiB, same run): %.2f TB/s\n",
              hw.name, hw.compute_capability, hw.sm_count, sm_clock_khz / 1000, mem_clock_khz / 1000, iters, ceiling);
  auto bandwidth_cell = [](const Cell* c) {
    if (c == nullptr)
      std::printf(" — |");
    else
      std::printf(" %.2f (%.0f µs) [%.2f×] |", c->tbps, c->median_us, c->fi_tbps > 0 ? c->tbps / c->fi_tbps : 0.0);
  };
  print_grid_tables(cells, "\n", bandwidth_cell);
  // The size-matched floor: a pure read of each cell's K/V bytes under the same method. Small
  // cells cannot reach the 8 GiB ceiling (launch, ramp and drain are fixed costs). .cs loads
  // allocate evict-first in L2, as the ceiling's do; .cg loads evict normally (the K/V copies
  // without the evict-first hint).
  std::printf("\nsize-matched read floor (a streaming read of the cell's K/V bytes after the same flush): "
              "floor µs with .cs / .cg loads, and muh ÷ floor(.cs)\n");
  print_grid_tables(cells, "", [](const Cell* c) {
    if (c == nullptr || c->floor_us <= 0)
      std::printf(" — |");
    else
      std::printf(" %.1f / %.1f [%.2f] |", c->floor_us, c->floor_cg_us, c->median_us / c->floor_us);
  });
  for (const char* lname : {"split", "spread"}) {
    if (layouts.empty()) break;
    std::printf("\ncache layout '%s' (see the CSV's 'layout' column): TB/s (µs) [× FlashInfer]\n", lname);
    std::vector<Cell> of_layout;
    for (const Cell& c : layouts)
      if (c.layout == lname) of_layout.push_back(c);
    print_grid_tables(of_layout, "", bandwidth_cell);
  }
  std::printf("\nplan per cell (splits × partition tokens → CTAs; model µs):\n");
  for (const Cell& c : cells)
    std::printf("  %s b%-3d kv%-5d: %3d × %5d → %5d CTAs; model %.1f µs, measured %.1f µs (min %.1f, max %.1f)\n",
                c.config.c_str(), c.batch, c.kv_len, c.splits, c.partition, c.ctas, c.model_us, c.median_us, c.min_us,
                c.max_us);
  if (!sweep.empty()) {
    std::printf("\nforced split counts (µs, median; * = the plan's choice):\n");
    for (int ci = 0; ci < 2; ++ci)
      for (int batch : {1, 16})
        for (int len : {512, 2048, 8192, 32768}) {
          int plan_splits = 0;
          for (const Cell& c : cells)
            if (c.config == kConfigs[ci].name && c.batch == batch && c.kv_len == len) plan_splits = c.splits;
          std::printf("  %s b%-3d kv%-5d:", kConfigs[ci].name, batch, len);
          for (const Cell& c : sweep)
            if (c.config == kConfigs[ci].name && c.batch == batch && c.kv_len == len)
              std::printf(" %d:%.1f%s", c.splits, c.median_us, c.splits == plan_splits ? "*" : "");
          std::printf("   (plan %d)\n", plan_splits);
        }
  }

  if (!psweep.empty()) {
    std::printf("\npolicy sweep (sm80 agent, bf16 NHD; µs median / TB/s): warps w, stages s, CTAs/SM c\n");
    for (std::size_t i = 0; i < psweep.size(); i += 4) {
      std::printf("  %-24s", psweep[i].config.c_str());
      for (std::size_t k = i; k < i + 4 && k < psweep.size(); ++k)
        std::printf("  b%d kv%d: %7.1f / %.2f", psweep[k].batch, psweep[k].kv_len, psweep[k].median_us, psweep[k].tbps);
      // The best forced split count of this candidate on each V2 cell.
      for (const auto& bl : {kSweepCells[2], kSweepCells[3]}) {
        const Cell* best = nullptr;
        for (const Cell& c : psplit)
          if (c.config == psweep[i].config && c.batch == bl[0] && c.kv_len == bl[1] &&
              (best == nullptr || c.median_us < best->median_us))
            best = &c;
        if (best != nullptr) std::printf("  | b%d kv%d best %d splits: %7.1f", bl[0], bl[1], best->splits, best->median_us);
      }
      std::printf("\n");
    }
  }

  // ---- Files ---------------------------------------------------------------------------------------
  const std::string stem = out_dir + "/decode-" + bench::device_slug(hw.name) + "-" + bench::utc_date();
  {
    std::ofstream csv(stem + ".csv");
    if (!csv) throw UsageError("muh bench decode: cannot write " + stem + ".csv");
    csv << "kind,layout,config,head_dim,q_heads,kv_heads,batch,kv_len,splits,partition_tokens,ctas,median_us,min_us,max_us,"
           "tbps,model_us,flashinfer_tbps,flashinfer_us,ratio_vs_flashinfer,ceiling_tbps,fraction_of_ceiling,l2_evict_first,"
           "read_floor_us,read_floor_cg_us\n";
    auto row = [&](const char* kind, const Cell& c) {
      csv << kind << ',' << c.layout << ',' << c.config << ',' << c.head_dim << ',' << c.q_heads << ',' << c.kv_heads << ',' << c.batch
          << ',' << c.kv_len << ',' << c.splits << ',' << c.partition << ',' << c.ctas << ',' << c.median_us << ','
          << c.min_us << ',' << c.max_us << ',' << c.tbps << ',' << c.model_us << ',' << c.fi_tbps << ',' << c.fi_us
          << ',' << (c.fi_tbps > 0 ? c.tbps / c.fi_tbps : 0) << ',' << ceiling << ',' << c.tbps / ceiling << ',' << int(c.l2_evict_first)
          << ',' << c.floor_us << ',' << c.floor_cg_us << '\n';
    };
    for (const Cell& c : cells) row("grid", c);
    for (const Cell& c : layouts) row("grid_layout", c);
    for (const Cell& c : sweep) row("forced_splits", c);
    for (const Cell& c : psweep) row("policy_sweep", c);
    for (const Cell& c : psplit) row("policy_forced_splits", c);
  }
  {
    nlohmann::json j;
    j["device"] = device_json(device);
    j["date_utc"] = bench::utc_date();
    j["muh_version"] = MUH_VERSION_STRING;
    j["cuda_architectures"] = MUH_CUDA_ARCHITECTURES_STRING;
    j["method"] = {{"dtype", "bf16"},
                   {"layout", o.kv_layout},
                   {"page_size", kPage},
                   {"page_order", "random permutation of the cell's own batch x kv_len / 16 pages"},
                   {"cache_layout", "interleaved: FlashInfer's [num_pages, 2, page, kv_heads, head_dim] "
                                    "(cells_other_layouts: split = vLLM's K/V pair, spread = pages drawn "
                                    "from a 34 GB pool)"},
                   {"l2", "256 MB buffer overwritten before each timed call (untimed)"},
                   {"statistic", "median of CUDA-event-timed calls after 3 warm-up calls"},
                   {"iterations", iters},
                   {"bytes", "K and V of all tokens + q + out"}};
    j["ceiling_tbps"] = ceiling;
    j["ceiling_method"] = "streaming read of 8 GiB, 16-byte loads, 16 CTAs x 256 threads per SM, median of 20";
    j["read_floor_method"] = "per grid cell: the same streaming read over the cell's K/V bytes, after the same "
                             "256 MB flush, median of --iters; ld.global.cs (read_floor_us) and .cg (read_floor_cg_us)";
    auto to_json = [&](const Cell& c) {
      return nlohmann::json{{"config", c.config},         {"layout", c.layout},         {"head_dim", c.head_dim},   {"q_heads", c.q_heads},
                            {"kv_heads", c.kv_heads},     {"batch", c.batch},         {"kv_len", c.kv_len},
                            {"splits", c.splits},         {"partition_tokens", c.partition}, {"l2_evict_first", c.l2_evict_first},
                            {"ctas", c.ctas},             {"median_us", c.median_us}, {"min_us", c.min_us},
                            {"max_us", c.max_us},         {"tbps", c.tbps},           {"model_us", c.model_us},
                            {"flashinfer_tbps", c.fi_tbps}, {"flashinfer_us", c.fi_us},
                            {"ratio_vs_flashinfer", c.fi_tbps > 0 ? c.tbps / c.fi_tbps : 0},
                            {"read_floor_us", c.floor_us},  {"read_floor_cg_us", c.floor_cg_us}};
    };
    for (const Cell& c : cells) j["cells"].push_back(to_json(c));
    for (const Cell& c : layouts) j["cells_other_layouts"].push_back(to_json(c));
    for (const Cell& c : sweep) j["forced_splits"].push_back(to_json(c));
    for (const Cell& c : psweep) j["policy_sweep"].push_back(to_json(c));
    for (const Cell& c : psplit) j["policy_forced_splits"].push_back(to_json(c));
    std::ofstream js(stem + ".json");
    if (!js) throw UsageError("muh bench decode: cannot write " + stem + ".json");
    js << j.dump(2) << '\n';
  }
  std::fprintf(stderr, "wrote %s.csv and %s.json\n", stem.c_str(), stem.c_str());
  cudaStreamDestroy(stream);
}

}  // namespace

std::vector<KVDType> parse_kv_types(const BenchDecodeOptions& o) {
  std::vector<KVDType> kv_types;
  const std::string& list = o.kv_dtype;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    const std::string name = list.substr(at, comma - at);
    const auto t = parse_kv_dtype(name);
    if (!t)
      throw UsageError("muh bench decode: --kv-dtype: unknown cache type '" + name +
                       "' (auto, fp8_e4m3, fp8_e5m2, comma-separated)");
    kv_types.push_back(*t);
    at = comma + 1;
  }
  return kv_types;
}

void add_bench_decode(CLI::App& bench) {
  static BenchDecodeOptions o;
  CLI::App* cmd = bench.add_subcommand(
      "decode", "paged decode: bf16, page 16, hd128 32q/8kv and hd256 16q/4kv, batch {1,16,64,256} x kv_len "
                "{512..32768}, cold L2, against the streaming-read ceiling (CSV + JSON)");
  cmd->add_option("--out", o.out, "directory for decode-<device>-<date>.csv/.json")->check(CLI::ExistingDirectory);
  cmd->add_option("--iters", o.iters, "timed iterations per cell (median; at least 30)")->check(CLI::Range(30, 100000));
  cmd->add_flag("--no-split-sweep", o.no_sweep, "skip the forced-split-count cells at batch 1 and 16");
  cmd->add_flag("--no-layouts", o.no_layouts, "skip the grid's repeats with the other page placements");
  cmd->add_flag("--policy-sweep", o.policy_sweep,
                "also time candidate sm80-agent shapes (warps x stages) on four cells per head dim (the two V2 "
                "cells also with forced split counts 1..64)");
  cmd->add_option("--kv-layout", o.kv_layout, "cache layout the kernel reads: nhd (default) or vllm")
      ->check(CLI::IsMember({"nhd", "vllm"}));
  cmd->add_option("--l2-hint", o.l2_hint,
                  "L2 evict-first policy on the sm80 agent's K/V copies: auto (the plan's choice, default), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  cmd->add_option("--wide-row", o.wide_row,
                  "the target's wide decode row (12 warps x 1 stage, tuning_sm90.hpp): auto (the plan's choice, "
                  "default), on (forced: an error where the call cannot take it), off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  cmd->add_option("--splits", o.splits, "with --only: force this many partitions per sequence (0: the plan's count)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--kv-dtype", o.kv_dtype,
                  "with --only or --grid seed: the cache types to time each cell with, comma-separated (auto = "
                  "q's dtype, fp8_e4m3, fp8_e5m2; default auto)");
  cmd->add_option("--variant", o.variant,
                  "with --only: the cells' attention variant, e.g. window=4095 or softcap=30,sinks,alibi");
  cmd->add_option("--only", o.only,
                  "run only these grid cells, e.g. --only hd128:1:32768 hd256:64:8192 (no sweeps, no layout repeats)")
      ->check([](const std::string& v) { return parse_only(v).error; });
  cmd->add_flag("--guard-ab", o.guard_ab,
                "only the input guard's cost: the sm90 row with and without it on the grid (or the --only cells), "
                "interleaved, with a bitwise comparison of the outputs (needs sm_90)");
  add_bench_decode_seed_options(*cmd, o);  // --grid, --emulate
  cmd->callback([cmd] {
    o.given = given_options(*cmd);
    run_bench_decode(o);
  });
}

}  // namespace muh::cli
