// Turns what manadv_init_obj (or the device model) reports about a queue into a ready RxQueue or
// TxQueue. Shared by the production control path and the model so both run the same checks.
#pragma once

#include <cstdint>

#include "rawpipe/status.hh"
#include "pmd/mana/rx.hh"
#include "pmd/mana/tx.hh"

namespace rawpipe::mana {

struct QueueSetup {
  WorkQueue wq;                                  // buf, size, count, id (head/tail zero)
  CompletionQueue cq;                            // initialised (head = count)
  void* db_page = nullptr;
  const rdma::DoorbellSink* db_sink = nullptr;   // model only
  std::uint32_t lkey = 0;
  // Rx
  Pool* pool = nullptr;
  std::uint16_t port_id = 0;
  std::uint16_t queue_id = 0;
  // Tx
  const std::uint8_t* mr_begin = nullptr;
  const std::uint8_t* mr_end = nullptr;
  std::uint32_t vp_offset = 0;
  // The CQ must hold a completion for every WQE that can be outstanding: the NIC is never told
  // the consumer index, so a smaller CQ can be overrun. Only tests of overflow detection turn
  // this check off.
  bool require_cq_covers_wq = true;
};

Status setup_rx_queue(RxQueue& q, const QueueSetup& s);
Status setup_tx_queue(TxQueue& q, const QueueSetup& s);

}  // namespace rawpipe::mana
