// Pinocchio's C++ cost for crba + nonLinearEffects on jaxmb's reference chain(n), no Python in the loop.
// Built and run by benchmarks/throughput.py when a C++ compiler and Pinocchio's headers are found.
// usage: pin_chain_bench n nstates repeats  -> prints "ns_per_state <wall>" and
// "cpu_ns_per_state <process CPU time>" (best pass each; CPU time is less hurt by a loaded machine)
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <pinocchio/multibody.hpp>
#include <pinocchio/algorithm/crba.hpp>
#include <pinocchio/algorithm/rnea.hpp>

int main(int argc, char** argv) {
  using namespace pinocchio;
  const int n = argc > 1 ? std::atoi(argv[1]) : 7;
  const int nstates = argc > 2 ? std::atoi(argv[2]) : 4096;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 20;
  Model model;
  model.gravity.linear(Eigen::Vector3d(0, 0, -9.81));
  JointIndex parent = 0;
  for (int i = 0; i < n; ++i) {
    SE3 placement = SE3::Identity();
    if (i > 0) placement.translation() << 0, 0, 0.3;
    JointIndex j;
    if (i % 3 == 0)
      j = model.addJoint(parent, JointModelRX(), placement, "j" + std::to_string(i));
    else if (i % 3 == 1)
      j = model.addJoint(parent, JointModelRY(), placement, "j" + std::to_string(i));
    else
      j = model.addJoint(parent, JointModelRZ(), placement, "j" + std::to_string(i));
    Eigen::Matrix3d I = Eigen::Vector3d(0.02, 0.02, 0.005).asDiagonal();
    model.appendBodyToJoint(j, Inertia(1.0 + 0.1 * i, Eigen::Vector3d(0, 0, 0.15), I));
    parent = j;
  }
  Data data(model);
  std::srand(0);
  std::vector<Eigen::VectorXd> qs, vs;
  for (int k = 0; k < nstates; ++k) {
    qs.push_back(Eigen::VectorXd::Random(model.nq));
    vs.push_back(Eigen::VectorXd::Random(model.nv));
  }
  auto cpu_now = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
  };
  double best = 1e300, best_cpu = 1e300, checksum = 0;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    double c0 = cpu_now();
    for (int k = 0; k < nstates; ++k) {
      crba(model, data, qs[k]);
      nonLinearEffects(model, data, qs[k], vs[k]);
      checksum += data.M(0, 0) + data.nle[0];
    }
    auto t1 = std::chrono::steady_clock::now();
    double cpu = (cpu_now() - c0) / nstates;
    if (cpu < best_cpu) best_cpu = cpu;
    double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / nstates;
    if (ns < best) best = ns;
  }
  std::printf("ns_per_state %.3f\ncpu_ns_per_state %.3f\nchecksum %.6e\n", best, best_cpu,
              checksum);
  return 0;
}
