"""nano-vllm's example.py and bench.py, call for call, with `from minivllm import LLM,
SamplingParams` and example.py's tokenizer taken from llm.tokenizer; small sizes."""
import json
from random import randint, seed

import pytest

from minivllm import LLM, SamplingParams, _minivllm


def test_example_py_flow(smollm2):
    # example.py, with llm.tokenizer in place of AutoTokenizer.from_pretrained(path).
    llm = LLM(smollm2, enforce_eager=True, tensor_parallel_size=1, max_model_len=512, num_kvcache_blocks=64)
    tokenizer = llm.tokenizer
    sampling_params = SamplingParams(temperature=0.6, max_tokens=16)
    prompts = [
        "introduce yourself",
        "list all prime numbers within 100",
    ]
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}],
            tokenize=False,
            add_generation_prompt=True,
        )
        for prompt in prompts
    ]
    outputs = llm.generate(prompts, sampling_params)
    assert len(outputs) == 2
    for prompt, output in zip(prompts, outputs):
        assert prompt.endswith("<|im_start|>assistant\n")  # SmolLM2's ChatML template
        assert 1 <= len(output["token_ids"]) <= 16
        assert output["text"]
        if output["finish_reason"] == "length":
            assert output["text"] == tokenizer.decode(output["token_ids"])
    llm.exit()


def test_bench_py_flow(smollm2):
    # bench.py with num_seqs 4, inputs up to 64 tokens and outputs up to 16 instead of 256 / 1024 / 1024.
    seed(0)
    num_seqs = 4
    max_input_len = 64
    max_ouput_len = 16

    llm = LLM(smollm2, enforce_eager=False, max_model_len=4096, num_kvcache_blocks=64)

    prompt_token_ids = [[randint(0, 10000) for _ in range(randint(10, max_input_len))] for _ in range(num_seqs)]
    sampling_params = [SamplingParams(temperature=0.6, ignore_eos=True, max_tokens=randint(1, max_ouput_len))
                       for _ in range(num_seqs)]

    llm.generate(["Benchmark: "], SamplingParams())
    outputs = llm.generate(prompt_token_ids, sampling_params, use_tqdm=False)
    total_tokens = sum(sp.max_tokens for sp in sampling_params)
    # ignore_eos: every sequence ran to its own max_tokens, in input order.
    assert [len(o["token_ids"]) for o in outputs] == [sp.max_tokens for sp in sampling_params]
    assert [o["prompt_token_ids"] for o in outputs] == prompt_token_ids
    assert total_tokens == sum(len(o["token_ids"]) for o in outputs)
    llm.exit()


def test_bench_workload_is_bench_py_draw():
    # The workload `minivllm bench` and `python -m minivllm.bench` run is exactly what CPython's
    # random draws in bench.py (this checks the C++ PyRandom against the real thing).
    seed(0)
    prompts = [[randint(0, 10000) for _ in range(randint(100, 1024))] for _ in range(256)]
    max_tokens = [randint(100, 1024) for _ in range(256)]
    got_prompts, got_max_tokens = _minivllm.bench_workload()
    assert got_prompts == prompts and got_max_tokens == max_tokens
    assert sum(map(len, prompts)) == 142827 and sum(max_tokens) == 133966


def test_python_bench_module_runs(smollm2, tmp_path, capsys):
    from minivllm import bench
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps({"prompt_token_ids": [[1, 2, 3, 4], [5, 6, 7]], "max_tokens": [5, 3]}))
    # Engine flags are spelled as the CLI's and reach LLM(**config) as keys.
    assert bench.main(["--model", smollm2, "--workload", str(workload), "--decode-tokens", "4",
                       "--max-model-len", "512", "--num-kvcache-blocks", "64", "--device", "cpu", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["num_seqs"] == 2 and report["output_tokens"] == 8 and report["decode_tokens"] == 3  # the prefill step samples the first
    assert report["num_kvcache_blocks"] == 64 and report["throughput_tok_s"] > 0


def test_python_bench_repeat_reports_the_median_run(smollm2, tmp_path, capsys):
    from minivllm import bench
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps({"prompt_token_ids": [[1, 2, 3, 4], [5, 6, 7]], "max_tokens": [5, 3]}))
    assert bench.main(["--model", smollm2, "--workload", str(workload), "--decode-tokens", "0", "--repeat", "3",
                       "--max-model-len", "512", "--num-kvcache-blocks", "64", "--device", "cpu", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    runs = report["throughput_runs_tok_s"]
    assert len(runs) == 3 and report["output_tokens"] == 8
    assert report["throughput_tok_s"] == sorted(runs)[1]  # the median of three
    with pytest.raises(SystemExit):
        bench.main(["--model", smollm2, "--workload", str(workload), "--repeat", "0", "--device", "cpu"])


def test_reset_prefix_cache_only_between_requests(stories):
    llm = LLM(stories, device="cpu", block_size=16, max_model_len=256, num_kvcache_blocks=64)
    prompt = list(range(1, 41))  # two full 16-token blocks
    rid = llm.add_request(prompt, SamplingParams(temperature=0, max_tokens=4, ignore_eos=True))
    assert llm.reset_prefix_cache() is False  # a request is unfinished
    while not llm.is_finished():
        llm.step()
    assert rid >= 0
    assert llm.reset_prefix_cache() is True
    llm.exit()
