// The direct-verbs half of the double: what libmlx5.so.1 and libmana.so.1 export, implemented
// here (in libibverbs.so.1) so the three share one state; the two provider stand-ins forward.
// mlx5dv_init_obj and manadv_init_obj hand out the model's rings, doorbell records and pages.
#include "tests/rdma_double/core.hh"
#include "tests/rdma_double/ops.hh"

using namespace rpdouble;

extern "C" {

bool rpdouble_mlx5dv_is_supported(ibv_device* device) {
  std::lock_guard lock(st().mu);
  for (auto& d : st().devices)
    if (&d->dev == device) {
      rec("mlx5dv_is_supported {} -> {}", device->name, d->kind == Kind::kMlx5);
      return d->kind == Kind::kMlx5;
    }
  return false;
}

int rpdouble_mlx5dv_query_device(ibv_context* ctx, mlx5dv_context* a) {
  std::lock_guard lock(st().mu);
  Context* c = context_of(ctx);
  if (!c || !c->mlx5) return violation(EOPNOTSUPP, "mlx5dv_query_device on a context that is not an mlx5 one");
  rec("mlx5dv_query_device {} comp_mask={:#x}", c->name, a->comp_mask);
  const std::uint64_t asked = a->comp_mask;
  std::uint64_t answered = 0;
  a->version = 1;
  a->flags = MLX5DV_CONTEXT_FLAGS_CQE_V1 | MLX5DV_CONTEXT_FLAGS_MPW_ALLOWED;
  if (asked & MLX5DV_CONTEXT_MASK_CQE_COMPRESION) {
    a->cqe_comp_caps.max_num = 64;
    a->cqe_comp_caps.supported_format = MLX5DV_CQE_RES_FORMAT_HASH | MLX5DV_CQE_RES_FORMAT_CSUM;
    answered |= MLX5DV_CONTEXT_MASK_CQE_COMPRESION;
  }
  if (asked & MLX5DV_CONTEXT_MASK_STRIDING_RQ) {
    a->striding_rq_caps.min_single_stride_log_num_of_bytes = 6;
    a->striding_rq_caps.max_single_stride_log_num_of_bytes = 13;
    a->striding_rq_caps.min_single_wqe_log_num_of_strides = 3;
    a->striding_rq_caps.max_single_wqe_log_num_of_strides = 16;
    a->striding_rq_caps.supported_qpts = 1u << IBV_QPT_RAW_PACKET;
    answered |= MLX5DV_CONTEXT_MASK_STRIDING_RQ;
  }
  a->comp_mask = answered;  // the provider answers the subset of what was asked that it knows
  return 0;
}

ibv_cq_ex* rpdouble_mlx5dv_create_cq(ibv_context* ctx, ibv_cq_init_attr_ex* attr, mlx5dv_cq_init_attr* dv) {
  std::lock_guard lock(st().mu);
  Context* c = context_of(ctx);
  if (!c || !c->mlx5) return fail_null(EOPNOTSUPP, "mlx5dv_create_cq on a context that is not an mlx5 one");
  rec("mlx5dv_create_cq {} cqe={} comp_mask={:#x} wc_flags={:#x} dv_comp_mask={:#x} cqe_size={} compressed={}", c->name,
      attr->cqe, attr->comp_mask, attr->wc_flags, dv ? dv->comp_mask : 0,
      dv && (dv->comp_mask & MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE) ? dv->cqe_size : 64,
      dv && (dv->comp_mask & MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE) ? fmt::format("{:#x}", dv->cqe_comp_res_format) : "no");
  // providers/mlx5/verbs.c create_cq
  if (attr->comp_mask & ~std::uint32_t(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD))
    return fail_null(EINVAL, "mlx5dv_create_cq {}: comp_mask {:#x} has unsupported bits", c->name, attr->comp_mask);
  if (attr->cqe == 0 || attr->cqe > static_cast<std::uint32_t>(kMaxCqe))
    return fail_null(EINVAL, "mlx5dv_create_cq {}: cqe {} outside 1..{}", c->name, attr->cqe, kMaxCqe);
  std::uint32_t cqe_size = 64;
  bool compressed = false;
  if (dv) {
    if (dv->comp_mask & ~std::uint64_t(MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE | MLX5DV_CQ_INIT_ATTR_MASK_FLAGS | MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE))
      return fail_null(EINVAL, "mlx5dv_create_cq {}: dv comp_mask {:#x} has unknown bits", c->name, dv->comp_mask);
    if (dv->comp_mask & MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE) {
      if (dv->cqe_size != 64 && dv->cqe_size != 128)
        return fail_null(EINVAL, "mlx5dv_create_cq {}: cqe_size {} (64 or 128)", c->name, dv->cqe_size);
      cqe_size = dv->cqe_size;
    }
    if (dv->comp_mask & MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE) {
      if (!is_pow2(dv->cqe_comp_res_format) ||
          !(dv->cqe_comp_res_format & (MLX5DV_CQE_RES_FORMAT_HASH | MLX5DV_CQE_RES_FORMAT_CSUM)))
        return fail_null(EINVAL, "mlx5dv_create_cq {}: compressed format {:#x} is not one the device offers", c->name,
                         dv->cqe_comp_res_format);
      compressed = true;
    }
  }
  if (cqe_size != 64) return unsupported("mlx5dv_create_cq with 128-byte CQEs: the model writes 64-byte CQEs");
  auto* q = new Cq();
  q->name = next_name("cq");
  q->ctx = c;
  // mlx5's align_queue_size(cqe + 1): the ring is the next power of two above the request.
  q->cqe = std::bit_ceil(attr->cqe + 1);
  q->compressed = compressed;
  q->cqe_size = cqe_size;
  q->cq.context = ctx;
  q->cq.cqe = static_cast<int>(q->cqe - 1);
  ++c->live_objects;
  c->cqs.push_back(q);
  st().cqs[&q->cq] = q;
  rec("  -> {} ring={}", q->name, q->cqe);
  return &q->cq;
}

ibv_wq* rpdouble_mlx5dv_create_wq(ibv_context* ctx, ibv_wq_init_attr* attr, mlx5dv_wq_init_attr* dv) {
  mlx5dv_wq_init_attr none{};
  return op_create_wq(ctx, attr, dv ? dv : &none);
}

ibv_qp* rpdouble_mlx5dv_create_qp(ibv_context* ctx, ibv_qp_init_attr_ex* attr, mlx5dv_qp_init_attr* dv) {
  if (dv && dv->comp_mask) {
    std::lock_guard lock(st().mu);
    return unsupported(fmt::format("mlx5dv_create_qp with dv comp_mask {:#x}", dv->comp_mask));
  }
  return op_create_qp_ex(ctx, attr);
}

int rpdouble_mlx5dv_init_obj(mlx5dv_obj* obj, uint64_t type) {
  std::lock_guard lock(st().mu);
  rec("mlx5dv_init_obj{}{}{}{}", type & MLX5DV_OBJ_QP ? fmt::format(" qp={}", find(st().qps, obj->qp.in) ? find(st().qps, obj->qp.in)->name : "?") : "",
      type & MLX5DV_OBJ_CQ ? fmt::format(" cq={}", find(st().cqs, obj->cq.in) ? find(st().cqs, obj->cq.in)->name : "?") : "",
      type & MLX5DV_OBJ_RWQ ? fmt::format(" rwq={}", find(st().wqs, obj->rwq.in) ? find(st().wqs, obj->rwq.in)->name : "?") : "",
      type & ~std::uint64_t(MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ | MLX5DV_OBJ_RWQ) ? fmt::format(" other={:#x}", type) : "");
  if (type & ~std::uint64_t(MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ | MLX5DV_OBJ_RWQ))
    return unsupported("mlx5dv_init_obj of SRQ / DM / AH / PD objects"), EOPNOTSUPP;
  if (type & MLX5DV_OBJ_QP) {
    Qp* q = find(st().qps, obj->qp.in);
    if (!q || !q->pd->ctx->mlx5) return violation(EINVAL, "mlx5dv_init_obj: the QP does not exist");
    mlx5dv_qp& o = *obj->qp.out;
    const std::uint64_t asked = o.comp_mask;
    std::memset(&o, 0, sizeof(o));
    (void)asked;  // no optional outputs (UAR mmap offset, TIR number) are answered
    if (q->has_rq) {
      o.dbrec = q->mlx5_rq_ring.dbrec;  // [MLX5_RCV_DBR] first
      o.rq.buf = q->mlx5_rq_ring.buf;
      o.rq.wqe_cnt = q->mlx5_rq_ring.wqe_cnt;
      o.rq.stride = q->mlx5_rq_ring.stride;
    }
    if (q->has_sq) {
      o.dbrec = q->mlx5_sq_ring.dbrec - rawpipe::mlx5::kSndDbr;
      o.sq.buf = q->mlx5_sq_ring.buf;
      o.sq.wqe_cnt = q->mlx5_sq_ring.wqe_cnt;
      o.sq.stride = rawpipe::mlx5::kWqeBb;
      o.bf.reg = q->mlx5_sq_ring.bf_reg;
      o.bf.size = q->mlx5_sq_ring.bf_size;
    }
  }
  if (type & MLX5DV_OBJ_RWQ) {
    Wq* w = find(st().wqs, obj->rwq.in);
    if (!w || !w->pd->ctx->mlx5) return violation(EINVAL, "mlx5dv_init_obj: the RWQ does not exist");
    mlx5dv_rwq& o = *obj->rwq.out;
    std::memset(&o, 0, sizeof(o));
    o.buf = w->mlx5_ring.buf;
    o.dbrec = w->mlx5_ring.dbrec;
    o.wqe_cnt = w->mlx5_ring.wqe_cnt;
    o.stride = w->mlx5_ring.stride;
  }
  if (type & MLX5DV_OBJ_CQ) {
    Cq* q = find(st().cqs, obj->cq.in);
    if (!q || !q->ctx->mlx5) return violation(EINVAL, "mlx5dv_init_obj: the CQ does not exist");
    if (!q->bound) return unsupported("mlx5dv_init_obj of a CQ no queue uses yet: the model makes its ring with the queue"), EOPNOTSUPP;
    mlx5dv_cq& o = *obj->cq.out;
    std::memset(&o, 0, sizeof(o));
    o.buf = q->mlx5_ring.buf;
    o.dbrec = q->mlx5_ring.dbrec;
    o.cqe_cnt = q->mlx5_ring.cqe_cnt;
    o.cqe_size = q->cqe_size;
    o.cqn = 0x400 + static_cast<std::uint32_t>(std::find(q->ctx->cqs.begin(), q->ctx->cqs.end(), q) - q->ctx->cqs.begin());
  }
  return 0;
}

// providers/mlx5/mlx5.c mlx5dv_open_device: a ConnectX only; the DevX flag asks the kernel for a
// DevX user context, which a device or kernel without DevX refuses.
ibv_context* rpdouble_mlx5dv_open_device(ibv_device* device, mlx5dv_context_attr* attr) {
  std::lock_guard lock(st().mu);
  Device* d = device_of(device);
  if (!d) return fail_null(ENODEV, "mlx5dv_open_device on a device not from ibv_get_device_list");
  const std::uint32_t flags = attr ? attr->flags : 0;
  rec("mlx5dv_open_device {} flags={:#x} comp_mask={:#x}", device->name, flags, attr ? attr->comp_mask : 0);
  if (d->kind != Kind::kMlx5) return fail_null(EOPNOTSUPP, "mlx5dv_open_device on {}, not a ConnectX", device->name);
  if (attr && attr->comp_mask) return fail_null(EINVAL, "mlx5dv_open_device {}: comp_mask {:#x} has unknown bits", device->name, attr->comp_mask);
  if (flags & ~std::uint32_t(MLX5DV_CONTEXT_FLAGS_DEVX))
    return fail_null(EINVAL, "mlx5dv_open_device {}: flags {:#x} has unknown bits", device->name, flags);
  const bool devx = flags & MLX5DV_CONTEXT_FLAGS_DEVX;
  if (devx && !mlx5_inline_report().devx) {
    rec("  -> EOPNOTSUPP (the device offers no DevX)");
    errno = EOPNOTSUPP;
    return nullptr;
  }
  Context* c = open_context(d, devx);
  rec("  -> {}{}", c->name, devx ? " (DevX)" : "");
  return &c->vctx.context;
}

namespace {

// MLX5_SET on a big-endian mailbox: `width` bits at bit `offset`, counted from the most
// significant bit of the first word, as mlx5_ifc lays structures out.
void ifc_set(std::uint8_t* base, std::uint32_t offset, std::uint32_t width, std::uint32_t value) {
  auto* word = reinterpret_cast<std::uint32_t*>(base) + offset / 32;
  const std::uint32_t shift = 32 - offset % 32 - width;
  const std::uint32_t mask = ((width == 32 ? 0u : (1u << width)) - 1u) << shift;
  *word = htonl((ntohl(*word) & ~mask) | ((value << shift) & mask));
}

std::uint32_t ifc_get(const std::uint8_t* base, std::uint32_t offset, std::uint32_t width) {
  const std::uint32_t w = ntohl(reinterpret_cast<const std::uint32_t*>(base)[offset / 32]);
  return (w >> (32 - offset % 32 - width)) & ((width == 32 ? 0u : (1u << width)) - 1u);
}

}  // namespace

// The firmware commands of DevX the double answers: QUERY_HCA_CAP for the Ethernet offload caps
// and QUERY_NIC_VPORT_CONTEXT, each answered from RAWPIPE_RDMA_DOUBLE_MLX5_INLINE. Which context
// may issue which is the kernel's devx_get_uid (drivers/infiniband/hw/mlx5/devx.c): QUERY_HCA_CAP
// is on its whitelist (any context, when the device has DevX at all), the rest need a DevX one.
int rpdouble_mlx5dv_devx_general_cmd(ibv_context* ctx, const void* in_v, size_t inlen, void* out_v, size_t outlen) {
  std::lock_guard lock(st().mu);
  Context* c = context_of(ctx);
  if (!c || !c->mlx5) return violation(EOPNOTSUPP, "mlx5dv_devx_general_cmd on a context that is not an mlx5 one");
  const auto* in = static_cast<const std::uint8_t*>(in_v);
  auto* out = static_cast<std::uint8_t*>(out_v);
  if (inlen < 16 || outlen < 16) return violation(EINVAL, "mlx5dv_devx_general_cmd {}: inlen {} / outlen {} shorter than a command header", c->name, inlen, outlen);
  const std::uint32_t opcode = ifc_get(in, 0x00, 16), op_mod = ifc_get(in, 0x30, 16);
  const char* name = opcode == 0x100 ? "QUERY_HCA_CAP" : opcode == 0x754 ? "QUERY_NIC_VPORT_CONTEXT" : "?";
  rec("mlx5dv_devx_general_cmd {} {} op_mod={:#x} inlen={} outlen={}", c->name, name, op_mod, inlen, outlen);
  const Mlx5InlineReport r = mlx5_inline_report();
  if (!r.devx) {
    rec("  -> EOPNOTSUPP (the device offers no DevX)");
    return EOPNOTSUPP;
  }
  std::memset(out, 0, outlen);
  if (opcode == 0x100) {
    if (op_mod != ((1u << 1) | 1u)) return unsupported(fmt::format("QUERY_HCA_CAP op_mod {:#x}: the double answers the current Ethernet offload caps only", op_mod)), EOPNOTSUPP;
    if (outlen < 16 + 4096) return violation(EINVAL, "QUERY_HCA_CAP: outlen {} is shorter than query_hca_cap_out ({})", outlen, 16 + 4096);
    ifc_set(out + 16, 0x12, 2, r.cap_mode);  // per_protocol_networking_offload_caps.wqe_inline_mode
    rec("  -> wqe_inline_mode={}", r.cap_mode);
    return 0;
  }
  if (opcode == 0x754) {
    if (!c->devx) return violation(EINVAL, "QUERY_NIC_VPORT_CONTEXT on {}, not a DevX context (devx_get_uid: no uid)", c->name);
    if (ifc_get(in, 0x40, 1) != 0) return unsupported("QUERY_NIC_VPORT_CONTEXT of another vport"), EOPNOTSUPP;
    if (outlen < 16 + 4) return violation(EINVAL, "QUERY_NIC_VPORT_CONTEXT: outlen {} holds no context", outlen);
    ifc_set(out + 16, 0x05, 3, r.vport_mode);  // nic_vport_context.min_wqe_inline_mode
    rec("  -> min_wqe_inline_mode={}", r.vport_mode);
    return 0;
  }
  return unsupported(fmt::format("DevX command {:#x}", opcode)), EOPNOTSUPP;
}

int rpdouble_manadv_set_context_attr(ibv_context* ctx, manadv_set_ctx_attr_type type, void* attr) {
  std::lock_guard lock(st().mu);
  Context* c = context_of(ctx);
  if (!c || !c->mana) return violation(EINVAL, "manadv_set_context_attr on a context that is not a MANA one");
  rec("manadv_set_context_attr {} type={}", c->name, static_cast<int>(type));
  if (type != MANADV_CTX_ATTR_BUF_ALLOCATORS) return violation(EOPNOTSUPP, "manadv_set_context_attr {}: type {}", c->name, static_cast<int>(type));
  const auto* a = static_cast<const manadv_ctx_allocators*>(attr);
  if (!a->alloc || !a->free) return violation(EINVAL, "manadv_set_context_attr {}: allocators without alloc or free", c->name);
  c->allocators = *a;
  c->allocators_set = true;
  return 0;
}

int rpdouble_manadv_init_obj(manadv_obj* obj, uint64_t type) {
  std::lock_guard lock(st().mu);
  rec("manadv_init_obj{}{}{}", type & MANADV_OBJ_QP ? fmt::format(" qp={}", find(st().qps, obj->qp.in) ? find(st().qps, obj->qp.in)->name : "?") : "",
      type & MANADV_OBJ_CQ ? fmt::format(" cq={}", find(st().cqs, obj->cq.in) ? find(st().cqs, obj->cq.in)->name : "?") : "",
      type & MANADV_OBJ_RWQ ? fmt::format(" rwq={}", find(st().wqs, obj->rwq.in) ? find(st().wqs, obj->rwq.in)->name : "?") : "");
  // providers/mana/manadv.c
  if (type & ~std::uint64_t(MANADV_OBJ_QP | MANADV_OBJ_CQ | MANADV_OBJ_RWQ))
    return violation(EINVAL, "manadv_init_obj: object type {:#x} has unknown bits", type);
  if (type & MANADV_OBJ_QP) {
    Qp* q = find(st().qps, obj->qp.in);
    if (!q || !q->pd->ctx->mana || !q->has_sq) return violation(EINVAL, "manadv_init_obj: the QP is not a live raw send QP");
    manadv_qp& o = *obj->qp.out;
    o.sq_buf = q->mana_buf;
    o.sq_count = q->mana_sq_count;
    o.sq_size = q->mana_bytes;
    o.sq_id = q->mana_sq_id;
    o.tx_vp_offset = q->pd->ctx->mana->vp_offset();
    o.db_page = q->db_page.get();
  }
  if (type & MANADV_OBJ_CQ) {
    Cq* q = find(st().cqs, obj->cq.in);
    if (!q || !q->ctx->mana) return violation(EINVAL, "manadv_init_obj: the CQ does not exist");
    // The kernel tells a CQ's id in the response that creates its queue; before it rdma-core
    // hands out whatever cq->cqid holds.
    if (!q->mana_id_known)
      return violation(EINVAL, "manadv_init_obj: {} has no queue id yet (create its QP or the RSS QP first)", q->name);
    manadv_cq& o = *obj->cq.out;
    o.buf = q->mana_buf;
    o.count = q->cqe;
    o.cq_id = q->mana_cq_id;
  }
  if (type & MANADV_OBJ_RWQ) {
    Wq* w = find(st().wqs, obj->rwq.in);
    if (!w || !w->pd->ctx->mana) return violation(EINVAL, "manadv_init_obj: the WQ does not exist");
    if (!w->mana_id_known)
      return violation(EINVAL, "manadv_init_obj: {} has no queue id until the RSS QP over it exists", w->name);
    manadv_rwq& o = *obj->rwq.out;
    o.buf = w->mana_buf;
    o.count = w->mana_count;
    o.size = w->mana_bytes;
    o.wq_id = w->mana_rq_id;
    o.db_page = w->db_page.get();
  }
  return 0;
}

}  // extern "C"
