// Helpers for tests of the CPU backend against the reference backend: graphs built node by node,
// fusion plans given by hand, and a check that runs both backends on the same inputs.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/executable.h"
#include "compiler/fusion_plan.h"
#include "compiler/shape_inference.h"
#include "ingot/ingot.h"
#include "ir/op_registry.h"
#include "op_test_util.h"

namespace ingot::cpu_test {

// One cache directory for this test process: libraries are reused within it, never across runs.
inline const std::string& suite_cache_dir() {
  static ingot::testing::TempDir d("ingot-cpu-test");
  return d.path;
}

inline CpuBackend::CpuOptions cpu_options() {
  CpuBackend::CpuOptions o;
  o.cache_dir = suite_cache_dir();
  return o;
}

// Writes `source` to `path` and builds it with the backend's flags (`vectorize`:
// CpuOptions::vectorize) plus the compiler's vectorization report (GCC -fopt-info-vec-optimized,
// clang -Rpass=loop-vectorize); returns the report, whose lines name `path`'s loops.
inline std::string vectorization_report(const std::string& source, const std::string& path, bool vectorize = true) {
  std::ofstream(path) << source;
  const cpu::Toolchain tc = cpu::find_toolchain("");
  const bool clang = tc.version.find("clang") != std::string::npos;
  const std::vector<std::string> argv = cpu::build_command(
      tc, cpu::compile_flags({clang ? "-Rpass=loop-vectorize" : "-fopt-info-vec-optimized"}, vectorize), path,
      path + ".so");
  const std::string report_path = path + ".report.txt";
  const std::string cmd = cpu::join_command(argv) + " > " + report_path + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream rf(report_path);
  return std::string((std::istreambuf_iterator<char>(rf)), std::istreambuf_iterator<char>());
}

using PlanFn = std::function<FusionPlan(const Graph&)>;

inline FusionPlan unfused(const Graph& g) { return unfused_plan(g); }

// Groups given as lists of node ids (kinds and anchors from the ops); the rest one per node.
inline PlanFn grouped(std::vector<std::vector<NodeId>> groups) {
  return [groups](const Graph& g) {
    FusionPlan p;
    std::vector<bool> taken(g.nodes().size(), false);
    std::vector<std::vector<NodeId>> all;
    for (const auto& grp : groups) {
      for (NodeId n : grp) taken[static_cast<size_t>(n)] = true;
    }
    // Keep execution order: emit a group when its last node comes up.
    for (const Node& n : g.nodes()) {
      for (const auto& grp : groups)
        if (grp.back() == n.id) all.push_back(grp);
      if (!taken[static_cast<size_t>(n.id)]) all.push_back({n.id});
    }
    for (const auto& nodes : all) {
      FusionGroup fg;
      fg.nodes = nodes;
      fg.kind = GroupKind::Elementwise;
      for (NodeId id : nodes) {
        switch (get_op(g.node(id).op).fusion) {
          case FusionClass::Reduction: fg.kind = GroupKind::Reduction; fg.anchor = id; break;
          case FusionClass::RowKernel: fg.kind = GroupKind::RowKernel; fg.anchor = id; break;
          case FusionClass::Dense: fg.kind = GroupKind::Dense; fg.anchor = id; break;
          case FusionClass::Elementwise: break;
          default: fg.kind = GroupKind::Opaque; fg.anchor = id; break;
        }
      }
      p.groups.push_back(fg);
    }
    compute_group_io(g, p);
    return p;
  };
}

inline void expect_same(const Tensor& got, const Tensor& want, const std::string& what, double rtol, double atol) {
  ASSERT_EQ(dtype_name(got.dtype()), dtype_name(want.dtype())) << what;
  ASSERT_EQ(to_string(got.shape()), to_string(want.shape())) << what;
  if (is_floating(want.dtype())) {
    EXPECT_TRUE(allclose(got.astype(DType::Float64), want.astype(DType::Float64), rtol, atol))
        << what << ": max |diff| " << max_abs_diff(got.astype(DType::Float64), want.astype(DType::Float64))
        << "\n got " << got.str() << "\nwant " << want.str();
  } else {
    EXPECT_TRUE(equal(got, want)) << what << "\n got " << got.str() << "\nwant " << want.str();
  }
}

struct Input {
  std::string name;
  ShapeTemplate shape;
  DType dtype = DType::Float32;
};

// Builds a graph with `inputs`, lets `body` add nodes and outputs, infers, and returns it.
inline Graph make_graph(const std::vector<Input>& inputs, const std::function<void(Graph&, std::vector<ValueId>&)>& body) {
  Graph g;
  std::vector<ValueId> ids;
  std::vector<ShapeConstraint> cs;
  for (const Input& in : inputs) {
    ValueId id = g.add_input(in.name);
    g.value(id).dtype = in.dtype;
    ids.push_back(id);
    cs.push_back({id, in.shape, "", "test input"});
  }
  body(g, ids);
  infer_shapes(g, cs);
  infer_types(g);
  verify(g);
  return g;
}

// Random values in [lo, hi] for every input of `g`, in its dtype (drawn as float32 and
// converted), each with seed `seed` + its value id; symbolic dims set to `batch`.
inline std::vector<Tensor> random_inputs(const Graph& g, int64_t batch, uint64_t seed, double lo = -1, double hi = 1) {
  std::vector<Tensor> ins;
  for (ValueId id : g.leaves_of(ValueKind::Input)) {
    Shape s;
    for (const SymDim& d : g.value(id).shape) s.push_back(d.known() ? d.value : batch);
    ins.push_back(testing::random_tensor(s, seed + static_cast<uint64_t>(id), lo, hi).astype(g.value(id).dtype));
  }
  return ins;
}

inline ValueId scalar(Graph& g, double v, DType t = DType::Float32) {
  return g.add_constant("c" + std::to_string(g.values().size()), Tensor::full(t, {}, v));
}

// Every layout target the CPU backend can be asked for (CompileOptions::layout_target): a test
// that loops over them covers on any machine what an AVX2 and an AVX-512 machine pick.
inline const std::vector<Layout>& all_layout_targets() {
  static const std::vector<Layout> all = {Layout::Nchw8c, Layout::Nchw16c, Layout::Nhwc, Layout::Nchw};
  return all;
}

// The layout target `layout` gives a conv output with `channels` channels (layout_plan.h).
inline Layout conv_layout_under(Layout layout, int64_t channels) {
  const int block = layout_channel_block(layout);
  if (layout == Layout::Nchw) return Layout::Nchw;
  return block > 0 && channels % block == 0 ? layout : Layout::Nhwc;
}

// cpu_options() built with -DIG_FAIL_SCRATCH: every prelude kernel's scratch request fails, as
// when its allocation does, so it takes its path without scratch (ig_scratch).
inline CpuBackend::CpuOptions cpu_options_without_scratch() {
  CpuBackend::CpuOptions o = cpu_options();
  o.extra_flags.push_back("-DIG_FAIL_SCRATCH");
  return o;
}

// Runs `g` on each input set with CpuBackend (plan from `plan`, buffers laid out for `layout`,
// built with `options`) and ReferenceBackend.
inline std::string check(const Graph& g, const std::vector<std::vector<Tensor>>& input_sets, const PlanFn& plan = unfused,
                  double rtol = 1e-5, double atol = 1e-6, Layout layout = host_layout(),
                  const CpuBackend::CpuOptions& options = cpu_options()) {
  SCOPED_TRACE("layout target " + std::string(layout_name(layout)));
  std::unique_ptr<Executable> ref = ReferenceBackend().lower(g, {});
  std::unique_ptr<Executable> cpu = cpu::lower_with_plan(g, plan(g), options, false, "greedy", layout);
  for (size_t s = 0; s < input_sets.size(); ++s) {
    std::vector<Tensor> want = ref->run(input_sets[s]);
    std::vector<Tensor> got = cpu->run(input_sets[s]);
    EXPECT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size() && i < got.size(); ++i)
      expect_same(got[i], want[i], "set " + std::to_string(s) + " output '" + g.outputs()[i].first + "'", rtol, atol);
  }
  return cpu->source();
}

inline int count(const std::string& s, const std::string& needle) {
  int n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

}  // namespace ingot::cpu_test
