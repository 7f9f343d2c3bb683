"""tools/roofline.py against hand counts: weight and KV bytes of published configs, what tensor
parallelism splits, the seeds' workload totals, and the batch-1 formula. Needs no engine, no model
weights; runs in well under a second (pytest, or python3 -m unittest tests/python/test_roofline.py)."""
import importlib.util
import json
import os
import pathlib
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIGS = pathlib.Path(os.environ.get("MINIVLLM_SHARED_DIR", ROOT.parent / "shared")) / "models" / "configs"
spec = importlib.util.spec_from_file_location("roofline", ROOT / "tools" / "roofline.py")
roofline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(roofline)

# Llama-3.1-8B by hand: hidden 4096, 32 layers, 32 q / 8 kv heads of 128, MLP 14336, vocab 128256, untied.
H, LAYERS, MLP, VOCAB, KV_WIDTH = 4096, 32, 14336, 128256, 8 * 128
LLAMA8B_LINEAR = LAYERS * (2 * H * H + 2 * H * KV_WIDTH + 3 * H * MLP)  # q, o; k, v; gate, up, down
LLAMA8B_NORMS = LAYERS * 2 * H + H                                      # two per layer, the final one
LLAMA8B_PARAMS = LLAMA8B_LINEAR + LLAMA8B_NORMS + 2 * VOCAB * H          # + embedding, LM head


def config(name):
    with open(CONFIGS / f"{name}.json") as f:
        return json.load(f)


class WeightBytes(unittest.TestCase):
    def test_llama_8b_bf16_is_the_hand_count(self):
        self.assertEqual(LLAMA8B_PARAMS, 8_030_261_248)  # the published 8.03B
        m = roofline.Model(config("llama-3.1-8b-instruct"))
        self.assertEqual(m.memory_bytes(), 2 * LLAMA8B_PARAMS)
        # A decode step reads one row of the embedding, not the table.
        self.assertEqual(m.step_read_bytes(1), 2 * (LLAMA8B_PARAMS - VOCAB * H))

    def test_world_size_2_halves_the_split_layers_only(self):
        one = roofline.Model(config("llama-3.1-8b-instruct"))
        two = roofline.Model(config("llama-3.1-8b-instruct"), world_size=2)
        norms = 2 * LLAMA8B_NORMS  # replicated on every rank
        self.assertEqual(two.memory_bytes() - norms, (one.memory_bytes() - norms) / 2)
        self.assertEqual(two.kv_bytes_per_token(), one.kv_bytes_per_token() / 2)
        self.assertEqual(two.linear_flops_per_token(), one.linear_flops_per_token() / 2)

    def test_fp8_weights_halve_the_linears_and_keep_the_head_bf16(self):
        m = roofline.Model(config("llama-3.1-8b-instruct"), weight_dtype="fp8")
        self.assertEqual(m.head_dtype, "bf16")
        self.assertEqual(m.memory_bytes(), LLAMA8B_LINEAR + 2 * (LLAMA8B_NORMS + 2 * VOCAB * H))

    def test_an_fp8_checkpoints_config_defaults_to_fp8_weights(self):
        self.assertEqual(roofline.config_weight_dtype(config("qwen3-8b-fp8")), "fp8")  # 128 x 128 blocks
        self.assertEqual(roofline.config_weight_dtype(config("qwen3-8b")), "bf16")
        fp8_ct = {"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {
            "group_0": {"weights": {"type": "float", "num_bits": 8}}}}}
        int8_ct = {"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {
            "group_0": {"weights": {"type": "int", "num_bits": 8}}}}}
        self.assertEqual(roofline.config_weight_dtype(fp8_ct), "fp8")
        self.assertEqual(roofline.config_weight_dtype(int8_ct), "bf16")
        self.assertEqual(roofline.parse_args([str(CONFIGS / "qwen3-8b-fp8.json")]).weight_dtype, "auto")

    def test_bits_per_weight_apply_to_the_head_too(self):
        m = roofline.Model(config("llama-3.1-8b-instruct"), weight_dtype="4.5")
        self.assertEqual(m.memory_bytes(), (LLAMA8B_LINEAR + 2 * VOCAB * H) * 4.5 / 8 + 2 * LLAMA8B_NORMS)

    def test_qwen3_moe_reads_its_routed_experts_at_batch_1_and_all_at_large_batches(self):
        m = roofline.Model(config("qwen3-30b-a3b"))
        expert = 2 * 48 * 3 * 2048 * 768  # bf16 gate/up/down of one expert over 48 layers
        self.assertAlmostEqual(m.step_read_bytes(1), m.memory_bytes() - 2 * 151936 * 2048 - 120 * expert)
        self.assertAlmostEqual(m.step_read_bytes(4096), m.memory_bytes() - 2 * 151936 * 2048, delta=expert)

    def test_mixtral_names_its_experts_and_their_width_its_own_way(self):
        path = ROOT / "tools" / "configs" / "mixtral-8x7b-instruct-v0.1.json"
        m = roofline.Model(json.loads(path.read_text()))
        expert = 2 * 32 * 3 * 4096 * 14336  # bf16 gate/up/down of one expert over 32 layers
        self.assertEqual((m.s.experts, m.s.experts_per_token, m.s.mlp_width), (8, 2, 14336))
        self.assertAlmostEqual(m.step_read_bytes(1), m.memory_bytes() - 2 * 32000 * 4096 - 6 * expert)

    def test_qwen2_moe_reads_its_shared_expert_with_every_token(self):
        path = ROOT / "tools" / "configs" / "qwen1.5-moe-a2.7b-chat.json"
        m = roofline.Model(json.loads(path.read_text()))
        h, layers, vocab = 2048, 24, 151936
        expert = layers * 3 * h * 1408  # gate/up/down of one routed expert over 24 layers
        always = layers * (4 * h * h + 3 * h * 5632)  # q, k, v, o and the shared expert
        replicated = layers * (2 * h + 60 * h + h) + h  # two norms, the router, the shared gate; final norm
        params = always + 60 * expert + layers * 3 * h + replicated + 2 * vocab * h  # + q/k/v biases
        self.assertEqual(round(params / 1e8), 143)  # the published 14.3B
        self.assertEqual(m.memory_bytes(), 2 * params)
        self.assertAlmostEqual(m.step_read_bytes(1), 2 * (params - vocab * h - 56 * expert))  # 4 of 60 read

    def test_glm4_moe_keeps_its_first_layer_dense_and_its_shared_expert_always_read(self):
        m = roofline.Model(json.loads((ROOT / "tests" / "goldens" / "glm4moe-tiny" / "config.json").read_text()))
        h, q, kv, vocab = 64, 64, 32, 512
        attention = 3 * (2 * h * q + 2 * h * kv)  # q, o; k, v; three layers
        always = attention + 3 * h * 96 + 2 * 3 * h * 32  # layer 0's dense MLP; layers 1-2's shared expert
        expert = 2 * 3 * h * 32  # one routed expert over the two sparse layers
        replicated = 3 * (2 * h + 2 * 16) + 2 * 8 * h + h  # norms and q/k norms, two routers, the final norm
        params = always + 8 * expert + 3 * (q + 2 * kv) + replicated + 2 * vocab * h
        self.assertEqual(m.memory_bytes(), 2 * params)
        self.assertAlmostEqual(m.step_read_bytes(1), 2 * (params - vocab * h - 6 * expert))  # 2 of 8 read

    def test_gemma2_ties_its_head_and_norms_each_sublayer_twice(self):
        path = ROOT / "tools" / "configs" / "gemma-2-9b-it.json"
        m = roofline.Model(json.loads(path.read_text()))
        h, layers = 3584, 42
        linear = layers * (2 * h * 16 * 256 + 2 * h * 8 * 256 + 3 * h * 14336)
        params = linear + layers * 4 * h + h + 256000 * h  # four norms a layer, one tied table
        self.assertEqual(params, 9_241_705_984)  # the published 9.24B
        self.assertEqual(m.memory_bytes(), 2 * params)

    def test_a_world_size_that_does_not_divide_is_named(self):
        with self.assertRaisesRegex(ValueError, "world size 3 does not divide the attention heads"):
            roofline.Model(config("llama-3.1-8b-instruct"), world_size=3)
        with self.assertRaisesRegex(ValueError, "weight dtype 'int3'"):
            roofline.Model(config("llama-3.1-8b-instruct"), weight_dtype="int3")


class KvAndFigures(unittest.TestCase):
    def test_kv_bytes_per_token(self):
        self.assertEqual(roofline.Model(config("llama-3.1-8b-instruct")).kv_bytes_per_token(), 2 * 32 * 8 * 128 * 2)
        fp8 = roofline.Model(config("llama-3.1-8b-instruct"), kv_cache_dtype="fp8")
        self.assertEqual(fp8.kv_bytes_per_token(), 2 * 32 * 8 * (128 + 4))  # e4m3 + an fp32 scale per head

    def test_batch1_decode_is_bytes_over_bandwidth(self):
        m, hw = roofline.Model(config("llama-3.1-8b-instruct")), roofline.Ceilings(bandwidth_tbs=4.3)
        mean_context = 128 + (1 + 255) / 2
        seconds = (m.step_read_bytes(1) + mean_context * m.kv_bytes_per_token()) / 4.3e12
        self.assertAlmostEqual(roofline.batch1_decode(m, hw)["tok_s"], 1 / seconds, delta=1e-6 / seconds)
        # `bench --decode-context 3000`: the same steps over a longer sequence's KV.
        long_seconds = (m.step_read_bytes(1) + (3000 + (1 + 255) / 2) * m.kv_bytes_per_token()) / 4.3e12
        self.assertAlmostEqual(roofline.batch1_decode(m, hw, 3000)["tok_s"], 1 / long_seconds,
                               delta=1e-6 / long_seconds)

    def test_seeds_workload_totals_and_steps(self):
        prompts, outputs = roofline.load_workload(None, None)
        self.assertEqual((len(prompts), sum(prompts), sum(outputs)), (256, 142_827, 133_966))
        m, hw = roofline.Model(config("llama-3.1-8b-instruct")), roofline.Ceilings()
        w = roofline.workload(m, hw, prompts, outputs, kv_capacity_tokens=10**9)
        # Everything runs at once; the longest output takes (its length - 1) decode steps.
        self.assertEqual((w["peak_running"], w["decode_steps"]), (256, max(outputs) - 1))
        small = roofline.workload(m, hw, prompts, outputs, kv_capacity_tokens=20_000)
        self.assertLess(small["peak_running"], 256)
        self.assertLess(small["tok_s"], w["tok_s"])


if __name__ == "__main__":
    unittest.main()
