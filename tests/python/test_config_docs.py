"""The keyword arguments' docstrings come from the engine's config tables (one definition per key):
every key of each table, with its help text, appears in the docstring of the class that takes it."""
import pytest

from minivllm import LLM, LLMEngine, SamplingParams, _minivllm


@pytest.mark.parametrize("kind,cls,known", [("engine", LLMEngine, "max_num_seqs"), ("engine", LLM, "block_size"),
                                            ("sampling", SamplingParams, "temperature")])
def test_docstring_lists_every_key_of_the_table(kind, cls, known):
    keys = _minivllm.config_keys(kind)
    assert known in [k[0] for k in keys]
    for name, alias, type_, default, range_, help_ in keys:
        assert f"\n    {name}" in cls.__doc__, name
        assert help_ in cls.__doc__, name
        if alias:
            assert f"(alias {alias})" in cls.__doc__, name


def test_unknown_table_is_a_value_error():
    with pytest.raises(ValueError, match="kind"):
        _minivllm.config_keys("server")
