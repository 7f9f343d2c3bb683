#include "backend/backend.h"

#include "common/check.h"

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

}  // namespace minivllm
