#include "pmd/mlx5/probe.hh"

#include "pmd/rdma/preflight.hh"

namespace rawpipe {

Status probe_mlx5(std::string_view ifname) {
  rdma::PreflightOptions o;
  o.pmd = "mlx5";
  o.expected_driver = "mlx5_core";
  o.load_provider = [] { return rdma::load_mlx5().status(); };
  return rdma::rdma_preflight(ifname, o).status();
}

}  // namespace rawpipe
