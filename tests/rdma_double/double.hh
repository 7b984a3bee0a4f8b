// A test double of rdma-core: stand-ins for libibverbs.so.1, libmlx5.so.1 and libmana.so.1 that
// rawpipe's loader (pmd/rdma/loader.cc) dlopens by soname when LD_LIBRARY_PATH points at this
// directory of the build. The unmodified mlx5 and mana drivers run their whole control path
// against it, and their data paths against the device models behind it.
//
// What it does with every call:
//   - records it, with the arguments that matter (sizes, masks, states, which object on which),
//     one line per call in the file RAWPIPE_RDMA_DOUBLE_TRACE names; objects are named by kind and
//     creation number (ctx0, pd1, cq2), never by address, so a trace compares with a golden one;
//   - checks the preconditions rdma-core's providers and the kernel enforce (creation order,
//     comp_mask and attribute masks, sizes against the device attributes it reports, QP state
//     transitions, ownership at destroy: a PD with a live QP is EBUSY as in the kernel's
//     ib_destroy_usecnt). A violated one fails the call with the errno the real library returns
//     and adds a "VIOLATION" line to the trace, which tests assert is absent;
//   - answers with objects backed by the device models: the rings, doorbell records and UAR or
//     doorbell pages mlx5dv_init_obj / manadv_init_obj hand out are the memory
//     pmd/mlx5/model and pmd/mana/model read and write.
//
// Environment (tests only):
//   RAWPIPE_RDMA_DOUBLE_TRACE    file the trace is appended to (none: no trace)
//   RAWPIPE_RDMA_DOUBLE_DEVICES  the device list, "name[:vendor_part_id],..."; a name starting
//                                with "mlx5" is a ConnectX, with "mana" a MANA (default "mlx5_0")
//   RAWPIPE_RDMA_DOUBLE_FRAMES   UDP frames the wire carries once the receive side is steered
//   RAWPIPE_RDMA_DOUBLE_DST / _SRC / _FLOWS / _SIZE / _MAC   what they look like (10.0.0.2:5000,
//                                10.0.0.1:1024 with FLOWS source ports, 64 bytes, to 02:00:00:00:00:02)
//   RAWPIPE_RDMA_DOUBLE_MLX5_INLINE  what the ConnectX reports of its minimum inline mode through
//                                DevX (none, l2, l3, l4, inner-l4, cap-l2, not-required; unset: no
//                                DevX, the PCI id decides; core.hh mlx5_inline_report)
//
// libmlx5 and libmana stand-ins forward to the rpdouble_* entry points exported here, so all three
// libraries share one state, as the real providers share libibverbs.
#pragma once

#include <infiniband/manadv.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

extern "C" {
// libmlx5
__attribute__((visibility("default"))) bool rpdouble_mlx5dv_is_supported(ibv_device* device);
__attribute__((visibility("default"))) int rpdouble_mlx5dv_query_device(ibv_context* ctx, mlx5dv_context* attrs);
__attribute__((visibility("default"))) ibv_cq_ex* rpdouble_mlx5dv_create_cq(ibv_context* ctx, ibv_cq_init_attr_ex* attr,
                                                                            mlx5dv_cq_init_attr* dv_attr);
__attribute__((visibility("default"))) ibv_wq* rpdouble_mlx5dv_create_wq(ibv_context* ctx, ibv_wq_init_attr* attr,
                                                                         mlx5dv_wq_init_attr* dv_attr);
__attribute__((visibility("default"))) ibv_qp* rpdouble_mlx5dv_create_qp(ibv_context* ctx, ibv_qp_init_attr_ex* attr,
                                                                         mlx5dv_qp_init_attr* dv_attr);
__attribute__((visibility("default"))) int rpdouble_mlx5dv_init_obj(mlx5dv_obj* obj, uint64_t obj_type);
__attribute__((visibility("default"))) ibv_context* rpdouble_mlx5dv_open_device(ibv_device* device, mlx5dv_context_attr* attr);
__attribute__((visibility("default"))) int rpdouble_mlx5dv_devx_general_cmd(ibv_context* ctx, const void* in, size_t inlen,
                                                                            void* out, size_t outlen);
// libmana
__attribute__((visibility("default"))) int rpdouble_manadv_set_context_attr(ibv_context* ctx,
                                                                            manadv_set_ctx_attr_type type, void* attr);
__attribute__((visibility("default"))) int rpdouble_manadv_init_obj(manadv_obj* obj, uint64_t obj_type);
}
