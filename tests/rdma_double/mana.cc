// libmana.so.1 of the rdma-core double: the manadv_* entry points rawpipe's loader resolves,
// forwarded to the state in the double's libibverbs.so.1 (dv.cc).
#include "tests/rdma_double/double.hh"

extern "C" {

int manadv_set_context_attr(ibv_context* ctx, manadv_set_ctx_attr_type type, void* attr) {
  return rpdouble_manadv_set_context_attr(ctx, type, attr);
}
int manadv_init_obj(manadv_obj* obj, uint64_t obj_type) { return rpdouble_manadv_init_obj(obj, obj_type); }

}  // extern "C"
