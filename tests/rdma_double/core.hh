// Internals shared by the double's translation units: the process-wide state, the trace, the
// violation record and the helpers every entry point uses (see double.hh for the whole picture).
#pragma once

#include <arpa/inet.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "pmd/mana/hw.hh"
#include "pmd/mlx5/hw.hh"
#include "tests/rdma_double/state.hh"

namespace rpdouble {

// ---- device attributes the double reports ---------------------------------------------------

inline constexpr int kMaxQpWr = 32768;          // mlx5: 1 << log_max_qp_sz on ConnectX-6 Dx
inline constexpr int kMaxCqe = (1 << 22) - 1;
inline constexpr int kMaxSge = 30;
inline constexpr std::uint32_t kMlx5MaxIndLog = 11;     // 1 << log_max_rqt_size
inline constexpr int kManaMaxQpWr = 8192;       // adapter_caps.max_qp_wr of an Azure VM's MANA
inline constexpr std::uint32_t kManaIndTableSize = 64;  // MANA_INDIRECT_TABLE_SIZE
inline constexpr std::uint32_t kManaMaxTxSge = 30;      // MAX_TX_WQE_SGL_ENTRIES
inline constexpr std::uint32_t kHashKeyLen = 40;

// ---- state ----------------------------------------------------------------------------------

struct State {
  std::recursive_mutex mu;
  FILE* trace = nullptr;
  std::vector<std::unique_ptr<Device>> devices;
  std::map<std::string, int> counters;   // per kind, for object names
  std::map<const void*, Context*> contexts;
  // Closed contexts are kept (a leaked queue may still point into their model) and stay
  // reachable from here, so a leak checker reports the caller's leaks, not this keeping.
  std::vector<Context*> closed_contexts;
  std::map<const void*, Pd*> pds;
  std::map<const void*, Mr*> mrs;
  std::map<const void*, Cq*> cqs;
  std::map<const void*, Wq*> wqs;
  std::map<const void*, IndTable*> inds;
  std::map<const void*, Qp*> qps;
  std::map<const void*, Flow*> flows;
  std::uint64_t violations = 0;

  State() {
    if (const char* path = std::getenv("RAWPIPE_RDMA_DOUBLE_TRACE"); path && *path) trace = std::fopen(path, "a");
    std::string list = std::getenv("RAWPIPE_RDMA_DOUBLE_DEVICES") ? std::getenv("RAWPIPE_RDMA_DOUBLE_DEVICES") : "mlx5_0";
    std::size_t at = 0;
    while (at <= list.size()) {
      std::size_t comma = list.find(',', at);
      if (comma == std::string::npos) comma = list.size();
      std::string item = list.substr(at, comma - at);
      at = comma + 1;
      if (item.empty()) continue;
      auto d = std::make_unique<Device>();
      std::string name = item;
      if (auto colon = item.find(':'); colon != std::string::npos) {
        name = item.substr(0, colon);
        d->vendor_part_id = static_cast<std::uint32_t>(std::strtoul(item.c_str() + colon + 1, nullptr, 0));
      } else {
        d->vendor_part_id = name.rfind("mana", 0) == 0 ? 2 : 4125;  // MANA Ethernet; ConnectX-6 Dx
      }
      d->kind = name.rfind("mana", 0) == 0 ? Kind::kMana : Kind::kMlx5;
      std::snprintf(d->dev.name, sizeof(d->dev.name), "%s", name.c_str());
      std::snprintf(d->dev.dev_name, sizeof(d->dev.dev_name), "uverbs%zu", devices.size());
      d->dev.node_type = IBV_NODE_CA;
      d->dev.transport_type = IBV_TRANSPORT_IB;
      devices.push_back(std::move(d));
    }
  }
};

inline State& st() {
  static State* s = new State();  // never destroyed: providers are never unloaded either
  return *s;
}

inline void trace_line(const std::string& line) {
  State& s = st();
  if (!s.trace) return;
  std::fputs(line.c_str(), s.trace);
  std::fputc('\n', s.trace);
  std::fflush(s.trace);
}

template <typename... Args>
void rec(fmt::format_string<Args...> f, Args&&... args) {
  trace_line(fmt::format(f, std::forward<Args>(args)...));
}

// A precondition the real library or kernel enforces was broken: recorded, and the caller
// returns `err` as the real one does.
template <typename... Args>
int violation(int err, fmt::format_string<Args...> f, Args&&... args) {
  ++st().violations;
  trace_line("VIOLATION " + fmt::format(f, std::forward<Args>(args)...) + fmt::format(" ({})", std::strerror(err)));
  return err;
}

template <typename... Args>
std::nullptr_t fail_null(int err, fmt::format_string<Args...> f, Args&&... args) {
  errno = violation(err, f, std::forward<Args>(args)...);
  return nullptr;
}

// The double cannot play something a real device could (e.g. one CQ shared by two queues):
// refused, and said so, but not a violation of the caller.
inline std::nullptr_t unsupported(const std::string& what) {
  trace_line("UNSUPPORTED " + what);
  errno = EOPNOTSUPP;
  return nullptr;
}

inline std::string next_name(const char* kind) { return fmt::format("{}{}", kind, st().counters[kind]++); }

template <typename T>
T* find(std::map<const void*, T*>& m, const void* p) {
  auto it = m.find(p);
  return it == m.end() ? nullptr : it->second;
}

inline const char* env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

inline bool is_pow2(std::uint64_t v) { return v && !(v & (v - 1)); }

// ---- naming helpers for the trace ------------------------------------------------------------

inline std::string qp_state_name(int s) {
  switch (s) {
    case IBV_QPS_RESET: return "RESET";
    case IBV_QPS_INIT: return "INIT";
    case IBV_QPS_RTR: return "RTR";
    case IBV_QPS_RTS: return "RTS";
    case IBV_QPS_SQD: return "SQD";
    case IBV_QPS_SQE: return "SQE";
    case IBV_QPS_ERR: return "ERR";
    default: return fmt::format("state{}", s);
  }
}

inline std::string wq_state_name(int s) {
  switch (s) {
    case IBV_WQS_RESET: return "RESET";
    case IBV_WQS_RDY: return "RDY";
    case IBV_WQS_ERR: return "ERR";
    default: return fmt::format("state{}", s);
  }
}

inline std::string name_of(Pd* p) { return p ? p->name : "null"; }
inline std::string name_of(Cq* c) { return c ? c->name : "null"; }

// ---- mlx5 queues on the model -----------------------------------------------------------------

// What the modelled ConnectX tells about its inline mode (RAWPIPE_RDMA_DOUBLE_MLX5_INLINE), in
// mlx5_ifc's encodings: the HCA capability's wqe_inline_mode (MLX5_CAP_INLINE_MODE_L2 0,
// VPORT_CONTEXT 1, NOT_REQUIRED 2) and, when that is VPORT_CONTEXT, the NIC vport context's
// min_wqe_inline_mode (MLX5_INLINE_MODE_NONE 0, L2 1, IP 2, TCP_UDP 3, INNER_TCP_UDP 7).
//   unset        no DevX: mlx5dv_open_device(DEVX) fails and so do the commands; the PCI id decides
//   none/l2/l3/l4  DevX; capability VPORT_CONTEXT; vport mode NONE / L2 / IP / TCP_UDP
//   inner-l4     DevX; capability VPORT_CONTEXT; vport mode INNER_TCP_UDP
//   cap-l2       DevX; capability L2
//   not-required DevX; capability NOT_REQUIRED
struct Mlx5InlineReport {
  bool devx = false;
  std::uint8_t cap_mode = 0;
  std::uint8_t vport_mode = 0;
};

inline Mlx5InlineReport mlx5_inline_report() {
  const std::string mode = env_or("RAWPIPE_RDMA_DOUBLE_MLX5_INLINE", "");
  if (mode == "none") return {true, 1, 0};
  if (mode == "l2") return {true, 1, 1};
  if (mode == "l3") return {true, 1, 2};
  if (mode == "l4") return {true, 1, 3};
  if (mode == "inner-l4") return {true, 1, 7};
  if (mode == "cap-l2") return {true, 0, 0};
  if (mode == "not-required") return {true, 2, 0};
  return {};
}

// The inline header the modelled device enforces on every send WQE.
inline std::uint16_t mlx5_min_inline(const Device& d) {
  const std::string mode = env_or("RAWPIPE_RDMA_DOUBLE_MLX5_INLINE", "");
  if (mode == "none" || mode == "not-required") return 0;
  if (mode == "l2" || mode == "cap-l2") return rawpipe::mlx5::kEthL2InlineHeader;
  if (mode == "l3") return rawpipe::mlx5::kInlineL3;
  if (mode == "l4" || mode == "inner-l4") return rawpipe::mlx5::kInlineL4;
  // What the PCI id implies (ConnectX-4 / -4 Lx and their VFs need the L2 header inline).
  return d.vendor_part_id >= 4115 && d.vendor_part_id <= 4118 ? rawpipe::mlx5::kEthL2InlineHeader : 0;
}

inline bool bind_cq(Cq* cq, const std::string& user) {
  if (cq->bound) {
    unsupported(fmt::format("{} on {}: the double backs each CQ with one model queue; give every queue its own CQ", user,
                            cq->name));
    return false;
  }
  cq->bound = true;
  return true;
}

// ---- objects and model queues shared by the entry points ------------------------------------

inline Qp* new_qp(Context* c, Pd* pd, ibv_qp_type type) {
  auto* q = new Qp();
  q->name = next_name("qp");
  q->pd = pd;
  q->qp.context = &c->vctx.context;
  q->qp.pd = pd ? &pd->pd : nullptr;
  q->qp.qp_type = type;
  q->qp.state = IBV_QPS_RESET;
  q->qp.handle = static_cast<std::uint32_t>(st().counters["qp"]);
  if (pd) ++pd->users;
  ++c->live_objects;
  c->qps.push_back(q);
  st().qps[&q->qp] = q;
  return q;
}

inline void mlx5_bind_rq(Context* c, Cq* cq, std::uint32_t wqe_cnt, bool striding, std::uint32_t log_stride_size,
                  std::uint32_t log_strides, std::uint16_t& id, rawpipe::mlx5::RqRing& ring) {
  rawpipe::mlx5::model::RqOptions ro;
  ro.wqe_cnt = wqe_cnt;
  ro.cqe_cnt = cq->cqe;
  ro.compression = cq->compressed;
  ro.striding = striding;
  ro.log_stride_size = log_stride_size;
  ro.log_strides = log_strides;
  id = c->mlx5->create_rq(ro, ring, cq->mlx5_ring);
  c->mlx5->stop_rq(id);  // created in RESET: nothing lands in it before RDY / RTR
}

inline std::uint32_t mana_hw_size(std::uint64_t bytes) {
  return static_cast<std::uint32_t>(std::max<std::uint64_t>(std::bit_ceil(bytes), 4096));
}
inline std::uint32_t mana_wqe_size(std::uint32_t sge) { return (sge * 16 + 8 + 8 + 31) & ~31u; }

inline std::uint8_t* mana_alloc(Context* c, std::uint32_t bytes) {
  void* p = c->allocators.alloc(bytes, c->allocators.data);
  if (p) std::memset(p, 0, bytes);  // the driver's allocator hands out zeroed pages; the NIC expects them
  return static_cast<std::uint8_t*>(p);
}

// ---- the wire (wire.cc) ------------------------------------------------------------------------

struct WireFrames {
  std::vector<std::vector<std::uint8_t>> distinct;
  std::uint64_t total = 0;
};
// The frames RAWPIPE_RDMA_DOUBLE_FRAMES and friends describe.
WireFrames wire_frames();
// MANA's wire on its own thread (the mlx5 model has one of its own).
void start_mana_wire(Context* c, std::vector<Qp*> sqs, std::vector<Wq*> rqs);
// Stops the wire of a context before anything it reads or writes goes away.
void stop_wire(Context* c);

Device* device_of(ibv_device* device);
// A new context on `d` (ibverbs.cc), a DevX one from mlx5dv_open_device.
Context* open_context(Device* d, bool devx);

inline Context* context_of(ibv_context* c) { return find(st().contexts, c); }
inline bool same_ctx(Context* c, Cq* cq) { return cq && cq->ctx == c; }

}  // namespace rpdouble
