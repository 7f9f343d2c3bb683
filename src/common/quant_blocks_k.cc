// The block formats of quant_blocks.h beyond Q8_0 / Q4_0 / Q4_1, decoded to integer codes and
// per-sub-block scales (decode_block). Layouts (ggml-common.h; bytes in this order, f16 = IEEE half):
//
//   Q5_0   (32, 22 B): f16 d, u32 qh, u8 qs[16]   code j = (qs[j] & 15) | bit j of qh << 4 (j < 16),
//                     code j+16 = (qs[j] >> 4) | bit j+16 of qh << 4;      x = (code - 16) d
//   Q5_1   (32, 24 B): f16 d, f16 m, u32 qh, u8 qs[16]   codes as Q5_0;    x = code d + m
//   IQ4_NL (32, 18 B): f16 d, u8 qs[16]   nibbles as Q4_0;                 x = kIq4NlValues[nibble] d
//   MXFP4  (32, 17 B): u8 e (E8M0), u8 qs[16]   nibbles as Q4_0;           x = kMxfp4Values[nibble] 2^(e - 128)
//                     (an FP4 E2M1 value times 2^(e - 127): the table holds twice the E2M1 values)
//
// K-quants, 256 elements a super-block; element e = 128 n + 32 k + l (n < 2, k < 4, l < 32) where
// a format packs 2-bit fields:
//   Q2_K (84 B): u8 scales[16], u8 qs[64], f16 d, f16 dmin
//       code = (qs[32 n + l] >> 2k) & 3, s = scales[8 n + 2 k + l / 16]; x = d (s & 15) code - dmin (s >> 4)
//   Q3_K (110 B): u8 hmask[32], u8 qs[64], u8 scales[12], f16 d
//       code = ((qs[32 n + l] >> 2k) & 3) - (bit 4 n + k of hmask[l] ? 0 : 4); x = d (sc - 32) code with
//       sc (6 bits) of sub-block i = 8 n + 2 k + l / 16: low 4 from scales[i % 8] (>> 4 when i >= 8),
//       high 2 from scales[8 + i % 4] >> 2 (i / 4)
//   Q6_K (210 B): u8 ql[128], u8 qh[64], i8 scales[16], f16 d
//       low 4 bits: ql[64 n + 32 (k & 1) + l], its high nibble when k >= 2; high 2: (qh[32 n + l] >> 2k) & 3;
//       x = d scales[8 n + 2 k + l / 16] (code - 32)
// and in 32-element sub-blocks j (element e = 32 j + l):
//   Q4_K (144 B): f16 d, f16 dmin, u8 scales[12], u8 qs[128]
//       code = nibble of qs[32 (j / 2) + l] (low for even j); x = d sc_j code - dmin m_j, with the 6-bit
//       sc_j, m_j: j < 4: scales[j] & 63, scales[j + 4] & 63; else low 4 bits from scales[j + 4]
//       (sc: & 15, m: >> 4), high 2 from scales[j - 4] >> 6 (sc) and scales[j] >> 6 (m)
//   Q5_K (176 B): f16 d, f16 dmin, u8 scales[12], u8 qh[32], u8 qs[128]   as Q4_K, plus bit j of qh[l] << 4
//   IQ4_XS (136 B): f16 d, u16 scales_h, u8 scales_l[4], u8 qs[128]
//       ls_j = ((scales_l[j / 2] >> 4 (j & 1)) & 15) | ((scales_h >> 2 j) & 3) << 4;
//       nibbles of qs[16 j ..] as IQ4_NL's; x = d (ls_j - 32) kIq4NlValues[nibble]
#include <cstring>

#include "common/check.h"
#include "common/quant_blocks.h"

namespace minivllm {

const int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
const int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

namespace {

float f16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return f16_to_f32(v);
}

uint32_t u32_at(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Q5_0 / Q5_1: the 32 five-bit codes.
void five_bit_codes(const uint8_t* qh_bytes, const uint8_t* qs, int bias, int16_t* q) {
  const uint32_t qh = u32_at(qh_bytes);
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int16_t>(((qs[j] & 15) | (((qh >> j) & 1) << 4)) - bias);
    q[j + 16] = static_cast<int16_t>(((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - bias);
  }
}

void table_codes(const int8_t* table, const uint8_t* qs, int16_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = table[qs[j] & 15];
    q[j + 16] = table[qs[j] >> 4];
  }
}
void iq4_codes(const uint8_t* qs, int16_t* q) { table_codes(kIq4NlValues, qs, q); }

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j.
void k4_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

void decode_q2_k(const uint8_t* b, BlockCodes* o) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const float d = f16_at(b + 80), dmin = f16_at(b + 82);
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, k = (e / 32) % 4, l = e % 32;
    o->q[e] = static_cast<int16_t>((qs[32 * n + l] >> (2 * k)) & 3);
  }
  for (int i = 0; i < 16; ++i) {
    o->d[i] = d * static_cast<float>(scales[i] & 15);
    o->c[i] = -(dmin * static_cast<float>(scales[i] >> 4));
  }
}

void decode_q3_k(const uint8_t* b, BlockCodes* o) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* scales = b + 96;
  const float d = f16_at(b + 108);
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, k = (e / 32) % 4, l = e % 32;
    const int high = (hmask[l] >> (4 * n + k)) & 1;
    o->q[e] = static_cast<int16_t>(((qs[32 * n + l] >> (2 * k)) & 3) - (high ? 0 : 4));
  }
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? scales[i] & 15 : scales[i - 8] >> 4;
    const int high = (scales[8 + i % 4] >> (2 * (i / 4))) & 3;
    o->d[i] = d * static_cast<float>((low | (high << 4)) - 32);
    o->c[i] = 0;
  }
}

void decode_q6_k(const uint8_t* b, BlockCodes* o) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = f16_at(b + 208);
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, k = (e / 32) % 4, l = e % 32;
    const uint8_t lo_byte = ql[64 * n + 32 * (k & 1) + l];
    const int low = k >= 2 ? lo_byte >> 4 : lo_byte & 15;
    const int high = (qh[32 * n + l] >> (2 * k)) & 3;
    o->q[e] = static_cast<int16_t>((low | (high << 4)) - 32);
  }
  for (int i = 0; i < 16; ++i) {
    o->d[i] = d * static_cast<float>(scales[i]);
    o->c[i] = 0;
  }
}

// Q4_K (qh == nullptr) and Q5_K.
void decode_q45_k(const uint8_t* b, const uint8_t* qh, const uint8_t* qs, BlockCodes* o) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  for (int j = 0; j < 8; ++j) {
    int sc = 0, m = 0;
    k4_scale_min(b + 4, j, &sc, &m);
    o->d[j] = d * static_cast<float>(sc);
    o->c[j] = -(dmin * static_cast<float>(m));
    for (int l = 0; l < 32; ++l) {
      const uint8_t byte = qs[32 * (j / 2) + l];
      int code = (j & 1) ? byte >> 4 : byte & 15;
      if (qh != nullptr) code |= ((qh[l] >> j) & 1) << 4;
      o->q[32 * j + l] = static_cast<int16_t>(code);
    }
  }
}

void decode_iq4_xs(const uint8_t* b, BlockCodes* o) {
  const float d = f16_at(b);
  uint16_t scales_h;
  std::memcpy(&scales_h, b + 2, 2);
  for (int j = 0; j < 8; ++j) {
    const int ls = ((b[4 + j / 2] >> (4 * (j & 1))) & 15) | (((scales_h >> (2 * j)) & 3) << 4);
    o->d[j] = d * static_cast<float>(ls - 32);
    o->c[j] = 0;
    iq4_codes(b + 8 + 16 * j, o->q + 32 * j);
  }
}

}  // namespace

bool has_block_codes(DType dtype) {
  switch (dtype) {
    case DType::kQ5_0: case DType::kQ5_1: case DType::kIQ4_NL:
    case DType::kQ2_K: case DType::kQ3_K: case DType::kQ4_K: case DType::kQ5_K: case DType::kQ6_K:
    case DType::kIQ4_XS: case DType::kMXFP4:
      return true;
    default:
      return false;
  }
}

void decode_block(DType dtype, const uint8_t* b, BlockCodes* o) {
  o->n = static_cast<int>(dtype_block(dtype));
  o->sub = (dtype == DType::kQ2_K || dtype == DType::kQ3_K || dtype == DType::kQ6_K) ? 16 : 32;
  switch (dtype) {
    case DType::kQ5_0:
      o->d[0] = f16_at(b);
      o->c[0] = 0;
      five_bit_codes(b + 2, b + 6, 16, o->q);
      return;
    case DType::kQ5_1:
      o->d[0] = f16_at(b);
      o->c[0] = f16_at(b + 2);
      five_bit_codes(b + 4, b + 8, 0, o->q);
      return;
    case DType::kIQ4_NL:
      o->d[0] = f16_at(b);
      o->c[0] = 0;
      iq4_codes(b + 2, o->q);
      return;
    case DType::kQ2_K: decode_q2_k(b, o); return;
    case DType::kQ3_K: decode_q3_k(b, o); return;
    case DType::kQ4_K: decode_q45_k(b, nullptr, b + 16, o); return;
    case DType::kQ5_K: decode_q45_k(b, b + 16, b + 48, o); return;
    case DType::kQ6_K: decode_q6_k(b, o); return;
    case DType::kIQ4_XS: decode_iq4_xs(b, o); return;
    case DType::kMXFP4:
      o->d[0] = mxfp4_scale(b[0]);
      o->c[0] = 0;
      table_codes(kMxfp4Values, b + 1, o->q);
      return;
    default: MINIVLLM_FAIL() << "decode_block: " << dtype_name(dtype) << " is not a block-code format";
  }
}

}  // namespace minivllm
