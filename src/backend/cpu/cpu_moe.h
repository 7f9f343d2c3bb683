// The CPU's mixture-of-experts kernels as plain host functions (the CpuBackend's moe_route and
// moe_experts_add are written from them; tests call them directly on odd shapes). The CPU is the
// reference any GPU MoE kernel will be checked against.
#pragma once

#include <cstdint>

namespace minivllm::cpu {

// Per row of logits [T, E]: the k largest logits' experts (equal logits: the lower id first), in
// decreasing order, into ids [T, k]; their softmax probabilities over all E experts into
// weights [T, k], divided by the k probabilities' sum when renormalize. k <= E.
void moe_topk_softmax(const float* logits, int64_t tokens, int64_t num_experts, int k, bool renormalize,
                      int32_t* ids, float* weights);

// Backend::moe_route_biased on rows of logits [T, E] with score_bias [E]: sigmoid scores (or the
// softmax over all E: exp(l - max) / their sum in double), the
// experts chosen by score + bias within the topk_groups best of `groups` equal groups (a group's value:
// its two best choice values summed; one group: every expert), equal values the lower index first, in
// decreasing order into ids [T, k]; the chosen scores into weights [T, k], divided by their sum (+ 1e-20,
// as transformers) when renormalize, times scale. Throws unless groups divides E and the allowed
// groups hold at least k experts.
void moe_topk_biased(const float* logits, const float* score_bias, int64_t tokens, int64_t num_experts, int k,
                     bool sigmoid, int groups, int topk_groups, bool renormalize, float scale, int32_t* ids,
                     float* weights);

// The (token, slot) pairs of ids [T, k] grouped by expert, for the experts [first_expert,
// first_expert + num_local) (pairs routed to other experts are dropped: another rank's): entries
// holds t * k + j, expert by expert and by token within an expert; offsets [num_local + 1] where
// each expert's entries begin (an expert with no token has an empty range). Returns the entries
// written (offsets[num_local]). An id outside [0, num_experts) throws.
int64_t moe_group_by_expert(const int32_t* ids, int64_t tokens, int k, int64_t num_experts, int64_t first_expert,
                            int64_t num_local, int32_t* offsets, int32_t* entries);

}  // namespace minivllm::cpu
