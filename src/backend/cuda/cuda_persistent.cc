// CudaBackend's persistent decode op: what the kernel (persistent_decode.cu) can take, said by name
// when it cannot; its scratch; and the launch parameters of one step, built on the host each call
// (the layer table travels by value in the kernel's parameters, so a captured graph keeps it).
#include <algorithm>
#include <cstdint>
#include <sstream>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/persistent_decode.h"
#include "common/check.h"

namespace minivllm::cuda {
namespace {

bool is_plain_bf16(const Tensor& t, std::initializer_list<int64_t> shape) {
  if (!t.defined() || t.device() != DeviceKind::kCuda || t.dtype() != DType::kBF16) return false;
  if (t.scales() != nullptr || t.parts() != nullptr) return false;
  if (reinterpret_cast<uintptr_t>(t.data()) % 16 != 0) return false;
  if (static_cast<size_t>(t.ndim()) != shape.size()) return false;
  int i = 0;
  for (int64_t n : shape) {
    if (t.size(i++) != n) return false;
  }
  return true;
}

// Scratch layout (bytes, each part 256-aligned): qkv f32, attn_out bf16, act bf16, sync u32.
struct ScratchLayout {
  size_t qkv = 0, attn = 0, act = 0, sync = 0, total = 0;
};

ScratchLayout scratch_layout(const PersistentDecodeModel& m) {
  const auto up = [](size_t b) { return (b + 255) & ~size_t{255}; };
  const size_t b = kPdMaxBatch, hd = static_cast<size_t>(m.head_dim);
  const size_t nq = static_cast<size_t>(m.num_q_heads), nkv = static_cast<size_t>(m.num_kv_heads);
  ScratchLayout s;
  s.attn = s.qkv + up(b * (nq + 2 * nkv) * hd * 4);
  s.act = s.attn + up(b * nq * hd * 2);
  s.sync = s.act + up(b * static_cast<size_t>(m.inter) * 2);
  s.total = s.sync + up((2 + m.layers.size() * (nq + 2 * nkv)) * 4);
  return s;
}

int64_t widest_k(const PersistentDecodeModel& m) {
  return std::max({m.hidden, m.inter, static_cast<int64_t>(m.num_q_heads) * m.head_dim});
}

}  // namespace

std::string CudaBackend::prepare_persistent_decode(PersistentDecodeModel& m) {
  const int64_t h = m.hidden, inter = m.inter, hd = m.head_dim, nq = m.num_q_heads, nkv = m.num_kv_heads;
  const int64_t layers = static_cast<int64_t>(m.layers.size());
  const auto ring_slots = [&](int batch) {
    return pd_ring_slots(batch, widest_k(m), static_cast<int>(hd), static_cast<int>(nq / nkv));
  };
  std::ostringstream why;
  if (layers < 1 || layers > kPdMaxLayers) {
    why << layers << " layers (the kernel's table holds 1 to " << kPdMaxLayers << ")";
  } else if (nkv < 1 || nq % nkv != 0 || !pd_supports(static_cast<int>(hd), static_cast<int>(nq / nkv))) {
    why << "head_dim " << hd << " with " << nq << " query heads over " << nkv
        << " kv heads (built for head_dim 128 with groups of 2 or 4, and 64 with 4)";
  } else if (pd_chunk(h) == 0 || pd_chunk(inter) == 0 || pd_chunk(nq * hd) == 0) {
    why << "hidden " << h << ", intermediate " << inter << " and query width " << nq * hd
        << " must be multiples of 128";
  } else if (!m.cos_sin.defined() || m.cos_sin.dtype() != DType::kF32 || m.cos_sin.ndim() != 2 ||
             m.cos_sin.size(1) != hd) {
    why << "the rope table must be f32 [positions, head_dim] (a rotary over the whole head)";
  } else if (ring_slots(1) == 0) {
    why << "a row of width " << widest_k(m) << " leaves no room for the weight ring in shared memory";
  }
  for (int64_t l = 0; l < layers && why.tellp() == 0; ++l) {
    const PersistentDecodeLayer& L = m.layers[static_cast<size_t>(l)];
    const bool qk = !L.q_norm.empty();
    if (!is_plain_bf16(L.attn_norm, {h}) || !is_plain_bf16(L.ffn_norm, {h}) ||
        (qk && (!is_plain_bf16(L.q_norm, {hd}) || !is_plain_bf16(L.k_norm, {hd}))) || qk == L.k_norm.empty()) {
      why << "layer " << l << "'s norm weights are not bf16 of the model's widths";
    } else if (!is_plain_bf16(L.qkv, {(nq + 2 * nkv) * hd, h}) || !is_plain_bf16(L.o, {h, nq * hd}) ||
               !is_plain_bf16(L.gate_up, {2 * inter, h}) || !is_plain_bf16(L.down, {h, inter})) {
      why << "layer " << l << "'s linear weights are not plain bf16 (quantized, fused from parts, or another shape)";
    }
  }
  if (why.tellp() != 0) return "the persistent decode kernel cannot take this model: " + why.str();
  int batch = kPdMaxBatch;
  while (batch > 1 && ring_slots(batch) == 0) batch /= 2;
  m.max_batch = batch;
  const ScratchLayout s = scratch_layout(m);
  m.scratch = empty(DType::kU8, {static_cast<int64_t>(s.total)});
  fill_bytes(m.scratch, 0);  // the sync counters start at zero; the kernel leaves them so
  return "";
}

void CudaBackend::persistent_decode(const PersistentDecodeModel& m, const Tensor& residual, const Tensor& positions,
                                    const std::vector<KVCache>& caches, const AttentionMetadata& meta) {
  const int batch = meta.num_seqs;
  MINIVLLM_CHECK(m.scratch.defined() && m.max_batch >= 1)
      << "persistent_decode: the model was not prepared (prepare_persistent_decode)";
  MINIVLLM_CHECK(!meta.is_prefill && batch >= 1 && batch <= m.max_batch && meta.num_tokens == batch)
      << "persistent_decode: a decode batch of 1 to " << m.max_batch << " sequences, one token each; got "
      << meta.num_seqs << " sequences, " << meta.num_tokens << " tokens";
  MINIVLLM_CHECK(caches.size() == m.layers.size()) << "persistent_decode: " << caches.size() << " caches for "
                                                   << m.layers.size() << " layers";
  MINIVLLM_CHECK(residual.dtype() == DType::kF32 && residual.ndim() == 2 && residual.size(0) >= batch &&
                 residual.size(1) == m.hidden)
      << "persistent_decode: residual " << residual.describe() << " must be f32 [" << batch << ", " << m.hidden << "]";
  PdParams p;
  p.num_layers = static_cast<int>(m.layers.size());
  p.batch = batch;
  p.hidden = static_cast<int>(m.hidden);
  p.inter = static_cast<int>(m.inter);
  p.num_q_heads = m.num_q_heads;
  p.num_kv_heads = m.num_kv_heads;
  p.head_dim = m.head_dim;
  p.block_size = meta.block_size;
  p.max_blocks = meta.max_num_blocks;
  p.activation = static_cast<int>(m.activation);
  const int group = m.num_q_heads / m.num_kv_heads;
  p.ring_slots = pd_ring_slots(batch, widest_k(m), m.head_dim, group);
  if (persistent_ring_ > 0) p.ring_slots = std::min(p.ring_slots, persistent_ring_);
  p.prefetch_kv = persistent_prefetch_ ? 1 : 0;
  p.chunk_hidden = pd_chunk(m.hidden);
  p.chunk_attn = pd_chunk(static_cast<int64_t>(m.num_q_heads) * m.head_dim);
  p.chunk_inter = pd_chunk(m.inter);
  p.eps = m.eps;
  p.scale = m.scale;
  p.positions = positions.ptr<int32_t>();
  p.context_lens = meta.context_lens.ptr<int32_t>();
  p.slot_mapping = meta.slot_mapping.ptr<int32_t>();
  p.block_tables = meta.block_tables.ptr<int32_t>();
  p.cos_sin = m.cos_sin.ptr<float>();
  p.residual = residual.ptr<float>();
  const ScratchLayout s = scratch_layout(m);
  uint8_t* base = m.scratch.ptr<uint8_t>();
  p.qkv = reinterpret_cast<float*>(base + s.qkv);
  p.attn_out = base + s.attn;
  p.act_out = base + s.act;
  p.sync = reinterpret_cast<unsigned*>(base + s.sync);
  p.head_ready = p.sync + 2;
  if (m.trace.defined() && !m.trace.empty()) {
    MINIVLLM_CHECK(m.trace.dtype() == DType::kI64 && m.trace.numel() >= int64_t{num_sms_} * kPersistentTraceEvents)
        << "persistent_decode: trace " << m.trace.describe() << " must be i64 [" << num_sms_ << ", "
        << kPersistentTraceEvents << "]";
    p.trace = static_cast<unsigned long long*>(m.trace.data());
    p.trace_events = static_cast<int>(kPersistentTraceEvents);
  }
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const PersistentDecodeLayer& L = m.layers[l];
    const KVCache& c = caches[l];
    MINIVLLM_CHECK(c.dtype() == DType::kBF16 && c.head_dim == m.head_dim && c.num_kv_heads == m.num_kv_heads &&
                   c.block_size == meta.block_size)
        << "persistent_decode: layer " << l << "'s cache " << c.k.describe() << " (the kernel reads bf16 caches of "
        << m.num_kv_heads << " kv heads of " << m.head_dim << ")";
    PdLayer& d = p.layers[l];
    d.attn_norm = L.attn_norm.data();
    d.ffn_norm = L.ffn_norm.data();
    d.q_norm = L.q_norm.empty() ? nullptr : L.q_norm.data();
    d.k_norm = L.k_norm.empty() ? nullptr : L.k_norm.data();
    d.qkv = L.qkv.data();
    d.o = L.o.data();
    d.gate_up = L.gate_up.data();
    d.down = L.down.data();
    d.k_cache = c.k.data();
    d.v_cache = c.v.data();
  }
  launch_persistent_decode(p, num_sms_, stream_);
}

}  // namespace minivllm::cuda
