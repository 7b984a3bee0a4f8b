// The mlx5 verbs control path's CQ creation against a stand-in libmlx5 that sizes CQEs the way
// rdma-core's does (providers/mlx5/verbs.c get_cqe_size: an explicit
// MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE wins, else MLX5_CQE_SIZE from the environment, else 64).
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <vector>
#include <cstdlib>
#include <string>

#include "pmd/mlx5/backend.hh"
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

namespace rawpipe::mlx5 {
namespace {

// The verbs backend against stand-in libibverbs/libmlx5 tables that record every call: the RSS
// hash QPs and their field masks, which QP each flow lands on, the quiesce transitions and the
// teardown order. Rings are plain zeroed memory (no device behind them).
struct Verbs {
  static inline std::vector<std::string> calls;
  static inline std::vector<std::uint64_t> hash_masks;                  // per create_qp_ex
  static inline std::vector<std::pair<ibv_qp*, RssType>> flows;         // QP each flow went to
  static inline std::vector<std::unique_ptr<ibv_qp>> qps;
  static inline std::vector<std::unique_ptr<ibv_wq>> wqs;
  static inline std::vector<std::unique_ptr<ibv_cq_ex>> cqs;
  static inline std::vector<std::unique_ptr<ibv_flow>> flow_objs;
  static inline ibv_context ctx{};
  static inline ibv_pd pd{};
  static inline ibv_mr mr{};
  static inline ibv_rwq_ind_table ind{};
  alignas(64) static inline std::uint8_t ring[1 << 16];
  static inline std::uint32_t dbrec[4];
  static inline mlx5dv_context caps{};
  static inline std::uint32_t rwq_stride = 16;

  static void reset() {
    caps = {};
    rwq_stride = 16;
    calls.clear();
    hash_masks.clear();
    flows.clear();
    qps.clear();
    wqs.clear();
    cqs.clear();
    flow_objs.clear();
  }
  static rdma::IbverbsTable verbs() {
    rdma::IbverbsTable t;
    t.get_device_name = [](ibv_device*) -> const char* { return "mlx5_0"; };
    t.open_device = [](ibv_device*) -> ibv_context* { return calls.push_back("open_device"), &ctx; };
    t.close_device = [](ibv_context*) -> int { return calls.push_back("close_device"), 0; };
    t.query_device_ex = [](ibv_context*, ibv_device_attr_ex* a) -> int {
      *a = {};
      a->orig_attr.vendor_part_id = 4119;
      return 0;
    };
    t.query_port = [](ibv_context*, std::uint8_t, ibv_port_attr* a) -> int {
      *a = {};
      a->link_layer = IBV_LINK_LAYER_ETHERNET;
      return 0;
    };
    t.alloc_pd = [](ibv_context*) -> ibv_pd* { return calls.push_back("alloc_pd"), &pd; };
    t.dealloc_pd = [](ibv_pd*) -> int { return calls.push_back("dealloc_pd"), 0; };
    t.reg_mr = [](ibv_pd*, void*, std::size_t, int) -> ibv_mr* { return calls.push_back("reg_mr"), &mr; };
    t.dereg_mr = [](ibv_mr*) -> int { return calls.push_back("dereg_mr"), 0; };
    t.destroy_cq = [](ibv_cq*) -> int { return calls.push_back("destroy_cq"), 0; };
    t.create_wq = [](ibv_context*, ibv_wq_init_attr*) -> ibv_wq* {
      calls.push_back("create_wq");
      wqs.push_back(std::make_unique<ibv_wq>());
      return wqs.back().get();
    };
    t.modify_wq = [](ibv_wq*, ibv_wq_attr* a) -> int {
      calls.push_back(a->wq_state == IBV_WQS_RDY ? "modify_wq(RDY)" : "modify_wq(RESET)");
      return 0;
    };
    t.destroy_wq = [](ibv_wq*) -> int { return calls.push_back("destroy_wq"), 0; };
    t.create_rwq_ind_table = [](ibv_context*, ibv_rwq_ind_table_init_attr*) -> ibv_rwq_ind_table* {
      return calls.push_back("create_rwq_ind_table"), &ind;
    };
    t.destroy_rwq_ind_table = [](ibv_rwq_ind_table*) -> int { return calls.push_back("destroy_rwq_ind_table"), 0; };
    t.create_qp_ex = [](ibv_context*, ibv_qp_init_attr_ex* a) -> ibv_qp* {
      EXPECT_EQ(a->comp_mask, unsigned(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH));
      const std::uint64_t m = a->rx_hash_conf.rx_hash_fields_mask;
      const bool v4 = m & (IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4), v6 = m & (IBV_RX_HASH_SRC_IPV6 | IBV_RX_HASH_DST_IPV6);
      EXPECT_FALSE(v4 && v6) << "mlx5_ib refuses a TIR that mixes IPv4 and IPv6 fields (create_rss_raw_qp_tir)";
      calls.push_back("create_qp_ex(rss)");
      hash_masks.push_back(m);
      qps.push_back(std::make_unique<ibv_qp>());
      return qps.back().get();
    };
    t.create_qp = [](ibv_pd*, ibv_qp_init_attr* a) -> ibv_qp* {
      EXPECT_EQ(a->qp_type, IBV_QPT_RAW_PACKET);
      calls.push_back("create_qp(raw)");
      qps.push_back(std::make_unique<ibv_qp>());
      qps.back()->qp_num = 0x99;
      return qps.back().get();
    };
    t.modify_qp = [](ibv_qp*, ibv_qp_attr* a, int) -> int {
      calls.push_back(a->qp_state == IBV_QPS_RESET ? "modify_qp(RESET)" : "modify_qp");
      return 0;
    };
    t.destroy_qp = [](ibv_qp*) -> int { return calls.push_back("destroy_qp"), 0; };
    t.create_flow = [](ibv_qp* qp, ibv_flow_attr* a) -> ibv_flow* {
      calls.push_back("create_flow");
      const auto* b = reinterpret_cast<const std::uint8_t*>(a);
      flows.emplace_back(qp, rss_type_of(FlowAttrBytes(b, b + a->size)));
      flow_objs.push_back(std::make_unique<ibv_flow>());
      return flow_objs.back().get();
    };
    t.destroy_flow = [](ibv_flow*) -> int { return calls.push_back("destroy_flow"), 0; };
    return t;
  }
  static rdma::Mlx5Table mlx5() {
    rdma::Mlx5Table t;
    t.is_supported = [](ibv_device*) -> bool { return true; };
    t.query_device = [](ibv_context*, mlx5dv_context* a) -> int {
      *a = caps;
      return 0;
    };
    t.create_cq = [](ibv_context*, ibv_cq_init_attr_ex*, mlx5dv_cq_init_attr* a) -> ibv_cq_ex* {
      EXPECT_TRUE(a->comp_mask & MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE);
      calls.push_back("mlx5dv_create_cq");
      cqs.push_back(std::make_unique<ibv_cq_ex>());
      return cqs.back().get();
    };
    t.create_wq = [](ibv_context*, ibv_wq_init_attr*, mlx5dv_wq_init_attr* a) -> ibv_wq* {
      EXPECT_EQ(a->comp_mask, std::uint64_t(MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ));
      calls.push_back("mlx5dv_create_wq");
      rwq_stride = 32;  // a striding WQE: next segment + data segment
      wqs.push_back(std::make_unique<ibv_wq>());
      return wqs.back().get();
    };
    t.init_obj = [](mlx5dv_obj* o, std::uint64_t types) -> int {
      if (types & MLX5DV_OBJ_CQ) *o->cq.out = mlx5dv_cq{ring, dbrec, 64, 64, nullptr, 1, 0};
      if (types & MLX5DV_OBJ_RWQ) {
        o->rwq.out->buf = ring;
        o->rwq.out->dbrec = dbrec;
        o->rwq.out->wqe_cnt = 64;
        o->rwq.out->stride = rwq_stride;
      }
      if (types & MLX5DV_OBJ_QP) {
        o->qp.out->dbrec = dbrec;
        o->qp.out->sq.buf = ring;
        o->qp.out->sq.wqe_cnt = 64;
        o->qp.out->sq.stride = 64;
        o->qp.out->rq.buf = ring;
        o->qp.out->rq.wqe_cnt = 64;
        o->qp.out->rq.stride = 16;
      }
      return 0;
    };
    return t;
  }
};

TEST(Mlx5VerbsControl, OneHashQpPerTrafficTypeAndEachFlowOnTheQpOfItsType) {
  Verbs::reset();
  static const rdma::IbverbsTable verbs = Verbs::verbs();
  static const rdma::Mlx5Table dv = Verbs::mlx5();
  rdma::PreflightResult pre;
  pre.verbs = &verbs;
  pre.netdev.rdma_port = 1;
  auto backend = open_verbs_backend_on(std::move(pre), dv, "eth9");
  ASSERT_TRUE(backend) << backend.message();
  Backend& b = *backend.value();
  RxQueue q0, q1;
  RxQueue* queues[] = {&q0, &q1};
  RxOptions ro;
  ro.wqe_cnt = 64;
  ASSERT_TRUE(b.create_rx(queues, ro));
  ASSERT_EQ(Verbs::hash_masks.size(), kRssTypes);
  for (std::size_t t = 0; t < kRssTypes; ++t)
    EXPECT_EQ(Verbs::hash_masks[t], rss_hash_fields(static_cast<RssType>(t))) << "QP " << t;
  TxQueue tq;
  TxOptions to;
  to.wqe_cnt = 64;
  ASSERT_TRUE(b.create_tx(tq, 0, to));

  FlowTarget target;
  auto rule = parse_match_rule("any dst 10.0.0.2");
  ASSERT_TRUE(rule) << rule.message();
  for (const auto& a : build_flow_attrs(rule.value(), 0, target)) ASSERT_TRUE(b.add_flow(a));
  auto v6 = parse_match_rule("udp dst [fd00::2]:5000");
  ASSERT_TRUE(v6) << v6.message();
  for (const auto& a : build_flow_attrs(v6.value(), 0, target)) ASSERT_TRUE(b.add_flow(a));
  ASSERT_EQ(Verbs::flows.size(), 4u);
  for (auto [qp, type] : Verbs::flows)
    EXPECT_EQ(qp, Verbs::qps[static_cast<std::size_t>(type)].get()) << "flow of type " << int(type);
  EXPECT_EQ(Verbs::flows[3].second, RssType::kIpv6Udp);

  // Stop: both WQs and the send QP to RESET; nothing destroyed yet.
  Verbs::calls.clear();
  b.quiesce();
  EXPECT_EQ(Verbs::calls, (std::vector<std::string>{"modify_wq(RESET)", "modify_wq(RESET)", "modify_qp(RESET)"}));
  // Teardown: flows before the QPs they point at, QPs before the table and the WQs, MR after
  // every queue, the context last.
  Verbs::calls.clear();
  backend.value().reset();
  auto at = [](const char* name) {
    return std::find(Verbs::calls.begin(), Verbs::calls.end(), name) - Verbs::calls.begin();
  };
  auto last = [](const char* name) {
    return Verbs::calls.rend() - std::find(Verbs::calls.rbegin(), Verbs::calls.rend(), name) - 1;
  };
  EXPECT_LT(last("destroy_flow"), at("destroy_qp"));
  EXPECT_EQ(std::count(Verbs::calls.begin(), Verbs::calls.begin() + at("destroy_rwq_ind_table"), "destroy_qp"),
            std::ptrdiff_t(kRssTypes))
      << "every hash QP goes before the indirection table it uses";
  EXPECT_LT(at("destroy_rwq_ind_table"), at("destroy_wq"));
  EXPECT_LT(last("destroy_wq"), at("dereg_mr"));
  EXPECT_EQ(Verbs::calls.back(), "close_device");
  EXPECT_EQ(std::count(Verbs::calls.begin(), Verbs::calls.end(), "destroy_qp"), std::ptrdiff_t(kRssTypes + 1));
}

// What mlx5dv_query_device reports decides before any queue is created: a compressed-session
// size of 0, or striding WQs that do not serve raw-packet QPs, are refused with the key to change.
TEST(Mlx5VerbsControl, CapabilitiesAreCheckedBeforeCreatingQueues) {
  static const rdma::IbverbsTable verbs = Verbs::verbs();
  static const rdma::Mlx5Table dv = Verbs::mlx5();
  auto open = [] {
    rdma::PreflightResult pre;
    pre.verbs = &verbs;
    return open_verbs_backend_on(std::move(pre), dv, "eth9");
  };
  RxQueue q;
  RxQueue* queues[] = {&q};
  Verbs::reset();
  Verbs::caps.comp_mask = MLX5DV_CONTEXT_MASK_CQE_COMPRESION;
  Verbs::caps.cqe_comp_caps.supported_format = MLX5DV_CQE_RES_FORMAT_HASH;
  Verbs::caps.cqe_comp_caps.max_num = 0;
  auto b = open();
  ASSERT_TRUE(b) << b.message();
  RxOptions ro;
  ro.compression = true;
  Status s = b.value()->create_rx(queues, ro);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("maximum compressed session of 0"), std::string::npos) << s.message();
  EXPECT_EQ(std::count(Verbs::calls.begin(), Verbs::calls.end(), "mlx5dv_create_cq"), 0);

  Verbs::reset();
  Verbs::caps.comp_mask = MLX5DV_CONTEXT_MASK_STRIDING_RQ;
  Verbs::caps.striding_rq_caps.min_single_stride_log_num_of_bytes = 6;
  Verbs::caps.striding_rq_caps.max_single_stride_log_num_of_bytes = 13;
  Verbs::caps.striding_rq_caps.min_single_wqe_log_num_of_strides = 3;
  Verbs::caps.striding_rq_caps.max_single_wqe_log_num_of_strides = 16;
  Verbs::caps.striding_rq_caps.supported_qpts = 1u << IBV_QPT_UD;
  b = open();
  ASSERT_TRUE(b) << b.message();
  RxOptions so;
  so.striding = true;
  s = b.value()->create_rx(queues, so);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("other QP types than raw packet"), std::string::npos) << s.message();
  Verbs::caps.striding_rq_caps.supported_qpts = 1u << IBV_QPT_RAW_PACKET;
  b = open();
  EXPECT_TRUE(b.value()->create_rx(queues, so)) << "raw-packet striding WQs are accepted";
}

}  // namespace
}  // namespace rawpipe::mlx5
