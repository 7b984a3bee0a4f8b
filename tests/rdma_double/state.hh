// The double's objects and its one piece of shared state (see double.hh for what the double is).
// Every verbs object the double hands out is the first member of a record here, so the pointer a
// caller passes back leads to the record, as rdma-core's container_of does; a pointer the double
// never handed out, or one already destroyed, is caught by the live-object set instead of being
// dereferenced.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pmd/mana/model/device.hh"
#include "pmd/mlx5/model/device.hh"
#include "tests/rdma_double/double.hh"

namespace rpdouble {

enum class Kind : std::uint8_t { kMlx5, kMana };

struct Device {
  ibv_device dev{};  // first: ibv_device* leads here
  Kind kind = Kind::kMlx5;
  std::uint32_t vendor_part_id = 0;
};

struct Context;

struct Pd {
  ibv_pd pd{};
  std::string name;
  Context* ctx = nullptr;
  Pd* parent_of = nullptr;  // a parent domain: the PD it was allocated on
  std::uintptr_t pd_context = 0;
  int users = 0;            // MRs, QPs, WQs and parent domains on it (the kernel's usecnt)
};

struct Mr {
  ibv_mr mr{};
  std::string name;
  Pd* pd = nullptr;
};

struct Cq {
  ibv_cq_ex cq{};           // ibv_cq is its prefix (ibv_cq_ex_to_cq)
  std::string name;
  Context* ctx = nullptr;
  std::uint32_t cqe = 0;    // what the provider made of the request (mlx5: a power of two)
  bool compressed = false;
  std::uint32_t cqe_size = 64;
  int users = 0;            // QPs and WQs completing into it
  bool bound = false;       // backed by a model queue (the first QP or WQ that uses it)
  rawpipe::mlx5::CqRing mlx5_ring{};
  std::uint32_t mana_cq_id = 0;
  bool mana_id_known = false;  // the kernel reports a MANA CQ's id only when its queue is created
  std::uint8_t* mana_buf = nullptr;
  std::uint32_t mana_bytes = 0;
};

struct Wq {
  ibv_wq wq{};
  std::string name;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  bool striding = false;
  int tables = 0;           // indirection tables that list it
  std::uint16_t mlx5_rq = 0;
  rawpipe::mlx5::RqRing mlx5_ring{};
  std::uint32_t mana_rq_id = 0;
  bool mana_id_known = false;
  std::uint8_t* mana_buf = nullptr;
  std::uint32_t mana_bytes = 0;
  std::uint32_t mana_count = 0;             // max_wr, as manadv_init_obj reports it
  std::unique_ptr<std::uint64_t[]> db_page;  // MANA: this queue's doorbell page
};

struct IndTable {
  ibv_rwq_ind_table table{};
  std::string name;
  Context* ctx = nullptr;
  std::vector<Wq*> wqs;     // 2^log entries, as given
  int users = 0;            // hash QPs over it
};

struct Qp {
  ibv_qp qp{};
  std::string name;
  Pd* pd = nullptr;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  IndTable* ind = nullptr;  // a hash (RSS) QP
  std::uint64_t hash_fields = 0;
  int flows = 0;            // the kernel's qp->usecnt: flows attached
  bool has_rq = false, has_sq = false;
  std::uint16_t mlx5_rq = 0, mlx5_sq = 0;
  rawpipe::mlx5::RqRing mlx5_rq_ring{};
  rawpipe::mlx5::SqRing mlx5_sq_ring{};
  std::uint32_t mana_sq_id = 0;
  std::uint8_t* mana_buf = nullptr;
  std::uint32_t mana_bytes = 0;
  std::uint32_t mana_sq_count = 0;
  std::unique_ptr<std::uint64_t[]> db_page;
};

struct Flow {
  ibv_flow flow{};
  std::string name;
  Qp* qp = nullptr;
  int model_handle = -1;
};

struct Context {
  verbs_context vctx{};     // ibv_context is its last member (verbs_get_ctx's container_of)
  std::string name;
  Device* device = nullptr;
  int live_objects = 0;
  std::vector<Pd*> pds;
  std::vector<Cq*> cqs;
  std::vector<Wq*> wqs;
  std::vector<Qp*> qps;
  // mlx5
  bool devx = false;        // opened by mlx5dv_open_device(MLX5DV_CONTEXT_FLAGS_DEVX)
  std::unique_ptr<rawpipe::mlx5::model::Device> mlx5;
  bool rss_set = false;
  bool wire_started = false;
  // MANA
  std::unique_ptr<rawpipe::mana::ManaModel> mana;
  manadv_ctx_allocators allocators{};
  bool allocators_set = false;
  std::thread mana_wire;
  std::atomic<bool> mana_wire_stop{false};
  std::vector<std::uint32_t> mana_table;     // RSS indirection (64 entries of RQ ids)
  std::array<std::uint8_t, 40> mana_key{};
};

}  // namespace rpdouble
