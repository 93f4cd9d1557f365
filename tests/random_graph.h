// Random graphs of mixed ops for equivalence tests of the optimization passes and planners:
// elementwise (unary, binary with broadcasting), x*1 / x+0 patterns, reductions, matmul,
// reshape / transpose chains, constant-only subgraphs and duplicated nodes (for CSE). With
// RandomGraphOptions::model_ops also what models are made of, so every pass has something to
// rewrite: an NCHW image input, conv2d (constant or parameter weights, bias, stride, padding),
// conv2d -> batch_norm chains, batch_norm, max / avg / global average pooling, softmax and
// log_softmax, matmul with a bias, flattening reshapes, 4-D transposes, attention written out,
// parameters, and broadcasting of scalars and constants (broadcast_to of a scalar, x*1 and x+0
// through it).
#pragma once

#include <map>
#include <random>
#include <string>
#include <vector>

#include "compiler/shape_inference.h"
#include "ingot/compile.h"
#include "ingot/graph.h"
#include "op_test_util.h"

namespace ingot::testing {

// Runs shape and type inference with static shapes for the given leaves, then verify.
inline void annotate(Graph& g, const std::map<ValueId, Shape>& shapes) {
  std::vector<ShapeConstraint> cs;
  for (const auto& [id, s] : shapes) {
    ShapeTemplate t;
    for (int64_t d : s) t.emplace_back(d);
    cs.push_back({id, t, "", "test"});
  }
  infer_shapes(g, cs);
  infer_types(g);
  verify(g);
}

// Runs `g` on the reference backend with tensors by leaf name (leaves the graph lacks are skipped).
inline std::vector<Tensor> run_graph(const Graph& g, const std::map<std::string, Tensor>& by_name) {
  std::vector<Tensor> ins;
  for (ValueId id : g.leaves()) {
    const Value& v = g.value(id);
    if (v.kind == ValueKind::Constant) continue;
    ins.push_back(by_name.at(v.name));
  }
  return ReferenceBackend().lower(g, CompileOptions{})->run(ins);
}

// A graph built by hand with a tensor for each non-constant leaf, by name (run_graph's input).
struct GraphWithInputs {
  Graph g;
  std::map<std::string, Tensor> inputs;
  // A leaf of `kind` named `name` with a random tensor of `shape`, values in [lo, hi).
  ValueId leaf(const std::string& name, ValueKind kind, const Shape& shape, double lo = -1, double hi = 1) {
    inputs[name] = random_tensor(shape, inputs.size() + 3, lo, hi);
    return g.add_input(name, kind);
  }
  // Shape and type inference from the leaves' tensors, then verify.
  void annotate_from_inputs() {
    std::map<ValueId, Shape> shapes;
    for (ValueId id : g.leaves())
      if (g.value(id).kind != ValueKind::Constant) shapes[id] = inputs.at(g.value(id).name).shape();
    annotate(g, shapes);
  }
};

inline int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op == op;
  return n;
}

struct RandomGraph {
  Graph graph;
  std::map<std::string, Tensor> inputs;
};

struct RandomGraphOptions {
  int num_ops = 14;
  bool model_ops = false;  // also the model ops listed at the top (a different graph per seed)
  std::vector<Shape> leaf_shapes_from = {};  // the shapes inputs are drawn from (empty: {2,3}, {3,4}, {2,3,4}, {4})
};

inline RandomGraph random_graph(uint64_t seed, const RandomGraphOptions& options) {
  const int num_ops = options.num_ops;
  const std::vector<Shape>& leaf_shapes_from = options.leaf_shapes_from;
  std::mt19937_64 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  RandomGraph rg;
  Graph& g = rg.graph;
  std::map<ValueId, Shape> leaf_shapes;
  struct V {
    ValueId id;
    Shape shape;
  };
  std::vector<V> vals;
  const std::vector<Shape> base =
      leaf_shapes_from.empty() ? std::vector<Shape>{{2, 3}, {3, 4}, {2, 3, 4}, {4}} : leaf_shapes_from;
  const int num_inputs = 2 + static_cast<int>(pick(2));
  for (int i = 0; i < num_inputs; ++i) {
    Shape s = base[pick(base.size())];
    ValueId id = g.add_input("x" + std::to_string(i));
    leaf_shapes[id] = s;
    rg.inputs["x" + std::to_string(i)] = random_tensor(s, seed * 31 + static_cast<uint64_t>(i));
    vals.push_back({id, s});
  }
  if (options.model_ops) {  // an image for the convolutions, pools and batch norms
    const Shape s = {2, 3, 6, 6};
    ValueId id = g.add_input("img");
    leaf_shapes[id] = s;
    rg.inputs["img"] = random_tensor(s, seed * 29 + 7);
    vals.push_back({id, s});
  }
  int consts = 0;
  auto constant = [&](Shape s, double lo = -1, double hi = 1) {
    const int k = consts++;
    ValueId id = g.add_constant("c" + std::to_string(k), random_tensor(s, seed * 17 + static_cast<uint64_t>(k), lo, hi));
    vals.push_back({id, s});
    return vals.back();
  };
  auto scalar_const = [&](double x) {
    return g.add_constant("c" + std::to_string(consts++), Tensor::full(DType::Float32, {}, x));
  };
  auto add = [&](const std::string& op, std::vector<ValueId> ins, Shape s, Attrs a = {}) {
    ValueId out = g.add_op(op, std::move(ins), std::move(a));
    vals.push_back({out, s});
    return vals.back();
  };
  int params = 0;
  // A weight: a constant, or (model_ops, half the time) a parameter leaf, which run-time
  // rewrites (conv_bn_folding in inference) and gradients treat differently.
  auto weight = [&](Shape s, double lo = -1, double hi = 1) {
    if (!options.model_ops || pick(2)) return constant(std::move(s), lo, hi);
    const std::string name = "p" + std::to_string(params++);
    ValueId id = g.add_input(name, ValueKind::Parameter);
    leaf_shapes[id] = s;
    rg.inputs[name] = random_tensor(s, seed * 13 + static_cast<uint64_t>(params), lo, hi);
    vals.push_back({id, s});
    return vals.back();
  };
  const std::vector<std::string> unary = {"tanh", "sigmoid", "relu", "neg", "abs", "sin", "identity"};
  const std::vector<std::string> binary = {"add", "sub", "mul", "maximum"};
  // The model ops, on a random value of a rank they accept (the image when there is none).
  auto model_op = [&](size_t which) {
    auto of_rank = [&](size_t rank) {
      std::vector<V> c;
      for (const V& v : vals)
        if (v.shape.size() == rank && (rank != 4 || (v.shape[2] >= 3 && v.shape[3] >= 3))) c.push_back(v);
      return c.empty() ? V{} : c[pick(c.size())];
    };
    const V x = of_rank(4);  // never empty: the image qualifies
    auto batch_norm = [&](V in) {
      const int64_t c = in.shape[1];
      V gamma = weight({c}, 0.5, 1.5), beta = weight({c}), mean = weight({c}), var = weight({c}, 0.5, 1.5);
      return add("batch_norm", {in.id, gamma.id, beta.id, mean.id, var.id}, in.shape);
    };
    switch (which) {
      case 0:
      case 1: {  // conv2d, sometimes followed by batch_norm (conv_bn_folding's pattern)
        if (x.shape.size() != 4) return;
        const int64_t co = 2 + static_cast<int64_t>(pick(3)), stride = 1 + static_cast<int64_t>(pick(2)),
                      pad = static_cast<int64_t>(pick(2));
        V w = weight({co, x.shape[1], 3, 3});
        std::vector<ValueId> ins = {x.id, w.id};
        if (pick(2)) ins.push_back(weight({co}).id);
        const Shape s = {x.shape[0], co, (x.shape[2] + 2 * pad - 3) / stride + 1, (x.shape[3] + 2 * pad - 3) / stride + 1};
        V y = add("conv2d", ins, s, {{"stride", std::vector<int64_t>{stride, stride}}, {"padding", std::vector<int64_t>{pad, pad}}});
        if (which == 1) batch_norm(y);
        return;
      }
      case 2:
        if (x.shape.size() == 4) batch_norm(x);
        return;
      case 3: {  // pooling
        if (x.shape.size() != 4) return;
        const size_t kind = pick(3);
        if (kind == 2) {
          add("global_avg_pool2d", {x.id}, {x.shape[0], x.shape[1]});
          return;
        }
        add(kind ? "avg_pool2d" : "max_pool2d", {x.id}, {x.shape[0], x.shape[1], x.shape[2] / 2, x.shape[3] / 2},
            {{"kernel", std::vector<int64_t>{2, 2}}, {"stride", std::vector<int64_t>{2, 2}}});
        return;
      }
      case 4: {  // softmax / log_softmax over a random axis of any value
        V v = vals[pick(vals.size())];
        if (v.shape.empty()) return;
        const char* op = pick(2) ? "softmax" : "log_softmax";
        add(op, {v.id}, v.shape, {{"axis", static_cast<int64_t>(pick(v.shape.size()))}});
        return;
      }
      case 5: {  // matmul with a bias: flatten an image first when there is no matrix
        V m = of_rank(2);
        if (m.shape.empty()) {
          if (x.shape.size() != 4) return;
          m = add("reshape", {x.id}, {x.shape[0], numel(x.shape) / x.shape[0]},
                  {{"shape", std::vector<int64_t>{x.shape[0], -1}}});
        }
        const int64_t k = 2 + static_cast<int64_t>(pick(3));
        V w = weight({m.shape[1], k});
        V y = add("matmul", {m.id, w.id}, {m.shape[0], k});
        add("add", {y.id, weight({k}).id}, y.shape);
        return;
      }
      case 6: {  // a 4-D transpose (NCHW <-> NHWC and back, or any order)
        if (x.shape.size() != 4) return;
        std::vector<int64_t> p = {0, 2, 3, 1};
        if (pick(2)) std::shuffle(p.begin(), p.end(), rng);
        Shape s(4);
        for (size_t i = 0; i < 4; ++i) s[i] = x.shape[static_cast<size_t>(p[i])];
        add("transpose", {x.id}, s, {{"perm", p}});
        return;
      }
      case 7: {  // a scalar broadcast to a value's shape feeding an elementwise op (0, 1 or any)
        V v = vals[pick(vals.size())];
        const double c[] = {0.0, 1.0, 0.5};
        const size_t which_c = pick(3);
        ValueId sc = scalar_const(c[which_c]);
        V b = add("broadcast_to", {sc}, v.shape, {{"shape", std::vector<int64_t>(v.shape.begin(), v.shape.end())}});
        const char* op = which_c == 0 ? (pick(2) ? "add" : "sub") : (which_c == 1 ? (pick(2) ? "mul" : "div") : "mul");
        add(op, {v.id, b.id}, v.shape);
        return;
      }
      case 8: {  // a constant of the last dim's size, broadcast along the others
        V v = vals[pick(vals.size())];
        if (v.shape.empty()) return;
        V c = constant({v.shape.back()});
        add(pick(2) ? "add" : "mul", {v.id, c.id}, v.shape);
        return;
      }
      case 9: {  // attention written out over a 4-D value (the attention pass's pattern)
        if (x.shape.size() != 4) return;
        // q and k bounded (tanh), so the scores stay small and a softmax of bfloat16 scores
        // (the mixed precision run) stays within its tolerance
        const Shape ss = {x.shape[0], x.shape[1], x.shape[2], x.shape[2]};
        V q = add("tanh", {x.id}, x.shape);
        V k = add("mul", {q.id, weight(x.shape).id}, x.shape);
        V kt = add("transpose", {k.id}, {x.shape[0], x.shape[1], x.shape[3], x.shape[2]},
                   {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
        V s = add("matmul", {q.id, kt.id}, ss);
        s = add("mul", {s.id, scalar_const(0.5)}, ss);
        if (pick(2)) s = add("add", {s.id, constant({x.shape[2], x.shape[2]}).id}, ss);
        V p = add("softmax", {s.id}, ss, {{"axis", int64_t{-1}}});
        add("matmul", {p.id, x.id}, x.shape);
        return;
      }
    }
  };
  for (int k = 0; k < num_ops; ++k) {
    if (options.model_ops && pick(2)) {
      model_op(pick(10));
      continue;
    }
    V x = vals[pick(vals.size())];
    const size_t r = x.shape.size();
    switch (pick(11)) {
      case 0:
      case 1: add(unary[pick(unary.size())], {x.id}, x.shape); break;
      case 2: {  // binary with a same-shape value, a suffix-shaped one, or a constant
        std::vector<V> same;
        for (const V& v : vals)
          if (v.shape == x.shape || (v.shape.size() < r && std::equal(v.shape.begin(), v.shape.end(), x.shape.end() - static_cast<long>(v.shape.size()))))
            same.push_back(v);
        V y = same[pick(same.size())];
        bool swap = pick(2) == 0;
        add(binary[pick(binary.size())], swap ? std::vector<ValueId>{y.id, x.id} : std::vector<ValueId>{x.id, y.id}, x.shape);
        break;
      }
      case 3: {  // x*1, x+0, x-0, x/1
        int which = static_cast<int>(pick(4));
        const char* ops[] = {"mul", "add", "sub", "div"};
        double unit = (which == 0 || which == 3) ? 1.0 : 0.0;
        add(ops[which], {x.id, scalar_const(unit)}, x.shape);
        break;
      }
      case 4: {  // transpose (sometimes twice)
        if (r < 2) break;
        std::vector<int64_t> p(r);
        for (size_t i = 0; i < r; ++i) p[i] = static_cast<int64_t>(i);
        std::shuffle(p.begin(), p.end(), rng);
        Shape s(r);
        for (size_t i = 0; i < r; ++i) s[i] = x.shape[static_cast<size_t>(p[i])];
        V t = add("transpose", {x.id}, s, {{"perm", p}});
        if (pick(2)) {
          std::vector<int64_t> q(r);
          for (size_t i = 0; i < r; ++i) q[i] = static_cast<int64_t>(i);
          std::shuffle(q.begin(), q.end(), rng);
          Shape s2(r);
          for (size_t i = 0; i < r; ++i) s2[i] = s[static_cast<size_t>(q[i])];
          add("transpose", {t.id}, s2, {{"perm", q}});
        }
        break;
      }
      case 5: {  // reshape to flat and back
        if (r == 0) break;
        V f = add("reshape", {x.id}, {numel(x.shape)}, {{"shape", std::vector<int64_t>{-1}}});
        add("reshape", {f.id}, x.shape, {{"shape", std::vector<int64_t>(x.shape.begin(), x.shape.end())}});
        break;
      }
      case 6: {  // reduction
        if (r == 0) break;
        int64_t axis = static_cast<int64_t>(pick(r));
        bool keep = pick(2);
        Shape s = x.shape;
        if (keep) s[static_cast<size_t>(axis)] = 1;
        else s.erase(s.begin() + axis);
        add(pick(2) ? "sum" : "mean", {x.id}, s, {{"axes", std::vector<int64_t>{axis}}, {"keepdims", int64_t{keep}}});
        break;
      }
      case 7: {  // matmul with a constant weight
        if (r != 2) break;
        V w = constant({x.shape[1], 3});
        add("matmul", {x.id, w.id}, {x.shape[0], 3});
        break;
      }
      case 8: {  // a constant-only chain
        V c = constant(x.shape);
        V t = add("tanh", {c.id}, x.shape);
        add("add", {x.id, t.id}, x.shape);
        break;
      }
      case 9: {  // duplicate an existing node
        if (g.nodes().empty()) break;
        const Node n = g.nodes()[pick(g.nodes().size())];
        if (n.outputs.size() != 1) break;
        Shape s;
        for (const V& v : vals)
          if (v.id == n.outputs[0]) s = v.shape;
        add(n.op, n.inputs, s, n.attrs);
        break;
      }
      case 10: add("cast", {x.id}, x.shape, {{"dtype", std::string("float32")}}); break;
    }
  }
  // Outputs: the last value and a random one; with model_ops also two random produced values, so
  // more of the graph is live (and differentiated).
  g.set_output("out0", vals.back().id);
  g.set_output("out1", vals[pick(vals.size())].id);
  if (options.model_ops)
    for (int k = 2; k < 4 && !g.nodes().empty(); ++k)
      g.set_output("out" + std::to_string(k), g.nodes()[pick(g.nodes().size())].outputs[0]);
  annotate(g, leaf_shapes);
  return rg;
}

inline RandomGraph random_graph(uint64_t seed, int num_ops = 14, const std::vector<Shape>& leaf_shapes_from = {}) {
  return random_graph(seed, RandomGraphOptions{.num_ops = num_ops, .leaf_shapes_from = leaf_shapes_from});
}

}  // namespace ingot::testing
