"""Docstrings from the engine's config tables: the keys, their types, defaults, ranges and help are
defined once in C++ (src/api/engine_config.cc, src/engine/sampling_keys.cc); Python only shows them."""
from . import _minivllm


def keys_doc(kind):
    """One paragraph per key of `kind` ("engine" or "sampling"), as a docstring section."""
    lines = ["", "Keyword arguments (the engine's config table):" if kind == "engine"
             else "Keyword arguments (the engine's sampling table):"]
    for name, alias, type_, default, range_, help_ in _minivllm.config_keys(kind):
        head = f"    {name}" + (f" (alias {alias})" if alias else "") + f": {type_}, default {default}"
        if range_:
            head += f"; {range_}"
        lines += [head, f"        {help_}"]
    return "\n".join(lines)
