"""Rank 1 raises before the collective its peer waits in: the job must end, not hang."""
import numpy as np

import nki
import nki.collectives as ncc
import nki.language as nl


@nki.jit
def gather(x):
    if ncc.rank_id() == 1:
        raise RuntimeError("rank 1 refuses")
    out = nl.ndarray((2 * x.shape[0], x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.all_gather([x], [out], replica_group=[[0, 1]], collective_dim=0)
    return out


gather(np.zeros((128, 8), np.float32))
