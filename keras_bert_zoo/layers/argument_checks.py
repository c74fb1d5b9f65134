"""Type and range checks for the constructor arguments of layers and models.

Each check returns the value as the plain Python type stored in the config (so a NumPy
integer becomes an `int`) or raises: `TypeError` for a wrong type (`hidden_dim="32"`,
`causal="no"`), `ValueError` for a wrong value (`num_layers=0`), both in the usual
"Received: name=value" form. Booleans are not accepted as integers, nor integers as
booleans: `num_layers=True` and `causal=0` are mistakes, not 1 and False.
"""

import numbers

import keras
import numpy as np

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def _received(name, value):
    return f"Received: {name}={value!r} of type {type(value).__name__}."


def positive_int(name, value):
    """Returns `value` as an int; TypeError unless an integer (not a bool), ValueError if < 1."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be a positive int. {_received(name, value)}")
    if value < 1:
        raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}.")
    return int(value)


def boolean(name, value):
    """Returns `value` as a bool; TypeError for anything but True/False."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"`{name}` must be True or False. {_received(name, value)}")
    return bool(value)


def _real(name, value, what):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` must be {what}. {_received(name, value)}")
    return float(value)


def rate(name, value):
    """Returns a dropout rate as a float; TypeError unless a number, ValueError outside [0, 1)."""
    value = _real(name, value, "a float in [0, 1)")
    if not 0.0 <= value < 1.0:
        raise ValueError(f"`{name}` must be in [0, 1). Received: {name}={value!r}.")
    return value


def positive_float(name, value):
    """Returns `value` as a float; TypeError unless a number, ValueError unless > 0."""
    value = _real(name, value, "a positive float")
    if not value > 0.0:
        raise ValueError(f"`{name}` must be a positive float. Received: {name}={value!r}.")
    return value


def float_policy(dtype):
    """Returns the dtype policy for `dtype` (None: the global one); refuses non-float policies.

    The models compute in floating point whatever their inputs (int32 ids); an integer
    policy (`dtype="int32"`) would fail deep inside the first layer.
    """
    try:
        policy = keras.config.dtype_policy() if dtype is None else keras.dtype_policies.get(dtype)
    except (TypeError, ValueError) as error:
        raise ValueError(
            "`dtype` must be a float dtype policy such as 'float32', 'mixed_bfloat16' or "
            f"'mixed_float16'. Received: dtype={dtype!r} ({error})."
        ) from None
    check_float_policy(policy, dtype)
    return policy


def check_float_policy(policy, dtype=None):
    """Raises ValueError unless `policy` computes and stores variables in floating point."""
    if policy.compute_dtype not in FLOAT_DTYPES or policy.variable_dtype not in FLOAT_DTYPES:
        raise ValueError(
            "`dtype` must be a float dtype policy such as 'float32', 'mixed_bfloat16' or "
            f"'mixed_float16'. Received: dtype={policy.name if dtype is None else dtype!r} "
            f"(compute dtype {policy.compute_dtype}, variable dtype {policy.variable_dtype}). "
            "Token ids are int32 inputs whatever the policy."
        )
