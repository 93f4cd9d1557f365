// Helpers for op tests: run one op through shape inference, type inference and its reference
// kernel, and check that the symbolic rules agree with what the kernel produced.
#pragma once

#include <gtest/gtest.h>

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/shape_inference.h"
#include "ingot/graph.h"
#include "ingot/physical_model.h"
#include "ingot/tensor.h"
#include "ir/op_registry.h"

namespace ingot::testing {

inline ShapeTemplate template_of(const Shape& s) {
  ShapeTemplate t;
  for (int64_t d : s) t.emplace_back(d);
  return t;
}

// Runs `op` on concrete inputs. Fails the current test if the inferred shape or dtype of an
// output differs from the tensor the kernel returned.
inline std::vector<Tensor> run_op_n(const std::string& op, const std::vector<Tensor>& inputs,
                                    const Attrs& attrs, int num_outputs) {
  Graph g;
  std::vector<ValueId> ins;
  std::vector<ShapeConstraint> cs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ValueId id = g.add_input("in" + std::to_string(i));
    g.value(id).dtype = inputs[i].dtype();
    ins.push_back(id);
    cs.push_back({id, template_of(inputs[i].shape()), "", "test input"});
  }
  std::vector<ValueId> outs = g.add_node(op, ins, attrs, num_outputs);
  infer_shapes(g, cs);
  infer_types(g);
  std::vector<Tensor> result(static_cast<size_t>(num_outputs));
  get_op(op).eval(g.node(0), inputs, result);
  for (int i = 0; i < num_outputs; ++i) {
    const Value& v = g.value(outs[i]);
    EXPECT_TRUE(result[i].defined()) << op << " output " << i << " not produced";
    if (!result[i].defined()) continue;
    EXPECT_EQ(to_string(v.shape), to_string(result[i].shape()))
        << op << " output " << i << ": shape rule and kernel disagree";
    EXPECT_EQ(dtype_name(v.dtype), dtype_name(result[i].dtype()))
        << op << " output " << i << ": dtype rule and kernel disagree";
  }
  return result;
}

inline Tensor run_op(const std::string& op, const std::vector<Tensor>& inputs,
                     const Attrs& attrs = {}) {
  return run_op_n(op, inputs, attrs, 1)[0];
}

// Symbolic output shapes of `op` for input shape templates (symbols allowed).
inline std::vector<SymShape> infer_op_shapes(const std::string& op,
                                             const std::vector<ShapeTemplate>& in_shapes,
                                             const Attrs& attrs = {}, int num_outputs = 1) {
  Graph g;
  std::vector<ValueId> ins;
  std::vector<ShapeConstraint> cs;
  for (size_t i = 0; i < in_shapes.size(); ++i) {
    ValueId id = g.add_input("in" + std::to_string(i));
    ins.push_back(id);
    cs.push_back({id, in_shapes[i], "", "test input"});
  }
  std::vector<ValueId> outs = g.add_node(op, ins, attrs, num_outputs);
  infer_shapes(g, cs);
  std::vector<SymShape> out;
  for (ValueId v : outs) out.push_back(g.value(v).shape);
  return out;
}

inline std::string infer_op_shape(const std::string& op, const std::vector<ShapeTemplate>& in,
                                  const Attrs& attrs = {}) {
  return to_string(infer_op_shapes(op, in, attrs)[0]);
}

// Shapes of every value (inputs, then outputs) after shape inference of one op.
inline std::vector<std::string> infer_all(const std::string& op,
                                          const std::vector<ShapeTemplate>& in,
                                          const Attrs& attrs = {}) {
  Graph g;
  std::vector<ValueId> ins;
  std::vector<ShapeConstraint> cs;
  for (size_t i = 0; i < in.size(); ++i) {
    ins.push_back(g.add_input("in" + std::to_string(i)));
    cs.push_back({ins.back(), in[i], "", "test input"});
  }
  g.add_node(op, ins, attrs);
  infer_shapes(g, cs);
  std::vector<std::string> out;
  for (const Value& v : g.values()) out.push_back(to_string(v.shape));
  return out;
}

// Evaluates the kernel alone (no shape or type inference): for run-time error checks.
inline Tensor eval_only(const std::string& op, const std::vector<Tensor>& in,
                        const Attrs& attrs = {}) {
  Node n;
  n.op = op;
  n.attrs = attrs;
  std::vector<Tensor> out(1);
  get_op(op).eval(n, in, out);
  return out[0];
}

// True under INGOT_SKIP_SLOW=1 (the sanitizer run): tests slower than ~5 s skip themselves.
inline bool slow_tests_skipped() {
  const char* v = std::getenv("INGOT_SKIP_SLOW");
  return v != nullptr && std::string(v) == "1";
}

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& prefix = "ingot-test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// The inferred shape of terminal `name` as text, e.g. "[N, 10]".
inline std::string shape_of(const PhysicalModel& pm, const std::string& name) {
  return to_string(pm.get_shapes().at(name));
}

// EXPECT_TRUE(Contains(message, "part")) prints both strings when it fails.
inline ::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

// The message of the ingot::Error that f throws, or "(no error)" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Runs f and expects an ingot::Error whose message contains `needle`.
template <class F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an ingot::Error mentioning \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

template <class T>
Tensor tensor(std::vector<T> values, Shape shape) {
  return Tensor::from_vector<T>(values, std::move(shape));
}

// Deterministic pseudo-random floats in [lo, hi).
inline Tensor random_tensor(Shape shape, uint64_t seed, double lo = -1, double hi = 1,
                            DType dtype = DType::Float32) {
  Tensor t(DType::Float64, std::move(shape));
  double* p = t.data<double>();
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = lo + (hi - lo) * static_cast<double>(s >> 11) / 9007199254740992.0;
  }
  return t.astype(dtype);
}

}  // namespace ingot::testing
