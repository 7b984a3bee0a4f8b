// Completion queues for the mlx5 verbs control path, always with 64-byte CQEs.
//
// libmlx5 sizes a CQE from the MLX5_CQE_SIZE environment variable unless the creator asks for a
// size (providers/mlx5/verbs.c get_cqe_size: MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE wins over the
// environment). The data path polls 64-byte CQEs on both directions, so every CQ is created with
// the size forced to 64 and the ring mlx5dv_init_obj returns is checked again (DPDK checks the
// same in drivers/net/mlx5/linux/mlx5_verbs.c).
#pragma once

#include <infiniband/mlx5dv.h>

#include <cstdint>
#include <string_view>

#include "rawpipe/status.hh"
#include "pmd/rdma/loader.hh"

namespace rawpipe::mlx5 {

// mlx5dv_create_cq with cqe_size 64 (and compressed CQEs in hash format when `compressed`);
// `what` names the queue in messages.
Result<ibv_cq*> create_cq64(const rdma::Mlx5Table& dv, ibv_context* ctx, std::uint32_t entries, bool compressed,
                            std::string_view what);

// The CQE size mlx5dv_init_obj reported for a CQ must be the 64 bytes the data path polls.
Status check_cqe_size(const mlx5dv_cq& cq, std::string_view what);

}  // namespace rawpipe::mlx5
