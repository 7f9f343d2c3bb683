#include "runtime/decode_seq_order.h"

#include <algorithm>
#include <numeric>

namespace minivllm {

void longest_context_first(const int32_t* context_lens, int n, int32_t* order) {
  std::iota(order, order + n, 0);
  // (length descending, row ascending) is a total order: the same permutation on every rank.
  std::sort(order, order + n, [context_lens](int32_t a, int32_t b) {
    return context_lens[a] != context_lens[b] ? context_lens[a] > context_lens[b] : a < b;
  });
}

}  // namespace minivllm
