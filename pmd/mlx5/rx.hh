// mlx5 receive data path: CQE polling, RQ refill and doorbell records on the plain rings of
// queue.hh. One body per mode (cyclic, cyclic with CQE compression, striding), each instantiated
// for the hardware and the model doorbell policy; the port picks one at setup.
#pragma once

#include "pmd/mlx5/queue.hh"

namespace rawpipe::mlx5 {

// The burst function for a queue's mode; `model` selects the ModelDoorbell instantiation.
RxBurstFn rx_burst_function(RxMode mode, bool compression, bool model) noexcept;

// Control path. rx_setup writes every RQ WQE (buffers from the pool for a cyclic RQ, the queue's
// stride region for a striding one) and publishes them with the RQ doorbell record. Fails (and
// holds nothing) when the pool cannot fill the ring.
Status rx_setup(RxQueue& q, bool model);
// Returns every buffer the queue holds (posted and stashed) to its pool.
void rx_release(RxQueue& q);

}  // namespace rawpipe::mlx5
