// The control path of an mlx5 port behind one small interface with two implementations:
//   VerbsBackend (verbs.cc)  - rdma-core through the run-time loader: PD, MR, CQs, QPs/WQs, RSS,
//                              state transitions, mlx5dv_init_obj, ibv_create_flow;
//   ModelBackend (model_backend.cc) - the in-memory ConnectX of model/device.hh.
// Both fill the same ring descriptors (queue.hh) the data path runs on. Control path only: none
// of these calls happen per packet (reset_* only after an error CQE).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "rawpipe/status.hh"
#include "pmd/mlx5/flow.hh"
#include "pmd/mlx5/queue.hh"
#include "pmd/rdma/preflight.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe::mlx5 {

struct RxOptions {
  std::uint32_t wqe_cnt = 1024;        // per queue; for striding: striding WQEs
  bool compression = false;
  bool striding = false;
  std::uint32_t log_stride_size = 6;
  std::uint32_t log_strides = 9;
};

struct TxOptions {
  std::uint32_t wqe_cnt = 1024;
  std::uint16_t comp_every = 32;
  int inline_bytes = -1;               // -1: what the device needs
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual bool is_model() const = 0;
  virtual const rdma::DoorbellSink* sink() const { return nullptr; }
  virtual std::string describe() const = 0;
  virtual LinkInfo link() const = 0;
  virtual FlowTarget flow_target() const = 0;
  virtual int ifindex() const { return 0; }

  // Registers [addr, addr+len) for the NIC's DMA; returns the lkey.
  virtual Result<std::uint32_t> register_memory(void* addr, std::size_t len, std::string_view what) = 0;
  // Creates the receive side for all queues (RSS over them when there are several) and fills
  // each queue's CQ and RQ descriptors.
  virtual Status create_rx(std::span<RxQueue* const> queues, const RxOptions& o) = 0;
  virtual Status create_tx(TxQueue& q, std::uint16_t index, const TxOptions& o) = 0;
  // The inline header size the device requires for `o`.
  virtual std::uint16_t tx_inline_bytes(const TxOptions& o) const = 0;
  // Steering rule to the receive side; returns a handle for remove_flow.
  virtual Result<std::uint64_t> add_flow(const FlowAttrBytes& attr) = 0;
  virtual void remove_flow(std::uint64_t handle) = 0;
  // Error recovery: the hardware queue back to ready with nothing posted.
  virtual bool reset_rq(std::uint16_t queue) = 0;
  virtual bool reset_sq(std::uint16_t queue) = 0;
  // Takes every queue out of the ready state (WQs/QPs to RESET) so the device stops writing into
  // and reading from posted buffers; the port calls it after removing its flow rules and before
  // any posted buffer goes back to the pool (DPDK's mlx5_dev_stop order).
  virtual void quiesce() = 0;
  // Device-side start/stop (the model's injector thread: the wire). stop() runs only when the
  // port goes away, after the queues were quiesced: like a wire, it keeps carrying frames while
  // the port is stopped.
  virtual Status start() { return Status::ok(); }
  virtual void stop() {}
  virtual void extended_stats(std::map<std::string, std::uint64_t>& out) const { (void)out; }
};

struct VerbsOptions {
  std::string interface;
};
Result<std::unique_ptr<Backend>> open_verbs_backend(const VerbsOptions& o);
// The same backend on a preflight result and provider table the caller supplies (tests hand in
// tables of their own to see every verbs call the control path makes).
Result<std::unique_ptr<Backend>> open_verbs_backend_on(rdma::PreflightResult pre, const rdma::Mlx5Table& dv,
                                                       std::string_view interface);

struct ModelOptions {
  std::string pcap;                    // frames from this capture, or
  std::uint64_t count = 0;             // synthetic UDP frames (0 with no pcap: none)
  std::uint16_t frame_size = 64;
  std::string dst = "10.0.0.2:5000";
  std::string src = "10.0.0.1:1024";
  std::uint32_t flows = 1;             // source ports src..src+flows-1
  std::uint32_t loops = 1;             // pcap/synthetic sequence repeated this many times
  std::uint16_t min_inline = 18;       // what the modelled device requires
  std::uint32_t rx_error_every = 0;    // fault injection: every n-th frame completes with an error CQE (0: off)
  double rate_pps = 0;                 // the wire's pace; 0: as fast as the receive queue takes frames
  std::array<std::uint8_t, 6> mac{0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
  // A kernel interface the model stands in front of for the control path's side effects on the
  // host (multicast memberships, as the hardware port keeps on its netdev); "" for none. The
  // model's queues stay its own: it claims no instance lock for it.
  std::string interface;
  std::string wire_pcap;               // frames sent, written here when the port stops (rdma/wire_pcap.hh)
};
Result<std::unique_ptr<Backend>> open_model_backend(const ModelOptions& o);

}  // namespace rawpipe::mlx5
