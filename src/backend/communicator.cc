// SingleRankCommunicator: the world of one rank. Reductions, broadcast and barrier leave the
// tensors as they are; all_gather and gather copy `in` to `out` with the backend (on its stream).
#include "backend/communicator.h"

#include <atomic>

#include "backend/backend.h"
#include "common/check.h"

namespace minivllm {

namespace {

class SingleRankCommunicator : public Communicator {
 public:
  explicit SingleRankCommunicator(Backend& backend) : backend_(backend) {}

  int rank() const override { return 0; }
  int world_size() const override { return 1; }

  void all_reduce_sum(const Tensor& t) override {
    check("all_reduce_sum");
    MINIVLLM_CHECK(t.dtype() == DType::kF32 || t.dtype() == DType::kBF16 || t.dtype() == DType::kI32)
        << "all_reduce_sum: " << t.describe() << " must be f32, bf16 or i32";
  }
  void all_reduce_min(const Tensor& t) override {
    check("all_reduce_min");
    MINIVLLM_CHECK(t.dtype() == DType::kI32) << "all_reduce_min: " << t.describe() << " must be i32";
  }
  void all_gather(const Tensor& in, const Tensor& out) override { copy("all_gather", in, out); }
  void gather(const Tensor& in, const Tensor& out) override { copy("gather", in, out); }
  void broadcast(const Tensor& t, int root) override {
    check("broadcast");
    MINIVLLM_CHECK_EQ(root, 0) << "broadcast: root of a world of one rank";
  }
  void barrier() override { check("barrier"); }
  void abort() override { aborted_.store(true); }

 private:
  void check(const char* op) const {
    MINIVLLM_CHECK(!aborted_.load()) << "communicator aborted: " << op << " after abort()";
  }
  void copy(const char* op, const Tensor& in, const Tensor& out) {
    check(op);
    MINIVLLM_CHECK(in.dtype() == out.dtype() && in.numel() == out.numel())
        << op << ": out " << out.describe() << " must match in " << in.describe() << " in a world of one rank";
    if (in.numel() > 0 && in.data() != out.data()) backend_.copy(out, in);
  }

  Backend& backend_;
  std::atomic<bool> aborted_{false};
};

}  // namespace

std::unique_ptr<Communicator> make_single_rank_communicator(Backend& backend) {
  return std::make_unique<SingleRankCommunicator>(backend);
}

}  // namespace minivllm
