// The mlx5 verbs control path's CQ creation against a stand-in libmlx5 that sizes CQEs the way
// rdma-core's does (providers/mlx5/verbs.c get_cqe_size: an explicit
// MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE wins, else MLX5_CQE_SIZE from the environment, else 64).
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "pmd/mlx5/verbs_cq.hh"

namespace rawpipe::mlx5 {
namespace {

struct FakeMlx5 {
  static inline mlx5dv_cq_init_attr last{};
  static inline ibv_cq_ex cq{};
  static inline std::uint32_t created_cqe_size = 0;
  static rdma::Mlx5Table table() {
    rdma::Mlx5Table t;
    t.create_cq = [](ibv_context*, ibv_cq_init_attr_ex*, mlx5dv_cq_init_attr* a) -> ibv_cq_ex* {
      last = *a;
      std::uint32_t size = 64;
      if (a->comp_mask & MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE) {
        size = a->cqe_size;
      } else if (const char* env = std::getenv("MLX5_CQE_SIZE")) {
        size = static_cast<std::uint32_t>(std::atoi(env));
      }
      created_cqe_size = size;
      return &cq;
    };
    return t;
  }
};

struct EnvGuard {
  EnvGuard() { setenv("MLX5_CQE_SIZE", "128", 1); }
  ~EnvGuard() { unsetenv("MLX5_CQE_SIZE"); }
};

TEST(Mlx5Control, TransmitCqIsForcedTo64ByteCqesWhateverTheEnvironmentSays) {
  EnvGuard env;
  const rdma::Mlx5Table dv = FakeMlx5::table();
  auto cq = create_cq64(dv, nullptr, 64, false, "transmit queue 0");
  ASSERT_TRUE(cq) << cq.message();
  EXPECT_TRUE(FakeMlx5::last.comp_mask & MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE);
  EXPECT_EQ(FakeMlx5::last.cqe_size, 64u);
  EXPECT_FALSE(FakeMlx5::last.comp_mask & MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE);
  EXPECT_EQ(FakeMlx5::created_cqe_size, 64u) << "MLX5_CQE_SIZE=128 must not reach the transmit CQ";
}

TEST(Mlx5Control, ReceiveCqKeepsCompressionAndTheForcedSize) {
  EnvGuard env;
  const rdma::Mlx5Table dv = FakeMlx5::table();
  ASSERT_TRUE(create_cq64(dv, nullptr, 512, true, "receive queue 0"));
  EXPECT_EQ(FakeMlx5::last.comp_mask,
            std::uint64_t(MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE | MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE));
  EXPECT_EQ(FakeMlx5::last.cqe_comp_res_format, unsigned(MLX5DV_CQE_RES_FORMAT_HASH));
  EXPECT_EQ(FakeMlx5::created_cqe_size, 64u);
}

TEST(Mlx5Control, A128ByteRingIsRefusedWithTheQueueNamed) {
  mlx5dv_cq dcq{};
  dcq.cqe_size = 128;
  Status s = check_cqe_size(dcq, "transmit queue 3");
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("transmit queue 3"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("128-byte CQEs"), std::string::npos) << s.message();
  dcq.cqe_size = 64;
  EXPECT_TRUE(check_cqe_size(dcq, "transmit queue 3"));
}

TEST(Mlx5Control, CreationFailureSaysWhatAndWhy) {
  rdma::Mlx5Table dv;
  dv.create_cq = [](ibv_context*, ibv_cq_init_attr_ex*, mlx5dv_cq_init_attr*) -> ibv_cq_ex* {
    errno = ENOMEM;
    return nullptr;
  };
  auto cq = create_cq64(dv, nullptr, 64, false, "transmit queue 1");
  ASSERT_FALSE(cq);
  EXPECT_NE(cq.message().find("transmit queue 1"), std::string::npos) << cq.message();
  EXPECT_NE(cq.message().find("Cannot allocate memory"), std::string::npos) << cq.message();
}

}  // namespace
}  // namespace rawpipe::mlx5
