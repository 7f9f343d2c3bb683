"""SamplingParams: nano-vllm's (and vLLM's) per-request settings, checked by the engine."""
import json
import struct

from . import _minivllm
from ._docs import keys_doc
from ._json import to_json


class SamplingParams:
    """Sampling parameters, given as keyword arguments (listed below, from the engine's table).

    The engine validates them here: an unknown key or a bad value raises ValueError naming the key.
    Each parameter reads back as an attribute (``sp.max_tokens``); setting one validates again.
    """

    __slots__ = ("_core", "_values")

    def __init__(self, **kwargs):
        self._set(kwargs)

    def _set(self, kwargs):
        core = _minivllm.SamplingParams.from_json(to_json(kwargs, "sampling parameter"))
        object.__setattr__(self, "_core", core)
        values = {k: _short_float32(v) if isinstance(v, float) else v for k, v in json.loads(core.to_json()).items()}
        object.__setattr__(self, "_values", values)

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"SamplingParams has no parameter '{name}'") from None

    def __setattr__(self, name, value):
        self._set({**self._values, name: value})

    def to_dict(self):
        return dict(self._values)

    def __eq__(self, other):
        return isinstance(other, SamplingParams) and self._values == other._values

    def __repr__(self):
        return "SamplingParams(" + ", ".join(f"{k}={v!r}" for k, v in self._values.items()) + ")"


SamplingParams.__doc__ += keys_doc("sampling")


def _short_float32(x):
    """The engine keeps floats as float32: 0.6 comes back as 0.6000000238418579. This gives the
    shortest decimal that is the same float32 (0.6), as the user wrote it."""
    f32 = struct.unpack("f", struct.pack("f", x))[0]
    for digits in range(1, 10):
        short = float(f"{f32:.{digits}g}")
        if struct.unpack("f", struct.pack("f", short))[0] == f32:
            return short
    return f32
