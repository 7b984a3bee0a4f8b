// The verbs rdma-core dispatches through the context (verbs_get_ctx_op): what the double puts in
// its struct verbs_context, so pmd/rdma/loader.cc reaches them exactly as it reaches a provider's.
#pragma once

#include "tests/rdma_double/double.hh"

namespace rpdouble {

ibv_qp* op_create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* attr);
// `dv` is mlx5dv_create_wq's extra attributes (null for ibv_create_wq).
ibv_wq* op_create_wq(ibv_context* ctx, ibv_wq_init_attr* attr, mlx5dv_wq_init_attr* dv);
int op_modify_wq(ibv_wq* wq, ibv_wq_attr* attr);
int op_destroy_wq(ibv_wq* wq);
ibv_rwq_ind_table* op_create_rwq_ind_table(ibv_context* ctx, ibv_rwq_ind_table_init_attr* attr);
int op_destroy_rwq_ind_table(ibv_rwq_ind_table* table);
ibv_flow* op_create_flow(ibv_qp* qp, ibv_flow_attr* attr);
int op_destroy_flow(ibv_flow* flow);
ibv_pd* op_alloc_parent_domain(ibv_context* ctx, ibv_parent_domain_init_attr* attr);

}  // namespace rpdouble
