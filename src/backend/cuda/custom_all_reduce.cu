// The one-shot all-reduce kernel of CustomAllReduce (design in custom_all_reduce.h).
#include <cuda_bf16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/custom_all_reduce.h"
#include "backend/cuda/custom_all_reduce_layout.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/pdl_launch.h"

namespace minivllm::cuda {
namespace {

constexpr int kThreads = CustomAllReduce::kThreads;
constexpr int kMaxRanks = CustomAllReduce::kMaxRanks;
constexpr int kMaxBlocks = CustomAllReduce::kMaxBlocks;
constexpr int kVecs = CustomAllReduce::kVecsPerThread;
constexpr int64_t kTileBytes = static_cast<int64_t>(CustomAllReduce::kTileBytes);

__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void st_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// A peer's data: not cached in L1 (the same addresses hold new data every other call).
__device__ __forceinline__ uint4 ld_volatile16(const void* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

// Calls arrived() until it returns true: a peer's flag or data has landed. A peer that died never
// writes, so every 256 polls the host's abort flag (CustomAllReduce::abort) is read too; false then.
template <typename Arrived>
__device__ __forceinline__ bool spin_until(Arrived arrived, const int* abort_flag) {
  for (int spins = 0; !arrived();) {
    if (++spins == 256) {
      spins = 0;
      if (*reinterpret_cast<const volatile int*>(abort_flag) != 0) return false;
    }
  }
  return true;
}

__device__ __forceinline__ void add_bf16x8(float (&acc)[8], const uint4& v) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    acc[2 * i] += f.x;
    acc[2 * i + 1] += f.y;
  }
}

// Sums v[0..world) (rank order) into one 16-byte vector: fp32 accumulation, bf16 rounded once.
__device__ __forceinline__ uint4 sum_vectors(const uint4 (&v)[kMaxRanks], int world, bool bf16) {
  uint4 out;
  if (bf16) {
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int q = 0; q < kMaxRanks; ++q) {
      if (q < world) add_bf16x8(acc, v[q]);
    }
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __float22bfloat162_rn(make_float2(acc[2 * i], acc[2 * i + 1]));
  } else {
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int q = 0; q < kMaxRanks; ++q) {
      if (q < world) {
        const float4 f = *reinterpret_cast<const float4*>(&v[q]);
        acc.x += f.x;
        acc.y += f.y;
        acc.z += f.z;
        acc.w += f.w;
      }
    }
    out = *reinterpret_cast<const uint4*>(&acc);
  }
  return out;
}

// This thread's vector k of tile t: tid * 16 and (tid + kThreads) * 16 bytes into the tile
// (coalesced per warp). Every kernel here walks its tiles this way.
template <int V = kVecs, int T = kThreads>
__device__ __forceinline__ int64_t vec_offset(int64_t t, int k) {
  return t * (int64_t{T} * 16 * V) + (static_cast<int64_t>(k) * T + threadIdx.x) * 16;
}

// The fp32 residual's 8 values behind bf16 byte offset `off` += the 8 bf16 values of s (exact
// widening, one add each); their new values in x.
__device__ __forceinline__ void add_bf16x8_to_f32(float* accumulate, int64_t off, const uint4& s, float (&x)[8]) {
  float4* r = reinterpret_cast<float4*>(reinterpret_cast<char*>(accumulate) + 2 * off);
  float f[8];
  bf16x8_to_f32(s, f);
  float4 lo = r[0], hi = r[1];
  lo.x += f[0], lo.y += f[1], lo.z += f[2], lo.w += f[3];
  hi.x += f[4], hi.y += f[5], hi.z += f[6], hi.w += f[7];
  r[0] = lo;
  r[1] = hi;
  x[0] = lo.x, x[1] = lo.y, x[2] = lo.z, x[3] = lo.w;
  x[4] = hi.x, x[5] = hi.y, x[6] = hi.z, x[7] = hi.w;
}

// One summed vector s at byte offset `off`: written in place, or added into `accumulate`.
__device__ __forceinline__ void store_sum(const CustomAllReduceArgs& a, char* data, int64_t off, const uint4& s) {
  if (a.accumulate != nullptr && a.bf16) {  // f32 residual + the bf16-rounded sum, 8 floats
    float updated[8];
    add_bf16x8_to_f32(a.accumulate, off, s, updated);
  } else if (a.accumulate != nullptr) {  // residual + sum: the unfused add's result, bit for bit
    float4* r = reinterpret_cast<float4*>(reinterpret_cast<char*>(a.accumulate) + off);
    const float4 f = *reinterpret_cast<const float4*>(&s);
    float4 acc = *r;
    acc.x += f.x;
    acc.y += f.y;
    acc.z += f.z;
    acc.w += f.w;
    *r = acc;
  } else {
    *reinterpret_cast<uint4*>(data + off) = s;
  }
}

// The tile's sums (v[k][q]: rank q's vectors k), in rank order, written in place or added into
// `accumulate`.
template <int V = kVecs, int T = kThreads>
__device__ __forceinline__ void sum_tile(const CustomAllReduceArgs& a, int64_t t, const uint4 (&v)[V][kMaxRanks]) {
  char* data = static_cast<char*>(a.data);
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const int64_t off = vec_offset<V, T>(t, k);
    if (off >= a.bytes) continue;
    store_sum(a, data, off, sum_vectors(v[k], a.world, a.bf16));
  }
}

__global__ void __launch_bounds__(kThreads) custom_all_reduce_kernel(const __grid_constant__ CustomAllReduceArgs a) {
  const int b = blockIdx.x;
  const int tid = threadIdx.x;
  __shared__ int aborted;
  if (tid == 0) aborted = 0;
  const int64_t ntiles = (a.bytes + kTileBytes - 1) / kTileBytes;
  // Every thread reads the block's epoch before the barriers below; thread 0 stores the new one last.
  const uint32_t epoch = a.epochs[b] + 1;
  const int64_t half = (epoch & 1u) ? a.half_bytes : 0;
  char* data = static_cast<char*>(a.data);
  char* own = static_cast<char*>(a.buffers[a.rank]) + half;
  // Where rank q's tiles are read in step 4: pushed into this rank's slot q (local memory), or
  // pulled from slot 0 of rank q's buffer (over NVLink).
  auto source = [&](int q) -> const char* {
    return a.push ? own + q * a.slot_bytes : static_cast<const char*>(a.buffers[q]) + half;
  };

  // 1. This block's tiles of the input: pushed into slot `rank` of every peer's half (NVLink
  //    stores, posted: no round trip per load as a pull has), or copied into this rank's own half.
  for (int64_t t = b; t < ntiles; t += kMaxBlocks) {
    uint4 v[kVecs];
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int64_t off = vec_offset(t, k);
      if (off < a.bytes) v[k] = *reinterpret_cast<const uint4*>(data + off);
    }
    if (a.push) {
#pragma unroll
      for (int q = 0; q < kMaxRanks; ++q) {
        if (q >= a.world || q == a.rank) continue;
        char* dst = static_cast<char*>(a.buffers[q]) + half + a.rank * a.slot_bytes;
#pragma unroll
        for (int k = 0; k < kVecs; ++k) {
          const int64_t off = vec_offset(t, k);
          if (off < a.bytes) *reinterpret_cast<uint4*>(dst + off) = v[k];
        }
      }
    } else {
#pragma unroll
      for (int k = 0; k < kVecs; ++k) {
        const int64_t off = vec_offset(t, k);
        if (off < a.bytes) *reinterpret_cast<uint4*>(own + off) = v[k];
      }
    }
  }
  __syncthreads();

  // 2. Arrive: flag [b][rank] of every peer = epoch (release: the stores above come first).
  const int64_t flags = 2 * a.half_bytes;
  if (tid < a.world && tid != a.rank) {
    __threadfence_system();
    uint32_t* flag = reinterpret_cast<uint32_t*>(static_cast<char*>(a.buffers[tid]) + flags) + b * kMaxRanks + a.rank;
    st_release_sys(flag, epoch);
  }

  // 3. Wait for every peer's block b (acquire), or for abort().
  if (tid < a.world && tid != a.rank) {
    const uint32_t* flag =
        reinterpret_cast<const uint32_t*>(static_cast<const char*>(a.buffers[a.rank]) + flags) + b * kMaxRanks + tid;
    if (!spin_until([&] { return static_cast<int32_t>(ld_acquire_sys(flag) - epoch) >= 0; }, a.abort_flag)) {
      aborted = 1;
    }
  }
  __syncthreads();
  if (aborted) return;

  // 4. Sum the tiles over ranks in rank order (the same order on every rank), in place; or, for an
  //    all-gather, copy every rank's tiles (bytes as they are) to its place in the output. All
  //    loads of a tile are issued before the sums.
  for (int64_t t = b; t < ntiles; t += kMaxBlocks) {
    uint4 v[kVecs][kMaxRanks];
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int64_t off = vec_offset(t, k);
      if (off >= a.bytes) continue;
#pragma unroll
      for (int q = 0; q < kMaxRanks; ++q) {
        if (q < a.world) {
          v[k][q] = q == a.rank ? *reinterpret_cast<const uint4*>(data + off) : ld_volatile16(source(q) + off);
        }
      }
    }
    if (a.gather_out != nullptr) {
      char* out = static_cast<char*>(a.gather_out);
#pragma unroll
      for (int k = 0; k < kVecs; ++k) {
        const int64_t off = vec_offset(t, k);
        if (off >= a.bytes) continue;
#pragma unroll
        for (int q = 0; q < kMaxRanks; ++q) {
          if (q < a.world) *reinterpret_cast<uint4*>(out + q * a.bytes + off) = v[k][q];
        }
      }
      continue;
    }
    sum_tile(a, t, v);
  }
  if (tid == 0) a.epochs[b] = epoch;
}

// ---- The Lamport kernel (the default for sums; MINIVLLM_CUSTOM_AR_LAMPORT=0 turns it off). No
// flags and no fences: an empty slot holds kEmpty in every 32-bit word, data never does (cleaned
// below), so a word that is not kEmpty has arrived (32-bit stores are single-copy atomic). Three
// buffers in turn per block (its own counter): call e pushes into buffer e % 3, reads its peers'
// words there as they land, and empties this block's words of buffer (e + 2) % 3, the last call's,
// whose every word it saw arrive then. A peer writes into a buffer again only two calls later,
// after it saw this rank's data of the call in between, which this rank sent after the emptying
// (kernel order).
//
// Two-shot (a.two_shot; messages past the one-shot limit at more than two ranks): block b's tiles
// belong to rank b % world, their owner. A non-owner pushes its tiles into slot `rank` of the
// owner's buffer and waits for the sums in slot `owner` of its own; the owner waits for the other
// ranks' tiles, sums them in rank order, cleans the sum (so every rank keeps the same bits) and
// pushes it into slot `owner` of every peer. Each rank then sends 2 (world - 1) / world of the
// message instead of world - 1 times it. At one offset a rank uses slots q != rank (its own tiles)
// or the owner's (the others'), never both, so the buffers are the one-shot kernel's. The same
// turn argument holds: a peer writes a rank's buffer again two calls later only after that rank's
// data of the call in between (the owner's sums need every rank's tiles; a non-owner's tiles reach
// an owner that waited for them). lamport_prev holds -bytes after a two-shot call, so that the
// emptying knows which slots the call filled.
constexpr uint32_t kEmpty = 0x80008000u;

// Blocks of the Lamport kernel at T threads a block: one per SM for 512 (its registers), two for 256.
constexpr int lamport_max_blocks(int threads) { return threads >= 512 ? kMaxBlocks : CustomAllReduce::kLamportMaxBlocks; }

// bf16: -0.0 halves become +0.0 (a word of two -0.0 halves is kEmpty); f32: the one word equal
// to kEmpty (a negative denormal) loses its sign. Every rank sums the cleaned values.
__device__ __forceinline__ uint4 lamport_clean(uint4 v, bool bf16) {
  uint32_t* w = reinterpret_cast<uint32_t*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (bf16) {
      if ((w[i] & 0xFFFFu) == 0x8000u) w[i] &= 0xFFFF0000u;
      if ((w[i] >> 16) == 0x8000u) w[i] &= 0x0000FFFFu;
    } else if (w[i] == kEmpty) {
      w[i] = 0x00008000u;
    }
  }
  return v;
}

__device__ __forceinline__ bool lamport_arrived(const uint4& v) {
  return v.x != kEmpty && v.y != kEmpty && v.z != kEmpty && v.w != kEmpty;
}

// sum_tile for bf16 partials with the next RMSNorm fused (a.normed_out): the residual rows of the
// tile are updated as sum_tile does, then normed into normed_out at the same offsets. Rows lie whole
// in a tile and cover whole warps (row_elems a power of two in [256, 2048], the host checks): a warp
// holds 256 values of one row, the row's warps are the block's warps [g * wpr, (g + 1) * wpr), and a
// thread's column is the same for all its V vectors (a tile's T vectors are T * 8 >= 2,048 values,
// whole rows apart).
// The sum of squares is taken in rms_norm_kernel's order (a thread's 8, warp_sum, then the row's
// warps by warp_sum), so normed_out equals the unfused rms_norm bit for bit. Every thread calls it.
template <int V, int T>
__device__ __forceinline__ void sum_tile_norm(const CustomAllReduceArgs& a, int64_t t, const uint4 (&v)[V][kMaxRanks],
                                              const float (&w)[8]) {
  __shared__ float s_warp[V][T / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float x[V][8];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const int64_t off = vec_offset<V, T>(t, k);
    float ss = 0.0f;
    if (off < a.bytes) {
      add_bf16x8_to_f32(a.accumulate, off, sum_vectors(v[k], a.world, true), x[k]);
#pragma unroll
      for (int i = 0; i < 8; ++i) ss += x[k][i] * x[k][i];
    }
    ss = warp_sum(ss);  // a warp is wholly in or out of the message (whole rows)
    if (lane == 0) s_warp[k][warp] = ss;
  }
  __syncthreads();
  const int wpr = static_cast<int>(a.row_elems >> 8);
  const int first = warp / wpr * wpr;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const int64_t off = vec_offset<V, T>(t, k);
    float tot = lane < wpr ? s_warp[k][first + lane] : 0.0f;
    tot = warp_sum(tot);
    if (off >= a.bytes) continue;
    const float inv = 1.0f / sqrtf(tot / static_cast<float>(a.row_elems) + a.eps);
#pragma unroll
    for (int i = 0; i < 8; ++i) x[k][i] = (x[k][i] * inv) * w[i];
    *reinterpret_cast<uint4*>(static_cast<char*>(a.normed_out) + off) = f32_to_bf16x8(x[k]);
  }
  __syncthreads();  // s_warp is the next tile's
}

// The two-shot body (see above) of block blockIdx.x, whose tiles `owner` sums; `now` is this
// call's buffer. A peer that died leaves the spins through the abort flag (the output is garbage).
template <int T, int V>
__device__ __forceinline__ void lamport_two_shot(const CustomAllReduceArgs& a, int owner, int64_t now) {
  constexpr int64_t kTile = int64_t{T} * 16 * V;
  constexpr int kBlocks = lamport_max_blocks(T);
  const int64_t ntiles = (a.bytes + kTile - 1) / kTile;
  char* data = static_cast<char*>(a.data);
  const char* mine = static_cast<const char*>(a.buffers[a.rank]) + now;
  if (owner != a.rank) {
    char* dst = nullptr;  // the owner's buffer, picked by unrolled compares (no indexed copy of the params)
#pragma unroll
    for (int q = 0; q < kMaxRanks; ++q) {
      if (q == owner) dst = static_cast<char*>(a.buffers[q]) + now + a.rank * a.slot_bytes;
    }
    for (int64_t t = blockIdx.x; t < ntiles; t += kBlocks) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const int64_t off = vec_offset<V, T>(t, k);
        if (off < a.bytes) {
          *reinterpret_cast<uint4*>(dst + off) = lamport_clean(*reinterpret_cast<const uint4*>(data + off), a.bf16);
        }
      }
    }
    for (int64_t t = blockIdx.x; t < ntiles; t += kBlocks) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const int64_t off = vec_offset<V, T>(t, k);
        if (off >= a.bytes) continue;
        const char* src = mine + owner * a.slot_bytes + off;
        uint4 got;
        if (!spin_until([&] { return lamport_arrived(got = ld_volatile16(src)); }, a.abort_flag)) return;
        store_sum(a, data, off, got);
      }
    }
    return;
  }
  for (int64_t t = blockIdx.x; t < ntiles; t += kBlocks) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const int64_t off = vec_offset<V, T>(t, k);
      if (off >= a.bytes) continue;
      uint4 v[kMaxRanks];
      bool aborted = false;  // a flag, not a return inside the loop: the loop must unroll (v in registers)
#pragma unroll
      for (int q = 0; q < kMaxRanks; ++q) {
        if (q >= a.world) continue;
        if (q == a.rank) {
          v[q] = lamport_clean(*reinterpret_cast<const uint4*>(data + off), a.bf16);
          continue;
        }
        const char* src = mine + q * a.slot_bytes + off;
        uint4& got = v[q];
        if (!spin_until([&] { return lamport_arrived(got = ld_volatile16(src)); }, a.abort_flag)) aborted = true;
      }
      if (aborted) return;
      const uint4 sum = lamport_clean(sum_vectors(v, a.world, a.bf16), a.bf16);
#pragma unroll
      for (int q = 0; q < kMaxRanks; ++q) {
        if (q < a.world && q != a.rank) {
          *reinterpret_cast<uint4*>(static_cast<char*>(a.buffers[q]) + now + a.rank * a.slot_bytes + off) = sum;
        }
      }
      store_sum(a, data, off, sum);
    }
  }
}

template <int T, int V, bool kTwoShot>
__global__ void __launch_bounds__(T) lamport_all_reduce_kernel(const __grid_constant__ CustomAllReduceArgs a) {
  constexpr int64_t kTile = int64_t{T} * 16 * V;
  constexpr int kBlocks = lamport_max_blocks(T);
  const int b = blockIdx.x;
  const int tid = threadIdx.x;
  const int64_t ntiles = (a.bytes + kTile - 1) / kTile;
  const uint32_t epoch = a.lamport_epochs[b] + 1;
  const int64_t region = a.world * a.slot_bytes;  // one buffer: a slot per rank
  const int64_t now = a.lamport_base + (epoch % 3) * region;
  const int64_t last = a.lamport_base + ((epoch + 2) % 3) * region;
  const char* data = static_cast<const char*>(a.data);
  char* mine = static_cast<char*>(a.buffers[a.rank]);

  // 1. Empty the last call's buffer: this block's words of its message. Before the PDL wait (with
  //    MINIVLLM_AR_PDL the kernel may start while the GEMM before it still runs): the last call of
  //    this kernel has ended, since nothing between the two lets a successor start early (this
  //    kernel never calls pdl_launch_dependents), and no peer writes this buffer before the next
  //    call (see above).
  //    After a two-shot call, only the slots it filled: the other ranks' (owner) or the owner's.
  const int owner = b % a.world;
  const int64_t prev = a.lamport_prev[b];
  const bool prev_two_shot = prev < 0;
  const int64_t last_bytes = prev_two_shot ? -prev : prev;
  const uint4 empty = make_uint4(kEmpty, kEmpty, kEmpty, kEmpty);
  for (int64_t t = b; t * kTile < last_bytes; t += kBlocks) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const int64_t off = vec_offset<V, T>(t, k);
      if (off >= last_bytes) continue;
#pragma unroll
      for (int q = 0; q < kMaxRanks; ++q) {
        if (q < a.world && q != a.rank && (!prev_two_shot || owner == a.rank || q == owner)) {
          *reinterpret_cast<uint4*>(mine + last + q * a.slot_bytes + off) = empty;
        }
      }
    }
  }
  // The norm's weights of this thread's column (constant over its tiles: see sum_tile_norm).
  float w[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  if (a.normed_out != nullptr) load_weight8(a.norm_weight, a.norm_w_f32, (tid * 8) & (a.row_elems - 1), w);
  pdl_wait();  // `data` is the GEMM's output, and the kernels before may still read normed_out
  if constexpr (kTwoShot) {
    lamport_two_shot<T, V>(a, owner, now);
  } else {
    // 2. Push this block's tiles, cleaned, into slot `rank` of every peer's buffer.
    for (int64_t t = b; t < ntiles; t += kBlocks) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const int64_t off = vec_offset<V, T>(t, k);
        if (off >= a.bytes) continue;
        const uint4 v = lamport_clean(*reinterpret_cast<const uint4*>(data + off), a.bf16);
#pragma unroll
        for (int q = 0; q < kMaxRanks; ++q) {
          if (q < a.world && q != a.rank) {
            *reinterpret_cast<uint4*>(static_cast<char*>(a.buffers[q]) + now + a.rank * a.slot_bytes + off) = v;
          }
        }
      }
    }
    // 3. Wait for each peer's words, then sum in rank order as the flag kernel does. An abort is
    //    made block-wide before the sums (as in the build that ran on the H100s, where a fused norm
    //    synchronised the block).
    __shared__ int s_aborted;
    if (tid == 0) s_aborted = 0;
    __syncthreads();
    bool aborted = false;
    for (int64_t t = b; t < ntiles; t += kBlocks) {
      uint4 v[V][kMaxRanks];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const int64_t off = vec_offset<V, T>(t, k);
        if (off >= a.bytes) continue;
#pragma unroll
        for (int q = 0; q < kMaxRanks; ++q) {
          if (q >= a.world) continue;
          if (q == a.rank) {
            v[k][q] = lamport_clean(*reinterpret_cast<const uint4*>(data + off), a.bf16);
            continue;
          }
          const char* src = mine + now + q * a.slot_bytes + off;
          uint4& got = v[k][q];
          if (!spin_until([&] { return lamport_arrived(got = ld_volatile16(src)); }, a.abort_flag)) aborted = true;
        }
      }
      if (aborted) s_aborted = 1;
      __syncthreads();
      if (s_aborted) break;
      if (a.normed_out != nullptr) {
        sum_tile_norm<V, T>(a, t, v, w);
      } else {
        sum_tile<V, T>(a, t, v);
      }
    }
  }  // one-shot
  // Every thread of the block read the counters before; the next call of this block comes after
  // the kernel ends.
  __syncthreads();
  if (tid == 0) {
    a.lamport_epochs[b] = epoch;
    a.lamport_prev[b] = kTwoShot ? -a.bytes : a.bytes;
  }
}

// ---- The stamped gather (all-gathers up to kStampedMaxBytes; design in custom_all_reduce.h). One
// block. Word i of rank q's message lands in slot q of half (epoch & 1) of every rank's buffer as
// the 64-bit pair (word, epoch); a reader takes it once the high half equals this call's epoch.
// The half is safe to overwrite two calls later: a peer starts call e + 2 only after it saw this
// rank's words of call e + 1, which this rank sent after it had read every word of call e.
constexpr int kStampedThreads = 512;

__device__ __forceinline__ uint64_t ld_volatile8(const void* p) {
  uint64_t v;
  asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void st_volatile8(void* p, uint64_t v) {
  asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__global__ void __launch_bounds__(kStampedThreads) stamped_gather_kernel(const __grid_constant__ CustomAllReduceArgs a) {
  // Everything comes after the wait: `in` is the kernel before's output, and the counter is read
  // only once every earlier kernel has ended, whichever of them let its successor start early.
  // What PDL saves here is the launch itself.
  pdl_wait();
  const int tid = threadIdx.x;
  uint32_t epoch = *a.stamped_epoch + 1;  // every thread reads it before the barrier below
  if (epoch == 0) epoch = 1;              // 0 is the buffers' initial stamp
  const int64_t words = a.bytes / 4;
  constexpr int64_t slot = static_cast<int64_t>(kCustomArStampedSlotBytes);
  const int64_t now = a.stamped_base + static_cast<int64_t>(epoch & 1u) * a.world * slot;
  const uint32_t* in = static_cast<const uint32_t*>(a.data);
  uint32_t* out = static_cast<uint32_t*>(a.gather_out);
  // 1. Push: every word, stamped, into slot `rank` of every peer's half; this rank's own part of
  //    the output directly.
  for (int64_t i = tid; i < words; i += kStampedThreads) {
    const uint32_t w = in[i];
    out[a.rank * words + i] = w;
    const uint64_t stamped = (static_cast<uint64_t>(epoch) << 32) | w;
#pragma unroll
    for (int q = 0; q < kMaxRanks; ++q) {
      if (q < a.world && q != a.rank) {
        st_volatile8(static_cast<char*>(a.buffers[q]) + now + a.rank * slot + 8 * i, stamped);
      }
    }
  }
  // 2. Each peer's words as they land (local memory), or abort().
  const char* mine = static_cast<const char*>(a.buffers[a.rank]) + now;
  bool aborted = false;
  for (int64_t i = tid; i < words && !aborted; i += kStampedThreads) {
#pragma unroll
    for (int q = 0; q < kMaxRanks; ++q) {
      if (q >= a.world || q == a.rank) continue;
      const char* src = mine + q * slot + 8 * i;
      uint64_t v = 0;
      if (!spin_until([&] { return static_cast<uint32_t>((v = ld_volatile8(src)) >> 32) == epoch; }, a.abort_flag)) {
        aborted = true;
        break;
      }
      out[q * words + i] = static_cast<uint32_t>(v);
    }
  }
  __syncthreads();
  if (tid == 0) *a.stamped_epoch = epoch;
}

__global__ void fill_words_kernel(uint32_t* p, int64_t n, uint32_t value) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    p[i] = value;
  }
}

// The Lamport and stamped kernels' launch: by programmatic dependent launch unless args.pdl is off
// (MINIVLLM_AR_PDL=0).
void launch_collective(void (*kernel)(CustomAllReduceArgs), int blocks, int threads, const CustomAllReduceArgs& args,
                       cudaStream_t stream) {
  if (args.pdl) {
    launch_with_pdl(kernel, dim3(blocks), dim3(threads), 0, stream, args);
  } else {
    kernel<<<blocks, threads, 0, stream>>>(args);
  }
  CUDA_CHECK_LAUNCH();
}

// One Lamport call at T threads x V vectors a tile (T * 16 * V bytes), one block per tile up to
// lamport_max_blocks(T): the geometry the kernel itself walks.
template <int T, int V>
void launch_lamport(const CustomAllReduceArgs& args, cudaStream_t stream) {
  constexpr int64_t kTile = int64_t{T} * 16 * V;
  const int64_t ntiles = (args.bytes + kTile - 1) / kTile;
  const int blocks = static_cast<int>(ntiles < lamport_max_blocks(T) ? ntiles : lamport_max_blocks(T));
  if (blocks == 0) return;
  if (args.two_shot) {
    launch_collective(lamport_all_reduce_kernel<T, V, true>, blocks, T, args, stream);
  } else {
    launch_collective(lamport_all_reduce_kernel<T, V, false>, blocks, T, args, stream);
  }
}

}  // namespace

void launch_lamport_fill(void* p, int64_t bytes, cudaStream_t stream) {
  fill_words_kernel<<<256, 256, 0, stream>>>(static_cast<uint32_t*>(p), bytes / 4, kEmpty);
  CUDA_CHECK_LAUNCH();
}

void launch_custom_all_reduce(const CustomAllReduceArgs& args, cudaStream_t stream) {
  if (args.gather_out != nullptr && args.stamped) {
    if (args.bytes == 0) return;
    launch_collective(stamped_gather_kernel, 1, kStampedThreads, args, stream);
    return;
  }
  if (args.lamport) {
    // The tile, in KB (CustomAllReduce::kDefaultLamportTileKb): a block owns the same bytes of the
    // buffers in every call.
    switch (args.lamport_tile_kb) {
      case 4:
        return launch_lamport<256, 1>(args, stream);
      case 8:
        return launch_lamport<512, 1>(args, stream);
      case 16:
        return launch_lamport<512, 2>(args, stream);
    }
    MINIVLLM_FAIL() << "Lamport all-reduce: a tile of " << args.lamport_tile_kb << " KB (16, 8 or 4)";
  }
  const int64_t ntiles = (args.bytes + kTileBytes - 1) / kTileBytes;
  const int blocks = static_cast<int>(ntiles < kMaxBlocks ? ntiles : kMaxBlocks);
  if (blocks == 0) return;
  custom_all_reduce_kernel<<<blocks, kThreads, 0, stream>>>(args);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minivllm::cuda
