"""Read pretrained checkpoints (a Hugging Face folder of safetensors, or one GGUF file) into one float32 form, offline.

Nothing is unpickled: weights come from safetensors or GGUF only. Each format has its reader (explorer.folder_files,
explorer.gguf_files); what they share is explorer.checkpoint_common.
"""

from __future__ import annotations

from pathlib import Path

from explorer.checkpoint_common import SUPPORTED, Checkpoint, Progress, starts_with
from explorer.config import ConfigError


def read_checkpoint(path: Path, progress: Progress | None = None) -> Checkpoint:
    """A .gguf file or a Hugging Face folder (config.json + safetensors), read and checked."""
    path = Path(path)
    if path.is_dir():
        from explorer.folder_files import read_folder  # each reader imports only its own format's library

        return read_folder(path)
    if not path.exists():
        raise ConfigError(f"{path} does not exist; give {SUPPORTED}.")
    if path.suffix.lower() == ".gguf" or starts_with(path, b"GGUF"):
        from explorer.gguf_files import read_gguf

        return read_gguf(path, progress)
    raise ConfigError(f"{path} is neither a folder nor a GGUF file; give {SUPPORTED}.")
