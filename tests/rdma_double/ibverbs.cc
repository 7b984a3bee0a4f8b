// libibverbs.so.1 of the rdma-core double (double.hh): the exported ibv_* entry points, the ops
// reached through verbs_get_ctx_op, and the provider logic the libmlx5 / libmana stand-ins forward
// to. Preconditions cite where rdma-core (providers/mlx5/verbs.c, providers/mana/*.c at
// linux-rdma/rdma-core 691953d8) or the kernel (drivers/infiniband/hw/mana/qp.c at torvalds/linux
// 688bac28; uverbs' ib_destroy_usecnt) enforce them.
#include "tests/rdma_double/core.hh"
#include "tests/rdma_double/ops.hh"

using namespace rpdouble;


// ================================================================================================
// libibverbs exports. Names in parentheses: verbs.h defines several of them as function-like macros.
// ================================================================================================

extern "C" {

__attribute__((visibility("default"))) ibv_device** (ibv_get_device_list)(int* num) {
  std::lock_guard lock(st().mu);
  auto& d = st().devices;
  auto** list = static_cast<ibv_device**>(std::calloc(d.size() + 1, sizeof(ibv_device*)));
  for (std::size_t i = 0; i < d.size(); ++i) list[i] = &d[i]->dev;
  if (num) *num = static_cast<int>(d.size());
  std::string names;
  for (const auto& dev : d) {
    if (!names.empty()) names += ',';
    names += dev->dev.name;
  }
  rec("ibv_get_device_list devices={}", names);
  return list;
}

__attribute__((visibility("default"))) void ibv_free_device_list(ibv_device** list) {
  rec("ibv_free_device_list");
  std::free(list);
}

__attribute__((visibility("default"))) const char* ibv_get_device_name(ibv_device* device) {
  return device ? device->name : nullptr;
}

namespace {

int op_query_port(ibv_context* ctx, uint8_t port, ibv_port_attr* attr, size_t len) {
  std::lock_guard lock(st().mu);
  Context* c = context_of(ctx);
  if (!c) return violation(EINVAL, "ibv_query_port on a context the library did not open");
  rec("ibv_query_port {} port={}", c->name, port);
  if (port != 1) return violation(EINVAL, "ibv_query_port {}: port {} does not exist (1 port)", c->name, port);
  std::memset(attr, 0, len);
  attr->state = IBV_PORT_ACTIVE;
  attr->max_mtu = IBV_MTU_4096;
  attr->active_mtu = IBV_MTU_1024;
  attr->link_layer = IBV_LINK_LAYER_ETHERNET;
  attr->gid_tbl_len = 256;
  return 0;
}

void fill_device_attr(const Device& d, ibv_device_attr& a) {
  std::memset(&a, 0, sizeof(a));
  std::snprintf(a.fw_ver, sizeof(a.fw_ver), "%s", d.kind == Kind::kMlx5 ? "22.99.0000" : "0.0.0");
  a.vendor_id = d.kind == Kind::kMlx5 ? 0x02c9 : 0x1414;
  a.vendor_part_id = d.vendor_part_id;
  a.max_qp = 1 << 17;
  a.max_qp_wr = d.kind == Kind::kMlx5 ? kMaxQpWr : kManaMaxQpWr;
  a.max_sge = kMaxSge;
  a.max_cq = 1 << 16;
  a.max_cqe = kMaxCqe;
  a.max_mr = 1 << 16;
  a.max_pd = 1 << 16;
  a.phys_port_cnt = 1;
}

int op_query_device_ex(ibv_context* ctx, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr, size_t len) {
  std::lock_guard lock(st().mu);
  Context* c = context_of(ctx);
  if (!c) return violation(EINVAL, "ibv_query_device_ex on a context the library did not open");
  rec("ibv_query_device_ex {}", c->name);
  if (input && input->comp_mask) return violation(EINVAL, "ibv_query_device_ex {}: input comp_mask {:#x} (must be 0)", c->name, input->comp_mask);
  std::memset(attr, 0, len);
  fill_device_attr(*c->device, attr->orig_attr);
  attr->raw_packet_caps = IBV_RAW_PACKET_CAP_CVLAN_STRIPPING | IBV_RAW_PACKET_CAP_IP_CSUM;
  if (c->device->kind == Kind::kMlx5) {
    attr->rss_caps.supported_qpts = 1u << IBV_QPT_RAW_PACKET;
    attr->rss_caps.max_rwq_indirection_tables = 1 << 16;
    attr->rss_caps.max_rwq_indirection_table_size = 1u << kMlx5MaxIndLog;
    attr->rss_caps.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
    attr->rss_caps.rx_hash_fields_mask = rawpipe::mlx5::model::kAllHashFields;
    attr->max_wq_type_rq = 1 << 16;
  } else {
    attr->rss_caps.max_rwq_indirection_table_size = kManaIndTableSize;
    attr->rss_caps.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
  }
  return 0;
}

// ---- mlx5: receive QP / WQ and transmit QP on the model --------------------------------------

ibv_qp* mlx5_create_qp_basic(Context* c, Pd* pd, ibv_qp_init_attr* attr) {
  Cq* scq = find(st().cqs, attr->send_cq);
  Cq* rcq = find(st().cqs, attr->recv_cq);
  rec("ibv_create_qp {} type={} send_cq={} recv_cq={} max_send_wr={} max_recv_wr={} max_send_sge={} max_recv_sge={} "
      "max_inline={} sq_sig_all={}",
      pd->name, static_cast<int>(attr->qp_type), name_of(scq), name_of(rcq), attr->cap.max_send_wr, attr->cap.max_recv_wr,
      attr->cap.max_send_sge, attr->cap.max_recv_sge, attr->cap.max_inline_data, attr->sq_sig_all);
  if (attr->qp_type != IBV_QPT_RAW_PACKET)
    return unsupported(fmt::format("ibv_create_qp type {}: the double plays raw-packet QPs only", static_cast<int>(attr->qp_type)));
  if (!same_ctx(c, scq) || !same_ctx(c, rcq))
    return fail_null(EINVAL, "ibv_create_qp {}: send_cq / recv_cq missing, destroyed or of another context", pd->name);
  if (attr->cap.max_send_wr > static_cast<std::uint32_t>(kMaxQpWr) || attr->cap.max_recv_wr > static_cast<std::uint32_t>(kMaxQpWr))
    return fail_null(EINVAL, "ibv_create_qp {}: max_send_wr {} / max_recv_wr {} above the device's max_qp_wr {}", pd->name,
                     attr->cap.max_send_wr, attr->cap.max_recv_wr, kMaxQpWr);
  if (attr->cap.max_send_sge > static_cast<std::uint32_t>(kMaxSge) || attr->cap.max_recv_sge > static_cast<std::uint32_t>(kMaxSge))
    return fail_null(EINVAL, "ibv_create_qp {}: more SGEs than the device's max_sge {}", pd->name, kMaxSge);
  if (attr->cap.max_recv_wr > 0 && attr->cap.max_recv_sge == 0)
    return fail_null(EINVAL, "ibv_create_qp {}: max_recv_wr {} with max_recv_sge 0", pd->name, attr->cap.max_recv_wr);
  // A receive QP is played by a model RQ, a send-only QP by a model SQ (one CQ per model queue).
  const bool rx = attr->cap.max_recv_wr > 0;
  if (!bind_cq(rx ? rcq : scq, "ibv_create_qp")) return nullptr;
  Qp* q = new_qp(c, pd, attr->qp_type);
  q->send_cq = scq;
  q->recv_cq = rcq;
  ++scq->users;
  ++rcq->users;
  q->qp.send_cq = attr->send_cq;
  q->qp.recv_cq = attr->recv_cq;
  if (rx) {
    q->has_rq = true;
    mlx5_bind_rq(c, rcq, std::bit_ceil(attr->cap.max_recv_wr), false, 0, 0, q->mlx5_rq, q->mlx5_rq_ring);
    q->qp.qp_num = 0x100 + q->mlx5_rq;  // the model's numbering
  } else {
    q->has_sq = true;
    rawpipe::mlx5::model::SqOptions so;
    so.wqe_cnt = std::bit_ceil(std::max<std::uint32_t>(attr->cap.max_send_wr, 1));
    so.cqe_cnt = scq->cqe;
    so.min_inline = mlx5_min_inline(*c->device);
    q->mlx5_sq = c->mlx5->create_sq(so, q->mlx5_sq_ring, scq->mlx5_ring);
    c->mlx5->stop_sq(q->mlx5_sq);
    q->qp.qp_num = q->mlx5_sq_ring.qpn;
  }
  rec("  -> {} qpn={:#x}", q->name, q->qp.qp_num);
  return &q->qp;
}

// ---- MANA queues on the model -----------------------------------------------------------------

ibv_qp* mana_create_qp_raw(Context* c, Pd* pd, ibv_qp_init_attr* attr) {
  Cq* scq = find(st().cqs, attr->send_cq);
  rec("ibv_create_qp {} type={} send_cq={} recv_cq={} max_send_wr={} max_recv_wr={} max_send_sge={} sq_sig_all={}",
      pd->name, static_cast<int>(attr->qp_type), name_of(scq), name_of(find(st().cqs, attr->recv_cq)),
      attr->cap.max_send_wr, attr->cap.max_recv_wr, attr->cap.max_send_sge, attr->sq_sig_all);
  if (attr->qp_type != IBV_QPT_RAW_PACKET)
    return unsupported(fmt::format("ibv_create_qp type {}: the double plays MANA raw-packet QPs only", static_cast<int>(attr->qp_type)));
  // providers/mana/qp.c mana_create_qp_raw
  if (!pd->parent_of) return fail_null(EINVAL, "ibv_create_qp {}: a MANA raw QP must be on a parent domain", pd->name);
  if (!c->allocators_set)
    return fail_null(EINVAL, "ibv_create_qp {}: a MANA raw QP needs manadv_set_context_attr(BUF_ALLOCATORS) first", pd->name);
  if (!same_ctx(c, scq)) return fail_null(EINVAL, "ibv_create_qp {}: send_cq missing, destroyed or of another context", pd->name);
  // kernel mana_ib_create_qp_raw
  if (attr->cap.max_send_wr > static_cast<std::uint32_t>(kManaMaxQpWr))
    return fail_null(EINVAL, "ibv_create_qp {}: max_send_wr {} above max_qp_wr {}", pd->name, attr->cap.max_send_wr, kManaMaxQpWr);
  if (attr->cap.max_send_sge > kManaMaxTxSge)
    return fail_null(EINVAL, "ibv_create_qp {}: max_send_sge {} above {}", pd->name, attr->cap.max_send_sge, kManaMaxTxSge);
  if (pd->pd_context != 1) return fail_null(EINVAL, "ibv_create_qp {}: port {} (pd_context) does not exist", pd->name, pd->pd_context);
  if (!bind_cq(scq, "ibv_create_qp")) return nullptr;
  const std::uint32_t bytes = mana_hw_size(std::uint64_t(attr->cap.max_send_wr) * mana_wqe_size(attr->cap.max_send_sge));
  std::uint8_t* buf = mana_alloc(c, bytes);
  if (!buf) {
    scq->bound = false;
    errno = ENOMEM;
    return nullptr;
  }
  Qp* q = new_qp(c, pd, attr->qp_type);
  q->send_cq = scq;
  ++scq->users;
  q->qp.send_cq = attr->send_cq;
  q->qp.recv_cq = attr->recv_cq;
  q->has_sq = true;
  q->mana_buf = buf;
  q->mana_bytes = bytes;
  q->mana_sq_count = attr->cap.max_send_wr;
  q->mana_sq_id = c->mana->create_sq(attr->cap.max_send_wr, scq->mana_cq_id, buf, bytes);
  scq->mana_id_known = true;  // the create response carries the CQ's id
  q->db_page.reset(new std::uint64_t[rawpipe::mana::kDoorbellPageSize / 8]());
  rec("  -> {} sq_bytes={}", q->name, bytes);
  return &q->qp;
}

}  // namespace

}  // extern "C"

namespace rpdouble {

Device* device_of(ibv_device* device) {
  for (auto& x : st().devices)
    if (&x->dev == device) return x.get();
  return nullptr;
}

Context* open_context(Device* d, bool devx) {
  ibv_device* device = &d->dev;
  auto* c = new Context();
  c->name = next_name("ctx");
  c->device = d;
  c->devx = devx;
  c->vctx.sz = sizeof(verbs_context);
  c->vctx.context.device = device;
  c->vctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
  c->vctx.context.num_comp_vectors = 1;
  c->vctx.query_port = op_query_port;
  c->vctx.query_device_ex = op_query_device_ex;
  // What verbs_get_ctx_op finds: the ops rdma-core dispatches through the context.
  c->vctx.create_qp_ex = op_create_qp_ex;
  c->vctx.create_wq = [](ibv_context* ctx, ibv_wq_init_attr* attr) { return op_create_wq(ctx, attr, nullptr); };
  c->vctx.modify_wq = op_modify_wq;
  c->vctx.destroy_wq = op_destroy_wq;
  c->vctx.create_rwq_ind_table = op_create_rwq_ind_table;
  c->vctx.destroy_rwq_ind_table = op_destroy_rwq_ind_table;
  c->vctx.ibv_create_flow = op_create_flow;
  c->vctx.ibv_destroy_flow = op_destroy_flow;
  c->vctx.alloc_parent_domain = op_alloc_parent_domain;
  if (d->kind == Kind::kMlx5) {
    c->mlx5 = std::make_unique<rawpipe::mlx5::model::Device>();
    c->mlx5->keep_sent(false);
  } else {
    c->mana = std::make_unique<rawpipe::mana::ManaModel>();
  }
  st().contexts[&c->vctx.context] = c;
  return c;
}

}  // namespace rpdouble

extern "C" {

__attribute__((visibility("default"))) ibv_context* ibv_open_device(ibv_device* device) {
  std::lock_guard lock(st().mu);
  Device* d = device_of(device);
  if (!d) return fail_null(ENODEV, "ibv_open_device on a device not from ibv_get_device_list");
  Context* c = open_context(d, false);
  rec("ibv_open_device {} -> {}", device->name, c->name);
  return &c->vctx.context;
}

__attribute__((visibility("default"))) int ibv_close_device(ibv_context* ctx) {
  std::lock_guard lock(st().mu);
  Context* c = context_of(ctx);
  if (!c) return violation(EINVAL, "ibv_close_device on a context the library did not open");
  rec("ibv_close_device {}", c->name);
  stop_wire(c);
  // rdma-core closes the file and the kernel destroys what is left without complaint; a driver
  // that leaves objects behind has a teardown bug all the same.
  if (c->live_objects) violation(0, "ibv_close_device {}: {} objects still alive (leaked by the caller)", c->name, c->live_objects);
  st().contexts.erase(ctx);
  st().closed_contexts.push_back(c);
  // The model stays: a leaked queue may still point into it. Contexts are few per process.
  return 0;
}

__attribute__((visibility("default"))) int ibv_query_device(ibv_context* ctx, ibv_device_attr* attr) {
  std::lock_guard lock(st().mu);
  Context* c = context_of(ctx);
  if (!c) return violation(EINVAL, "ibv_query_device on a context the library did not open");
  rec("ibv_query_device {}", c->name);
  fill_device_attr(*c->device, *attr);
  return 0;
}

__attribute__((visibility("default"))) int (ibv_query_port)(ibv_context* ctx, uint8_t port, struct _compat_ibv_port_attr* attr) {
  return op_query_port(ctx, port, reinterpret_cast<ibv_port_attr*>(attr), sizeof(ibv_port_attr));
}

__attribute__((visibility("default"))) ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  std::lock_guard lock(st().mu);
  Context* c = context_of(ctx);
  if (!c) return fail_null(EINVAL, "ibv_alloc_pd on a context the library did not open");
  auto* p = new Pd();
  p->name = next_name("pd");
  p->ctx = c;
  p->pd.context = ctx;
  p->pd.handle = static_cast<std::uint32_t>(st().counters["pd"]);
  ++c->live_objects;
  st().pds[&p->pd] = p;
  rec("ibv_alloc_pd {} -> {}", c->name, p->name);
  return &p->pd;
}

__attribute__((visibility("default"))) int ibv_dealloc_pd(ibv_pd* pd) {
  std::lock_guard lock(st().mu);
  Pd* p = find(st().pds, pd);
  if (!p) return violation(EINVAL, "ibv_dealloc_pd on a PD that does not exist (destroyed twice?)");
  rec("ibv_dealloc_pd {}", p->name);
  if (p->users)
    return violation(EBUSY, "ibv_dealloc_pd {}: {} MRs, QPs, WQs or parent domains still use it", p->name, p->users);
  if (p->parent_of) --p->parent_of->users;
  --p->ctx->live_objects;
  st().pds.erase(pd);
  delete p;
  return 0;
}

__attribute__((visibility("default"))) ibv_mr* (ibv_reg_mr)(ibv_pd* pd, void* addr, size_t length, int access) {
  std::lock_guard lock(st().mu);
  Pd* p = find(st().pds, pd);
  if (!p) return fail_null(EINVAL, "ibv_reg_mr on a PD that does not exist");
  rec("ibv_reg_mr {} length={} access={:#x}", p->name, length, access);
  if (!addr || !length) return fail_null(EINVAL, "ibv_reg_mr {}: empty region", p->name);
  if (access & ~(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                 IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB |
                 IBV_ACCESS_RELAXED_ORDERING))
    return fail_null(EINVAL, "ibv_reg_mr {}: unknown access bits {:#x}", p->name, access);
  // ib_check_mr_access: remote write without local write is refused.
  if ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE))
    return fail_null(EINVAL, "ibv_reg_mr {}: remote write without local write", p->name);
  Context* c = p->ctx;
  auto* m = new Mr();
  m->name = next_name("mr");
  m->pd = p;
  m->mr.context = c->vctx.context.device ? &c->vctx.context : nullptr;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.lkey = c->mlx5 ? c->mlx5->reg_mr(addr, length) : c->mana->register_mr(addr, length);
  m->mr.rkey = m->mr.lkey;
  ++p->users;
  ++c->live_objects;
  st().mrs[&m->mr] = m;
  rec("  -> {}", m->name);
  return &m->mr;
}

__attribute__((visibility("default"))) int ibv_dereg_mr(ibv_mr* mr) {
  std::lock_guard lock(st().mu);
  Mr* m = find(st().mrs, mr);
  if (!m) return violation(EINVAL, "ibv_dereg_mr on an MR that does not exist (deregistered twice?)");
  rec("ibv_dereg_mr {}", m->name);
  Context* c = m->pd->ctx;
  stop_wire(c);
  if (c->mlx5) c->mlx5->dereg_mr(mr->lkey);
  --m->pd->users;
  --c->live_objects;
  st().mrs.erase(mr);
  delete m;
  return 0;
}

__attribute__((visibility("default"))) ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context,
                                                             ibv_comp_channel* channel, int comp_vector) {
  std::lock_guard lock(st().mu);
  Context* c = context_of(ctx);
  if (!c) return fail_null(EINVAL, "ibv_create_cq on a context the library did not open");
  rec("ibv_create_cq {} cqe={} channel={} comp_vector={}", c->name, cqe, channel ? "yes" : "no", comp_vector);
  if (cqe <= 0 || cqe > kMaxCqe) return fail_null(EINVAL, "ibv_create_cq {}: cqe {} outside 1..{}", c->name, cqe, kMaxCqe);
  if (comp_vector >= c->vctx.context.num_comp_vectors)
    return fail_null(EINVAL, "ibv_create_cq {}: comp_vector {} of {}", c->name, comp_vector, c->vctx.context.num_comp_vectors);
  if (c->mlx5) return unsupported("ibv_create_cq on mlx5: rawpipe's mlx5 driver uses mlx5dv_create_cq (64-byte CQEs)");
  auto* q = new Cq();
  q->name = next_name("cq");
  q->ctx = c;
  q->cq.context = ctx;
  q->cq.cq_context = cq_context;
  // providers/mana/cq.c: with the application's allocators the CQ keeps the requested count
  // ("to preserve old behaviour for DPDK"); the NIC walks a power-of-two ring of that many.
  q->cqe = static_cast<std::uint32_t>(cqe);
  q->cq.cqe = cqe;
  if (!c->allocators_set) {
    delete q;
    return unsupported("ibv_create_cq on MANA before manadv_set_context_attr(BUF_ALLOCATORS): an RNIC CQ, which "
                       "raw-packet queues cannot use");
  }
  if (!is_pow2(q->cqe)) {
    delete q;
    return fail_null(EINVAL, "ibv_create_cq {}: MANA CQ of {} entries; its owner bits need a power of two", c->name, cqe);
  }
  q->mana_bytes = mana_hw_size(std::uint64_t(q->cqe) * 64);
  q->mana_buf = mana_alloc(c, q->mana_bytes);
  if (!q->mana_buf) {
    delete q;
    errno = ENOMEM;
    return nullptr;
  }
  q->mana_cq_id = c->mana->create_cq(q->cqe, q->mana_buf, q->mana_bytes);
  ++c->live_objects;
  c->cqs.push_back(q);
  st().cqs[&q->cq] = q;
  rec("  -> {} cqe={}", q->name, q->cqe);
  return reinterpret_cast<ibv_cq*>(&q->cq);
}

__attribute__((visibility("default"))) int ibv_destroy_cq(ibv_cq* cq) {
  std::lock_guard lock(st().mu);
  Cq* q = find(st().cqs, cq);
  if (!q) return violation(EINVAL, "ibv_destroy_cq on a CQ that does not exist (destroyed twice?)");
  rec("ibv_destroy_cq {}", q->name);
  if (q->users) return violation(EBUSY, "ibv_destroy_cq {}: {} QPs or WQs still complete into it", q->name, q->users);
  Context* c = q->ctx;
  stop_wire(c);
  if (q->mana_buf) c->allocators.free(q->mana_buf, c->allocators.data);
  --c->live_objects;
  std::erase(c->cqs, q);
  st().cqs.erase(cq);
  delete q;
  return 0;
}

__attribute__((visibility("default"))) ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  std::lock_guard lock(st().mu);
  Pd* p = find(st().pds, pd);
  if (!p) return fail_null(EINVAL, "ibv_create_qp on a PD that does not exist");
  if (attr->srq) return unsupported("ibv_create_qp with an SRQ");
  return p->ctx->mlx5 ? mlx5_create_qp_basic(p->ctx, p, attr) : mana_create_qp_raw(p->ctx, p, attr);
}

__attribute__((visibility("default"))) int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  std::lock_guard lock(st().mu);
  Qp* q = find(st().qps, qp);
  if (!q) return violation(EINVAL, "ibv_modify_qp on a QP that does not exist");
  rec("ibv_modify_qp {} {} -> {} mask={:#x}{}", q->name, qp_state_name(qp->state),
      mask & IBV_QP_STATE ? qp_state_name(attr->qp_state) : "-", mask,
      mask & IBV_QP_PORT ? fmt::format(" port={}", attr->port_num) : "");
  Context* c = q->pd->ctx;
  if (c->mana) return violation(EOPNOTSUPP, "ibv_modify_qp {}: mana_ib has no modify_qp for raw-packet QPs", q->name);
  if (q->ind) return violation(EINVAL, "ibv_modify_qp {}: a hash (RSS) QP has no state to change", q->name);
  if (!(mask & IBV_QP_STATE)) return violation(EINVAL, "ibv_modify_qp {}: no IBV_QP_STATE in the mask", q->name);
  // The kernel's ib_modify_qp_is_ok for raw-packet QPs: RESET->INIT needs the port (and takes
  // nothing else), INIT->RTR and RTR->RTS take no attributes, every state may go to RESET or ERR.
  const ibv_qp_state from = qp->state, to = attr->qp_state;
  const int allowed_extra = from == IBV_QPS_RESET && to == IBV_QPS_INIT ? IBV_QP_PORT : 0;
  const bool ok_transition = to == IBV_QPS_RESET || to == IBV_QPS_ERR || (from == IBV_QPS_RESET && to == IBV_QPS_INIT) ||
                             (from == IBV_QPS_INIT && (to == IBV_QPS_INIT || to == IBV_QPS_RTR)) ||
                             (from == IBV_QPS_RTR && to == IBV_QPS_RTS) || (from == IBV_QPS_RTS && to == IBV_QPS_RTS);
  if (!ok_transition)
    return violation(EINVAL, "ibv_modify_qp {}: {} -> {} is not a transition of a raw-packet QP", q->name,
                     qp_state_name(from), qp_state_name(to));
  if (mask & ~(IBV_QP_STATE | allowed_extra))
    return violation(EINVAL, "ibv_modify_qp {}: mask {:#x} has attributes {} -> {} does not take", q->name, mask,
                     qp_state_name(from), qp_state_name(to));
  if (from == IBV_QPS_RESET && to == IBV_QPS_INIT && (!(mask & IBV_QP_PORT) || attr->port_num != 1))
    return violation(EINVAL, "ibv_modify_qp {}: RESET -> INIT needs IBV_QP_PORT with an existing port", q->name);
  qp->state = to;
  if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) {
    if (q->has_rq) c->mlx5->stop_rq(q->mlx5_rq);
    if (q->has_sq) c->mlx5->stop_sq(q->mlx5_sq);
  } else if (to == IBV_QPS_RTR && q->has_rq) {
    c->mlx5->reset_rq(q->mlx5_rq);
  } else if (to == IBV_QPS_RTS && q->has_sq) {
    c->mlx5->reset_sq(q->mlx5_sq);
  }
  return 0;
}

__attribute__((visibility("default"))) int ibv_destroy_qp(ibv_qp* qp) {
  std::lock_guard lock(st().mu);
  Qp* q = find(st().qps, qp);
  if (!q) return violation(EINVAL, "ibv_destroy_qp on a QP that does not exist (destroyed twice?)");
  rec("ibv_destroy_qp {}", q->name);
  if (q->flows) return violation(EBUSY, "ibv_destroy_qp {}: {} flows still steer to it", q->name, q->flows);
  Context* c = q->pd->ctx;
  stop_wire(c);
  if (q->has_rq && c->mlx5) c->mlx5->stop_rq(q->mlx5_rq);
  if (q->has_sq && c->mlx5) c->mlx5->stop_sq(q->mlx5_sq);
  if (q->send_cq) --q->send_cq->users;
  if (q->recv_cq) --q->recv_cq->users;
  if (q->ind) --q->ind->users;
  if (q->mana_buf) c->allocators.free(q->mana_buf, c->allocators.data);
  --q->pd->users;
  --c->live_objects;
  std::erase(c->qps, q);
  st().qps.erase(qp);
  delete q;
  return 0;
}

}  // extern "C"
