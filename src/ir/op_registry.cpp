#include "ir/op_registry.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "ingot/error.h"
#include "ops/families.h"

namespace ingot {

std::string_view fusion_class_name(FusionClass c) {
  switch (c) {
    case FusionClass::Elementwise: return "elementwise";
    case FusionClass::Reduction: return "reduction";
    case FusionClass::RowKernel: return "row-kernel";
    case FusionClass::Injective: return "injective";
    case FusionClass::Dense: return "dense";
    case FusionClass::Source: return "source";
    case FusionClass::Opaque: return "opaque";
  }
  return "?";
}

std::string_view elementwise_kind_name(ElementwiseForms::Kind kind) {
  using K = ElementwiseForms::Kind;
  switch (kind) {
    case K::UnaryFloat: return "unary_float";
    case K::UnarySame: return "unary_same";
    case K::Binary: return "binary";
    case K::Compare: return "compare";
    case K::Cast: return "cast";
    case K::Where: return "where";
    case K::Identity: return "identity";
  }
  return "?";
}

namespace {
using Registry = std::map<std::string, std::unique_ptr<OpDef>, std::less<>>;

std::vector<const OpDef*>& registration_order() {
  static std::vector<const OpDef*> order;
  return order;
}

Registry& raw_registry() {
  static Registry r;
  return r;
}

// Built-in families register on first use, so a static library needs no registration objects.
Registry& registry() {
  static std::once_flag once;
  std::call_once(once, [] { ops::register_all_families(); });
  return raw_registry();
}
}  // namespace

void register_op(OpDef def) {
  Registry& r = raw_registry();
  INGOT_CHECK(!def.name.empty(), "register_op: op without a name");
  INGOT_CHECK(r.find(def.name) == r.end(), "register_op: op '", def.name, "' registered twice");
  INGOT_CHECK(def.shape && def.dtype && def.eval, "register_op: op '", def.name,
              "' needs a shape rule, a dtype rule and a reference kernel");
  std::string name = def.name;
  const auto it = r.emplace(std::move(name), std::make_unique<OpDef>(std::move(def))).first;
  registration_order().push_back(it->second.get());
}

void set_attr_sampler(std::string_view name, AttrSampler sampler) {
  Registry& r = raw_registry();
  auto it = r.find(name);
  INGOT_CHECK(it != r.end(), "set_attr_sampler: op '", name, "' is not registered");
  it->second->sample_attrs = sampler;
}

void set_operand_sampler(std::string_view name, OperandSampler sampler) {
  Registry& r = raw_registry();
  auto it = r.find(name);
  INGOT_CHECK(it != r.end(), "set_operand_sampler: op '", name, "' is not registered");
  it->second->sample_operands = sampler;
}

const OpDef* find_op(std::string_view name) {
  Registry& r = registry();
  auto it = r.find(name);
  return it == r.end() ? nullptr : it->second.get();
}

const OpDef& get_op(std::string_view name) {
  const OpDef* d = find_op(name);
  INGOT_CHECK(d != nullptr, "Unknown op '", name, "'");
  return *d;
}

std::vector<const OpDef*> all_ops() {
  std::vector<const OpDef*> out;
  for (auto& [name, def] : registry()) out.push_back(def.get());
  return out;
}

std::vector<const OpDef*> ops_in_registration_order() {
  registry();  // registers the built-in families first
  return registration_order();
}

}  // namespace ingot
