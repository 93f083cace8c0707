"""Started directly (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set), not by
torchrun, whose agent would stop the other ranks itself.

  dead:      rank 1 dies; rank 0's next collective must raise within the
             process group's timeout instead of hanging.
  diverge:   the ranks call different collectives; every rank must raise
             naming the mismatch (tpu_dist's own fingerprint check, or
             PyTorch's with TORCH_DISTRIBUTED_DEBUG=DETAIL).
"""

import datetime
import os
import sys

import torch
import torch.distributed as dist

import torch_tpu  # noqa: F401

case = sys.argv[1]
dist.init_process_group(backend="tpu_dist", timeout=datetime.timedelta(seconds=60))
r = dist.get_rank()
x = torch.ones(4, device="tpu")
dist.all_reduce(x)
if case == "dead":
    # Both ranks are up (the collective above): a group with a short
    # timeout for the collectives that rank 1 will not reach.
    group = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=5))
    dist.all_reduce(x, group=group)
    if r == 1:
        os._exit(3)
    try:
        dist.all_reduce(x, group=group)
        dist.all_reduce(x, group=group)
    except Exception as e:  # noqa: BLE001
        print(f"rank {r}: raised {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
        os._exit(0)
    print(f"rank {r}: no error", flush=True)
    os._exit(1)
else:
    try:
        if r == 0:
            dist.all_reduce(x)
        else:
            dist.broadcast(torch.ones(8, device="tpu"), src=0)
    except Exception as e:  # noqa: BLE001
        print(f"rank {r}: raised {type(e).__name__}: {str(e).splitlines()[0][:300]}", flush=True)
        os._exit(0)
    print(f"rank {r}: no error", flush=True)
    os._exit(1)
