// mlx5 transmit data path: one WQEBB per packet (ctrl + eth with the device's minimum inline
// header + one data segment), the SQ doorbell record, then the UAR write; completions requested
// every N WQEs free everything up to the completed index.
#pragma once

#include "pmd/mlx5/queue.hh"

namespace rawpipe::mlx5 {

TxBurstFn tx_burst_function(bool model) noexcept;

// Builds the send WQE for `m` at WQE index `pi` (the 16-bit counter). Exposed for golden-byte
// tests; the burst function uses the same inline code.
void build_send_wqe(void* wqe, std::uint32_t pi, std::uint32_t qpn, std::uint32_t lkey, std::uint16_t inline_bytes,
                    bool request_completion, const Mbuf* m) noexcept;

Status tx_setup(TxQueue& q);
// Frees every buffer still posted (not yet completed).
void tx_release(TxQueue& q);

}  // namespace rawpipe::mlx5
