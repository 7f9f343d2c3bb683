#!/usr/bin/env python3
"""Writes the seed corpora of the fuzzers (fuzz/corpus/<name>/): a handful of small, valid inputs
each, crafted here (no model data is copied). Deterministic: rerunning rewrites the same files.

    python3 fuzz/make_seeds.py            # from the repository root
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def write(fuzzer, name, data):
    d = os.path.join(CORPUS, fuzzer)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---------------------------------------------------------------------------------------------
# Byte-level BPE alphabet (GPT-2's printable stand-ins for the 256 byte values).

def byte_alphabet():
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def bl(text):
    """A string's byte-level spelling."""
    alpha = byte_alphabet()
    return "".join(alpha[b] for b in text.encode("utf-8"))


MERGE_WORDS = ["he", "ll", "hell", "hello", " w", "or", " wor", "ld", " world", "in", " t", "th", " th", "the",
               "12", "er", "\n\n"]


def bpe_vocab_and_merges():
    """256 byte tokens, then one token per merge (each merge joins two existing tokens)."""
    vocab = byte_alphabet()
    merges = []
    have = set(vocab)
    for w in MERGE_WORDS:
        s = bl(w)
        if s in have:
            continue
        # split into the longest known prefix + rest, both known by construction order
        for cut in range(len(s) - 1, 0, -1):
            if s[:cut] in have and s[cut:] in have:
                merges.append((s[:cut], s[cut:]))
                break
        else:
            raise SystemExit("merge word %r has no known split" % w)
        vocab.append(s)
        have.add(s)
    return vocab, merges


# ---------------------------------------------------------------------------------------------
# tokenizer.json

QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
              r"\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")


def added(i, content, special=True):
    return {"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": not special, "special": special}


def tokenizer_json_seeds():
    vocab, merges = bpe_vocab_and_merges()
    v = {t: i for i, t in enumerate(vocab)}
    n = len(vocab)
    qwen = {
        "version": "1.0",
        "added_tokens": [added(n, "<|endoftext|>"), added(n + 1, "<|im_start|>"), added(n + 2, "<|im_end|>"),
                         added(n + 3, "<think>", False)],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN_SPLIT}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": v, "merges": [a + " " + b for a, b in merges]},
    }
    write("tokenizer_json", "qwen_like.json", json.dumps(qwen, ensure_ascii=False))

    llama = {
        "version": "1.0",
        "added_tokens": [added(n, "<|begin_of_text|>"), added(n + 1, "<|eot_id|>")],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_SPLIT}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [],
             "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [n], "tokens": ["<|begin_of_text|>"]}}}]},
        "model": {"type": "BPE", "ignore_merges": True, "vocab": v, "merges": [[a, b] for a, b in merges]},
    }
    write("tokenizer_json", "llama3_like.json", json.dumps(llama, ensure_ascii=False))

    gpt2 = {
        "added_tokens": [added(n, "<|endoftext|>")],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "Split", "pattern": {"String": "\n"}, "behavior": "MergedWithPrevious", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": True, "use_regex": True}]},
        "post_processor": {"type": "RobertaProcessing", "sep": ["<|endoftext|>", n], "cls": ["<|endoftext|>", n]},
        "model": {"vocab": v, "merges": [a + " " + b for a, b in merges[:8]]},
    }
    write("tokenizer_json", "gpt2_like.json", json.dumps(gpt2, ensure_ascii=True))

    tiny = {"model": {"type": "BPE", "vocab": {bl("a"): 0, bl("b"): 1, bl("ab"): 2, bl(" "): 3}, "merges": [["a", "b"]]},
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
            "added_tokens": [{"id": 4, "content": "<eos>", "special": True}],
            "post_processor": {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A"}},
                               {"SpecialToken": {"id": "<eos>"}}], "special_tokens": {"<eos>": {"ids": [4]}}}}
    write("tokenizer_json", "tiny.json", json.dumps(tiny, indent=1))


# ---------------------------------------------------------------------------------------------
# GGUF

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?",
              U64: "<Q", I64: "<q", F64: "<d"}
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q4_1, GGML_Q8_0, GGML_BF16 = 0, 1, 2, 3, 8, 30


def gstr(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gvalue(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        out = struct.pack("<IQ", et, len(items))
        for x in items:
            out += gvalue(et, x)
        return out
    return struct.pack(SCALAR_FMT[t], v)


def tensor_bytes(ggml_type, n):
    """Deterministic small data of n elements in the type's layout."""
    if ggml_type == GGML_F32:
        return b"".join(struct.pack("<f", ((i * 7) % 13 - 6) / 8.0) for i in range(n))
    if ggml_type == GGML_F16:
        return b"".join(struct.pack("<e", ((i * 5) % 11 - 5) / 4.0) for i in range(n))
    if ggml_type == GGML_BF16:
        return b"".join(struct.pack("<f", ((i * 3) % 7 - 3) / 2.0)[2:] for i in range(n))
    blocks = n // 32
    out = b""
    for blk in range(blocks):
        if ggml_type == GGML_Q8_0:
            out += struct.pack("<e", 0.01 * (blk + 1)) + bytes(((i * 37 + blk) % 255) for i in range(32))
        elif ggml_type == GGML_Q4_0:
            out += struct.pack("<e", 0.05 * (blk + 1)) + bytes(((i * 29 + blk) % 256) for i in range(16))
        elif ggml_type == GGML_Q4_1:
            out += struct.pack("<ee", 0.05, -0.2 * blk) + bytes(((i * 31 + blk) % 256) for i in range(16))
    return out


def gguf(kvs, tensors, version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, ne, ggml_type)] (data made up)."""
    out = struct.pack("<IIQQ", 0x46554747, version, len(tensors), len(kvs))
    for key, t, v in kvs:
        out += gstr(key) + struct.pack("<I", t) + gvalue(t, v)
    datas, offset = [], 0
    for name, ne, gt in tensors:
        n = 1
        for d in ne:
            n *= d
        data = tensor_bytes(gt, n)
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", gt, offset)
        datas.append((offset, data))
        offset = (offset + len(data) + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    start = len(out)
    for off, data in datas:
        out += b"\0" * (start + off - len(out)) + data
    return out


def model_tensors(hidden, heads, kv_heads, head_dim, ffn, vocab, qk_norm, big_type, small_type=GGML_F32):
    q, kv = heads * head_dim, kv_heads * head_dim
    t = [("token_embd.weight", [hidden, vocab], big_type), ("output_norm.weight", [hidden], small_type)]
    t += [("blk.0.attn_norm.weight", [hidden], small_type),
          ("blk.0.attn_q.weight", [hidden, q], big_type),
          ("blk.0.attn_k.weight", [hidden, kv], big_type),
          ("blk.0.attn_v.weight", [hidden, kv], big_type),
          ("blk.0.attn_output.weight", [q, hidden], big_type),
          ("blk.0.ffn_norm.weight", [hidden], small_type),
          ("blk.0.ffn_gate.weight", [hidden, ffn], big_type),
          ("blk.0.ffn_up.weight", [hidden, ffn], big_type),
          ("blk.0.ffn_down.weight", [ffn, hidden], big_type)]
    if qk_norm:
        t += [("blk.0.attn_q_norm.weight", [head_dim], small_type), ("blk.0.attn_k_norm.weight", [head_dim], small_type)]
    return t


def arch_kvs(arch, hidden, heads, kv_heads, head_dim, ffn):
    return [("general.architecture", STR, arch), ("general.name", STR, "fuzz seed"),
            (arch + ".embedding_length", U32, hidden), (arch + ".block_count", U32, 1),
            (arch + ".feed_forward_length", U32, ffn), (arch + ".attention.head_count", U32, heads),
            (arch + ".attention.head_count_kv", U32, kv_heads), (arch + ".attention.key_length", U32, head_dim),
            (arch + ".attention.layer_norm_rms_epsilon", F32, 1e-6), (arch + ".rope.freq_base", F32, 1000000.0),
            (arch + ".context_length", U32, 256)]


def gguf_seeds():
    vocab, merges = bpe_vocab_and_merges()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokens = vocab + specials
    types = [1] * len(vocab) + [3, 3, 3]
    n = len(tokens)
    kvs = arch_kvs("qwen3", 32, 4, 2, 8, 32) + [
        ("tokenizer.ggml.model", STR, "gpt2"), ("tokenizer.ggml.pre", STR, "qwen2"),
        ("tokenizer.ggml.tokens", ARR, (STR, tokens)), ("tokenizer.ggml.token_type", ARR, (I32, types)),
        ("tokenizer.ggml.merges", ARR, (STR, [a + " " + b for a, b in merges])),
        ("tokenizer.ggml.eos_token_id", U32, n - 1), ("tokenizer.ggml.bos_token_id", U32, n - 3),
        ("tokenizer.ggml.add_bos_token", BOOL, False),
        ("tokenizer.chat_template", STR,
         "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
         "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"),
    ]
    # Blocks run along ne[0] (= hidden or the FFN width here), so 32 is the smallest width that
    # quantizes. Embedding Q4_0, attention Q8_0, MLP Q4_1, norms F32.
    t = model_tensors(32, 4, 2, 8, 32, n, True, GGML_Q4_0)
    t = [(nm, ne, GGML_Q8_0 if "attn_" in nm and gt == GGML_Q4_0 else GGML_Q4_1 if "ffn_" in nm and gt == GGML_Q4_0
          else gt) for nm, ne, gt in t]
    write("gguf", "qwen3_quant.gguf", gguf(kvs, t))

    # SentencePiece vocabulary ("llama"), llama architecture (q/k rows unpermuted), Q4_0 / Q4_1 / F16.
    byte_pieces = [0x09, 0x0A, 0x20, 0x21, 0x2E, 0x30, 0x31, 0x41, 0x61, 0x62, 0x63, 0x7A, 0xBC, 0xC3, 0xE6, 0x97, 0xA5]
    words = ["\u2581", "\u2581t", "\u2581th", "\u2581the", "e", "h", "t", "l", "o", "\u2581h", "he", "ll", "llo"]
    pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in byte_pieces] + words
    scores = [0.0, 0.0, 0.0] + [0.0] * len(byte_pieces) + [-float(i) for i in range(len(words))]
    ptypes = [2, 3, 3] + [6] * len(byte_pieces) + [1] * len(words)
    kvs = arch_kvs("llama", 32, 4, 4, 8, 32) + [
        ("tokenizer.ggml.model", STR, "llama"), ("tokenizer.ggml.tokens", ARR, (STR, pieces)),
        ("tokenizer.ggml.scores", ARR, (F32, scores)), ("tokenizer.ggml.token_type", ARR, (I32, ptypes)),
        ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2),
        ("tokenizer.ggml.unknown_token_id", U32, 0), ("tokenizer.ggml.padding_token_id", U32, 0xFFFFFFFF),
        ("tokenizer.ggml.add_space_prefix", BOOL, True),
    ]
    t = model_tensors(32, 4, 4, 8, 32, len(pieces), False, GGML_Q4_0, GGML_F16)
    t = [(nm, ne, GGML_Q4_1 if "ffn" in nm and gt == GGML_Q4_0 else gt) for nm, ne, gt in t]
    t.append(("output.weight", [32, len(pieces)], GGML_BF16))
    write("gguf", "llama_spm_q4.gguf", gguf(kvs, t, alignment=64))

    # Metadata only, every value type (nested arrays too), GGUF v2, an unsupported tensor type.
    kvs = [("general.alignment", U32, 16), ("u8", U8, 200), ("i8", I8, -5), ("u16", U16, 60000), ("i16", I16, -300),
           ("u32", U32, 4000000000), ("i32", I32, -7), ("f32", F32, 0.5), ("bool", BOOL, True), ("str", STR, "h\u00e9"),
           ("u64", U64, 2 ** 63 + 5), ("i64", I64, -2 ** 40), ("f64", F64, -1.25),
           ("arr.i32", ARR, (I32, [1, -2, 3])), ("arr.f64", ARR, (F64, [0.5, 1e300])),
           ("arr.bool", ARR, (BOOL, [True, False])), ("arr.str", ARR, (STR, ["a", "", "\u00fc"])),
           ("arr.nested", ARR, (ARR, [(I32, [1, 2]), (I32, []), (STR, ["x"])])), ("arr.empty", ARR, (U8, []))]
    t = [("q4_k.weight", [256, 1], 12), ("f32.bias", [4], GGML_F32), ("bf16.4d", [2, 2, 2, 2], GGML_BF16)]
    write("gguf", "all_types_v2.gguf", gguf(kvs, t, version=2, alignment=16))

    # The smallest valid file, and one tensor-free qwen2 header.
    write("gguf", "empty.gguf", gguf([], []))
    kvs = arch_kvs("qwen2", 64, 2, 1, 32, 128) + [("qwen2.vocab_size", U32, 8)]
    write("gguf", "qwen2_header.gguf", gguf(kvs, [("token_embd.weight", [64, 8], GGML_Q8_0),
                                                  ("blk.0.attn_q.bias", [64], GGML_F32)]))
    # A tensor with a zero dim and huge others: no data, but slicing it must not visit its
    # 2.3e12 empty chunks (a fuzzer finding: a 10 s timeout in the tensor-parallel slices).
    write("gguf", "qwen2_zero_dim.gguf", gguf(kvs, [("token_embd.weight", [64, 8], GGML_Q8_0),
                                                    ("blk.0.attn_q.bias", [0, 1179648, 2336462209024], GGML_F32)]))


# ---------------------------------------------------------------------------------------------
# safetensors

def safetensors(tensors, metadata=None, pad=True):
    """tensors: [(name, dtype, shape, data bytes)] in order."""
    header, off, blob = {}, 0, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
        blob += data
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + blob


def f32s(n, scale=1.0):
    return b"".join(struct.pack("<f", scale * ((i % 9) - 4)) for i in range(n))


def bf16s(n):
    return b"".join(struct.pack("<f", (i % 5) - 2.0)[2:] for i in range(n))


def f16s(n):
    return b"".join(struct.pack("<e", ((i % 7) - 3) / 2.0) for i in range(n))


def safetensors_seeds():
    write("safetensors", "layer_bf16.safetensors", safetensors([
        ("model.embed_tokens.weight", "BF16", [16, 8], bf16s(128)),
        ("model.layers.0.self_attn.q_proj.weight", "BF16", [8, 8], bf16s(64)),
        ("model.layers.0.self_attn.k_proj.weight", "BF16", [4, 8], bf16s(32)),
        ("model.layers.0.input_layernorm.weight", "BF16", [8], bf16s(8)),
        ("model.norm.weight", "BF16", [8], bf16s(8))], metadata={"format": "pt"}))
    write("safetensors", "mixed.safetensors", safetensors([
        ("a.f32", "F32", [3, 5], f32s(15)), ("b.f16", "F16", [2, 3, 4], f16s(24)),
        ("c.i64", "I64", [2], struct.pack("<qq", 1, -1)), ("d.scalar", "F32", [], f32s(1)),
        ("e.empty", "F16", [0, 4], b""), ("f.u8", "U8", [5], b"\x01\x02\x03\x04\x05"),
        ("g.bool", "BOOL", [2], b"\x00\x01"), ("h.4d", "F32", [1, 2, 2, 2], f32s(8, 0.5))],
        metadata={"format": "pt", "note": "fuzz seed"}))
    write("safetensors", "no_padding.safetensors", safetensors([("w", "F32", [2, 2], f32s(4))], pad=False))
    write("safetensors", "header_only.safetensors", safetensors([], metadata={}))
    # transformers 5's stacked experts, read as per-expert views (loader/safetensors.cc)
    write("safetensors", "fused_experts.safetensors", safetensors([
        ("model.layers.0.mlp.experts.gate_up_proj", "BF16", [3, 4, 2], bf16s(24)),
        ("model.layers.0.mlp.experts.down_proj", "F32", [3, 2, 2], f32s(12))], metadata={"format": "pt"}))


# ---------------------------------------------------------------------------------------------
# chat templates (written for these seeds)

CHATML = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}
    {{- "# Tools\\n<tools>" }}
    {%- for tool in tools %}{{- "\\n" }}{{- tool | tojson }}{%- endfor %}
    {{- "\\n</tools><|im_end|>\\n" }}
{%- elif messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- set ns = namespace(last_user=messages|length - 1) %}
{%- for m in messages[::-1] %}
    {%- if m.role == 'user' and ns.last_user == messages|length - 1 %}{%- set ns.last_user = messages|length - 1 - loop.index0 %}{%- endif %}
{%- endfor %}
{%- for m in messages %}
    {%- set content = m.content if m.content is string else '' %}
    {%- if m.role == 'user' or (m.role == 'system' and not loop.first) %}
        {{- '<|im_start|>' + m.role + '\\n' + content + '<|im_end|>\\n' }}
    {%- elif m.role == 'assistant' %}
        {%- set reasoning = m.reasoning_content if m.reasoning_content is defined else '' %}
        {%- if '</think>' in content %}
            {%- set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
            {%- set content = content.split('</think>')[-1].lstrip('\\n') %}
        {%- endif %}
        {%- if loop.index0 > ns.last_user and reasoning %}
            {{- '<|im_start|>assistant\\n<think>\\n' + reasoning.strip('\\n') + '\\n</think>\\n\\n' + content }}
        {%- else %}
            {{- '<|im_start|>assistant\\n' + content }}
        {%- endif %}
        {%- for tc in m.tool_calls|default([]) %}
            {%- set f = tc.function if tc.function else tc %}
            {{- '\\n<tool_call>\\n{"name": "' + f.name + '", "arguments": ' }}
            {{- f.arguments if f.arguments is string else f.arguments|tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif m.role == 'tool' %}
        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
        {{- '\\n<tool_response>\\n' + content + '\\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}
{%- endif %}
"""

LLAMA3 = """{{- bos_token }}
{%- if not date_string is defined %}{%- set date_string = strftime_now("%d %b %Y") %}{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{%- if tools is not none %}{{- "Functions:\\n" }}{%- for t in tools %}{{- t | tojson(indent=4) }}{{- "\\n\\n" }}{%- endfor %}{%- endif %}
{{- system_message }}{{- "<|eot_id|>" }}
{%- for message in messages %}
    {%- if message.role not in ['user', 'assistant', 'tool', 'ipython'] %}
        {{- raise_exception('unknown role ' ~ message.role) }}
    {%- endif %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}
"""

FEATURES = """{% macro row(k, v, sep=': ') -%}{{ k }}{{ sep }}{{ v }}{%- endmacro %}
{%- set xs = [3, 1, 2] -%}
{%- for k, v in {'b': 2, 'a': 1}|dictsort %}{{ row(k, v) }};{% endfor %}
{{ xs|sort|join(',') }} {{ xs|length }} {{ xs|first }} {{ xs|last }} {{ xs|max }} {{ xs|min }} {{ xs|sum }}
{{ 'Hello World'|lower|replace('o', '0')|title }} {{ '%s-%d'|format('a', 3) }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 5 }} {{ -3|abs }}
{{ 'abc' * 2 }} {{ [1, 2] + [3] }} {{ 'x' ~ 1 ~ none }} {{ 1 < 2 < 3 }} {{ 'a' in 'cat' }} {{ not true or false and true }}
{%- for m in messages if m.role != 'system' %}
  {{ loop.index }}/{{ loop.length }} {{ m.role|upper }} {{ m.content|truncate(10) if m.content is string else m.content|tojson }}
  {%- if loop.first %} first{% elif loop.last %} last{% endif %}{{ loop.cycle('-', '+') }}
{%- else %}no messages{% endfor %}
{%- set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}
{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|list|tojson }}
{{ messages|rejectattr('role', 'eq', 'user')|list|length }} {{ extra_var|default('dflt') }} {{ (1, 2)[1] }}
{%- if tools is defined and tools is iterable and tools is not string %} tools={{ tools|length }}{% endif %}
{{ {'k': [1, 2.5, none, true, 'v"\\n']}|tojson }} {{ 'a,b,c'.split(',')[1:] }} {{ 'x'.startswith('x') }} {{ '  y '.strip() }}
{% raw %}{{ not rendered }}{% endraw %}{# comment #}{{ '%-5s|'|format('ab') }}{{ 3.0 }} {{ 1e3 }} {{ 10 / 4 }}{{ '\\u00e9'|length }}
"""


def chat_template_seeds():
    write("chat_template", "chatml_thinking", CHATML)
    write("chat_template", "chatml_vars", CHATML + "\0" + json.dumps({
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "<think>\nhm\n</think>\n\nhello"},
                     {"role": "user", "content": "again"}],
        "add_generation_prompt": True, "enable_thinking": True}))
    write("chat_template", "llama3_tools", LLAMA3 + "\0" + json.dumps({
        "bos_token": "<|begin_of_text|>", "date_string": "26 Jul 2024",
        "tools": [{"name": "f", "parameters": {"x": {"type": "string"}}}],
        "messages": [{"role": "system", "content": " sys "}, {"role": "user", "content": "q"}]}))
    write("chat_template", "llama3_bad_role", LLAMA3 + "\0" + json.dumps({"messages": [{"role": "robot", "content": "x"}]}))
    write("chat_template", "features", FEATURES + "\0" + json.dumps({"extra_var": [1, {"a": None}], "add_generation_prompt": False}))
    write("chat_template", "simple",
          "{% for message in messages %}{{ message['role'] + ': ' + message['content'] }}\n{% endfor %}"
          "{% if add_generation_prompt %}assistant:{% endif %}")
    write("chat_template", "whitespace",
          "<\n  {% if true %}\n  x\n  {% endif %}\n  y\n  {#- c -#}\n>{%- set s %} block {{ 1 + 1 }} {% endset %}[{{ s }}]"
          "{% for x in 'abc' %}{{ loop.previtem }}{{ x }}{{ loop.nextitem }}{% if x == 'b' %}{% break %}{% endif %}{% endfor %}")


# ---------------------------------------------------------------------------------------------
# tokenizer encode/decode (first byte: mode bits, see tokenizer_encode_fuzz.cc)

def tokenizer_encode_seeds():
    texts = {
        "english": "Hello world! It's a test: don't stop, we'll see.\n",
        "code": "def f(x):\n    return x ** 2  # square\n\n\tprint(f(12345))\r\n",
        "multilingual": "Gr\u00fc\u00dfe, \u4f60\u597d\u4e16\u754c, \u3053\u3093\u306b\u3061\u306f, \u0645\u0631\u062d\u0628\u0627, "
                        "\u043f\u0440\u0438\u0432\u0435\u0442 \U0001F600\U0001F44D\U0001F3FD",
        "specials": "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhi<|im_end|><|endoftext|><think>",
        "nfd": "e\u0301 a\u0308 A\u030a \u1100\u1161 \ufb01 \u2126 >\u0338",
        "spaces": "   a  b   \n\n\n  \t \u00a0\u3000x",
    }
    for i, (name, text) in enumerate(texts.items()):
        write("tokenizer_encode", name, bytes([i % 4]) + text.encode("utf-8"))
    write("tokenizer_encode", "invalid_utf8", b"\x00ok \xff\xfe \xc3 \xe2\x82 \xed\xa0\x80 \xf4\x90\x80\x80 end")
    ids = [9707, 1879, 0, 151643, 151644, 151645, 151667, 33975, 25, 198, 99, 20, 151935, -1, 1 << 30]
    write("tokenizer_encode", "ids", bytes([4]) + b"".join(struct.pack("<i", x) for x in ids))
    write("tokenizer_encode", "ids_skip", bytes([6]) + b"".join(struct.pack("<i", x) for x in ids[:12]))


def main():
    tokenizer_json_seeds()
    gguf_seeds()
    safetensors_seeds()
    chat_template_seeds()
    tokenizer_encode_seeds()
    for d in sorted(os.listdir(CORPUS)):
        files = os.listdir(os.path.join(CORPUS, d))
        size = sum(os.path.getsize(os.path.join(CORPUS, d, f)) for f in files)
        print("%-18s %2d files %6d bytes" % (d, len(files), size))
        if size > 100_000:
            sys.exit("corpus %s is over 100 KB" % d)


if __name__ == "__main__":
    main()
