// Which query rows and keys one prefill CTA covers: shared by both prefill kernels
// (prefill_attention.cu, prefill_attention_wgmma.cu), so their causal spans cannot drift apart.
#pragma once

#include "backend/cuda/cuda_kernels.h"

namespace minivllm::cuda {

// A CTA owns query rows [q0, q0 + rows) of q head h of sequence seq. The query rows are the LAST
// len_q of the sequence's len_k keys (a cached prefix comes first), so row r sees keys
// [0, offset + r] (with a sliding window, the last `window` of those); n_keys is how many keys the
// CTA's last row sees (0 when q0 >= len_q: nothing to do).
struct PrefillSpan {
  int q_begin;  // the sequence's first query row in the packed tokens
  int len_q, len_k;
  int q0;       // this CTA's first query row within the sequence
  int kvh;      // the kv head of q head h
  int offset;   // key position of query row 0
  int n_keys;
  // The first key the CTA's first row sees (0 without a sliding window); later rows start later
  // (row r: offset + r + 1 - window), which the kernels mask.
  int first_key;
};

__device__ __forceinline__ PrefillSpan prefill_span(const AttentionArgs& a, int seq, int h, int tile, int rows) {
  PrefillSpan s;
  s.q_begin = a.cu_seqlens_q[seq];
  s.len_q = a.cu_seqlens_q[seq + 1] - s.q_begin;
  s.len_k = a.cu_seqlens_k[seq + 1] - a.cu_seqlens_k[seq];
  s.q0 = tile * rows;
  s.kvh = h / (a.num_q_heads / a.num_kv_heads);
  s.offset = s.len_k - s.len_q;
  s.n_keys = s.q0 < s.len_q ? min(s.len_k, s.offset + s.q0 + rows) : 0;
  s.first_key = a.window > 0 ? max(0, s.offset + s.q0 + 1 - a.window) : 0;
  return s;
}

}  // namespace minivllm::cuda
