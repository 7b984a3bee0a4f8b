// The context ops of the double (ops.hh): WQs, indirection tables, hash QPs, flows and parent
// domains, with the checks rdma-core (providers/mlx5/verbs.c, providers/mana/{qp,wq}.c, libibverbs
// cmd_*.c) and the kernel (mlx5_ib create_rss_raw_qp_tir, mana_ib_create_qp_rss, uverbs'
// ib_destroy_usecnt) make.
#include "tests/rdma_double/ops.hh"

#include "tests/rdma_double/core.hh"

namespace rpdouble {
namespace {

bool mixes(std::uint64_t fields, std::uint64_t a, std::uint64_t b) { return (fields & a) && (fields & b); }

constexpr std::uint64_t kV4 = IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4;
constexpr std::uint64_t kV6 = IBV_RX_HASH_SRC_IPV6 | IBV_RX_HASH_DST_IPV6;
constexpr std::uint64_t kTcp = IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP;
constexpr std::uint64_t kUdp = IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP;

std::string spec_list(const ibv_flow_attr* attr, std::size_t& bytes, bool& ok) {
  std::string out;
  const auto* p = reinterpret_cast<const std::uint8_t*>(attr + 1);
  bytes = 0;
  ok = true;
  for (unsigned i = 0; i < attr->num_of_specs; ++i) {
    // Specs sit at 4-byte offsets; ibv_flow_spec is an 8-byte aligned union: copy its header.
    decltype(ibv_flow_spec::hdr) hdr;
    std::memcpy(&hdr, p + bytes, sizeof hdr);
    if (hdr.size == 0 || sizeof(ibv_flow_attr) + bytes + hdr.size > attr->size) {
      ok = false;
      break;
    }
    if (!out.empty()) out += ',';
    out += fmt::format("{:#x}", static_cast<unsigned>(hdr.type));
    bytes += hdr.size;
  }
  return out;
}

}  // namespace

ibv_pd* op_alloc_parent_domain(ibv_context* ctx, ibv_parent_domain_init_attr* attr) {
  std::lock_guard lock(st().mu);
  Context* c = context_of(ctx);
  if (!c) return fail_null(EINVAL, "ibv_alloc_parent_domain on a context the library did not open");
  Pd* base = find(st().pds, attr->pd);
  rec("ibv_alloc_parent_domain {} pd={} comp_mask={:#x} pd_context={}", c->name, name_of(base), attr->comp_mask,
      reinterpret_cast<std::uintptr_t>(attr->pd_context));
  if (!base || base->ctx != c) return fail_null(EINVAL, "ibv_alloc_parent_domain {}: pd missing or destroyed", c->name);
  if (attr->td) return unsupported("ibv_alloc_parent_domain with a thread domain");
  if (attr->comp_mask & ~(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT))
    return fail_null(EINVAL, "ibv_alloc_parent_domain {}: unknown comp_mask bits {:#x}", c->name, attr->comp_mask);
  auto* p = new Pd();
  p->name = next_name("pd");
  p->ctx = c;
  p->parent_of = base;
  p->pd_context = attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT ? reinterpret_cast<std::uintptr_t>(attr->pd_context) : 0;
  p->pd.context = ctx;
  ++base->users;
  ++c->live_objects;
  st().pds[&p->pd] = p;
  rec("  -> {}", p->name);
  return &p->pd;
}

ibv_wq* op_create_wq(ibv_context* ctx, ibv_wq_init_attr* attr, mlx5dv_wq_init_attr* dv) {
  std::lock_guard lock(st().mu);
  Context* c = context_of(ctx);
  if (!c) return fail_null(EINVAL, "ibv_create_wq on a context the library did not open");
  Pd* pd = find(st().pds, attr->pd);
  Cq* cq = find(st().cqs, attr->cq);
  const bool striding = dv && (dv->comp_mask & MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ);
  rec("{} {} type={} max_wr={} max_sge={} pd={} cq={} comp_mask={:#x}{}", dv ? "mlx5dv_create_wq" : "ibv_create_wq",
      c->name, static_cast<int>(attr->wq_type), attr->max_wr, attr->max_sge, name_of(pd), name_of(cq), attr->comp_mask,
      striding ? fmt::format(" striding log_stride_bytes={} log_strides={} two_byte_shift={}",
                             dv->striding_rq_attrs.single_stride_log_num_of_bytes,
                             dv->striding_rq_attrs.single_wqe_log_num_of_strides, dv->striding_rq_attrs.two_byte_shift_en)
               : "");
  if (attr->comp_mask >= IBV_WQ_INIT_ATTR_RESERVED)  // libibverbs ibv_cmd_create_wq
    return fail_null(EINVAL, "create_wq {}: comp_mask {:#x} has unknown bits", c->name, attr->comp_mask);
  if (attr->wq_type != IBV_WQT_RQ) return fail_null(EINVAL, "create_wq {}: wq_type {} is not IBV_WQT_RQ", c->name, static_cast<int>(attr->wq_type));
  if (!pd || pd->ctx != c || !same_ctx(c, cq))
    return fail_null(EINVAL, "create_wq {}: pd or cq missing, destroyed or of another context", c->name);
  const int max_wr = c->mlx5 ? kMaxQpWr : kManaMaxQpWr;
  if (attr->max_wr == 0 || attr->max_wr > static_cast<std::uint32_t>(max_wr) || attr->max_sge == 0 ||
      attr->max_sge > static_cast<std::uint32_t>(kMaxSge))
    return fail_null(EINVAL, "create_wq {}: max_wr {} / max_sge {} outside 1..{} / 1..{}", c->name, attr->max_wr,
                     attr->max_sge, max_wr, kMaxSge);
  if (dv && (dv->comp_mask & ~std::uint64_t(MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ)))
    return fail_null(EINVAL, "mlx5dv_create_wq {}: dv comp_mask {:#x} has unknown bits", c->name, dv->comp_mask);
  if (striding) {
    // What mlx5dv_query_device reports (dv.cc) and the provider checks against.
    const auto& s = dv->striding_rq_attrs;
    if (s.single_stride_log_num_of_bytes < 6 || s.single_stride_log_num_of_bytes > 13 ||
        s.single_wqe_log_num_of_strides < 3 || s.single_wqe_log_num_of_strides > 16)
      return fail_null(EINVAL, "mlx5dv_create_wq {}: striding sizes outside the device's ranges", c->name);
  }
  if (c->mana && !c->allocators_set)  // providers/mana/wq.c
    return fail_null(EINVAL, "ibv_create_wq {}: a MANA WQ needs manadv_set_context_attr(BUF_ALLOCATORS) first", c->name);
  if (!bind_cq(cq, "create_wq")) return nullptr;
  auto* w = new Wq();
  w->name = next_name("wq");
  w->pd = pd;
  w->cq = cq;
  w->striding = striding;
  w->wq.context = ctx;
  w->wq.wq_context = attr->wq_context;
  w->wq.pd = attr->pd;
  w->wq.cq = attr->cq;
  w->wq.wq_type = IBV_WQT_RQ;
  w->wq.state = IBV_WQS_RESET;
  if (c->mlx5) {
    mlx5_bind_rq(c, cq, std::bit_ceil(attr->max_wr), striding, striding ? dv->striding_rq_attrs.single_stride_log_num_of_bytes : 0,
                 striding ? dv->striding_rq_attrs.single_wqe_log_num_of_strides : 0, w->mlx5_rq, w->mlx5_ring);
    w->wq.wq_num = 0x100 + w->mlx5_rq;
  } else {
    w->mana_bytes = mana_hw_size(std::uint64_t(attr->max_wr) * mana_wqe_size(attr->max_sge));
    w->mana_buf = mana_alloc(c, w->mana_bytes);
    if (!w->mana_buf) {
      cq->bound = false;
      delete w;
      errno = ENOMEM;
      return nullptr;
    }
    w->mana_count = attr->max_wr;
    w->mana_rq_id = c->mana->create_rq(attr->max_wr, cq->mana_cq_id, w->mana_buf, w->mana_bytes);
    w->db_page.reset(new std::uint64_t[rawpipe::mana::kDoorbellPageSize / 8]());
  }
  ++pd->users;
  ++cq->users;
  ++c->live_objects;
  c->wqs.push_back(w);
  st().wqs[&w->wq] = w;
  rec("  -> {}", w->name);
  return &w->wq;
}

int op_modify_wq(ibv_wq* wq, ibv_wq_attr* attr) {
  std::lock_guard lock(st().mu);
  Wq* w = find(st().wqs, wq);
  if (!w) return violation(EINVAL, "ibv_modify_wq on a WQ that does not exist");
  rec("ibv_modify_wq {} {} -> {} mask={:#x}", w->name, wq_state_name(wq->state),
      attr->attr_mask & IBV_WQ_ATTR_STATE ? wq_state_name(attr->wq_state) : "-", attr->attr_mask);
  Context* c = w->pd->ctx;
  if (c->mana) return violation(EOPNOTSUPP, "ibv_modify_wq {}: providers/mana has no modify_wq", w->name);
  if (attr->attr_mask >= IBV_WQ_ATTR_RESERVED) return violation(EINVAL, "ibv_modify_wq {}: unknown attr_mask bits", w->name);
  if (!(attr->attr_mask & IBV_WQ_ATTR_STATE)) return violation(EINVAL, "ibv_modify_wq {}: no IBV_WQ_ATTR_STATE", w->name);
  if ((attr->attr_mask & IBV_WQ_ATTR_CURR_STATE) && attr->curr_wq_state != wq->state)
    return violation(EINVAL, "ibv_modify_wq {}: curr_wq_state {} but the WQ is {}", w->name,
                     wq_state_name(attr->curr_wq_state), wq_state_name(wq->state));
  if (wq->state == IBV_WQS_ERR && attr->wq_state == IBV_WQS_RDY)
    return violation(EINVAL, "ibv_modify_wq {}: ERR -> RDY; a WQ in error goes through RESET", w->name);
  wq->state = attr->wq_state;
  if (attr->wq_state == IBV_WQS_RDY)
    c->mlx5->reset_rq(w->mlx5_rq);
  else
    c->mlx5->stop_rq(w->mlx5_rq);
  return 0;
}

int op_destroy_wq(ibv_wq* wq) {
  std::lock_guard lock(st().mu);
  Wq* w = find(st().wqs, wq);
  if (!w) return violation(EINVAL, "ibv_destroy_wq on a WQ that does not exist (destroyed twice?)");
  rec("ibv_destroy_wq {}", w->name);
  if (w->tables) return violation(EBUSY, "ibv_destroy_wq {}: {} indirection tables still list it", w->name, w->tables);
  Context* c = w->pd->ctx;
  stop_wire(c);
  if (c->mlx5) c->mlx5->stop_rq(w->mlx5_rq);
  if (w->mana_buf) c->allocators.free(w->mana_buf, c->allocators.data);
  --w->pd->users;
  --w->cq->users;
  --c->live_objects;
  std::erase(c->wqs, w);
  st().wqs.erase(wq);
  delete w;
  return 0;
}

ibv_rwq_ind_table* op_create_rwq_ind_table(ibv_context* ctx, ibv_rwq_ind_table_init_attr* attr) {
  std::lock_guard lock(st().mu);
  Context* c = context_of(ctx);
  if (!c) return fail_null(EINVAL, "ibv_create_rwq_ind_table on a context the library did not open");
  const std::uint32_t size = attr->log_ind_tbl_size < 31 ? 1u << attr->log_ind_tbl_size : 0;
  std::vector<Wq*> wqs;
  std::string names;
  bool all_found = size > 0;
  for (std::uint32_t i = 0; i < size && i < 4096; ++i) {
    Wq* w = find(st().wqs, attr->ind_tbl[i]);
    if (!names.empty()) names += ',';
    names += w ? w->name : std::string("?");
    if (!w || w->pd->ctx != c) all_found = false;
    wqs.push_back(w);
  }
  rec("ibv_create_rwq_ind_table {} log_size={} wqs={} comp_mask={:#x}", c->name, attr->log_ind_tbl_size, names, attr->comp_mask);
  if (attr->comp_mask) return fail_null(EINVAL, "ibv_create_rwq_ind_table {}: comp_mask {:#x} (must be 0)", c->name, attr->comp_mask);
  if (c->mlx5 && attr->log_ind_tbl_size > kMlx5MaxIndLog)
    return fail_null(EINVAL, "ibv_create_rwq_ind_table {}: 2^{} entries, above the device's 2^{}", c->name,
                     attr->log_ind_tbl_size, kMlx5MaxIndLog);
  if (!all_found) return fail_null(EINVAL, "ibv_create_rwq_ind_table {}: an entry is not a live WQ of this context", c->name);
  auto* t = new IndTable();
  t->name = next_name("ind");
  t->ctx = c;
  t->wqs = std::move(wqs);
  t->table.context = ctx;
  t->table.ind_tbl_num = static_cast<std::uint32_t>(st().counters["ind"]);
  for (Wq* w : t->wqs) ++w->tables;
  ++c->live_objects;
  st().inds[&t->table] = t;
  rec("  -> {}", t->name);
  return &t->table;
}

int op_destroy_rwq_ind_table(ibv_rwq_ind_table* table) {
  std::lock_guard lock(st().mu);
  IndTable* t = find(st().inds, table);
  if (!t) return violation(EINVAL, "ibv_destroy_rwq_ind_table on a table that does not exist (destroyed twice?)");
  rec("ibv_destroy_rwq_ind_table {}", t->name);
  if (t->users) return violation(EBUSY, "ibv_destroy_rwq_ind_table {}: {} hash QPs still use it", t->name, t->users);
  stop_wire(t->ctx);
  for (Wq* w : t->wqs) --w->tables;
  --t->ctx->live_objects;
  st().inds.erase(table);
  delete t;
  return 0;
}

ibv_qp* op_create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* attr) {
  std::lock_guard lock(st().mu);
  Context* c = context_of(ctx);
  if (!c) return fail_null(EINVAL, "ibv_create_qp_ex on a context the library did not open");
  Pd* pd = find(st().pds, attr->pd);
  IndTable* ind = find(st().inds, attr->rwq_ind_tbl);
  const auto& h = attr->rx_hash_conf;
  rec("ibv_create_qp_ex {} type={} comp_mask={:#x} pd={} ind={} hash_fn={} key_len={} fields={:#x} send_cq={} "
      "max_send_wr={} max_recv_wr={}",
      c->name, static_cast<int>(attr->qp_type), attr->comp_mask, name_of(pd), ind ? ind->name : "null",
      static_cast<int>(h.rx_hash_function), h.rx_hash_key_len, h.rx_hash_fields_mask,
      attr->send_cq ? "set" : "null", attr->cap.max_send_wr, attr->cap.max_recv_wr);
  const std::uint32_t supported = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
                                  IBV_QP_INIT_ATTR_MAX_TSO_HEADER | IBV_QP_INIT_ATTR_IND_TABLE |
                                  IBV_QP_INIT_ATTR_RX_HASH | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  if (attr->comp_mask & ~supported)  // providers/mlx5/verbs.c MLX5_CREATE_QP_SUP_COMP_MASK
    return fail_null(EINVAL, "ibv_create_qp_ex {}: comp_mask {:#x} has unsupported bits", c->name, attr->comp_mask);
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !pd || pd->ctx != c)
    return fail_null(EINVAL, "ibv_create_qp_ex {}: no live PD (IBV_QP_INIT_ATTR_PD)", c->name);
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_IND_TABLE) || !(attr->comp_mask & IBV_QP_INIT_ATTR_RX_HASH))
    return unsupported("ibv_create_qp_ex without an indirection table and RX hash: the double plays hash QPs here");
  if (attr->qp_type != IBV_QPT_RAW_PACKET)
    return fail_null(c->mlx5 ? EOPNOTSUPP : EOPNOTSUPP, "ibv_create_qp_ex {}: a hash QP must be raw packet", c->name);
  if (!ind || ind->ctx != c) return fail_null(EINVAL, "ibv_create_qp_ex {}: rwq_ind_tbl missing or destroyed", c->name);
  if (h.rx_hash_function != IBV_RX_HASH_FUNC_TOEPLITZ)
    return fail_null(c->mlx5 ? EOPNOTSUPP : EINVAL, "ibv_create_qp_ex {}: hash function {} is not Toeplitz", c->name,
                     static_cast<int>(h.rx_hash_function));
  if (h.rx_hash_key_len != kHashKeyLen || !h.rx_hash_key)
    return fail_null(EINVAL, "ibv_create_qp_ex {}: a {}-byte hash key; the device takes exactly {}", c->name,
                     h.rx_hash_key_len, kHashKeyLen);
  if (c->mlx5) {
    // mlx5_ib create_rss_raw_qp_tir
    if (attr->send_cq || attr->cap.max_send_wr)
      return fail_null(EINVAL, "ibv_create_qp_ex {}: a hash QP is receive-only (send_cq / max_send_wr set)", c->name);
    if (h.rx_hash_fields_mask & ~rawpipe::mlx5::model::kAllHashFields)
      return fail_null(EOPNOTSUPP, "ibv_create_qp_ex {}: hash fields {:#x} beyond the device's", c->name, h.rx_hash_fields_mask);
    if (mixes(h.rx_hash_fields_mask, kV4, kV6))
      return fail_null(EINVAL, "ibv_create_qp_ex {}: hash fields mix IPv4 and IPv6 (fields {:#x})", c->name, h.rx_hash_fields_mask);
    if (mixes(h.rx_hash_fields_mask, kTcp, kUdp))
      return fail_null(EINVAL, "ibv_create_qp_ex {}: hash fields mix TCP and UDP ports (fields {:#x})", c->name,
                       h.rx_hash_fields_mask);
  } else {
    // providers/mana/qp.c mana_create_qp_ex_raw and kernel mana_ib_create_qp_rss
    if (!pd->parent_of) return fail_null(EINVAL, "ibv_create_qp_ex {}: a MANA RSS QP must be on a parent domain", c->name);
    if (attr->cap.max_recv_wr > static_cast<std::uint32_t>(kManaMaxQpWr))
      return fail_null(EINVAL, "ibv_create_qp_ex {}: max_recv_wr {} above {}", c->name, attr->cap.max_recv_wr, kManaMaxQpWr);
    if (ind->wqs.size() > kManaIndTableSize)
      return fail_null(EINVAL, "ibv_create_qp_ex {}: indirection table of {} above MANA's {}", c->name, ind->wqs.size(),
                       kManaIndTableSize);
    if (pd->pd_context != 1) return fail_null(EINVAL, "ibv_create_qp_ex {}: port {} does not exist", c->name, pd->pd_context);
  }
  Qp* q = new_qp(c, pd, attr->qp_type);
  q->ind = ind;
  q->hash_fields = h.rx_hash_fields_mask;
  ++ind->users;
  if (c->mlx5) {
    if (!c->rss_set) {
      std::vector<std::uint16_t> rqs;
      for (Wq* w : ind->wqs) rqs.push_back(w->mlx5_rq);
      c->mlx5->set_rss(std::span<const std::uint8_t>(h.rx_hash_key, kHashKeyLen), rqs);
      c->rss_set = true;
    }
  } else {
    // The create response carries each WQ's and CQ's queue id (kernel resp.entries[]).
    for (Wq* w : ind->wqs) {
      w->mana_id_known = true;
      w->cq->mana_id_known = true;
    }
    std::memcpy(c->mana_key.data(), h.rx_hash_key, kHashKeyLen);
    c->mana_table.clear();
    for (std::uint32_t i = 0; i < kManaIndTableSize; ++i) c->mana_table.push_back(ind->wqs[i % ind->wqs.size()]->mana_rq_id);
    std::vector<Qp*> sqs;
    for (Qp* s : c->qps)
      if (s->has_sq) sqs.push_back(s);
    std::vector<Wq*> rqs;
    for (Wq* w : ind->wqs)
      if (std::find(rqs.begin(), rqs.end(), w) == rqs.end()) rqs.push_back(w);
    start_mana_wire(c, std::move(sqs), std::move(rqs));
  }
  rec("  -> {}", q->name);
  return &q->qp;
}

ibv_flow* op_create_flow(ibv_qp* qp, ibv_flow_attr* attr) {
  std::lock_guard lock(st().mu);
  Qp* q = find(st().qps, qp);
  if (!q) return fail_null(EINVAL, "ibv_create_flow on a QP that does not exist");
  std::size_t spec_bytes = 0;
  bool specs_ok = true;
  const std::string specs = spec_list(attr, spec_bytes, specs_ok);
  rec("ibv_create_flow {} type={} priority={} port={} flags={:#x} comp_mask={:#x} specs={}", q->name,
      static_cast<int>(attr->type), attr->priority, attr->port, attr->flags, attr->comp_mask, specs);
  Context* c = q->pd->ctx;
  if (c->mana) return unsupported("ibv_create_flow on MANA: mana_ib has no flow steering");
  // ib_uverbs_ex_create_flow: comp_mask 0, at most 10 specs, sizes adding up to the attribute.
  if (attr->comp_mask) return fail_null(EINVAL, "ibv_create_flow {}: comp_mask {:#x} (must be 0)", q->name, attr->comp_mask);
  if (attr->num_of_specs > 10) return fail_null(EINVAL, "ibv_create_flow {}: {} specs (at most 10)", q->name, attr->num_of_specs);
  if (!specs_ok || sizeof(ibv_flow_attr) + spec_bytes != attr->size)
    return fail_null(EINVAL, "ibv_create_flow {}: spec sizes do not add up to attr size {}", q->name, attr->size);
  if (attr->port != 1) return fail_null(EINVAL, "ibv_create_flow {}: port {} does not exist", q->name, attr->port);
  if (!q->ind && !q->has_rq) return fail_null(EINVAL, "ibv_create_flow {}: the QP receives nothing", q->name);
  auto* f = new Flow();
  f->name = next_name("flow");
  f->qp = q;
  f->flow.context = qp->context;
  f->flow.handle = static_cast<std::uint32_t>(st().counters["flow"]);
  const std::uint16_t rq = q->ind ? q->ind->wqs.front()->mlx5_rq : q->mlx5_rq;
  f->model_handle = c->mlx5->create_flow(rq, attr, q->ind ? q->hash_fields : rawpipe::mlx5::model::kAllHashFields);
  ++q->flows;
  ++c->live_objects;
  st().flows[&f->flow] = f;
  rec("  -> {}", f->name);
  // The wire starts with the first rule: frames before it would only go to the kernel.
  if (!c->wire_started) {
    WireFrames w = wire_frames();
    c->mlx5->start_thread(std::move(w.distinct), w.total);
    c->wire_started = true;
  }
  return &f->flow;
}

int op_destroy_flow(ibv_flow* flow) {
  std::lock_guard lock(st().mu);
  Flow* f = find(st().flows, flow);
  if (!f) return violation(EINVAL, "ibv_destroy_flow on a flow that does not exist (destroyed twice?)");
  rec("ibv_destroy_flow {}", f->name);
  Context* c = f->qp->pd->ctx;
  c->mlx5->destroy_flow(f->model_handle);
  --f->qp->flows;
  --c->live_objects;
  st().flows.erase(flow);
  delete f;
  return 0;
}

}  // namespace rpdouble
