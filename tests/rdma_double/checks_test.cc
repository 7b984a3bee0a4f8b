// The double's own checks: calls that break a precondition rdma-core or the kernel enforces fail
// with the real errno and leave a VIOLATION line in the trace; the same objects torn down in order
// leave none. Loads the double through rawpipe's loader by path, as the drivers do by soname.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "pmd/rdma/loader.hh"
#include "tests/support/process.hh"

namespace {

namespace fs = std::filesystem;

TEST(RdmaDoubleChecks, OwnershipStateAndHashRulesAreEnforced) {
  const fs::path dir = rawpipe::test::build_dir() / "tests" / "rdma_double";
  const fs::path trace = fs::temp_directory_path() / ("rawpipe-double-checks-" + std::to_string(getpid()) + ".trace");
  fs::remove(trace);
  setenv("RAWPIPE_RDMA_DOUBLE_TRACE", trace.c_str(), 1);
  setenv("RAWPIPE_RDMA_DOUBLE_DEVICES", "mlx5_0", 1);
  auto v = rawpipe::rdma::load_ibverbs((dir / "libibverbs.so.1").string());
  ASSERT_TRUE(v) << v.status().message();
  auto dv = rawpipe::rdma::load_mlx5((dir / "libmlx5.so.1").string());
  ASSERT_TRUE(dv) << dv.status().message();
  const auto& t = *v.value();

  int n = 0;
  ibv_device** list = t.get_device_list(&n);
  ASSERT_EQ(n, 1);
  ibv_context* ctx = t.open_device(list[0]);
  ASSERT_NE(ctx, nullptr);
  ibv_pd* pd = t.alloc_pd(ctx);
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 64;
  ibv_cq* cq = ibv_cq_ex_to_cq(dv.value()->create_cq(ctx, &ca, nullptr));
  ASSERT_NE(cq, nullptr);
  ibv_qp_init_attr qa{};
  qa.qp_type = IBV_QPT_RAW_PACKET;
  qa.send_cq = qa.recv_cq = cq;
  qa.cap.max_send_wr = 64;
  qa.cap.max_send_sge = 1;
  ibv_qp* qp = t.create_qp(pd, &qa);
  ASSERT_NE(qp, nullptr);
  const std::string clean_so_far = rawpipe::test::slurp(trace);
  EXPECT_EQ(clean_so_far.find("VIOLATION"), std::string::npos) << clean_so_far;

  // The kernel's ib_destroy_usecnt: a PD or CQ still in use is EBUSY.
  EXPECT_EQ(t.dealloc_pd(pd), EBUSY);
  EXPECT_EQ(t.destroy_cq(cq), EBUSY);
  // A raw-packet QP cannot jump RESET -> RTR, and RESET -> INIT needs the port.
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  EXPECT_EQ(t.modify_qp(qp, &a, IBV_QP_STATE), EINVAL);
  a.qp_state = IBV_QPS_INIT;
  EXPECT_EQ(t.modify_qp(qp, &a, IBV_QP_STATE), EINVAL);
  // mlx5_ib refuses a hash QP whose fields mix IPv4 and IPv6.
  ibv_wq_init_attr wa{};
  wa.wq_type = IBV_WQT_RQ;
  wa.max_wr = 64;
  wa.max_sge = 1;
  wa.pd = pd;
  ibv_cq* rcq = ibv_cq_ex_to_cq(dv.value()->create_cq(ctx, &ca, nullptr));
  wa.cq = rcq;
  ibv_wq* wq = t.create_wq(ctx, &wa);
  ASSERT_NE(wq, nullptr);
  ibv_rwq_ind_table_init_attr ia{};
  ia.log_ind_tbl_size = 0;
  ia.ind_tbl = &wq;
  ibv_rwq_ind_table* ind = t.create_rwq_ind_table(ctx, &ia);
  ASSERT_NE(ind, nullptr);
  std::uint8_t key[40] = {1};
  ibv_qp_init_attr_ex ha{};
  ha.qp_type = IBV_QPT_RAW_PACKET;
  ha.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
  ha.pd = pd;
  ha.rwq_ind_tbl = ind;
  ha.rx_hash_conf.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
  ha.rx_hash_conf.rx_hash_key_len = sizeof(key);
  ha.rx_hash_conf.rx_hash_key = key;
  ha.rx_hash_conf.rx_hash_fields_mask = IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_SRC_IPV6;
  errno = 0;
  EXPECT_EQ(t.create_qp_ex(ctx, &ha), nullptr);
  EXPECT_EQ(errno, EINVAL);
  // A WQ listed by a live indirection table is EBUSY too.
  EXPECT_EQ(t.destroy_wq(wq), EBUSY);
  const std::string broken = rawpipe::test::slurp(trace);
  for (const char* call : {"VIOLATION ibv_dealloc_pd", "VIOLATION ibv_destroy_cq", "VIOLATION ibv_modify_qp",
                           "VIOLATION ibv_create_qp_ex", "VIOLATION ibv_destroy_wq"})
    EXPECT_NE(broken.find(call), std::string::npos) << call << " not recorded:\n" << broken;

  // In order, everything goes and nothing more is recorded as broken.
  EXPECT_EQ(t.destroy_rwq_ind_table(ind), 0);
  EXPECT_EQ(t.destroy_wq(wq), 0);
  EXPECT_EQ(t.destroy_cq(rcq), 0);
  EXPECT_EQ(t.destroy_qp(qp), 0);
  EXPECT_EQ(t.destroy_cq(cq), 0);
  EXPECT_EQ(t.dealloc_pd(pd), 0);
  EXPECT_EQ(t.close_device(ctx), 0);
  t.free_device_list(list);
  const std::string all = rawpipe::test::slurp(trace);
  EXPECT_EQ(all.substr(broken.size()).find("VIOLATION"), std::string::npos) << all;
  fs::remove(trace);
}

}  // namespace
