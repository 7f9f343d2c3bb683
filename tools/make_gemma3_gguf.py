#!/usr/bin/env python3
"""Converts tests/goldens/gemma3-tiny-gguf (a tiny random Gemma3ForCausalLM made by
tools/make_hf_goldens.py) to GGUF with llama.cpp's own converter, convert_hf_to_gguf.py: the file
tests/golden/gguf_gemma3_test.cc loads and checks against that checkpoint's Hugging Face goldens.

Usage (the venv of tools/requirements-goldens.txt: torch, transformers, numpy; the converter's
gguf-py is the one vendored beside it):
    python3 tools/make_gemma3_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/gemma3-tiny-gguf

llama.cpp is the one the llama-cpp-python sdist vendors (docs/PERFORMANCE.md). Writes
DIR/gemma3-tiny.bf16.gguf (--outtype bf16: the checkpoint's bf16 matrices as they are; the
converter stores every norm in f32, with Gemma's 1 added: x_hat * (1 + w) becomes x_hat * w').

The checkpoint has no tokenizer (the goldens are token ids), and the converter's tokenizer step
needs a real one (it fingerprints the pre-tokenizer), so that one step is replaced: the vocabulary
written is 512 placeholder SentencePiece pieces with Gemma's special ids (pad 0, eos 1, bos 2,
unk 3). Everything else (tensor names, the norm shift, the metadata) is the converter's.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", help="the HF checkpoint folder; the .gguf is written beside it")
    parser.add_argument("--llama-cpp", required=True, help="llama.cpp source tree (convert_hf_to_gguf.py)")
    parser.add_argument("--outfile", default=None)
    args = parser.parse_args()
    outfile = args.outfile or os.path.join(args.dir, "gemma3-tiny.bf16.gguf")
    sys.path.insert(0, os.path.abspath(args.llama_cpp))
    import convert_hf_to_gguf  # noqa: E402  (puts the vendored gguf-py on sys.path)
    import gguf  # noqa: E402
    from conversion import gemma  # noqa: E402

    with open(os.path.join(args.dir, "config.json")) as f:
        vocab_size = json.load(f)["vocab_size"]
    special = {0: "<pad>", 1: "<eos>", 2: "<bos>", 3: "<unk>"}
    pieces = [special.get(i, f"\u2581t{i}") for i in range(vocab_size)]

    def placeholder_vocab(self):
        w = self.gguf_writer
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(pieces)
        w.add_token_scores([0.0 if i in special else -float(i) for i in range(vocab_size)])
        w.add_token_types([gguf.TokenType.CONTROL if i in special and i != 3 else
                           gguf.TokenType.UNKNOWN if i == 3 else gguf.TokenType.NORMAL for i in range(vocab_size)])
        w.add_pad_token_id(0)
        w.add_eos_token_id(1)
        w.add_bos_token_id(2)
        w.add_unk_token_id(3)
        w.add_add_bos_token(True)
        w.add_add_space_prefix(False)  # as Gemma3Model.set_vocab writes it

    gemma.Gemma3Model.set_vocab = placeholder_vocab
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "model")
        shutil.copytree(args.dir, src, ignore=shutil.ignore_patterns("*.gguf", "goldens*.json"))
        # Gemma3Model.modify_tensors keeps len(model.vocab) + len(added_tokens) embedding rows.
        with open(os.path.join(src, "tokenizer.json"), "w") as f:
            json.dump({"model": {"vocab": {p: i for i, p in enumerate(pieces)}}, "added_tokens": []}, f)
        sys.argv = ["convert_hf_to_gguf.py", src, "--outtype", "bf16", "--outfile", os.path.abspath(outfile)]
        convert_hf_to_gguf.main()
    print(f"wrote {outfile} ({os.path.getsize(outfile)} bytes)")


if __name__ == "__main__":
    main()
