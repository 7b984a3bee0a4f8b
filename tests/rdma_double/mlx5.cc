// libmlx5.so.1 of the rdma-core double: the mlx5dv_* entry points rawpipe's loader resolves,
// forwarded to the state in the double's libibverbs.so.1 (dv.cc).
#include "tests/rdma_double/double.hh"

extern "C" {

bool mlx5dv_is_supported(ibv_device* device) { return rpdouble_mlx5dv_is_supported(device); }
int mlx5dv_query_device(ibv_context* ctx, mlx5dv_context* attrs) { return rpdouble_mlx5dv_query_device(ctx, attrs); }
ibv_cq_ex* mlx5dv_create_cq(ibv_context* ctx, ibv_cq_init_attr_ex* attr, mlx5dv_cq_init_attr* dv) {
  return rpdouble_mlx5dv_create_cq(ctx, attr, dv);
}
ibv_wq* mlx5dv_create_wq(ibv_context* ctx, ibv_wq_init_attr* attr, mlx5dv_wq_init_attr* dv) {
  return rpdouble_mlx5dv_create_wq(ctx, attr, dv);
}
ibv_qp* mlx5dv_create_qp(ibv_context* ctx, ibv_qp_init_attr_ex* attr, mlx5dv_qp_init_attr* dv) {
  return rpdouble_mlx5dv_create_qp(ctx, attr, dv);
}
int mlx5dv_init_obj(mlx5dv_obj* obj, uint64_t obj_type) { return rpdouble_mlx5dv_init_obj(obj, obj_type); }
ibv_context* mlx5dv_open_device(ibv_device* device, mlx5dv_context_attr* attr) {
  return rpdouble_mlx5dv_open_device(device, attr);
}
int mlx5dv_devx_general_cmd(ibv_context* ctx, const void* in, size_t inlen, void* out, size_t outlen) {
  return rpdouble_mlx5dv_devx_general_cmd(ctx, in, inlen, out, outlen);
}

}  // extern "C"
