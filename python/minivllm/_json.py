"""Python values to the JSON text the C++ side parses and checks (it alone knows the keys)."""
import json


def dumps(value, what):
    """`value` as JSON text; one JSON cannot hold is a ValueError naming `what`."""
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what} has a value that is not a number, string, bool, None, list or dict: "
                         f"{value!r} ({e})") from None


def to_json(values, what):
    """Keyword arguments `values` as a JSON object; a bad value is a ValueError naming its key."""
    for key, value in values.items():
        dumps(value, f"{what} '{key}'")
    return json.dumps(values, allow_nan=False)
