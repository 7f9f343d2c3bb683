#include "backend/backend.h"

#include "common/check.h"
#include "common/quant_blocks.h"

namespace minivllm {

Tensor Backend::upload_weight(const Tensor& host_f32, bool keep_f32) {
  MINIVLLM_CHECK(host_f32.dtype() == DType::kF32 && host_f32.device() == DeviceKind::kCpu)
      << "upload_weight takes a host f32 tensor, got " << host_f32.describe();
  DType target = keep_f32 ? DType::kF32 : weight_dtype();
  Tensor dst = empty(target, host_f32.shape());
  if (target == DType::kF32) {
    copy_from_host(dst, host_f32.data());
  } else {
    Tensor staged = host_tensor(target, host_f32.shape());
    convert_from_f32(host_f32.ptr<float>(), target, staged.data(), static_cast<size_t>(host_f32.numel()));
    copy_from_host(dst, staged.data());
  }
  synchronize();  // the staging buffer dies here
  return dst;
}

Tensor Backend::upload_stored_weight(const Tensor& host) {
  MINIVLLM_CHECK(host.device() == DeviceKind::kCpu) << "upload_stored_weight takes a host tensor, got "
                                                    << host.describe();
  if (host.dtype() == DType::kF32 || !keeps_weight_dtype(host.dtype())) {
    if (host.dtype() == DType::kF32) return upload_weight(host);
    Tensor f32 = host_tensor(DType::kF32, host.shape());
    dequantize_to_f32(host.dtype(), host.data(), f32.ptr<float>(), host.numel());
    return upload_weight(f32);
  }
  Tensor dst = empty(host.dtype(), host.shape());
  copy_from_host(dst, host.data());
  synchronize();
  return dst;
}

}  // namespace minivllm
