#include "pmd/mlx5/verbs_cq.hh"

#include <cerrno>
#include <cstring>

#include "pmd/mlx5/hw.hh"

namespace rawpipe::mlx5 {

Result<ibv_cq*> create_cq64(const rdma::Mlx5Table& dv, ibv_context* ctx, std::uint32_t entries, bool compressed,
                            std::string_view what) {
  ibv_cq_init_attr_ex attr{};
  attr.cqe = entries;
  mlx5dv_cq_init_attr dv_attr{};
  dv_attr.comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE;
  dv_attr.cqe_size = kCqeSize;
  if (compressed) {
    dv_attr.comp_mask |= MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE;
    dv_attr.cqe_comp_res_format = MLX5DV_CQE_RES_FORMAT_HASH;
  }
  errno = 0;
  ibv_cq_ex* cq = dv.create_cq(ctx, &attr, &dv_attr);
  if (!cq) {
    const int err = errno ? errno : EINVAL;
    return Status::errorf("pmd mlx5: mlx5dv_create_cq ({} entries, 64-byte CQEs) for {} failed: {}", entries, what,
                          std::strerror(err));
  }
  return ibv_cq_ex_to_cq(cq);
}

Status check_cqe_size(const mlx5dv_cq& cq, std::string_view what) {
  if (cq.cqe_size == kCqeSize) return Status::ok();
  return Status::errorf("pmd mlx5: the CQ of {} has {}-byte CQEs; rawpipe polls 64-byte CQEs (unset MLX5_CQE_SIZE, "
                        "or use a libmlx5 that honours MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE)",
                        what, cq.cqe_size);
}

}  // namespace rawpipe::mlx5
