"""Streaming deltas join into generate()'s text; chat and the tokenizer as transformers has them;
the GIL is released while the engine steps."""
import threading
import time

from conftest import TINY
from minivllm import LLM, SamplingParams


def test_stream_joins_into_generate_text(stories):
    llm = LLM(stories, **TINY)
    for sp in [SamplingParams(temperature=0, max_tokens=40, ignore_eos=True),
               SamplingParams(temperature=0.8, seed=3, max_tokens=40),
               SamplingParams(temperature=0, max_tokens=60, stop=["Lily"])]:
        whole = llm.generate(["Once upon a time"], sp, use_tqdm=False)[0]
        deltas = list(llm.stream("Once upon a time", sp))
        assert len(deltas) > 1
        assert "".join(deltas) == whole["text"]
    llm.exit()


def test_stream_closed_early_aborts(stories):
    llm = LLM(stories, **TINY)
    it = llm.stream("Once upon a time", SamplingParams(max_tokens=100, ignore_eos=True))
    next(it)
    it.close()
    assert llm.is_finished()
    llm.exit()


def test_chat_and_tokenizer(smollm2):
    llm = LLM(smollm2, max_model_len=512, num_kvcache_blocks=64, device="cpu")
    tok = llm.tokenizer
    conversation = [{"role": "user", "content": "What is the capital of France?"}]
    text = tok.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>") and text.endswith("<|im_start|>assistant\n")
    assert tok.apply_chat_template(conversation, add_generation_prompt=True) == tok.encode(text, add_special_tokens=False)
    assert tok.decode(tok.encode("Hello world")) == "Hello world"
    assert tok.eos_token_id is not None and tok.eos_token == "<|im_end|>"
    sp = SamplingParams(temperature=0, max_tokens=12)
    chat = llm.chat(conversation, sp, use_tqdm=False)
    generated = llm.generate([tok.apply_chat_template(conversation, add_generation_prompt=True)], sp, use_tqdm=False)
    assert len(chat) == 1 and chat[0]["token_ids"] == generated[0]["token_ids"]
    assert "Paris" in chat[0]["text"]
    assert "".join(llm.stream(conversation, sp)) == chat[0]["text"]
    two = llm.chat([conversation, conversation], [sp, sp], use_tqdm=False)
    assert [o["text"] for o in two] == [chat[0]["text"]] * 2
    llm.exit()


def test_n_choices_and_logprobs(stories):
    llm = LLM(stories, **TINY)
    out = llm.generate(["Once upon a time"], SamplingParams(n=3, seed=1, max_tokens=8, logprobs=2), use_tqdm=False)[0]
    assert [c["index"] for c in out["choices"]] == [0, 1, 2]
    assert out["token_ids"] == out["choices"][0]["token_ids"]
    assert len(out["logprobs"]) == len(out["token_ids"]) and len(out["logprobs"][0]["top"]) == 2
    scored = llm.generate(["Once upon a time"], SamplingParams(max_tokens=1, prompt_logprobs=1), use_tqdm=False)[0]
    prompt = scored["prompt_token_ids"]
    assert [e["token_id"] for e in scored["prompt_logprobs"]] == prompt[1:]
    assert all(e["logprob"] <= 0 and len(e["top"]) == 1 for e in scored["prompt_logprobs"])
    llm.exit()


def test_gil_released_while_stepping(smollm2):
    # One long prefill step in another thread while this one ticks: with the GIL held for the step,
    # this thread would stand still for the whole step (one gap as long as the step).
    llm = LLM(smollm2, max_model_len=1024, num_kvcache_blocks=64, device="cpu")
    llm.add_request(list(range(1000, 1256)), SamplingParams(max_tokens=1))
    done = threading.Event()
    spent = []

    def step():
        t = time.perf_counter()
        llm.step()
        spent.append(time.perf_counter() - t)
        done.set()

    th = threading.Thread(target=step)
    last = time.perf_counter()
    max_gap = 0.0
    th.start()
    while not done.is_set():
        now = time.perf_counter()
        max_gap = max(max_gap, now - last)
        last = now
    th.join()
    assert spent[0] > 0.1, f"the prefill step ({spent[0]:.3f} s) was too short to tell"
    assert max_gap < spent[0] / 2, f"this thread stalled {max_gap:.3f} s during a {spent[0]:.3f} s step"
    llm.exit()
