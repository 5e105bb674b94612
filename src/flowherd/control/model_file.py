"""Reading a stable-baselines3 model file without running anything in it.

A stable-baselines3 ``.zip`` holds a JSON ``data`` member whose non-JSON values (the policy
class, the observation and action spaces, sometimes the policy's keyword arguments) are
base64-encoded cloudpickle, and ``policy.pth``, the policy's weights as a torch archive.
stable-baselines3's own loader (``load_from_zip_file``) unpickles every such value, and unpickling
can call any function: a model file is input like any other, and one whose ``policy_class`` is
``pickle`` of ``os.system("...")`` would run the command as it is opened.

`read_model_file` unpickles nothing. It checks, before anything is built or loaded:

* the file is a zip of at most `MAX_MEMBER_BYTES` per member (a zip bomb is refused from the
  sizes its directory declares), with ``data`` and ``policy.pth``;
* ``data`` is JSON whose ``policy_class`` is a pickled *reference* to stable-baselines3's
  ``ActorCriticPolicy`` and nothing else: its opcodes are read with `pickletools.genops`, which
  parses without executing, and any opcode other than a protocol header, strings, memo writes
  and the one global lookup (a call, an object build, a second global) is refused, naming the
  callable it would have reached;
* the spaces are taken from the fields stable-baselines3 writes beside their pickles (``:type:``,
  ``_shape``, ``dtype``, ``n``), not from the pickles, and must be flowherd's (a ``Box`` of
  `flowherd.control.herd.NUM_FEATURES` float32 features, a ``Discrete`` of one of
  `flowherd.control.agent.ACTION_SPACES`' sizes);
* ``policy_kwargs`` is plain JSON with keys of `POLICY_KWARGS` only, or (A2C, whose RMSprop
  settings are not JSON) a pickle of plain data, no call or object build among its opcodes,
  whose references are optimizers and activation functions only; that one is read by a
  restricted unpickler that resolves the activation functions and nothing else.

Then the policy is built from flowherd's own spaces and the declared keyword arguments, and its
weights are read with ``torch.load(weights_only=True)`` (torch's restricted unpickler: tensors
and plain containers only). ``policy.optimizer.pth`` and ``pytorch_variables.pth`` are never read.
A model written by `flowherd.rl.train` loads as before and gives the same actions.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import pickle
import pickletools
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowherd.errors import ConfigError
from flowherd.units import MiB

__all__ = ["MAX_MEMBER_BYTES", "POLICY_CLASSES", "POLICY_KWARGS", "ModelSchema", "class_reference",
           "load_weights", "pickle_globals", "read_model_file"]

#: Largest member of a model file read, bytes: flowherd's policies are tens of kB (two 64-unit
#: layers per head); a member declaring more is refused before it is decompressed.
MAX_MEMBER_BYTES = 64 * MiB
#: The policy classes a model file may name: stable-baselines3's actor-critic policy (PPO and A2C
#: save it under this name; ``MlpPolicy`` is an alias of it), and flowherd's rule-family policy
#: of the paths-index space (`flowherd.control.paths_rule`).
POLICY_CLASSES = (("stable_baselines3.common.policies", "ActorCriticPolicy"),
                  ("flowherd.control.paths_rule", "PathsRulePolicy"))
#: Keyword arguments of the policy a model file may declare, and those of its optimizer, which
#: acting does not need (A2C saves RMSprop's; they are dropped).
POLICY_KWARGS = ("net_arch", "activation_fn", "ortho_init", "share_features_extractor", "normalize_images")
TRAINING_KWARGS = ("optimizer_class", "optimizer_kwargs")
#: What a pickled ``policy_kwargs`` may refer to: optimizers (dropped) and activation functions.
_KWARGS_GLOBALS = {("torch.optim.adam", "Adam"), ("torch.optim.rmsprop", "RMSprop"),
                   ("torch.optim.sgd", "SGD"), ("torch.nn.modules.activation", "Tanh"),
                   ("torch.nn.modules.activation", "ReLU")}
#: Opcodes of a pickle of plain data (containers, numbers, strings, references): none calls
#: anything or builds an object.
_DATA_OPS = {
    "PROTO", "FRAME", "STOP", "MARK", "MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET",
    "LONG_BINGET", "SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8", "EMPTY_DICT", "DICT",
    "EMPTY_LIST", "LIST", "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "SETITEM", "SETITEMS",
    "APPEND", "APPENDS", "NONE", "NEWTRUE", "NEWFALSE", "INT", "BININT", "BININT1", "BININT2", "LONG",
    "LONG1", "LONG4", "FLOAT", "BINFLOAT", "STACK_GLOBAL", "GLOBAL"}
_SB3_GLOBALS = {("stable_baselines3.common.buffers", "RolloutBuffer"),
                ("stable_baselines3.common.utils", "FloatSchedule"),
                ("stable_baselines3.common.utils", "ConstantSchedule"),
                ("stable_baselines3.common.utils", "LinearSchedule")}
_REFERENCE_OPS = {"PROTO", "FRAME", "SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8",
                  "MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT", "STACK_GLOBAL", "GLOBAL", "STOP"}


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSchema:
    """What a checked model file declares.

    Attributes:
        num_features: Length of the observation vector.
        num_actions: Number of discrete actions.
        policy_kwargs: Keyword arguments of the policy (keys of `POLICY_KWARGS`).
        policy_bytes: The ``policy.pth`` member (the weights).
        policy_class: The declared policy class, ``(module, name)``, one of `POLICY_CLASSES`.
    """

    num_features: int
    num_actions: int
    policy_kwargs: dict[str, Any]
    policy_bytes: bytes
    policy_class: tuple[str, str] = POLICY_CLASSES[0]


def _bad(path: str | Path, reason: str) -> ConfigError:
    return ConfigError(f"{str(path)!r} is not a stable-baselines3 actor-critic model written by flowherd "
                       f"train: {reason} (controller.name)")


def pickle_globals(blob: bytes) -> list[tuple[str, str, str]]:
    """Every global a pickle would look up, with the opcode that follows each lookup's use.

    Parsed with `pickletools.genops`: no object is made, no function called. The stack is
    followed from the opcodes' declared stack effects, far enough to know the two strings a
    ``STACK_GLOBAL`` takes (often fetched back from the memo).

    Returns:
        ``(module, name, ops)`` per global, ``ops`` the names of the opcodes after the first
        global (``"STOP"`` alone for a pickle that is one class reference).

    Raises:
        ValueError: A malformed pickle (truncated, an unknown opcode, a global without names).
    """
    try:
        ops = list(pickletools.genops(blob))
    except Exception as err:  # pickletools' complaints: truncated data, an unknown opcode
        raise ValueError(f"a malformed pickle ({type(err).__name__})") from None
    stack: list[Any] = []
    memo: dict[int, Any] = {}
    mark = object()
    found: list[tuple[str, str, str]] = []
    after: list[str] = []
    for op, arg, _pos in ops:
        if found:
            after.append(op.name)
        name = op.name
        if name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8"):
            stack.append(str(arg))
            continue
        if name == "MEMOIZE" and stack:
            memo[len(memo)] = stack[-1]
            continue
        if name in ("PUT", "BINPUT", "LONG_BINPUT") and stack:
            memo[int(arg)] = stack[-1]
            continue
        if name in ("GET", "BINGET", "LONG_BINGET"):
            stack.append(memo.get(int(arg)))
            continue
        if name in ("GLOBAL", "STACK_GLOBAL"):
            if name == "GLOBAL":
                module, _, attr = str(arg).partition(" ")
            else:
                if len(stack) < 2 or not all(isinstance(x, str) for x in stack[-2:]):
                    raise ValueError("a malformed pickle (a global without its names)")
                attr, module = stack.pop(), stack.pop()
            found.append((module, attr, ""))
            stack.append(None)
            continue
        if name == "MARK":
            stack.append(mark)
            continue
        if any(x is pickletools.markobject for x in op.stack_before):
            while stack and stack.pop() is not mark:
                pass
        else:
            del stack[len(stack) - min(len(op.stack_before), len(stack)):]
        stack.extend([None] * len(op.stack_after))
    if found:
        found[0] = (found[0][0], found[0][1], " ".join(after))
    return found


def class_reference(blob: bytes) -> tuple[str, str]:
    """The ``(module, name)`` a pickle refers to, if it is nothing but one global reference.

    Raises:
        ValueError: Anything else: a call, an object build, a second reference, or a malformed
            pickle; the message names the callable it would have reached.
    """
    found = pickle_globals(blob)
    if not found:
        raise ValueError("no class reference")
    module, attr, after = found[0]
    extra = [op for op in after.split() if op not in _REFERENCE_OPS]
    if len(found) > 1 or extra:
        what = f"{module[:60]}.{attr[:60]}"
        raise ValueError(f"pickled code that uses {what} ({(extra or ['a second global'])[0]}), not a "
                         "class reference")
    return module, attr


def _allowed_global(module: str, attr: str) -> bool:
    return (module.startswith(("gymnasium.spaces.", "numpy._core.", "numpy.core.", "numpy.random."))
            or module == "numpy" or (module, attr) in _SB3_GLOBALS)


def check_unused_pickles(data: dict[str, Any]) -> None:
    """Refuse a ``data`` member whose other pickled values (spaces, schedules, buffer class; read
    from their declared fields or not at all) reach anything but gymnasium's spaces, numpy and
    stable-baselines3's schedules and buffers: such a file was not written by stable-baselines3.

    Raises:
        ValueError: Naming the key and the global.
    """
    for key, entry in data.items():
        if key in ("policy_class", "policy_kwargs") or not isinstance(entry, dict) \
                or ":serialized:" not in entry:
            continue
        try:
            blob = base64.b64decode(str(entry[":serialized:"]), validate=True)
        except binascii.Error:
            raise ValueError(f"its {key[:40]} is not base64") from None
        for module, attr, _ in pickle_globals(blob):
            if not _allowed_global(module, attr):
                raise ValueError(f"its {key[:40]} holds pickled code that uses {module[:60]}.{attr[:60]}")


def _member(zf: zipfile.ZipFile, name: str, path: str | Path) -> bytes:
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise _bad(path, f"no {name!r} member") from None
    if info.file_size > MAX_MEMBER_BYTES:
        raise _bad(path, f"its {name!r} member declares {info.file_size:,} bytes; expected at most "
                         f"{MAX_MEMBER_BYTES:,}")
    try:
        with zf.open(info) as fh:
            data = fh.read(MAX_MEMBER_BYTES + 1)
    except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, ValueError, NotImplementedError) as err:
        raise _bad(path, f"its {name!r} member cannot be read ({type(err).__name__}: {err})") from None
    if len(data) > MAX_MEMBER_BYTES:
        raise _bad(path, f"its {name!r} member holds more than {MAX_MEMBER_BYTES:,} bytes")
    return data


def _space(data: dict[str, Any], key: str, path: str | Path) -> dict[str, Any]:
    entry = data.get(key)
    if not isinstance(entry, dict) or not isinstance(entry.get(":type:"), str):
        raise _bad(path, f"no declared {key} in its data")
    return entry


def _int_field(entry: dict[str, Any], key: str, what: str, path: str | Path) -> int:
    try:
        return int(str(entry.get(key)))
    except ValueError:
        raise _bad(path, f"{what} {key} is {str(entry.get(key))[:40]!r}, not an integer") from None


class _Restricted(pickle.Unpickler):
    """Resolves the activation functions of `_KWARGS_GLOBALS` and nothing else (an optimizer
    class becomes its name: acting does not use it)."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _KWARGS_GLOBALS:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed")
        if module == "torch.nn.modules.activation":
            from torch import nn

            return getattr(nn, name)
        return f"{module}.{name}"


def _policy_kwargs(entry: Any, path: str | Path) -> dict[str, Any]:
    """The policy's keyword arguments: plain JSON (PPO), or a pickle of plain data whose only
    references are `_KWARGS_GLOBALS` (A2C's, with its RMSprop), read by a restricted unpickler."""
    if isinstance(entry, dict) and ":serialized:" in entry:
        try:
            blob = base64.b64decode(str(entry[":serialized:"]), validate=True)
            ops = {op.name for op, _arg, _pos in pickletools.genops(blob)}
        except Exception:  # base64 or pickletools: not a pickle
            raise _bad(path, "its policy_kwargs are not a readable pickle") from None
        refs = [(m, a) for m, a, _ in pickle_globals(blob)]
        bad_ops = sorted(ops - _DATA_OPS)
        bad_refs = [r for r in refs if r not in _KWARGS_GLOBALS]
        if bad_ops or bad_refs:
            what = (f"uses {bad_refs[0][0][:60]}.{bad_refs[0][1][:60]}" if bad_refs else
                    f"holds the opcode {bad_ops[0]}")
            raise _bad(path, f"its pickled policy_kwargs {what}; expected plain values, optimizers and "
                             "activation functions; flowherd reads weights and a declared schema only")
        try:
            entry = _Restricted(io.BytesIO(blob)).load()
        except Exception as err:  # the checks above make this a malformed pickle
            raise _bad(path, f"its policy_kwargs cannot be read ({type(err).__name__})") from None
    if not isinstance(entry, dict):
        raise _bad(path, "its policy_kwargs are not a mapping")
    kwargs = {k: v for k, v in entry.items() if k not in TRAINING_KWARGS}
    unknown = sorted(str(k) for k in set(kwargs) - set(POLICY_KWARGS))
    if unknown:
        raise _bad(path, f"its policy_kwargs hold {unknown[0][:40]!r}; expected only "
                         f"{', '.join(POLICY_KWARGS + TRAINING_KWARGS)}")
    return kwargs


def read_model_file(path: str | Path) -> ModelSchema:
    """Check a model file and return what it declares (module docstring); nothing in it is run.

    Raises:
        ConfigError: Not a zip, a member too large, a ``data`` member that is not JSON, a pickled
            value other than the one class reference, spaces or keyword arguments flowherd does
            not train; one line naming ``controller.name``.
    """
    p = Path(path)
    try:
        zf = zipfile.ZipFile(p)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as err:
        raise _bad(path, f"not a zip file ({type(err).__name__}: {err})") from None
    with zf:
        raw = _member(zf, "data", path)
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as err:
            raise _bad(path, f"its data member is not JSON ({err})") from None
        if not isinstance(data, dict):
            raise _bad(path, "its data member is not a JSON object")
        cls = data.get("policy_class")
        if not isinstance(cls, dict) or not isinstance(cls.get(":serialized:"), str):
            raise _bad(path, "no declared policy_class")
        try:
            ref = class_reference(base64.b64decode(cls[":serialized:"], validate=True))
        except (ValueError, binascii.Error) as err:
            raise _bad(path, f"its policy_class holds {err}; flowherd reads weights and a declared "
                             "schema only") from None
        if ref not in POLICY_CLASSES:
            raise _bad(path, f"its policy class is {ref[0]}.{ref[1]}; expected "
                             f"{' or '.join('.'.join(c) for c in POLICY_CLASSES)}")
        try:
            check_unused_pickles(data)
        except ValueError as err:
            raise _bad(path, f"{err}; flowherd reads weights and a declared schema only") from None
        obs = _space(data, "observation_space", path)
        act = _space(data, "action_space", path)
        if obs[":type:"] != "<class 'gymnasium.spaces.box.Box'>" or obs.get("dtype") != "float32":
            raise _bad(path, f"its observation space is {obs[':type:'][:80]!r} of "
                             f"{str(obs.get('dtype'))[:20]}; expected a float32 gymnasium Box")
        shape = obs.get("_shape")
        if not (isinstance(shape, list) and len(shape) == 1 and isinstance(shape[0], int)
                and not isinstance(shape[0], bool)):
            raise _bad(path, f"its observation shape is {str(shape)[:40]}; expected one dimension")
        if act[":type:"] != "<class 'gymnasium.spaces.discrete.Discrete'>":
            raise _bad(path, f"its action space is {act[':type:'][:80]!r}; expected a gymnasium Discrete")
        n = _int_field(act, "n", "its action space's", path)
        if _int_field(act, "start", "its action space's", path) != 0:
            raise _bad(path, "its actions do not start at 0")
        kwargs = _policy_kwargs(data.get("policy_kwargs", {}), path)
        policy_bytes = _member(zf, "policy.pth", path)
    return ModelSchema(num_features=int(shape[0]), num_actions=n, policy_kwargs=dict(kwargs),
                       policy_bytes=policy_bytes, policy_class=ref)


def load_weights(schema: ModelSchema, path: str | Path) -> dict[str, Any]:
    """The state dict of ``policy.pth``, read by torch's restricted unpickler (tensors only).

    Raises:
        ConfigError: Not a torch archive of tensors.
    """
    import torch

    try:
        state = torch.load(io.BytesIO(schema.policy_bytes), map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises UnpicklingError, RuntimeError, ... for a bad archive
        first = " ".join(str(err).split())[:200]
        raise _bad(path, f"its policy.pth is not a torch archive of weights ({type(err).__name__}: "
                         f"{first})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise _bad(path, "its policy.pth is not a state dict of tensors")
    return state
