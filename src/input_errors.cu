// input_errors.cu — the library's flag set per device (a __device__ array: the driver allocates
// it with the module, once per device, so no call allocates and capture is never refused) and
// the host side of the flags: messages, masks, reading and clearing (input_errors.hpp).
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <mutex>
#include <string>

#include "muh/input_errors.hpp"

namespace muh {
namespace {

__device__ int g_input_errors[kInputErrorWords];

constexpr int kMaxDevices = 64;
std::array<std::atomic<int*>, kMaxDevices> g_words{};  // the array's address per device, once known
std::mutex g_read_mu;                                   // one read-and-clear at a time

}  // namespace

const char* input_error_message(InputError e) {
  switch (e) {
    case InputError::block_id: return "block_table holds a block id outside [0, num_pages)";
    case InputError::seq_len:
      return "seq_lens holds a length outside [0, max_blocks_per_seq * page_size] (paged prefill: seqused_k outside "
             "[0, max_seqlen_k])";
    case InputError::cu_seqlens_q_start: return "cu_seqlens_q[0] is not 0";
    case InputError::cu_seqlens_q_order: return "cu_seqlens_q is not non-decreasing";
    case InputError::cu_seqlens_q_end: return "cu_seqlens_q[batch] is not total_q";
    case InputError::cu_seqlens_q_range: return "cu_seqlens_q holds an offset outside [0, total_q]";
    case InputError::seqlen_q_max: return "a q sequence (cu_seqlens_q) is longer than max_seqlen_q";
    case InputError::cu_seqlens_k_start: return "cu_seqlens_k[0] is not 0";
    case InputError::cu_seqlens_k_order: return "cu_seqlens_k is not non-decreasing";
    case InputError::cu_seqlens_k_end: return "cu_seqlens_k[batch] is not total_k";
    case InputError::cu_seqlens_k_range: return "cu_seqlens_k holds an offset outside [0, total_k]";
    case InputError::seqlen_k_max: return "a k sequence (cu_seqlens_k) is longer than max_seqlen_k";
  }
  return "unknown input error";
}

std::string describe_input_errors(std::uint32_t mask) {
  std::string s;
  for (int k = 0; k < 32; ++k) {
    if (!(mask & (1u << k))) continue;
    if (!s.empty()) s += "; ";
    s += k < kInputErrorKinds ? input_error_message(static_cast<InputError>(k))
                              : "unknown input error " + std::to_string(k);
  }
  return s;
}

Status input_errors_status(std::uint32_t mask) {
  if (mask == 0) return Status::Ok();
  return invalid_argument("bad device-side input detected by the kernels: " + describe_input_errors(mask) +
                          " (the sequences concerned were not computed; see muh/input_errors.hpp)");
}

std::uint32_t take_input_errors(volatile int* words) {
  std::uint32_t mask = 0;
  for (int k = 0; k < kInputErrorWords; ++k)
    if (words[k] != 0) {
      mask |= 1u << k;
      words[k] = 0;
    }
  return mask;
}

Status detail::library_input_errors(int** words) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) {
    cudaGetLastError();
    const bool none = e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver;
    return {none ? StatusCode::no_device : StatusCode::cuda_error,
            std::string("input-error flags: ") + (none ? "no CUDA device found" : cudaGetErrorString(e))};
  }
  if (dev < 0 || dev >= kMaxDevices)
    return {StatusCode::unsupported, "input-error flags: device " + std::to_string(dev) + " (muh serves devices 0..63)"};
  int* w = g_words[dev].load(std::memory_order_acquire);
  if (w == nullptr) {
    void* p = nullptr;
    e = cudaGetSymbolAddress(&p, g_input_errors);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return {StatusCode::cuda_error, std::string("input-error flags: ") + cudaGetErrorString(e)};
    }
    w = static_cast<int*>(p);
    g_words[dev].store(w, std::memory_order_release);
  }
  *words = w;
  return Status::Ok();
}

Status read_input_errors(cudaStream_t stream, std::uint32_t* mask) {
  if (mask == nullptr) return invalid_argument("read_input_errors: mask must not be null");
  *mask = 0;
  int* words = nullptr;
  MUH_TRY(detail::library_input_errors(&words));
  const std::lock_guard<std::mutex> lock(g_read_mu);
  int host[kInputErrorWords] = {};
  cudaError_t e = cudaMemcpyAsync(host, words, sizeof host, cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  // Clear only the words seen set: one flagged meanwhile stays for the next read.
  for (int k = 0; e == cudaSuccess && k < kInputErrorWords; ++k)
    if (host[k] != 0) {
      *mask |= 1u << k;
      e = cudaMemsetAsync(words + k, 0, sizeof(int), stream);
    }
  if (e == cudaSuccess && *mask != 0) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return {StatusCode::cuda_error, std::string("reading the input-error flags: ") + cudaGetErrorString(e)};
  }
  return Status::Ok();
}

Status check_input_errors(cudaStream_t stream) {
  std::uint32_t mask = 0;
  MUH_TRY(read_input_errors(stream, &mask));
  return input_errors_status(mask);
}

}  // namespace muh
