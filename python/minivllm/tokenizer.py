"""The model's own tokenizer and chat template, shaped as transformers' tokenizers."""
from ._json import dumps, to_json


class Tokenizer:
    """``llm.tokenizer``: encode, decode and apply_chat_template as transformers has them."""

    def __init__(self, engine):
        self._engine = engine
        (self._has, self.vocab_size, bos_id, eos_id, bos, eos) = engine.tokenizer_info()
        self.bos_token_id = bos_id if bos_id >= 0 else None
        self.eos_token_id = eos_id if eos_id >= 0 else None
        self.bos_token = bos or None
        self.eos_token = eos or None

    def __len__(self):
        return self.vocab_size

    def encode(self, text, add_special_tokens=True):
        return self._engine.encode(text, add_special_tokens)

    def decode(self, token_ids, skip_special_tokens=False):
        return self._engine.decode(list(token_ids), skip_special_tokens)

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": self.encode(text, add_special_tokens)}

    def apply_chat_template(self, conversation, tokenize=True, add_generation_prompt=False, **kwargs):
        """Renders `conversation` (a list of {"role", "content"} dicts) with the model's chat
        template; other keyword arguments become template variables (e.g. enable_thinking=False).
        With tokenize=True (transformers' default) returns the token ids, else the text."""
        text = self.render(conversation, add_generation_prompt, kwargs)
        return self.encode(text, add_special_tokens=False) if tokenize else text

    def render(self, conversation, add_generation_prompt, variables):
        return self._engine.apply_chat_template(dumps(conversation, "the conversation"), add_generation_prompt,
                                                to_json(dict(variables or {}), "chat template variable"))
