#include "backends/cpu/codegen_control.h"

#include <algorithm>

#include "backends/cpu/codegen.h"
#include "ingot/error.h"
#include "ops/control_flow_vjp.h"

namespace ingot::cpu {
namespace {

using Strings = std::vector<std::string>;

std::string list(const Strings& items) {
  if (items.empty()) return "nullptr";  // no zero-length arrays
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

class ControlEmitter {
 public:
  ControlEmitter(const ControlSite& site, std::ostream& out) : s_(site), o_(out) {}

  void run() {
    const std::string& op = s_.node.op;
    o_ << "  {  // " << op << " (node " << s_.node.id << "): generated subgraphs, called in place\n";
    for (size_t k = 0; k < s_.node.subgraphs.size(); ++k)
      o_ << "    const ingot_subgraph& ig_s" << k << " = ctx->host->subgraphs[" << s_.first_subgraph + static_cast<int>(k)
         << "];\n    const ig_ctx ig_c" << k << "{ig_s" << k << ".dims, ig_s" << k
         << ".host, ctx->error, ctx->error_size};\n";
    if (op == "if") emit_if();
    else if (op == "while") emit_while();
    else if (op == "scan") emit_scan();
    else INGOT_FAIL("CpuBackend internal error: no generated form for control-flow op '", op, "'");
    o_ << "  }\n";
  }

 private:
  const Graph& sub(size_t k) const { return s_.node.subgraphs[k]; }
  std::string bytes(ValueId v, size_t from = 0) const {
    return "static_cast<size_t>(" + s_.numel_from(v, from) + ") * sizeof(" + s_.ctype(s_.graph.value(v).dtype) + ")";
  }

  // Calls subgraph k with its parameters at `param(p)` and its results at `result(j)` (each a
  // void pointer expression), then copies the results its function does not write, of
  // `result_bytes(j)` bytes each.
  void emit_call(size_t k, const std::string& indent, const std::function<std::string(size_t)>& param,
                 const std::function<std::string(size_t)>& result,
                 const std::function<std::string(size_t)>& result_bytes) {
    const GeneratedCode& code = *s_.code[k];
    const Graph& g = sub(k);
    Strings in, out;
    for (size_t p : subgraph_params_of_inputs(g, code)) in.push_back(param(p));
    for (size_t j = 0; j < g.outputs().size(); ++j) out.push_back(result(j));
    o_ << indent << "{\n"
       << indent << "  const void* ig_in[] = {" << list(in) << "};\n"
       << indent << "  void* ig_out[] = {" << list(out) << "};\n"
       << indent << "  if (" << s_.function[k] << "(ig_in, ig_out, &ig_c" << k << ") != 0) return 1;\n";
    for (size_t j = 0; j < g.outputs().size(); ++j) {
      if (code.output_written.at(j)) continue;
      const ValueId v = g.outputs()[j].second;
      std::string from;
      if (g.value(v).producer >= 0) {  // returned twice: the first written copy
        for (size_t i = 0; i < j && from.empty(); ++i)
          if (g.outputs()[i].second == v && code.output_written[i]) from = "ig_out[" + std::to_string(i) + "]";
      } else if (g.value(v).kind == ValueKind::Constant) {
        const auto c = std::find(code.constants.begin(), code.constants.end(), v);
        INGOT_CHECK(c != code.constants.end(), "CpuBackend internal error: constant v", v, " has no slot");
        from = "ig_s" + std::to_string(k) + ".host->constants[" + std::to_string(c - code.constants.begin()) + "]";
      } else {
        const std::vector<ValueId> params = g.leaves_of(ValueKind::Input);
        const auto p = std::find(params.begin(), params.end(), v);
        INGOT_CHECK(p != params.end(), "CpuBackend internal error: subgraph result v", v, " has no source");
        from = param(static_cast<size_t>(p - params.begin()));
      }
      INGOT_CHECK(!from.empty(), "CpuBackend internal error: subgraph result ", j, " has no source");
      o_ << indent << "  std::memcpy(ig_out[" << j << "], " << from << ", " << result_bytes(j) << ");  // returned as is\n";
    }
    o_ << indent << "}\n";
  }

  // inputs: cond, operands...; then (0) and else (1) map operands to the node's results.
  void emit_if() {
    const Node& n = s_.node;
    const DType ct = s_.graph.value(n.inputs[0]).dtype;
    o_ << "    const bool ig_taken = " << truth(s_.ptr(n.inputs[0]), ct) << ";\n";
    auto param = [&](size_t p) { return "static_cast<const void*>(" + s_.ptr(n.inputs[1 + p]) + ")"; };
    auto result = [&](size_t j) { return "static_cast<void*>(" + s_.ptr(n.outputs[j]) + ")"; };
    auto result_bytes = [&](size_t j) { return bytes(n.outputs[j]); };
    o_ << "    if (ig_taken) {\n";
    emit_call(0, "      ", param, result, result_bytes);
    o_ << "    } else {\n";
    emit_call(1, "      ", param, result, result_bytes);
    o_ << "    }\n";
  }

  std::string truth(const std::string& pointer, DType t) const {
    const std::string ct = s_.ctype(t);
    return "(static_cast<const " + ct + "*>(static_cast<const void*>(" + pointer + "))[0] != " + ct + "(0))";
  }

  // The operands as the loop's current state (`ig_state`), the node's results as the first set of
  // carried buffers (`ig_a`) and the body's spares as the second (`ig_b`).
  void emit_state(size_t carried, size_t body) {
    const Node& n = s_.node;
    Strings state, a;
    for (ValueId v : n.inputs) state.push_back("static_cast<const void*>(" + s_.ptr(v) + ")");
    for (size_t i = 0; i < carried; ++i) a.push_back("static_cast<void*>(" + s_.ptr(n.outputs[i]) + ")");
    o_ << "    const void* ig_state[] = {" << list(state) << "};\n"
       << "    void* const ig_a[] = {" << list(a) << "};\n"
       << "    void* const* const ig_b = ig_s" << body << ".spare;\n"
       << "    bool ig_in_b = false;  // whether the state's carried values are in ig_b\n";
  }

  // After an iteration wrote the next carried values into ig_to: they become the state.
  void emit_advance(size_t carried) {
    for (size_t i = 0; i < carried; ++i) o_ << "      ig_state[" << i << "] = ig_to[" << i << "];\n";
    o_ << "      ig_in_b = !ig_in_b;\n";
  }

  // The final carried values into the node's results (where they are not already).
  void emit_finish(size_t carried) {
    const Node& n = s_.node;
    for (size_t i = 0; i < carried; ++i)
      o_ << "    if (ig_state[" << i << "] != ig_a[" << i << "]) std::memcpy(ig_a[" << i << "], ig_state[" << i << "], "
         << bytes(n.outputs[i]) << ");\n";
  }

  // inputs: carried..., invariants...; cond (0) and body (1) take them all; results: carried.
  void emit_while() {
    const Node& n = s_.node;
    const size_t carried = n.outputs.size();
    const int64_t max_iterations = n.attrs.get_int("max_iterations", -1);
    emit_state(carried, 1);
    o_ << "    for (int64_t ig_it = 0; " << (max_iterations < 0 ? "" : "ig_it < " + std::to_string(max_iterations))
       << "; ++ig_it) {\n";
    const DType ct = sub(0).value(sub(0).outputs()[0].second).dtype;
    o_ << "      alignas(16) unsigned char ig_flag[16];  // the cond graph's result\n";
    auto state = [](size_t p) { return "ig_state[" + std::to_string(p) + "]"; };
    emit_call(
        0, "      ", state, [](size_t) { return std::string("static_cast<void*>(ig_flag)"); },
        [&](size_t) { return "sizeof(" + s_.ctype(ct) + ")"; });
    o_ << "      if (!" << truth("ig_flag", ct) << ") break;\n"
       << "      void* const* const ig_to = ig_in_b ? ig_a : ig_b;\n";
    emit_call(
        1, "      ", state, [](size_t j) { return "ig_to[" + std::to_string(j) + "]"; },
        [&](size_t j) { return bytes(n.outputs[j]); });
    emit_advance(carried);
    o_ << "    }\n";
    emit_finish(carried);
  }

  // inputs: carry..., xs..., invariants...; body (0) takes carries, one step of each xs and the
  // invariants, and returns the next carries and one step of each stacked result.
  void emit_scan() {
    const Node& n = s_.node;
    const size_t c = static_cast<size_t>(ops::num_carry(n)), x = static_cast<size_t>(ops::num_xs(n));
    const bool reverse = n.attrs.get_int("reverse", 0) != 0;
    emit_state(c, 0);
    o_ << "    const int64_t ig_len = " << s_.dim(n.inputs[c], 0) << ";\n"
       << "    for (int64_t ig_step = 0; ig_step < ig_len; ++ig_step) {\n"
       << "      const int64_t ig_t = " << (reverse ? "ig_len - 1 - ig_step" : "ig_step") << ";\n";
    for (size_t j = c; j < c + x; ++j)
      o_ << "      ig_state[" << j << "] = static_cast<const char*>(static_cast<const void*>(" << s_.ptr(n.inputs[j])
         << ")) + ig_t * " << bytes(n.inputs[j], 1) << ";\n";
    o_ << "      void* const* const ig_to = ig_in_b ? ig_a : ig_b;\n";
    emit_call(
        0, "      ", [](size_t p) { return "ig_state[" + std::to_string(p) + "]"; },
        [&](size_t j) {
          if (j < c) return "ig_to[" + std::to_string(j) + "]";
          return "static_cast<void*>(static_cast<char*>(static_cast<void*>(" + s_.ptr(n.outputs[j]) + ")) + ig_t * " +
                 bytes(n.outputs[j], 1) + ")";
        },
        [&](size_t j) { return j < c ? bytes(n.outputs[j]) : bytes(n.outputs[j], 1); });
    emit_advance(c);
    o_ << "    }\n";
    emit_finish(c);
  }

  const ControlSite& s_;
  std::ostream& o_;
};

}  // namespace

std::vector<size_t> subgraph_params_of_inputs(const Graph& sub, const GeneratedCode& code) {
  const std::vector<ValueId> params = sub.leaves_of(ValueKind::Input);
  std::vector<size_t> r;
  for (ValueId v : code.inputs) {
    const auto it = std::find(params.begin(), params.end(), v);
    INGOT_CHECK(it != params.end(), "CpuBackend internal error: subgraph leaf v", v, " is a ",
                value_kind_name(sub.value(v).kind), "; a subgraph reads only its inputs and constants");
    r.push_back(static_cast<size_t>(it - params.begin()));
  }
  return r;
}

void emit_control(const ControlSite& site, std::ostream& out) { ControlEmitter(site, out).run(); }

}  // namespace ingot::cpu
