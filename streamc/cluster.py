"""A Dask client for the work streamc spreads over processes: an embedded ``distributed.LocalCluster`` (single-
threaded worker processes on the loopback interface) or an existing cluster's scheduler.

``streamc sweep`` runs a point per task on it, and the sim step a share of the verification frames per task
(``streamc build --scheduler``).
"""

from __future__ import annotations

import contextlib
import logging
import os

from .errors import BuildError

#: How long to wait for an external scheduler to answer, and then for it to have a worker.
CONNECT_TIMEOUT_S = 30


@contextlib.contextmanager
def dask_client(scheduler: str | None, workers: int | None = None):
    """A client of the scheduler at ``scheduler`` (``tcp://HOST:PORT``), or of a new local cluster of ``workers``
    worker processes (default: one per core) when it is None.

    Raises
    ------
    BuildError
        If the scheduler cannot be reached or has no worker.
    """
    from distributed import Client, LocalCluster

    if scheduler is None:
        # One single-threaded worker per core: a build is one process (its tools run one at a time within it).
        # No memory limit: the tools' memory is the build's own. The scheduler's web server on a free port: two
        # clusters on one host would both want Dask's 8787.
        with LocalCluster(n_workers=workers or os.cpu_count(), threads_per_worker=1, processes=True,
                          host="127.0.0.1", dashboard_address=":0", memory_limit=0,
                          silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
            yield client
        return
    try:
        client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as exc:
        raise BuildError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    with client:
        try:
            client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
        except TimeoutError:
            raise BuildError(f"the Dask scheduler at {scheduler} has no worker after {CONNECT_TIMEOUT_S} s; start one "
                             f"with: dask worker {scheduler}") from None
        yield client
