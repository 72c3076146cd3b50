"""Data-parallel training under `torchrun` (DistributedDataParallel): gloo on CPU, nccl on GPU.

`torchrun --nproc_per_node N -m transformer.cli train CONFIG` starts N processes; each reads
RANK / WORLD_SIZE / LOCAL_RANK from its environment. Without them this is one process and every
helper here is a no-op.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    """Where this process stands: its rank among world_size processes, and its device."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str | None = None
    """The process group's backend ("nccl" on GPUs, "gloo" on CPUs) under torchrun; None alone."""

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """Launched by torchrun (one process or several): the model trains under DDP."""
        return self.backend is not None


def pick_device(preference: str, local_rank: int = 0) -> torch.device:
    """auto: cuda when available; cpu; cuda (an error when there is none)."""
    if preference == "cuda" or (preference == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise ValueError(
                'train.device=\'cuda\' but no CUDA GPU is available: use device = "cpu" or "auto"'
            )
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def setup(preference: str = "auto") -> DistInfo:
    """Join the process group when launched by torchrun (`--nproc_per_node 1` too: the same DDP
    path as on several devices); otherwise a single process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = pick_device(preference, local_rank)
    if world == 1 and "TORCHELASTIC_RUN_ID" not in os.environ:  # not started by torchrun
        return DistInfo(rank, world, local_rank, device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    if not dist.is_initialized():
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend=backend)
    return DistInfo(rank, world, local_rank, device, dist.get_backend())


def cleanup(info: DistInfo) -> None:
    if info.distributed and dist.is_initialized():
        dist.destroy_process_group()


def barrier(info: DistInfo) -> None:
    if info.distributed:
        dist.barrier()


def all_reduce_sum(values: list[float], info: DistInfo) -> list[float]:
    """Sum each value over all processes (float64 on the CPU for gloo, on the device for nccl)."""
    if not info.distributed:
        return list(values)
    device = info.device if dist.get_backend() == "nccl" else torch.device("cpu")
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.tolist()


def any_true(flag: bool, info: DistInfo) -> bool:
    """True on every process when it is true on any (e.g. 'out of time'), so all stop at the same
    step."""
    return all_reduce_sum([float(flag)], info)[0] > 0


def gather_objects(obj, info: DistInfo) -> list:
    """Every process's obj, in rank order (on every process)."""
    if not info.distributed:
        return [obj]
    out = [None] * info.world_size
    dist.all_gather_object(out, obj)
    return out
