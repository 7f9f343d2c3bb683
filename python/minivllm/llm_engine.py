"""LLMEngine: nano-vllm's engine API (add_request, step, is_finished, abort, exit, generate) over
the C++ engine. The engine steps with the GIL released; its errors arrive as Python exceptions
carrying the engine's message: ValueError for a bad parameter or prompt, FileNotFoundError for a
missing model, RuntimeError for a failure while loading or running (a device error)."""
import json
import weakref
from time import perf_counter

from . import _minivllm
from ._docs import keys_doc
from ._json import dumps, to_json
from .sampling_params import SamplingParams
from .tokenizer import Tokenizer

try:
    from tqdm.auto import tqdm
except ImportError:  # the progress bar is optional
    tqdm = None


def _exit_engine(engine):
    engine.exit()


def _prompt_list(prompts):
    """One prompt (a string, or a list of token ids) or a list of them -> a list of prompts."""
    if isinstance(prompts, str):
        return [prompts]
    prompts = list(prompts)
    if prompts and isinstance(prompts[0], int):
        return [prompts]
    return prompts


def _is_conversation(prompt):
    return isinstance(prompt, (list, tuple)) and len(prompt) > 0 and isinstance(prompt[0], dict)


class _NoBar:
    def update(self, n=1):
        pass

    def set_postfix(self, *args, **kwargs):
        pass

    def close(self):
        pass


class LLMEngine:
    """LLMEngine(model, **config): `model` is a Hugging Face directory, a .gguf file or the default
    model's name; `config` holds the engine's config keys (listed below, from the engine's table).
    The engine checks them: an unknown key or a bad value raises ValueError naming the key."""

    def __init__(self, model, **config):
        self._engine = _minivllm.Engine(to_json({"model": str(model), **config}, "config key"))
        # Freed when this object is collected or the interpreter exits, whichever comes first; exit()
        # frees it now. (An atexit hook holding self, as nano-vllm's, would keep it alive forever.)
        self._finalizer = weakref.finalize(self, _exit_engine, self._engine)
        self.tokenizer = Tokenizer(self._engine)
        (self.max_model_len, self.num_kvcache_blocks, self.block_size, self.tensor_parallel_size,
         self.vocab_size) = self._engine.resolved_config()

    # --- the seeds' engine API ---------------------------------------------------------------

    def add_request(self, prompt, sampling_params=None):
        """Queues a prompt (text, token ids, or a conversation: a list of {"role", "content"});
        returns its request id."""
        sp = sampling_params if sampling_params is not None else self.get_default_sampling_params()
        if not isinstance(sp, SamplingParams):
            raise TypeError(f"sampling_params must be a SamplingParams, got {type(sp).__name__}")
        if _is_conversation(prompt):
            return self.add_chat_request(prompt, sp)
        if not isinstance(prompt, str):
            prompt = list(prompt)
        return self._engine.add_request(prompt, sp._core)

    def add_chat_request(self, messages, sampling_params=None, chat_template_kwargs=None, add_generation_prompt=True,
                         continue_final_message=False):
        """Queues a conversation rendered with the model's chat template; returns its request id.
        continue_final_message (with add_generation_prompt=False) leaves the last message open, so
        that the model continues it (a prefilled reply), as vLLM's."""
        sp = sampling_params if sampling_params is not None else self.get_default_sampling_params()
        return self._engine.add_chat_request(dumps(messages, "the conversation"), sp._core,
                                             to_json(dict(chat_template_kwargs or {}), "chat template variable"),
                                             bool(add_generation_prompt), bool(continue_final_message))

    def step(self):
        """One engine step: (finished outputs, num_tokens) as the seeds' step() returns them; each
        output unpacks as (request_id, token_ids) and has .text, .finish_reason, .index ...;
        num_tokens > 0 counts prefill tokens, < 0 decoded sequences."""
        r = self._engine.step()
        return r.finished, r.num_tokens

    def step_result(self):
        """One engine step with its streaming deltas: .finished, .deltas, .num_tokens."""
        return self._engine.step()

    def is_finished(self):
        return self._engine.is_finished()

    def abort(self, request_id):
        """Drops a request and frees its KV blocks; False when it is not in flight."""
        return self._engine.abort(request_id)

    def reset_prefix_cache(self):
        """Empties the prefix cache (vLLM's reset_prefix_cache), so that prompts seen before are
        computed again; False, changing nothing, while a request is unfinished."""
        return self._engine.reset_prefix_cache()

    def exit(self):
        """Stops the engine and frees its memory and worker processes now."""
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.exit()

    # --- whole batches -----------------------------------------------------------------------

    def generate(self, prompts, sampling_params=None, use_tqdm=True):
        """Runs every prompt (strings or token-id lists) to completion. `sampling_params` is one
        SamplingParams for all or a list with one per prompt. Returns one dict per prompt, in input
        order: {"text", "token_ids", "finish_reason", "prompt_token_ids", "num_cached_tokens"}, plus
        "logprobs" and "prompt_logprobs" when asked for and "choices" (one such dict per choice) when
        n > 1."""
        prompts = _prompt_list(prompts)
        return self._run(prompts, self._params_for(sampling_params, len(prompts)), use_tqdm,
                         lambda p, sp: self.add_request(p, sp))

    def embed(self, prompts, use_tqdm=True):
        """Embeds every prompt (strings or token-id lists): the final-normed hidden state of its last
        token, L2-normalised, as vLLM's LLM.embed gives decoder embedding models (Qwen3-Embedding).
        Returns one dict per prompt, in input order: {"embedding", "prompt_token_ids",
        "num_cached_tokens"}."""
        prompts = _prompt_list(prompts)
        params = [SamplingParams(max_tokens=1)] * len(prompts)
        outs = self._run(prompts, params, use_tqdm, lambda p, sp: self._engine.add_embedding_request(
            p if isinstance(p, str) else list(p)))
        result = []
        for out in outs:
            norm = sum(x * x for x in out["embedding"]) ** 0.5
            result.append({"embedding": [x / norm for x in out["embedding"]] if norm > 0 else out["embedding"],
                           "prompt_token_ids": out["prompt_token_ids"],
                           "num_cached_tokens": out["num_cached_tokens"]})
        return result

    def chat(self, messages, sampling_params=None, use_tqdm=True, chat_template_kwargs=None,
             add_generation_prompt=True, continue_final_message=False):
        """Like generate() for conversations: `messages` is one conversation (a list of
        {"role", "content"}) or a list of them, each rendered with the model's chat template and
        `chat_template_kwargs` (e.g. {"enable_thinking": False}); add_generation_prompt and
        continue_final_message as add_chat_request's."""
        conversations = [messages] if _is_conversation(messages) else list(messages)
        return self._run(conversations, self._params_for(sampling_params, len(conversations)), use_tqdm,
                         lambda c, sp: self.add_chat_request(c, sp, chat_template_kwargs, add_generation_prompt,
                                                             continue_final_message))

    def stream(self, prompt, sampling_params=None, chat_template_kwargs=None):
        """Yields the completion of one prompt (text, token ids, or a conversation) as text deltas,
        as they are decoded; joined they are generate()'s text. Closing the iterator early aborts
        the request."""
        sp = sampling_params if sampling_params is not None else self.get_default_sampling_params()
        if sp.n != 1:
            raise ValueError(f"stream() yields one completion: n must be 1, got {sp.n}")
        self._require_idle()
        if _is_conversation(prompt):
            rid = self.add_chat_request(prompt, sp, chat_template_kwargs)
        else:
            rid = self.add_request(prompt, sp)
        return self._stream(rid)

    def _stream(self, rid):
        try:
            while not self._engine.is_finished():
                r = self._engine.step()
                for d in r.deltas:
                    if d.request_id == rid and d.text:
                        yield d.text
                for out in r.finished:
                    if out.finish_reason == "error":
                        raise RuntimeError(out.error)
        finally:
            self._engine.abort(rid)

    def get_default_sampling_params(self):
        """The SamplingParams a call without them uses (vLLM's): the model's recommended sampling
        (its generation_config.json: temperature, top_p, top_k, min_p, repetition_penalty,
        max_new_tokens as max_tokens) over the defaults, unless the engine was made with
        generation_config="vllm"."""
        return SamplingParams(**json.loads(self._engine.generation_defaults()))

    def _params_for(self, sampling_params, count):
        if sampling_params is None:
            sampling_params = self.get_default_sampling_params()
        if isinstance(sampling_params, SamplingParams):
            return [sampling_params] * count
        params = list(sampling_params)
        if len(params) != count:
            raise ValueError(f"sampling_params has {len(params)} entries for {count} prompts")
        for i, sp in enumerate(params):
            if not isinstance(sp, SamplingParams):
                raise TypeError(f"sampling_params[{i}] must be a SamplingParams, got {type(sp).__name__}")
        return params

    def _require_idle(self):
        if not self._engine.is_finished():
            raise RuntimeError("the engine has requests in flight (from add_request); step() until "
                               "is_finished() before generate(), chat() or stream()")

    def _run(self, prompts, params, use_tqdm, add):
        self._require_idle()
        ids = []
        bar = _NoBar()
        try:
            for i, (p, sp) in enumerate(zip(prompts, params)):
                try:
                    ids.append(add(p, sp))
                except ValueError as e:
                    raise ValueError(f"prompt {i}: {e}") from None
            slot = {rid: i for i, rid in enumerate(ids)}
            results = [[None] * sp.n for sp in params]
            if use_tqdm and tqdm is not None:
                bar = tqdm(total=sum(sp.n for sp in params), desc="Generating", dynamic_ncols=True)
            prefill = decode = 0.0
            while not self._engine.is_finished():
                t = perf_counter()
                r = self._engine.step()
                if use_tqdm:
                    dt = perf_counter() - t
                    if r.num_tokens > 0:
                        prefill = r.num_tokens / dt
                    elif r.num_tokens < 0:
                        decode = -r.num_tokens / dt
                    bar.set_postfix({"Prefill": f"{int(prefill)}tok/s", "Decode": f"{int(decode)}tok/s"})
                for out in r.finished:
                    if out.finish_reason == "error":
                        raise RuntimeError(f"prompt {slot[out.request_id]}: {out.error}")
                    results[slot[out.request_id]][out.index] = out
                    bar.update(1)
        except BaseException:
            for rid in ids:
                self._engine.abort(rid)
            raise
        finally:
            bar.close()
        return [_result(choices, sp) for choices, sp in zip(results, params)]


def _choice(out, with_logprobs):
    d = {"text": out.text, "token_ids": out.token_ids, "finish_reason": out.finish_reason}
    if with_logprobs:
        d["logprobs"] = out.logprobs
    return d


def _result(choices, sp):
    first = choices[0]
    d = _choice(first, sp.logprobs >= 0)
    d["prompt_token_ids"] = first.prompt_token_ids
    d["num_cached_tokens"] = first.num_cached_tokens
    if first.embedding:  # an embedding request (embed())
        d["embedding"] = first.embedding
    if sp.prompt_logprobs >= 0:  # one per prompt token after the first, the same for every choice
        d["prompt_logprobs"] = first.prompt_logprobs
    if sp.n > 1:
        d["choices"] = [dict(_choice(c, sp.logprobs >= 0), index=c.index) for c in choices]
    return d


LLMEngine.__doc__ += keys_doc("engine")
